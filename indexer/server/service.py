"""What the server does, without HTTP: searches, status, embeddings and reranking through the facade.

Threads (see docs/server.md):

* the **model worker** (:class:`~indexer.server.worker.ModelWorker`) owns the query side: one
  :class:`~indexer.collection.reader.CollectionReader` per name (its query embedder, reranker and store handle)
  and the /v1 models. Every call that touches them runs there, one at a time, searches first.
* the **index thread** owns the write side: one :class:`~indexer.collection.writer.CollectionWriter` per name
  with its *own* parts and so its own embedding context, used by admin syncs and the watcher. A long indexing
  batch therefore never holds up a search; the two only share the CPU. (Embedded Qdrant admits one client per
  folder: there the writer is the second face of the reader's parts, :func:`~indexer.collection.facade.open_writer`
  decides; the parts serialize model calls, so a search may then wait for one embedding batch.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from indexer.codec import decode_request
from indexer.collection.facade import (
    CollectionReader,
    CollectionWriter,
    list_collections,
    open_reader,
    open_writer,
)
from indexer.collection.served_models import ServedModels
from indexer.errors import ConfigError, IndexerError, InputError, NotFoundError
from indexer.server.metrics import Metrics
from indexer.server.worker import PRIORITY_EMBED, PRIORITY_RERANK, PRIORITY_SEARCH, ModelWorker, Overloaded
from indexer.settings import Settings
from indexer.types import IndexReport, SearchRequest, SearchResult

logger = logging.getLogger(__name__)

T = TypeVar("T")
MEDIA_WORKERS = 2  # threads decoding thumbnails and summing up collections (/thumbnail, /fields, /overview)
F = TypeVar("F", CollectionReader, CollectionWriter)


class Service:
    """One per server process. Call :meth:`start` once, :meth:`close` at the end."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker = ModelWorker(settings.max_queue, settings.queue_timeout)
        self.metrics = Metrics(lambda: float(self.worker.depth))
        self._index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indexer-index")
        # /status, /readyz, /metrics: never queued behind model work (no model call runs there), nor behind pictures
        self._status_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indexer-status")
        # picture decodes and summaries (/thumbnail, /fields, /overview): a bounded pool of their own, so a page of
        # image hits never holds up a readiness probe; more than max_queue waiting get 503 + Retry-After
        self._media_pool = ThreadPoolExecutor(max_workers=MEDIA_WORKERS, thread_name_prefix="indexer-media")
        self._media_waiting = 0
        self._media_lock = threading.Lock()
        self._readers: dict[str, CollectionReader] = {}  # searches: model worker; status: status thread (no models)
        self._readers_lock = threading.Lock()
        self._repairs_asked: set[str] = set()  # status thread only
        self._writers: dict[str, CollectionWriter] = {}  # index thread only
        self.models = ServedModels(settings, share=self._loaded_embedder)  # /v1/*: model worker thread only
        self.last_errors: deque[dict[str, Any]] = deque(maxlen=20)
        self.started_at = time.time()
        self.ready = False
        self.ready_error: str | None = None
        self.watchers: dict[str, Any] = {}
        self.watch_discovery: Any = None  # indexer.server.watchers: starts watchers for collections made later
        self.stop_watching: Callable[[], None] | None = None  # set by indexer.server.watchers.start_watchers
        self._embed_lock = threading.Lock()
        self._embed_pending: list[_EmbedRequest] = []
        self._flush_scheduled = False
        self.embed_flushes = 0

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Load the models and open the stores (on the model worker) so the first search is fast."""
        try:
            self.worker.call_sync(self._warm, timeout=600)
            self.ready, self.ready_error = True, None
        except Exception as exc:  # reported by /readyz; the server still answers
            self.ready, self.ready_error = False, str(exc)
            self.record_error("warm-up", exc)
            logger.warning("warm-up failed: %s", exc)

    def _warm(self) -> None:
        for rec in list_collections(self.settings):
            col = self.reader(rec.name)
            col.embedder  # noqa: B018 - loads the model
            col.store.count(rec.name)
            if self.settings.rerank_model:
                col.reranker  # noqa: B018
        self.models.embedder  # noqa: B018 - loads (or shares) the /v1 embedding model

    def close(self) -> None:
        if self.stop_watching is not None:
            self.stop_watching()
        self._status_pool.shutdown(wait=True)
        self._media_pool.shutdown(wait=True, cancel_futures=True)
        try:
            self.worker.call_sync(lambda: _close_all(self._readers, self.models), timeout=60)
        except Exception as exc:  # closing is best effort
            logger.warning("closing the query side failed: %s", exc)
        self._index_pool.submit(lambda: _close_all(self._writers)).result(timeout=120)
        self._index_pool.shutdown(wait=True)
        self.worker.close()

    def record_error(self, where: str, exc: BaseException) -> None:
        self.last_errors.append({"time": time.time(), "where": where, "type": type(exc).__name__, "message": str(exc)})

    # -- queries (model worker) --------------------------------------------------------------------------------
    async def search(self, collection: str, request: SearchRequest) -> SearchResult:
        result = await self.worker.run(lambda: self.reader(collection).search(request), PRIORITY_SEARCH)
        for stage, ms in result.timings_ms.items():
            self.metrics.stages.labels(stage=stage).observe(ms / 1000)
        if result.reranked:
            self.metrics.rerank_pairs.labels(source="search").inc(result.rerank_count)
        return result

    async def fields(self, collection: str) -> dict[str, Any]:
        """The filterable fields of a collection (state reads only: the media pool)."""
        found = await self.run_on_media_pool(lambda: self.reader(collection).fields())
        return {"collection": collection, "fields": found}

    async def run_on_media_pool(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a picture decode or a collection summary: state reads, no model call) on the media pool;
        Overloaded (503) when ``max_queue`` calls already wait or run there."""
        with self._media_lock:
            if self._media_waiting >= self.settings.max_queue:
                raise Overloaded(
                    f"the server is busy ({self._media_waiting} thumbnails or summaries waiting, the limit is "
                    f"{self.settings.max_queue}); retry in 1 s",
                    1,
                )
            self._media_waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._media_pool, fn)
        finally:
            with self._media_lock:
                self._media_waiting -= 1

    async def run_on_status_thread(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (state and store reads, no model call) on the status thread: never behind model work."""
        return await asyncio.get_running_loop().run_in_executor(self._status_pool, fn)

    async def status(self, collection: str | None = None) -> dict[str, Any]:
        cols = await self.run_on_status_thread(lambda: self._status(collection))
        for st in cols:
            self.metrics.observe_status(st)
        return {
            "collections": cols,
            "server": {
                "uptime_s": round(time.time() - self.started_at, 1),
                "ready": self.ready,
                "queue_depth": self.worker.depth,
                "queue_limit": self.settings.max_queue,
                "jobs_completed": self.worker.completed,
                "jobs_rejected": self.worker.rejected,
                "watchers": sorted(self.watchers),
                "last_errors": list(self.last_errors),
            },
        }

    def _status(self, name: str | None) -> list[dict[str, Any]]:
        names = [name] if name else [rec.name for rec in list_collections(self.settings)]
        out = []
        for n in names:
            st = self.reader(n).status()
            watcher = self.watchers.get(n)
            if watcher is not None:
                st["watch"] = watch_status(watcher)
                last = (st["watch"].get("freshness") or {}).get("last_ms")
                if last is not None:
                    self.metrics.freshness.labels(collection=n).set(last / 1000)
            out.append(st)
        return out

    async def collections(self) -> list[dict[str, Any]]:
        recs = await asyncio.to_thread(list_collections, self.settings)
        return [{"collection": r.name, "store": r.store, "model": r.model_id, "dimensions": r.dimensions} for r in recs]

    async def check_ready(self) -> None:
        """Raise unless the models are loaded, every store answers and holds what the state says (on the status
        thread: readiness never waits behind model work, nor is refused when the model queue is full)."""
        if not self.ready:
            raise ConfigError(f"not ready: {self.ready_error or 'loading models'}")
        await self.run_on_status_thread(self._probe_stores)

    def _probe_stores(self) -> None:
        problems = []
        for rec in list_collections(self.settings):
            problem = self.reader(rec.name).agreement()
            if problem:
                problems.append(problem)
                self._request_repair(rec.name, problem)
            else:
                self._repairs_asked.discard(rec.name)
        if problems:
            raise ConfigError("not ready: " + "; ".join(problems))

    def _request_repair(self, name: str, problem: str) -> None:
        """A watched collection whose store disagrees with the state is repaired by its watcher's reconciliation
        scan (a full sync), asked once per disagreement: no file change needs to come first."""
        watcher = self.watchers.get(name)
        if watcher is None or name in self._repairs_asked:
            return
        self._repairs_asked.add(name)
        watcher.request_rescan(f"collection {name}: {problem}")

    def reader(self, name: str) -> CollectionReader:
        """The query side of collection ``name`` (opened once): public for routers. Model calls on it run on the
        model worker only; the status thread reads its state and store."""
        with self._readers_lock:
            col = self._readers.get(name)
            if col is None:
                col = self._readers[name] = _existing(open_reader(name, self.settings))
            return col

    # -- file text for the search page (model worker: the state store is the query side's) --------------------
    async def file_text(
        self, collection: str, path: str, query: str | None = None, lines: tuple[int, int | None] = (1, None)
    ) -> dict[str, Any]:
        return await self.worker.run(
            lambda: self.reader(collection).indexed_file(path, query, lines), PRIORITY_SEARCH
        )

    async def overview(self, collection: str) -> dict[str, Any]:
        """The collection at a glance (state reads only: the media pool), with this server's watcher if any."""
        watcher = self.watchers.get(collection)

        def run() -> dict[str, Any]:
            return self.reader(collection).overview(watcher.status() if watcher is not None else None)

        return await self.run_on_media_pool(run)

    async def thumbnail(self, collection: str, path: str, size: int) -> bytes:
        """A thumbnail of an indexed image (no model call: the media pool)."""
        return await self.run_on_media_pool(lambda: self.reader(collection).thumbnail(path, size))

    # -- /v1 models (model worker) ------------------------------------------------------------------------------
    def model_names(self) -> list[str]:
        return self.models.embed_names()

    def rerank_model_name(self) -> str | None:
        return self.models.rerank_name()

    async def embed(
        self, items: list[str | list[int] | bytes], model: str | None, dimensions: int | None = None
    ) -> tuple[np.ndarray, int, str]:
        """Embed one request's items. Requests that wait for the model together are embedded in one engine call
        (the engine packs short texts into shared decodes); each is validated on its own first."""
        loop = asyncio.get_running_loop()
        request = _EmbedRequest(items, model, dimensions, loop.create_future(), loop)
        with self._embed_lock:
            if len(self._embed_pending) >= self.settings.max_queue or self.worker.depth >= self.worker.max_queue:
                self.worker.rejected += 1
                raise Overloaded(
                    f"the server is busy ({len(self._embed_pending)} embedding requests and {self.worker.depth} model "
                    f"jobs waiting, the limit is {self.settings.max_queue}); retry in {self.worker.retry_after()} s",
                    self.worker.retry_after(),
                )
            self._embed_pending.append(request)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self.worker.submit_nowait(self._flush_embeddings, PRIORITY_EMBED)
        vectors, tokens, name = await request.future
        self.metrics.tokens_embedded.labels(source="v1").inc(tokens)
        return vectors, tokens, name

    def _flush_embeddings(self) -> None:
        """On the worker: take waiting requests (up to ``max_inputs`` texts), validate each, embed the valid ones
        in one engine call and answer each; another flush is queued for any left waiting."""
        with self._embed_lock:
            batch: list[_EmbedRequest] = []
            count = 0
            limit = self.settings.max_inputs
            while self._embed_pending and (not batch or count + len(self._embed_pending[0].items) <= limit):
                request = self._embed_pending.pop(0)
                batch.append(request)
                count += len(request.items)
            self._flush_scheduled = bool(self._embed_pending)
            if self._flush_scheduled:
                self.worker.submit_nowait(self._flush_embeddings, PRIORITY_EMBED)
        try:
            self.embed_flushes += 1
            self.metrics.embed_batch.observe(len(batch))
            self._embed_batch([r for r in batch if not r.future.cancelled()])
        except BaseException as exc:  # every waiting request gets an answer
            for r in batch:
                _resolve(r, None, exc)
            raise

    def _embed_batch(self, batch: list[_EmbedRequest]) -> None:
        valid: list[tuple[_EmbedRequest, int]] = []
        for r in batch:
            try:
                valid.append((r, self.models.check_embed(r.items, r.model, r.dimensions)))
            except RecursionError:  # input nested too deep for the checks: the client's fault, alone
                _resolve(r, None, InputError("the input is nested too deeply; send strings or lists of token ids"))
            except Exception as exc:  # one bad request never fails the others of the batch, whatever it raised
                if not isinstance(exc, IndexerError):
                    self.record_error("/v1/embeddings", exc)
                    logger.exception("validating one /v1/embeddings request failed")
                _resolve(r, None, exc)
        if not valid:
            return
        vectors = self.models.embed([item for r, _ in valid for item in r.items])
        at = 0
        for r, tokens in valid:
            n = len(r.items)
            _resolve(r, (vectors[at : at + n], tokens, self.settings.embed_model), None)
            at += n

    def _loaded_embedder(self, path: str) -> Any:
        """A collection's embedder of the model file ``path``, to share its llama.cpp context with /v1."""
        for col in self._readers.values():
            if col.record is not None and os.path.realpath(col.record.model_path) == path:
                return col.embedder  # the collection's model handle: one context, one lock
        return None

    async def rerank(self, query: str, documents: list[str], model: str | None) -> tuple[list[float], int, str]:
        scores, tokens, name = await self.worker.run(lambda: self._rerank(query, documents, model), PRIORITY_RERANK)
        self.metrics.rerank_pairs.labels(source="v1").inc(len(documents))
        return scores, tokens, name

    def _rerank(self, query: str, documents: list[str], model: str | None) -> tuple[list[float], int, str]:
        return self.models.rerank(query, documents, model)

    # -- the write side (index thread) -------------------------------------------------------------------------
    async def sync(self, collection: str) -> IndexReport:
        """Re-sync every root of ``collection`` (admin); searches go on meanwhile."""
        report = await self.run_on_index_thread(lambda: self.writer(collection).sync())
        self.metrics.tokens_embedded.labels(source="index").inc(report.tokens_embedded)
        return report

    async def run_on_index_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._index_pool, fn)

    def writer(self, name: str) -> CollectionWriter:
        """The write side of collection ``name``: opened on the index thread; used there (admin syncs) and by the
        collection's watcher thread (the parts serialize model calls; the writer lock serializes writes)."""
        col = self._writers.get(name)
        if col is None:
            col = self._writers[name] = _existing(open_writer(name, self.settings, beside=self.reader(name).parts))
        return col


