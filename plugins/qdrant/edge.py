"""Embedded Qdrant on Qdrant's own engine (qdrant-edge): one EdgeShard per store collection.

qdrant-client's local mode (``QdrantClient(path=...)``) is pure Python and brute force (qdrant-client warns above
20,000 points); qdrant-edge is the server's Rust core in-process: HNSW, payload indexes, sparse vectors with IDF,
a write-ahead log. Layout under the store folder::

    edge/<collection>/             the shard (its WAL, segments, edge_config.json)
    edge/<collection>.meta.json    what the collection records (model, normalization, metric, dimensions, ...)

A folder written by local mode (``collection/<name>/storage.sqlite``) is migrated on first use, collection by
collection, without re-embedding: its points are copied into ``edge/<name>.partial`` and the shard renamed into
place once complete (a killed migration starts over; the old files are left untouched). One process at a time
opens a shard (its WAL is locked), as with local mode.

Search: exact over the points no HNSW covers yet, HNSW with ``hnsw_ef`` = :func:`hnsw_ef` over the rest, on int8
codes held in RAM, the best ``OVERSAMPLING x limit`` rescored with the float vectors (so scores are exact); both
tuned from the measured recall (:mod:`plugins.qdrant.edge_recall`). The index and the codes are built in the
background once enough points are unindexed (:mod:`plugins.qdrant.edge_build`); a migrated collection arrives indexed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from indexer.plugin_api import (
    CollectionMismatchError,
    Filter,
    Hit,
    InputError,
    Metric,
    Point,
    StoreError,
    ancestor_dirs,
    canonical_id,
    lexical,
    prepare_vector,
)
from plugins.qdrant import selection, space
from plugins.qdrant.edge_build import OLD_SUFFIX, BackgroundBuilder, build_now, recover
from plugins.qdrant.edge_copy import EDGE_DIR, EdgeLanguages, copy_points, local_pages
from plugins.qdrant.edge_fields import EdgeFields, field_indexes
from plugins.qdrant.edge_recall import EdgeRecall, search_params

logger = logging.getLogger(__name__)

T = TypeVar("T")

RELEX_SUFFIX = ".relex"  # a lexical rebuild's new shard, beside the live one until swapped in
LEXICAL = lexical.sparse_name()  # the named sparse vector of new shards (same name as on a Qdrant server)
INDEXED_FIELDS = ("path", "dirs", "file_type", "root")
BATCH = 256
LIST_PAGE = 1024
# The HNSW graph (set when a shard is created) and the search-time beam width, chosen by measurement
# (bench/scale.py; docs/stores.md: recall@10 against exact at 100k and 1M real-embedding chunks).
HNSW_M = 16
HNSW_EF_CONSTRUCT = 100
HNSW_EF = 128
# Int8 scalar quantization kept in RAM, searched first, the best ``OVERSAMPLING x limit`` rescored with the
# float vectors: at 200k chunks the build is 2.4x faster and a search 1.9x at the same recall (docs/stores.md).
QUANTIZE = True
OVERSAMPLING = 2.0
# Memory placement: payloads cached (read for every hit), the float vectors, the keyword and the sparse indexes
# left on disk (mmap) so that opening a shard does not read or rebuild them.
COLD_INDEXES = True


def hnsw_ef(limit: int) -> int:
    return max(HNSW_EF, 2 * limit)


def _edge() -> Any:
    return selection.edge()


def _distance(metric: Metric) -> Any:
    d = _edge().Distance
    return {Metric.COSINE: d.Cosine, Metric.DOT: d.Dot, Metric.EUCLID: d.Euclid, Metric.MANHATTAN: d.Manhattan}[metric]


class EdgeStore(EdgeFields, EdgeLanguages, EdgeRecall):
    """The VectorStore port (and the lexical port) on qdrant-edge shards in ``path``."""

    name = "qdrant"
    cold_indexes = COLD_INDEXES

    def __init__(self, path: Path, metric: Metric = Metric.COSINE, read_only: bool = False, hnsw_ef: int | None = None,
                 graph: Mapping[str, int] | None = None) -> None:  # explicit beam, m / ef_construct: never tuned
        self.path = Path(path)
        self._init_recall(hnsw_ef, HNSW_EF, OVERSAMPLING if QUANTIZE else None, graph)
        self.metric = Metric(metric)
        # a stateless search worker's: nothing is written (no folder made, no recovery, no flush; writes refused)
        self.read_only = read_only
        self._shards: dict[str, Any] = {}
        self._shapes: dict[str, tuple[int, Metric]] = {}
        self._terms: dict[str, str | None] = {}  # the analyzer version of each open shard's sparse vector
        self._lock = threading.RLock()  # the shards: every engine call
        self._writes = threading.RLock()  # taken before _lock by writers; a build holds it to copy and swap
        self.builder = BackgroundBuilder(self._lock, self._writes, self._shards.get, graph=self._graph_for)
        if read_only:
            if not (self.path / EDGE_DIR).is_dir():
                raise StoreError(f"no embedded Qdrant store at {self.path}; point store_options (path) at the "
                                 "writer's store folder (<its data dir>/qdrant/<collection>)")
            return
        try:
            (self.path / EDGE_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the embedded Qdrant folder {self.path}: {exc}") from exc

    # -- shards ------------------------------------------------------------------------------------------------
    def _dir(self, collection: str) -> Path:
        if not collection or "/" in collection or collection.startswith("."):
            raise InputError(f"bad collection name {collection!r}")
        return self.path / EDGE_DIR / collection

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (StoreError, InputError):
            raise
        except Exception as exc:  # qdrant-edge raises plain Exceptions with the engine's message
            if "WouldBlock" in str(exc) or "Can't init WAL" in str(exc):
                raise StoreError(
                    f"another process holds the embedded Qdrant collection folder {self.path} (one process at a "
                    "time opens it); stop that process, or run `indexer serve` and search through it, or use a "
                    "Qdrant server (--qdrant-url) or the FAISS store"
                ) from exc
            hint = ("; `indexer index --repair` rebuilds it from the cached vectors and the files" if what ==
                    "open a shard" else "")  # fmt: skip
            raise StoreError(f"embedded Qdrant ({self.path}) failed to {what}: {exc}{hint}") from exc

    def _shard(self, collection: str) -> Any | None:
        """The open shard of ``collection`` (migrated from local mode first if needed), or None."""
        with self._lock:
            shard = self._shards.get(collection)
            folder = self._dir(collection)
            if shard is not None:
                if (folder / "edge_config.json").exists():
                    return shard
                # its files were deleted under this process: the open shard would answer from memory and write
                # nowhere. Forget it, so the loss shows (the collection is missing) and a writer's repair refills it.
                logger.warning("the embedded Qdrant collection %s in %s was deleted under this process", collection,
                               self.path)
                self._shards.pop(collection, None)
                self._shapes.pop(collection, None)
                self._terms.pop(collection, None)
                with contextlib.suppress(Exception):
                    shard.close()
            if not self.builder.building(collection) and not self.read_only:
                recover(folder)
            if not (folder / "edge_config.json").exists() and (self.read_only or not self._migrate_local(collection)):
                return None
            shard = _load(folder, self._call)
            self._shards[collection] = shard
            return shard

    def _require(self, collection: str) -> Any:
        shard = self._shard(collection)
        if shard is None:
            raise StoreError(
                f"embedded Qdrant collection {collection!r} does not exist in {self.path}; create it with "
                "ensure_collection() (index the folder first)"
            )
        return shard

    def _config(self, dimensions: int, metric: Metric) -> Any:
        qe = _edge()
        cold = qe.Memory.Cold if COLD_INDEXES else None
        quantization = (qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned)
                        if QUANTIZE else None)
        return qe.EdgeConfig(
            vectors={"": qe.EdgeVectorParams(size=dimensions, distance=_distance(metric), memory=cold)},
            sparse_vectors={LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=cold)},
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),  # our builder decides when (edge_build)
            hnsw_config=qe.HnswIndexConfig(m=HNSW_M, ef_construct=HNSW_EF_CONSTRUCT, full_scan_threshold=10_000),
            quantization_config=quantization,
            payload_memory=qe.Memory.Cached,
        )

    def _create(self, collection: str, dimensions: int, meta: Mapping[str, str], folder: Path) -> Any:
        qe = _edge()
        config = self._config(dimensions, self.metric)
        shard = self._call("create a shard", lambda: qe.EdgeShard.create(str(folder), config))
        schema = qe.KeywordIndexParams(memory=qe.Memory.Cold) if COLD_INDEXES else qe.PayloadSchemaType.Keyword
        indexes = [(field, schema) for field in INDEXED_FIELDS]
        indexes += [(key, params) for key, _, params in field_indexes(qe, COLD_INDEXES)]  # the filter language's
        for field, params in indexes:
            index = qe.UpdateOperation.create_field_index(field, params)
            self._call("create a payload index", partial(shard.update, index))
        return shard

    # -- the port ----------------------------------------------------------------------------------------------
    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        if dimensions <= 0:
            raise InputError(f"dimensions must be positive, got {dimensions}")
        with self._lock:
            if self._shard(collection) is None:
                recorded = {str(k): str(v) for k, v in meta.items()}
                recorded["dimensions"] = str(dimensions)
                recorded["metric"] = self.metric.value
                self._dir(collection).parent.mkdir(parents=True, exist_ok=True)  # gone if the folder was deleted
                space.check(self.path, 0, f"create collection {collection!r}", space.CREATE_RESERVE)
                # the settings first: a shard is never without them, even if its creation is cut short
                self._call("record the collection's settings", partial(_write_json, self._meta_file(collection),
                                                                       recorded))
                self._shards[collection] = self._create(collection, dimensions, recorded, self._dir(collection))
                logger.info("created embedded Qdrant collection %s (%d dims)", collection, dimensions)
        dims, _ = self._shape(collection)
        if dims != dimensions:
            raise CollectionMismatchError(
                f"Qdrant collection {collection!r} holds {dims}-dimensional vectors, not {dimensions}: it was "
                "made with another embedding model; use another collection name or drop it"
            )

    def _shape(self, collection: str) -> tuple[int, Metric]:
        cached = self._shapes.get(collection)
        if cached is not None:
            return cached
        self._require(collection)
        try:
            config = json.loads((self._dir(collection) / "edge_config.json").read_text())
            params = config["vectors"][""]
            size, distance = int(params["size"]), str(params["distance"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"the settings of embedded Qdrant collection {collection!r} ({self._dir(collection)}) cannot be "
                f"read ({type(exc).__name__}: {exc}); `indexer index --repair` rebuilds it from the cached vectors "
                "and the files"
            ) from None
        shape = self._shapes[collection] = (size, _metric_from(distance))
        return shape

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        if self._shard(collection) is None:
            return None
        try:
            meta = json.loads(self._meta_file(collection).read_text())
        except (OSError, ValueError):
            meta = {}
        dims, metric = self._shape(collection)
        out = {str(k): str(v) for k, v in meta.items()}
        out.setdefault("dimensions", str(dims))
        out.setdefault("metric", metric.value)
        return out

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if not points:
            return
        qe = _edge()
        dims, metric = self._shape(collection)
        version = self.lexical_version(collection)  # the shard's sparse vector: its analyzer's terms
        name, made_by = lexical.sparse_name(version or lexical.LEXICAL_VERSION), lexical.analyzer(version)
        latest = {canonical_id(p.id): p for p in points}
        structs, plain = [], []  # the engine's points, and the same as plain data for a build's journal
        for uid, p in latest.items():
            vec = prepare_vector(p.vector, dims, metric, f"point {uid}", f"Qdrant collection {collection!r}")
            payload = dict(p.payload)
            path = payload.get("path")
            if isinstance(path, str) and "dirs" not in payload:
                payload["dirs"] = ancestor_dirs(path)
            indices, values = lexical.sparse_document(payload, made_by)
            dense = vec.astype(np.float32)
            vector = {"": dense.tolist(), name: qe.SparseVector(indices=indices, values=values)}
            structs.append(qe.Point(id=uid, vector=vector, payload=payload))
            plain.append((uid, {"": dense, name: (indices, values)}, payload))  # an array: 1.5 KB, not 12
        self._apply(collection, [(qe.UpdateOperation.upsert_points(structs[start : start + BATCH]),
                                  ("upsert", plain[start : start + BATCH]), len(structs[start : start + BATCH]))
                                 for start in range(0, len(structs), BATCH)])
        self._note_languages(collection, [payload for _, _, payload in plain])  # what queries are told among

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        qe = _edge()
        unique = sorted({canonical_id(i) for i in ids})
        self._apply(collection, [(qe.UpdateOperation.delete_points(unique[start : start + BATCH * 4]),
                                  ("delete", unique[start : start + BATCH * 4]), 0)
                                 for start in range(0, len(unique), BATCH * 4)])

    def _apply(self, collection: str, operations: Sequence[tuple[Any, tuple[str, list[Any]], int]]) -> None:
        """Apply updates to the live shard and flush, under the lock (a background build's swap never falls
        between them); each is journaled for a build in progress; then start a build if one is due. Each update
        first checks the disk's free space (:mod:`plugins.qdrant.space`); writes of points wait while a bulk load
        outruns a running build (``builder.hold``)."""
        if self.read_only:
            raise StoreError(f"the embedded Qdrant store {self.path} is open read-only (a stateless search worker)")
        if any(points for _, _, points in operations):
            self.builder.hold(collection)
        with self._writes, self._lock:
            shard = self._require(collection)
            for op, (kind, items), points in operations:
                space.check(self.path, _bytes(kind, items), f"write {len(items)} points" if points else
                            f"delete {len(items)} points")
                self._call("update points", partial(shard.update, op))
                self.builder.record(collection, kind, items, points)
            self._call("flush", shard.flush)
            try:
                self.builder.maybe_start(collection, shard, self._dir(collection), self._swap_built)
            except Exception as exc:  # only speed is at stake: searches stay exact
                logger.warning("could not start an index build of embedded Qdrant collection %s: %s", collection,
                               exc)

    def _swap_built(self, collection: str, built_dir: Path) -> None:
        """Put a built copy, which holds every write (the builder replayed them), in place of the live shard
        (called with writes held back). Until the second rename the live folder is complete."""
        _warm(built_dir)  # searches go on meanwhile; the renames keep the files, and so their cached pages
        with self._lock:  # searches wait for the renames and the open (1.3 s at 1M chunks)
            live = self._shards.pop(collection, None)
            self._terms.pop(collection, None)  # a lexical rebuild's copy holds another sparse vector
            if live is not None:
                live.flush()
            folder = self._dir(collection)
            old = folder.with_name(folder.name + OLD_SUFFIX)
            os.replace(folder, old)  # the old shard's open files move with it
            os.replace(built_dir, folder)
            self._shards[collection] = _load(folder, self._call, warm=False)
        if live is not None:  # closing a shard of a million unindexed points took seconds: not under the lock
            with contextlib.suppress(Exception):
                live.close()
        shutil.rmtree(old, ignore_errors=True)

    def _query(self, collection: str, request: Any) -> Any:
        with self._lock:  # not during a swap
            shard = self._require(collection)
            return self._call("search", lambda: shard.query(request))

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        qe = _edge()
        dims, metric = self._shape(collection)
        query = prepare_vector(vector, dims, metric, "query vector", f"Qdrant collection {collection!r}")
        nearest, tuned = qe.Query.Nearest(query.astype(np.float32).tolist()), self._tuned(collection)
        found = self._selected(collection, where, limit, lambda n, flt, payload: qe.QueryRequest(
            limit=n, query=nearest, filter=flt, with_payload=payload, params=search_params(*tuned, n)))
        self.recent_queries(collection).add(query)  # sampled by the recall measurement (vectors only)
        negate = metric in (Metric.EUCLID, Metric.MANHATTAN)
        return [Hit(id=pid, score=-score if negate else score, payload=payload) for pid, score, payload in found]

    def _selected(self, collection: str, where: Filter | None, limit: int,
                  request: Callable[[int, Any, bool], Any]) -> list[tuple[str, float, dict[str, Any]]]:
        """(id, score, payload) of the ``limit`` best points ``where`` allows; ``request(n, filter, payloads)`` is
        the query. A large id selection is checked after a search without payloads (plugins/qdrant/selection.py)."""
        def run(n: int, flt: Filter | None, payload: bool) -> selection.Found:
            found = self._query(collection, request(n, selection.edge_filter(flt), payload))
            return [(str(p.id), float(p.score), dict(p.payload or {}) if payload else None) for p in found]

        def points() -> int:
            with self._lock:
                shard = self._require(collection)
                return int(self._call("count points", lambda: shard.count(_edge().CountRequest(exact=False))))

        def payloads(ids: list[str]) -> dict[str, dict[str, Any]]:
            with self._lock:
                shard = self._require(collection)
                records = self._call("read payloads", lambda: shard.retrieve(ids, True, False))
            return {str(r.id): dict(r.payload or {}) for r in records}

        return selection.search(where, limit, points, run, payloads)

    def lexical_version(self, collection: str) -> str | None:
        """The analyzer version of the shard's sparse vector (``bm25_v<version>``), None without a shard."""
        with self._lock:
            if collection not in self._terms or collection not in self._shards:
                if self._shard(collection) is None:
                    return None
                try:
                    config = json.loads((self._dir(collection) / "edge_config.json").read_text())
                    names = [str(n) for n in config.get("sparse_vectors") or {}]
                except (OSError, ValueError, AttributeError) as exc:
                    raise StoreError(f"the settings of embedded Qdrant collection {collection!r} cannot be read "
                                     f"({exc}); `indexer index --repair` rebuilds it") from None
                self._terms[collection] = next((n.removeprefix("bm25_v") for n in names
                                                if n.startswith("bm25_v")), None)
            return self._terms[collection]

    def has_lexical(self, collection: str) -> bool:
        return lexical.known(self.lexical_version(collection))  # an older analyzer's: searched with its terms

    def ensure_lexical(self, collection: str) -> bool:
        """Rebuild the lexical side of a shard whose terms an older analyzer made: a new shard with the current
        sparse vector, filled with the stored vectors and payloads (no re-embedding; its HNSW built as a
        migration's), swapped in as a background build is. Writes wait; searches go on, on the old shard with
        the old terms, until the swap. Killed anywhere, the old shard stays live; the next ``indexer index``
        removes the part-filled copy (``<name>.relex``) and starts over."""
        if self.lexical_version(collection) in (None, lexical.LEXICAL_VERSION):
            return False
        self.builder.cancel(collection)  # an index build copies the old shard (its last step holds writes back)
        with self._writes:
            version = self.lexical_version(collection)
            if version is None or version == lexical.LEXICAL_VERSION:
                return False
            self.builder.cancel(collection, wait=False)  # one a write started since: it stops at the gate
            dims, _ = self._shape(collection)
            target = self._dir(collection).with_name(collection + RELEX_SUFFIX)
            shutil.rmtree(target, ignore_errors=True)
            space.check(self.path, 0, f"rebuild the lexical side of {collection!r}", space.CREATE_RESERVE)
            shard = self._create(collection, dims, {}, target)
            try:
                moved = copy_points(shard, self._pages(collection, with_payload=True, with_vector=True), self._call)
            finally:
                with contextlib.suppress(Exception):
                    shard.close()
            if moved >= self.builder.threshold > 0:
                try:
                    build_now(target)
                except Exception as exc:  # only speed is at stake: the background builder tries again
                    logger.warning("could not build the index of the rebuilt collection %s: %s", collection, exc)
            self._swap_built(collection, target)
        logger.info("rebuilt the lexical side of embedded Qdrant collection %s (%d points, analyzer v%s -> v%s, no "
                    "re-embedding)", collection, moved, version, lexical.LEXICAL_VERSION)
        return True

    def search_lexical(self, collection: str, query: str, limit: int, where: Filter | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        qe = _edge()
        with self._lock:  # the shard's terms and the shard searched are one (a rebuild's swap is not between)
            version = self.lexical_version(collection)
            indices, values = lexical.sparse_query(query, lexical.analyzer(version), self._held(collection))
            if not indices:
                return []
            using = lexical.sparse_name(version or lexical.LEXICAL_VERSION)
            sparse = qe.Query.Nearest(qe.SparseVector(indices=indices, values=values), using=using)
            found = self._selected(collection, where, limit, lambda n, flt, payload: qe.QueryRequest(
                limit=n, query=sparse, filter=flt, with_payload=payload))
        return [Hit(id=pid, score=score, payload=payload) for pid, score, payload in found]

    def _pages(self, collection: str, *, with_payload: bool, with_vector: bool) -> Iterator[list[Any]]:
        qe = _edge()
        offset: Any = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=LIST_PAGE, with_payload=with_payload,
                                       with_vector=with_vector)
            with self._lock:  # the shard of this page (a build's swap may fall between pages)
                shard = self._require(collection)
                records, offset = self._call("list points", partial(shard.scroll, request))
            yield records
            if offset is None:
                return

    def payloads(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, payload) of every point (indexer.ports.PayloadScan)."""
        for page in self._pages(collection, with_payload=True, with_vector=False):
            for r in page:
                yield str(r.id), dict(r.payload or {})

    def count(self, collection: str) -> int:
        with self._lock:
            shard = self._require(collection)
            return int(self._call("count points", lambda: shard.count(_edge().CountRequest(exact=True))))

    def list_ids(self, collection: str) -> set[str]:
        return {str(r.id) for page in self._pages(collection, with_payload=False, with_vector=False) for r in page}

    def drop(self, collection: str) -> None:
        self.builder.cancel(collection)
        with self._lock:
            shard = self._shards.pop(collection, None)
            self._shapes.pop(collection, None)
            self._terms.pop(collection, None)
            if shard is not None:
                self._call("close a shard", shard.close)
            shutil.rmtree(self._dir(collection), ignore_errors=True)
            recover(self._dir(collection))  # and any build's copy, and a lexical rebuild's
            shutil.rmtree(self._dir(collection).with_name(collection + RELEX_SUFFIX), ignore_errors=True)
            for made in (self._meta_file(collection), self._languages_file(collection)):
                made.unlink(missing_ok=True)
            self._forget_recall(collection)
            self._forget_live(collection)
            local = self.path / "collection" / collection
            if local.is_dir():  # a local-mode copy of it, kept since a migration
                shutil.rmtree(local, ignore_errors=True)

    def flush(self) -> None:
        with self._lock:
            for shard in [] if self.read_only else self._shards.values():
                self._call("flush", shard.flush)

    def close(self) -> None:
        self.builder.close()
        self._save_recent()
        with self._lock:
            shards, self._shards = list(self._shards.items()), {}
        for name, shard in shards:
            try:
                if not self.read_only:
                    shard.flush()
                shard.close()
                if not self.read_only and space.free_bytes(self.path) > space.CREATE_RESERVE and any(  # a full disk:
                        self._dir(name).glob("segments/*/payload_index/*/tracker_journal.dat")):  # never
                    _load(self._dir(name), self._call, warm=False).close()  # folds the journals a reader would
            except Exception as exc:  # closing must not mask the caller's own error
                logger.warning("closing an embedded Qdrant shard in %s: %s", self.path, exc)

    @classmethod
    def count_copy(cls, folder: Path, collection: str) -> int:
        """The points of ``collection`` in a copied store folder (a backup): loads the copy, which also proves it
        opens."""
        copy = cls(folder)
        try:
            return copy.count(collection) if copy._shard(collection) is not None else 0
        finally:
            copy.close()

    # -- migration from qdrant-client's local mode ---------------------------------------------------------------
    def _migrate_local(self, collection: str) -> bool:
        """Copy local-mode collection ``collection`` (if this folder has one) into a new shard; True when done."""
        if not (self.path / "collection" / collection).is_dir():
            return False
        from qdrant_client import QdrantClient

        partial_dir = self.path / EDGE_DIR / f"{collection}.partial"
        shutil.rmtree(partial_dir, ignore_errors=True)
        try:
            client = QdrantClient(path=str(self.path))
        except RuntimeError as exc:
            raise StoreError(f"cannot open the local-mode Qdrant folder {self.path} to migrate it: {exc}") from exc
        try:
            info = client.get_collection(collection)
            params = info.config.params.vectors
            size = int(getattr(params, "size", 0))
            if size <= 0:
                raise StoreError(f"local-mode collection {collection!r} in {self.path} has no single dense vector")
            meta = {str(k): str(v) for k, v in (getattr(info.config, "metadata", None) or {}).items()}
            meta.setdefault("dimensions", str(size))
            meta.setdefault("metric", self.metric.value)
            shard = self._create(collection, size, meta, partial_dir)
            moved = copy_points(shard, local_pages(client, collection, BATCH), self._call)
            shard.close()
            if moved >= self.builder.threshold > 0:
                try:
                    build_now(partial_dir)
                except Exception as exc:  # only speed is at stake: the background builder tries again
                    logger.warning("could not build the index of migrated collection %s: %s", collection, exc)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"migrating local-mode collection {collection!r} in {self.path} failed: {exc}") from exc
        finally:
            client.close()
        _write_json(self._meta_file(collection), meta)
        os.replace(partial_dir, self._dir(collection))
        logger.info("moved embedded Qdrant collection %s (%d points) onto qdrant-edge in %s", collection, moved,
                    self.path)
        return True


def _load(folder: Path, call: Callable[[str, Callable[[], Any]], Any], warm: bool = True) -> Any:
    """Open the shard in ``folder`` (its int8 codes read into the page cache first, unless done already)."""
    if warm:
        _warm(folder)
    return call("open a shard", lambda: _edge().EdgeShard.load(str(folder)))


def _warm(folder: Path) -> None:
    """The engine copies a shard's int8 codes into RAM on open by page faults on the file (measured 61 MB/s: 6 s
    at 1M chunks), holding the GIL, and then drops them from the page cache; reading the files first, in large
    sequential reads that release the GIL, makes that copy one from the page cache (1M: open in 1.2 s)."""
    buffer = bytearray(8 << 20)
    for data in folder.glob("segments/*/vector_storage*/quantized.data"):
        with contextlib.suppress(OSError), open(data, "rb", buffering=0) as fh:
            while fh.readinto(buffer):
                pass


def _metric_from(distance: str) -> Metric:
    name = distance.lower()
    for metric in Metric:
        if metric.value == name or (metric is Metric.EUCLID and name.startswith("euclid")):
            return metric
    raise StoreError(f"unknown distance {distance!r} in an embedded Qdrant shard")


def _bytes(kind: str, items: list[Any]) -> int:
    """About how many bytes an update of ``items`` (journal items: ids, or ``(id, vectors, payload)``) adds."""
    if kind != "upsert":
        return 64 * len(items)
    total = 0
    for _uid, vectors, payload in items:
        indices, _values = next(v for name, v in vectors.items() if name)  # the sparse vector
        total += len(json.dumps(payload, default=str)) + 8 * len(vectors[""]) + 12 * len(indices) + 64
    return total


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(dict(data), sort_keys=True))
    os.replace(tmp, path)
