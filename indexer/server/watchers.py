"""The live-sync watcher (:class:`indexer.watch.watcher.Watcher`) inside the server: one per collection.

Each watcher drives the collection's **writer** (``Service.writer``: a
:class:`~indexer.collection.writer.CollectionWriter` with its own parts and so its own embedding context), so its
batches never queue in front of searches on the model worker; the watcher runs its batches in its own thread.
Embedded Qdrant admits one client per folder, so there the writer is the second face of the query side's parts
(the parts serialize model calls: a search may then wait for one embedding batch).

Collections created while the server runs (``indexer index PATH -c new`` from another shell) are found by a
discovery thread every ``watch_discover_seconds`` and watched from then on. A watcher that cannot start (another
process watches that collection, a root cannot be watched) is logged once and listed in ``/status``
``last_errors``; the server serves on without it and the discovery tries again.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from indexer.collection.facade import list_collections
from indexer.errors import IndexerError

if TYPE_CHECKING:
    from indexer.server.service import Service

logger = logging.getLogger(__name__)


class _Discovery:
    """Starts watchers for the collections that have none, now and then every ``interval`` seconds."""

    def __init__(self, svc: Service, interval: float) -> None:
        self.svc = svc
        self.interval = interval
        self.stopping = threading.Event()
        self.lock = threading.Lock()  # start vs stop: no watcher is started after stop_watchers began
        self.failed: dict[str, str] = {}  # collection -> last error logged (logged again only when it changes)
        self.thread = threading.Thread(target=self._loop, name="indexer-watch-discovery", daemon=True)

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                self.start_new()
            except Exception as exc:  # the state may be briefly unreadable; the next round tries again
                logger.warning("looking for new collections to watch: %s", exc)

    def start_new(self) -> None:
        svc = self.svc
        for rec in list_collections(svc.settings):
            with self.lock:
                if self.stopping.is_set() or rec.name in svc.watchers:
                    continue
                self._start(rec.name)

    def _start(self, name: str) -> None:
        from indexer.watch.watcher import Watcher

        svc = self.svc
        try:
            writer = svc._index_pool.submit(svc.writer, name).result(timeout=300)
            watcher = Watcher(writer)
            watcher.start()
        except (IndexerError, OSError) as exc:
            if self.failed.get(name) != str(exc):
                self.failed[name] = str(exc)
                svc.record_error(f"watch {name}", exc)
                logger.warning("collection %s: not watched (tried again every %.0f s): %s", name, self.interval, exc)
            return
        self.failed.pop(name, None)
        svc.watchers[name] = watcher
        logger.info("collection %s: watching %s", name, ", ".join(watcher.roots))


def start_watchers(svc: Service) -> None:
    """Start one watcher per collection of the data directory, and the discovery of collections made later."""
    discovery = _Discovery(svc, svc.settings.watch_discover_seconds)
    svc.watch_discovery = discovery
    svc.stop_watching = lambda: stop_watchers(svc)
    discovery.start_new()
    discovery.thread.start()


def stop_watchers(svc: Service, timeout: float = 60.0) -> None:
    """Stop the discovery, then every watcher (each finishes its batch in flight and persists what is queued)."""
    discovery: _Discovery | None = getattr(svc, "watch_discovery", None)
    if discovery is not None:
        with discovery.lock:
            discovery.stopping.set()
        discovery.thread.join(timeout)
    for name, watcher in list(svc.watchers.items()):
        try:
            watcher.stop(timeout)
        except Exception as exc:  # stopping is best effort; the next start recovers
            logger.warning("collection %s: stopping the watcher failed: %s", name, exc)
        svc.watchers.pop(name, None)
