"""FaissStore: FAISS indexes on disk behind the VectorStore port.

Layout under ``path``: one folder per collection holding ``points.sqlite`` (the sidecar, source of truth,
WAL), ``index.faiss`` (a cache of the index with the op sequence it reflects) and ``writer.lock``.

Durability: ``upsert``/``delete`` commit to the sidecar (synchronous=FULL) before they return; the in-memory
index is updated after the commit and the cache file is saved on ``flush()``/``close()`` and every
``save_every`` ops. On open the cache is loaded and newer ops replayed, or the index is rebuilt from the
sidecar's vectors, so a process killed at any moment leaves exactly the committed points.

Concurrency: writers (threads and processes) serialise on ``writer.lock`` and SQLite's write lock; readers
in other processes never block: before each search they replay the ops committed since their last look.

Metrics: COSINE = inner product on unit-length vectors (checked on insert and query, never re-normalised:
:mod:`indexer.core.normalization` decides normalization once, for every store); DOT = inner
product; EUCLID = L2, reported as ``score = -sqrt(squared L2)`` (the negated Euclidean distance, as the
Qdrant store reports it). MANHATTAN is not available in FAISS (ConfigError).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from indexer.plugin_api import (
    CollectionMismatchError,
    ConfigError,
    Filter,
    Hit,
    InputError,
    Metric,
    Point,
    StoreError,
    ancestor_dirs,
    canonical_id,
    copy_sqlite,
    count_rows,
    lexical,
    prepare_vector,
    restore_folder,
)
from plugins.faiss.index import CODES, KINDS, AutoParams, HnswParams, VectorIndex
from plugins.faiss.locking import WriterLock
from plugins.faiss.rebuild import FaissRebuild
from plugins.faiss.recall import FaissRecall, explicit
from plugins.faiss.selection import exact as _exact
from plugins.faiss.selection import lexical_ids as _lexical_ids
from plugins.faiss.selection import point_iid
from plugins.faiss.selection import selection as _selection
from plugins.faiss.sidecar import Row, Sidecar, sidecar_error
from plugins.faiss.space import save_failure

if TYPE_CHECKING:
    from indexer.plugin_api import Settings

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
SIDECAR = "points.sqlite"
CACHE = "index.faiss"
LOCK = "writer.lock"


@dataclass
class _Collection:
    name: str
    folder: Path
    sidecar: Sidecar
    dim: int
    metric: Metric
    kind: str
    generation: str
    index: VectorIndex | None = None
    dirty: int = 0  # ops applied by this process since its last cache save
    rewrite_cache: bool = False  # the cache was missing or unusable: save even if it claims to be current

    @property
    def cache(self) -> Path:
        return self.folder / CACHE


class FaissStore(FaissRecall, FaissRebuild):
    """FAISS collections on disk (see the module docstring for layout, durability and concurrency)."""

    name = "faiss"

    def __init__(
        self,
        path: Path,
        metric: Metric = Metric.COSINE,
        index: str = "auto",
        *,
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 100,
        hnsw_ef_search: int | None = None,  # None: 128, tuned from the measured recall (plugins/faiss/recall.py)
        save_every: int = 20_000,
        lock_timeout: float = 60.0,
        search_threads: int | None = 1,
        auto_switch_at: int = AutoParams.switch_at,
        ivf_nprobe: int | None = None,  # None: AutoParams.nprobe, tuned from the measured recall
        ivf_lists: int | None = None,  # None: by size, halved when tuning could not reach the floor (recall.py)
        ivf_codes: str = AutoParams.codes,  # int8 or sq8: the codes of IVF lists trained from now on (index.py)
    ) -> None:
        metric = Metric(metric)
        if metric is Metric.MANHATTAN:
            raise ConfigError("FAISS has no Manhattan metric; choose cosine, dot or euclid, or use the Qdrant store")
        if index not in KINDS:
            raise ConfigError(f"unknown FAISS index {index!r}; choose one of {', '.join(KINDS)}")
        if ivf_codes not in CODES:
            raise ConfigError(f"unknown FAISS IVF codes {ivf_codes!r}; choose one of {', '.join(CODES)}")
        self.path = Path(path)
        self.metric: Metric = metric
        self.index_kind = index
        self.hnsw = HnswParams(m=hnsw_m, ef_construction=hnsw_ef_construction, ef_search=hnsw_ef_search or 128)
        self.auto = AutoParams(switch_at=auto_switch_at, nprobe=ivf_nprobe or AutoParams.nprobe, lists=ivf_lists,
                               codes=ivf_codes)
        self._init_recall(ivf_nprobe, hnsw_ef_search)
        self._init_rebuild()
        self.save_every = save_every
        self.lock_timeout = lock_timeout
        self.search_threads = search_threads
        self._lock = threading.RLock()
        self._collections: dict[str, _Collection] = {}
        self._writers: dict[str, WriterLock] = {}
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create FAISS store folder {self.path}: {exc}") from exc

    # --- plugin factory (indexer.ports.StoreFactory) ---------------------------------------------
    @classmethod
    def default_options(cls, data_dir: Path, collection: str, settings: Settings) -> dict[str, Any]:
        return {"path": str(Path(data_dir) / "faiss" / collection), "index": settings.faiss_index}

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metric: Metric, settings: Settings) -> FaissStore:
        opts = dict(options)
        if "path" not in opts:
            raise ConfigError("FAISS store options need a 'path' (the store folder)")
        opts.update(explicit(settings))  # an explicit nprobe or efSearch setting wins over the tuning
        return cls(Path(opts.pop("path")), metric=metric, **opts)

    # --- snapshots (indexer.ports.StoreSnapshots): backup and restore ---------------------------
    @classmethod
    def single_process(cls, options: Mapping[str, Any]) -> bool:
        return False  # readers and writers of several processes share a store folder

    @classmethod
    def writer_guard(cls, options: Mapping[str, Any], collection: str) -> AbstractContextManager[None]:
        """The collection's ``writer.lock``: waits for a writer's current operation, not its whole run."""
        return WriterLock(Path(options["path"]) / collection / LOCK, 120.0).hold()

    @classmethod
    def snapshot(cls, options: Mapping[str, Any], collection: str, dest: Path, settings: Settings) -> int:
        """``points.sqlite`` through SQLite's online backup, ``index.faiss`` (a cache) as it is."""
        src, out = Path(options["path"]) / collection, dest / collection
        copy_sqlite(src / SIDECAR, out / SIDECAR)
        if (src / CACHE).exists():
            shutil.copy2(src / CACHE, out / CACHE)
        return count_rows(out / SIDECAR, "points")

    @classmethod
    def restore_snapshot(
        cls, src: Path, options: Mapping[str, Any], collection: str, target: Mapping[str, Any], settings: Settings
    ) -> dict[str, Any]:
        restore_folder(src, Path(target["path"]))
        return {**options, "path": str(target["path"])}

    # --- collection handling ---------------------------------------------------------------------
    def _folder(self, collection: str) -> Path:
        if not _NAME.match(collection):
            raise InputError(f"bad collection name {collection!r}: use letters, digits, '_', '-' and '.' (max 200)")
        return self.path / collection

    def _writer(self, collection: str) -> WriterLock:
        lock = self._writers.get(collection)
        if lock is None:
            lock = WriterLock(self._folder(collection) / LOCK, self.lock_timeout)
            self._writers[collection] = lock
        return lock

    def _forget(self, collection: str) -> None:
        coll = self._collections.pop(collection, None)
        self._recall.pop(collection, None)
        self._recent.pop(collection, None)  # a re-created or dropped collection's searches are not its own
        if coll is not None:
            coll.sidecar.close()

    def _open(self, collection: str) -> _Collection | None:
        """The open collection, re-opened when the sidecar was replaced; None when it does not exist."""
        coll = self._collections.get(collection)
        if coll is not None:
            if coll.sidecar.still_current():
                return coll
            self._forget(collection)
        sidecar = Sidecar.existing(self._folder(collection) / SIDECAR)
        if sidecar is None:
            return None
        with sidecar.read():
            meta = sidecar.meta()
        if meta is None:
            sidecar.close()
            return None
        try:
            coll = _Collection(
                collection,
                sidecar.path.parent,
                sidecar,
                int(meta["dimensions"]),
                Metric(meta["metric"]),
                meta.get("index", "flat"),
                meta["generation"],
            )
        except (KeyError, ValueError) as exc:
            sidecar.close()
            raise StoreError(
                f"FAISS collection {collection!r} has unreadable meta ({exc}); drop it and re-index"
            ) from exc
        self._collections[collection] = coll
        return coll

    def _require(self, collection: str) -> _Collection:
        coll = self._open(collection)
        if coll is None:
            raise StoreError(
                f"FAISS collection {collection!r} does not exist under {self.path}; "
                "create it with ensure_collection() (index the folder first)"
            )
        return coll

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        if dimensions <= 0:
            raise InputError(f"dimensions must be positive, got {dimensions}")
        with self._lock:
            coll = self._open(collection)
            if coll is None:
                folder = self._folder(collection)
                folder.mkdir(parents=True, exist_ok=True)
                with self._writer(collection).hold():
                    sidecar = Sidecar(folder / SIDECAR)
                    try:
                        with sidecar.write():
                            if sidecar.meta() is None:
                                sidecar.create(dimensions, self.metric.value, self.index_kind, meta)
                                logger.info("created FAISS collection %s (%d dims)", collection, dimensions)
                    except sqlite3.Error as exc:
                        raise sidecar_error(exc, sidecar.path, "creating the collection") from exc
                    finally:
                        sidecar.close()
                coll = self._require(collection)
            if coll.dim != dimensions:
                raise CollectionMismatchError(
                    f"FAISS collection {collection!r} holds {coll.dim}-dimensional vectors, "
                    f"not {dimensions}: it was made with another embedding model; "
                    "use another collection name or drop it"
                )

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        with self._lock:
            coll = self._open(collection)
            if coll is None:
                return None
            with coll.sidecar.read():
                raw = coll.sidecar.meta()
            if raw is None:
                return None
            out: dict[str, str] = json.loads(raw.get("user_meta", "{}"))
            out["dimensions"] = raw["dimensions"]
            out["metric"] = raw["metric"]
            return out

    # --- index maintenance -----------------------------------------------------------------------
    def _new_index(self, coll: _Collection, seq: int = 0) -> VectorIndex:
        return VectorIndex(coll.kind, coll.dim, coll.metric is not Metric.EUCLID, self.hnsw, seq, self.auto)

    def _rebuild(self, coll: _Collection, seq: int) -> VectorIndex:
        """A new index from the sidecar's exact vectors (the auto kind picks its structure by their number)."""
        ids, vectors = coll.sidecar.all_vectors(coll.dim)
        index = VectorIndex.build(
            coll.kind, coll.dim, coll.metric is not Metric.EUCLID, self.hnsw, ids, vectors, seq, self._auto_for(coll)
        )
        coll.rewrite_cache = True
        coll.dirty = max(coll.dirty, 1)
        logger.info("built FAISS index %s (%s) from the sidecar: %d vectors", coll.name, index.structure, len(ids))
        return index

    def _sync(self, coll: _Collection) -> VectorIndex:
        """Bring the in-memory index up to the sidecar's state (call inside a sidecar transaction)."""
        state = coll.sidecar.sync_state()
        if state.generation != coll.generation:
            raise StoreError(f"FAISS collection {coll.name!r} was re-created by another process; retry")
        index = self._take_built(coll, state.pruned_through) or coll.index  # a background build done: in place
        if index is not None and index.seq == state.seq:
            coll.index = index
            return index
        if index is None or state.pruned_through > index.seq or state.seq < index.seq:
            index = VectorIndex.load(
                coll.cache, coll.kind, coll.dim, coll.metric is not Metric.EUCLID, self.hnsw, self.auto
            )
            if index is not None and (index.seq < state.pruned_through or index.seq > state.seq):
                index = None  # the cache does not connect to the op log we can see: rebuild
            if index is None:
                index = self._rebuild(coll, state.seq)
        if index.seq < state.seq:
            touched = coll.sidecar.touched_since(index.seq)
            ids, vectors = coll.sidecar.vectors_of(touched, coll.dim)
            index.apply(touched, ids, vectors)
            if index.wants_rebuild():  # large: in the background, this index answering meanwhile (rebuild.py)
                index = self._rebuild_soon(coll, index, state.seq)
        index.seq = state.seq
        coll.index = index
        return index

    def _maybe_save(self, coll: _Collection, force: bool = False) -> None:
        if coll.index is None or coll.dirty == 0 or not (force or coll.dirty >= self.save_every):
            return
        with self._writer(coll.name).hold():
            old_seq = VectorIndex.cached_seq(coll.cache)
            if old_seq < coll.index.seq or (coll.rewrite_cache and old_seq == coll.index.seq):
                try:
                    coll.index.save(coll.cache)
                except OSError as exc:
                    raise StoreError(save_failure(coll.cache, len(coll.index.slot_iid) * coll.dim * 4, exc)) from exc
                # Keep one save interval of ops so readers a little behind can still replay.
                try:
                    with coll.sidecar.write():
                        pruned = coll.sidecar.sync_state().pruned_through
                        through = min(old_seq, coll.index.seq)
                        if through > pruned:
                            coll.sidecar.prune_ops(through)
                            coll.sidecar.set_meta("pruned_through", str(through))
                except sqlite3.Error as exc:
                    raise sidecar_error(exc, coll.sidecar.path, "pruning the op log") from exc
            coll.dirty = 0
            coll.rewrite_cache = False

    # --- VectorStore -----------------------------------------------------------------------------
    def _prepare(self, coll: _Collection, vector: Any, what: str) -> np.ndarray:
        return prepare_vector(vector, coll.dim, coll.metric, what, f"FAISS collection {coll.name!r}")

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if not points:
            return
        with self._lock:
            coll = self._require(collection)
            latest: dict[str, Point] = {}
            for p in points:
                latest[canonical_id(p.id)] = p  # the last occurrence of an id wins
            rows: list[Row] = []
            terms = coll.sidecar.terms_version()  # the analyzer its lexical table was made with
            for uid, p in latest.items():
                vec = self._prepare(coll, p.vector, f"point {uid}")
                payload = dict(p.payload)
                path = payload.get("path")
                if isinstance(path, str) and "dirs" not in payload:
                    payload["dirs"] = ancestor_dirs(path)
                try:
                    payload_json = json.dumps(payload, ensure_ascii=False)
                except (TypeError, ValueError) as exc:
                    raise InputError(f"payload of point {uid} is not JSON-serialisable: {exc}") from exc
                file_type = payload.get("file_type")
                rows.append(
                    Row(
                        point_iid(uid),
                        uid,
                        path if isinstance(path, str) else None,
                        file_type if isinstance(file_type, str) else None,
                        payload_json,
                        vec.astype("<f4").tobytes(),
                        *lexical.fts_fields(payload, terms),
                        terms,
                    )
                )
            iids = np.asarray([r.iid for r in rows], dtype=np.int64)
            if len(set(iids.tolist())) != len(rows):
                raise StoreError("two point ids in one batch map to the same FAISS id; change one id")
            vectors = np.frombuffer(b"".join(r.vector for r in rows), dtype="<f4").reshape(len(rows), coll.dim)
            with self._writer(collection).hold():
                try:
                    with coll.sidecar.write():
                        index = self._sync(coll)
                        known = coll.sidecar.uuids_of(iids.tolist())
                        clash = [u for r in rows if (u := known.get(r.iid)) is not None and u != r.uuid]
                        if clash:
                            raise StoreError(
                                f"point id collision in FAISS collection {collection!r} with {clash[0]}; "
                                "change the colliding id"
                            )
                        new_seq = coll.sidecar.put(rows, index.seq)
                except sqlite3.Error as exc:
                    raise sidecar_error(exc, coll.sidecar.path, "upsert") from exc
                self._apply(coll, iids, iids, vectors.astype(np.float32), new_seq)
            self._maybe_save(coll)

    def _apply(
        self, coll: _Collection, touched: np.ndarray, ids: np.ndarray, vectors: np.ndarray, new_seq: int
    ) -> None:
        """Mirror a committed change in memory; on failure, drop the index so the next call rebuilds it."""
        index = coll.index
        try:
            if index is None:
                raise RuntimeError("no index")
            index.apply(touched, ids, vectors)
            index.seq = new_seq
            coll.dirty += len(touched)
            if index.wants_rebuild():  # the auto kind crossed a size threshold: switch structure
                coll.index = self._rebuild_soon(coll, index, new_seq, written=True)  # large: in the background
        except Exception:  # committed already: the sidecar is right, the memory copy is not
            logger.exception("FAISS index %s out of step after a commit; it will be rebuilt", coll.name)
            coll.index = None

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._lock:
            coll = self._require(collection)
            iids = sorted({point_iid(canonical_id(i)) for i in ids})
            with self._writer(collection).hold():
                try:
                    with coll.sidecar.write():
                        index = self._sync(coll)
                        removed, new_seq = coll.sidecar.remove(iids, index.seq)
                except sqlite3.Error as exc:
                    raise sidecar_error(exc, coll.sidecar.path, "delete") from exc
                if removed:
                    gone = np.asarray(removed, dtype=np.int64)
                    self._apply(coll, gone, np.zeros(0, dtype=np.int64), np.zeros((0, coll.dim), np.float32), new_seq)
            self._maybe_save(coll)

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        with self._lock:
            coll = self._require(collection)
            query = self._prepare(coll, vector, "query vector")
            try:
                with coll.sidecar.read():
                    index = self._sync(coll)
                    allowed, excluded = _selection(coll.sidecar, where)
                    if index.structure == "ivf" and allowed is not None and len(allowed) <= self.auto.exact_below:
                        raw, iids = _exact(coll.sidecar.vectors_of(allowed, coll.dim), query, limit, index.ip)
                    else:
                        raw, iids = self._search_at(coll, index, query, limit, allowed, excluded)
                        if allowed is not None and len(iids) < min(limit, len(allowed)):
                            # An approximate structure found fewer than the filter matches: search them exactly.
                            raw, iids = _exact(coll.sidecar.vectors_of(allowed, coll.dim), query, limit, index.ip)
                    found = coll.sidecar.fetch(iids.tolist())
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "search") from exc
        self.recent_queries(collection).add(query)  # sampled by the recall measurement (vectors only)
        scores = -np.sqrt(np.maximum(raw, 0.0)) if coll.metric is Metric.EUCLID else raw
        hits = []
        for score, iid in zip(scores.tolist(), iids.tolist(), strict=False):
            row = found.get(iid)
            if row is not None:
                hits.append(Hit(id=row[0], score=float(score), payload=json.loads(row[1])))
        return hits

    # --- the lexical index (indexer.ports.LexicalSearch) -------------------------------------------
    def lexical_version(self, collection: str) -> str | None:
        with self._lock:
            coll = self._require(collection)
            try:
                with coll.sidecar.read():
                    return coll.sidecar.lexical_version()
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "reading meta") from exc

    def has_lexical(self, collection: str) -> bool:
        return lexical.known(self.lexical_version(collection))  # an older version's: searched with its terms

    def ensure_lexical(self, collection: str) -> bool:
        """Build the FTS5 table from the stored payloads when missing or outdated (one transaction)."""
        with self._lock:
            coll = self._require(collection)
            with self._writer(collection).hold():
                try:
                    with coll.sidecar.write():
                        if coll.sidecar.lexical_version() == lexical.LEXICAL_VERSION:
                            return False
                        coll.sidecar.create_lexical()
                        coll.sidecar.fill_lexical()  # from the stored payloads: no re-embedding
                        n = coll.sidecar.count()
                except sqlite3.Error as exc:
                    raise sidecar_error(exc, coll.sidecar.path, "building the lexical index") from exc
            logger.info("built the lexical index of FAISS collection %s: %d points", collection, n)
            return True

    def search_lexical(self, collection: str, query: str, limit: int, where: Filter | None = None) -> list[Hit]:
        """Points ranked by BM25 (FTS5) over their terms (the query cut as they were); higher is better."""
        if limit <= 0:
            return []
        with self._lock:
            coll = self._require(collection)
            try:
                with coll.sidecar.read():
                    if (version := coll.sidecar.lexical_version()) is None:
                        raise StoreError(
                            f"FAISS collection {collection!r} has no lexical index yet; run `indexer index` once "
                            "to build it (no re-embedding)"
                        )
                    held = lexical.held(coll.sidecar.languages())  # the languages its chunks are in
                    if (match := lexical.fts_query(query, version, held)) is None:
                        return []
                    rows = coll.sidecar.search_lexical(
                        match,
                        limit,
                        where.path_prefix if where else None,
                        where.file_types if where else (),
                        lexical.TITLE_WEIGHT,
                        *_lexical_ids(where),
                    )
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "lexical search") from exc
        return [Hit(id=uid, score=score, payload=json.loads(payload)) for uid, payload, score in rows]

    def count(self, collection: str) -> int:
        with self._lock:
            coll = self._require(collection)
            try:
                with coll.sidecar.read():
                    return coll.sidecar.count()
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "count") from exc

    def payloads(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, payload) of every point (indexer.ports.PayloadScan)."""
        with self._lock:
            coll = self._require(collection)
            try:
                with coll.sidecar.read():
                    rows = coll.sidecar.conn.execute("SELECT uuid, payload FROM points").fetchall()
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "reading payloads") from exc
        for uid, payload in rows:
            yield uid, json.loads(payload)

    def list_ids(self, collection: str) -> set[str]:
        with self._lock:
            coll = self._require(collection)
            try:
                with coll.sidecar.read():
                    return coll.sidecar.all_uuids()
            except sqlite3.Error as exc:
                raise sidecar_error(exc, coll.sidecar.path, "listing ids") from exc

    def drop(self, collection: str) -> None:
        with self._lock:
            folder = self._folder(collection)
            self._forget(collection)
            if not folder.exists():
                return
            with self._writer(collection).hold():
                for name in (SIDECAR, SIDECAR + "-wal", SIDECAR + "-shm", CACHE):
                    try:
                        (folder / name).unlink()
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        raise StoreError(f"cannot drop FAISS collection {collection!r}: {exc}") from exc
                for tmp in folder.glob(CACHE + ".*.tmp"):
                    tmp.unlink(missing_ok=True)
            deadline = time.monotonic() + 2.0  # the lock file and the folder, once the hold has ended; again
            while folder.exists() and time.monotonic() < deadline:  # while a reader writes a file into it
                shutil.rmtree(folder, ignore_errors=True)
            logger.info("dropped FAISS collection %s", collection)

    def flush(self) -> None:
        """Save every index this process changed to its cache file (speeds up the next open)."""
        with self._lock:
            for coll in list(self._collections.values()):
                if coll.sidecar.still_current():
                    self._maybe_save(coll, force=True)

    def close(self) -> None:
        try:
            self._finish_rebuilds()  # the builds this process's writes started (rebuild.py)
        finally:
            with self._lock:
                try:
                    self.flush()
                    self._save_recent()
                finally:
                    for name in list(self._collections):
                        self._forget(name)
                    for lock in self._writers.values():
                        lock.close()
                    self._writers.clear()
