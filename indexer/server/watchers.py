"""The live-sync watcher (:class:`indexer.watch.Watcher`) inside the server: one per collection.

Each watcher gets the collection's **write side** (``Service.writer``: its own ``Collection`` and so its own
embedding context), so its batches never queue in front of searches on the model worker; the watcher runs its
batches in its own thread. Embedded Qdrant admits one client per folder, so there the watcher shares the query
side's ``Collection`` (the facade serializes model calls: a search may then wait for one embedding batch).

A watcher that cannot start (another process watches that collection, a root cannot be watched) is logged and
listed in ``/status`` ``last_errors``; the server serves on without it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from indexer.collection import list_collections
from indexer.errors import IndexerError

if TYPE_CHECKING:
    from indexer.server.service import Service

logger = logging.getLogger(__name__)


def start_watchers(svc: Service) -> None:
    """Start one watcher per collection of the data directory."""
    from indexer.watch import Watcher

    for rec in list_collections(svc.settings):
        name = rec.name
        embedded_qdrant = rec.store == "qdrant" and not rec.store_options.get("url")
        try:
            if embedded_qdrant:
                col = svc.worker.call_sync(lambda n=name: svc._reader(n), timeout=300)  # type: ignore[misc]
            else:
                col = svc._index_pool.submit(svc.writer, name).result(timeout=300)
            watcher = Watcher(col)
            watcher.start()
        except (IndexerError, OSError) as exc:
            svc.record_error(f"watch {name}", exc)
            logger.warning("collection %s: not watched: %s", name, exc)
            continue
        svc.watchers[name] = watcher
        logger.info("collection %s: watching %s", name, ", ".join(watcher.roots))


def stop_watchers(svc: Service, timeout: float = 60.0) -> None:
    """Stop every watcher (each finishes its batch in flight and persists what is queued)."""
    for name, watcher in list(svc.watchers.items()):
        try:
            watcher.stop(timeout)
        except Exception as exc:  # stopping is best effort; the next start recovers
            logger.warning("collection %s: stopping the watcher failed: %s", name, exc)
        svc.watchers.pop(name, None)


def watch_status(watcher: Any) -> dict[str, Any]:
    """What /status shows of a watcher."""
    st: dict[str, Any] = watcher.status()
    return {k: st.get(k) for k in ("state", "roots", "queued", "last_error", "freshness", "batches", "totals")}