def _existing(face: F) -> F:
    """``face`` (a reader or writer) of a collection that exists; else closed, and a NotFoundError."""
    if face.record is None:
        face.close()
        raise NotFoundError.collection(face.name)
    return face


def search_request(body: Any) -> SearchRequest:
    """The facade's request from an HTTP or MCP body: :func:`indexer.codec.decode_request`."""
    return decode_request(body)


def watch_status(watcher: Any) -> dict[str, Any]:
    """What /status shows of a watcher."""
    st: dict[str, Any] = watcher.status()
    keys = ("state", "roots", "queued", "last_error", "freshness", "batches", "totals", "reading", "writing")
    return {k: st.get(k) for k in keys}


@dataclass
class _EmbedRequest:
    items: list[Any]  # texts, token lists, images (bytes; prepared by the check)
    model: str | None
    dimensions: int | None
    future: asyncio.Future[tuple[np.ndarray, int, str]]
    loop: asyncio.AbstractEventLoop


def _resolve(r: _EmbedRequest, value: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if r.future.done():
            return
        if error is not None:
            r.future.set_exception(error)
        else:
            r.future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop is closed (shutting down)
        r.loop.call_soon_threadsafe(settle)


def _close_all(cols: dict[str, CollectionReader] | dict[str, CollectionWriter], *models: ServedModels) -> None:
    for col in cols.values():
        try:
            col.close()
        except IndexerError as exc:
            logger.warning("closing collection %s failed: %s", col.name, exc)
    cols.clear()
    for m in models:
        m.close()


__all__ = ["Overloaded", "Service", "search_request"]
