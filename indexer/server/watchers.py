"""The hook that runs the live-sync watcher (``indexer.watch``) inside the server, one per collection.

The watcher turns file events into path batches; the server hands each batch to the write side of the
collection (``Collection.sync_paths`` on the index thread), so watching never holds up a search. When
``indexer.watch`` is not installed (or offers no ``start_watcher``), the server runs without watchers and says
so in the log and in ``/status`` (``watchers: []``).

Contract expected of ``indexer.watch``::

    start_watcher(name: str, roots: list[str], settings: Settings,
                  sync_paths: Callable[[list[str]], IndexReport]) -> handle
    handle.stop() -> None                 # stop watching, finish the batch in hand
    handle.freshness() -> dict            # optional: lag of the last batch etc., shown in /status
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from indexer.collection import list_collections

if TYPE_CHECKING:
    from indexer.pipeline import IndexReport
    from indexer.server.service import Service

logger = logging.getLogger(__name__)


def _sync_paths_on_index_thread(svc: Service, name: str) -> Callable[[list[str]], IndexReport]:
    def sync_paths(paths: list[str]) -> IndexReport:
        def job() -> IndexReport:
            col: Any = svc.writer(name)  # Collection.sync_paths lands with the core work
            report: IndexReport = col.sync_paths(paths)
            return report

        report = svc._index_pool.submit(job).result()
        svc.metrics.tokens_embedded.labels(source="watch").inc(report.tokens_embedded)
        return report

    return sync_paths


def _roots_of(svc: Service, name: str) -> list[str]:
    return svc.writer(name).state.roots(name)


def start_watchers(svc: Service) -> None:
    """Start one watcher per collection (FAISS and Qdrant server stores) when ``indexer.watch`` is available."""
    try:
        from indexer import watch
    except ImportError:
        logger.warning("live sync is not available in this build (no indexer.watch); serving without watchers")
        return
    start = getattr(watch, "start_watcher", None)
    if start is None:
        logger.warning("indexer.watch has no start_watcher(); serving without watchers")
        return
    for rec in list_collections(svc.settings):
        if rec.store == "qdrant" and not rec.store_options.get("url"):
            logger.warning("collection %s: embedded Qdrant admits one client; not watched inside the server", rec.name)
            continue
        roots = svc._index_pool.submit(_roots_of, svc, rec.name).result()
        try:
            svc.watchers[rec.name] = start(rec.name, roots, svc.settings, _sync_paths_on_index_thread(svc, rec.name))
        except Exception as exc:  # one collection's watcher failing must not stop the server
            svc.record_error(f"watch {rec.name}", exc)
            logger.warning("collection %s: cannot start the watcher: %s", rec.name, exc)


def stop_watchers(svc: Service) -> None:
    for name, handle in list(svc.watchers.items()):
        stop: Any = getattr(handle, "stop", None)
        try:
            if stop is not None:
                stop()
        except Exception as exc:  # stopping is best effort
            logger.warning("collection %s: stopping the watcher failed: %s", name, exc)
        svc.watchers.pop(name, None)
