"""QdrantStore: a Qdrant server (``url``) or qdrant-client's embedded local mode (``path``).

Meta is stored as Qdrant collection metadata (server >= 1.16 and qdrant-client local mode). Older servers
drop the unknown field silently; then the meta is kept in a companion collection ``<name>__indexer_meta``
holding one point (1-dimensional vector) whose payload is the meta; ``drop`` removes both.

Scores: cosine and dot are similarities already; Euclid and Manhattan distances are negated, so
``Hit.score`` is higher-is-better for every metric. Cosine collections take unit-length vectors (checked,
never re-normalised: :mod:`indexer.core.normalization` decides normalization once, for every store).

Filters: ``path_prefix`` matches ``path == prefix`` or ``prefix`` in the payload's ``dirs`` (every ancestor
directory, added at upsert when missing), so "/a/b" never matches "/a/bc/x". Server collections get keyword
payload indexes on path, dirs, file_type and root.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.plugin_api import (
    CollectionMismatchError,
    ConfigError,
    Filter,
    Hit,
    InputError,
    Metric,
    Point,
    StoreError,
    StoreUnavailableError,
    ancestor_dirs,
    canonical_id,
    copy_folder,
    lexical,
    prepare_vector,
    restore_folder,
)
from plugins.qdrant import clauses, selection
from plugins.qdrant.client_fields import ClientFields, affinity_headers, read_consistency_of, route_affinity_of
from plugins.qdrant.edge import EdgeStore
from plugins.qdrant.edge_build import BUILD_SUFFIX
from plugins.qdrant.sharding import sharded
from plugins.qdrant.snapshots import server_restore, server_snapshot

if TYPE_CHECKING:
    from indexer.plugin_api import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")

BATCH = 256
LIST_PAGE = 1024
META_SUFFIX = "__indexer_meta"
MIGRATE_SUFFIX = "__indexer_lexical"  # a copy of a collection while it is re-created with the lexical vector
LEXICAL = lexical.sparse_name()  # the named sparse vector (BM25 term weights, IDF modifier) of new collections
INDEXED_FIELDS = ("path", "dirs", "file_type", "root")
_DISTANCE = {
    Metric.COSINE: qm.Distance.COSINE,
    Metric.DOT: qm.Distance.DOT,
    Metric.EUCLID: qm.Distance.EUCLID,
    Metric.MANHATTAN: qm.Distance.MANHATTAN,
}
_METRIC = {v: k for k, v in _DISTANCE.items()}
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


def qdrant_distribution(settings: Settings) -> dict[str, int | None]:
    """Shards and replicas for collections a Qdrant server creates (settings ``qdrant_*``)."""
    return {
        "shard_number": settings.qdrant_shard_number,
        "replication_factor": settings.qdrant_replication_factor,
        "write_consistency_factor": settings.qdrant_write_consistency_factor,
    }


class QdrantStore(ClientFields):
    """Qdrant behind the VectorStore port; exactly one of ``url`` (server) or ``path`` (embedded)."""

    name = "qdrant"

    def __init__(
        self,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        metric: Metric = Metric.COSINE,
        timeout: float = 10.0,
        retries: int = 5,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        read_consistency: str | int | None = None,
        route_affinity: str | None = None,
        shard_key: str | None = None,  # qdrant_shard_key: our collections custom-sharded (plugins/qdrant/sharding.py)
    ) -> None:
        if (url is None) == (path is None):
            raise ConfigError("QdrantStore needs exactly one of url (a Qdrant server) or path (embedded)")
        if write_consistency_factor and write_consistency_factor > (replication_factor or 1):
            raise ConfigError(
                f"qdrant_write_consistency_factor={write_consistency_factor} exceeds qdrant_replication_factor="
                f"{replication_factor or 1}: a write cannot wait for more replicas than exist; lower it"
            )
        # Applied when this store creates a collection (shards and replicas of a Qdrant cluster).
        given = (("shard_number", shard_number), ("replication_factor", replication_factor),
                 ("write_consistency_factor", write_consistency_factor))
        self.distribution = {k: v for k, v in given if v is not None}
        self.metric: Metric = Metric(metric)
        self.read_consistency = read_consistency_of(read_consistency)  # searches and reads of a replicated cluster
        self.route_affinity = route_affinity_of(route_affinity) if url is not None else None  # embedded: none
        self.url = url
        self.path = Path(path) if path is not None else None
        self.retries = max(1, retries)
        self._dims: dict[str, tuple[int, Metric]] = {}
        self._lexical: dict[str, bool] = {}
        self._where = url if url is not None else str(path)
        try:
            if url is not None:
                self.client = sharded(QdrantClient(url=url, api_key=api_key, timeout=max(1, int(round(timeout))),
                                                   check_compatibility=False), shard_key, (META_SUFFIX,))
            else:
                assert self.path is not None
                self.path.mkdir(parents=True, exist_ok=True)
                self.client = QdrantClient(path=str(self.path))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise StoreError(
                    f"another process holds the embedded Qdrant collection folder {self.path} "
                    "(embedded Qdrant allows one client per folder); stop that process, or run a Qdrant "
                    "server (--qdrant-url) to share it, or use the FAISS store, which lets readers search "
                    "while a writer indexes"
                ) from exc
            raise StoreError(f"cannot open embedded Qdrant at {self.path}: {exc}") from exc
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot open Qdrant at {self._where}: {exc}") from exc

    # --- plugin factory (indexer.ports.StoreFactory) ---------------------------------------------
    @classmethod
    def default_options(cls, data_dir: Path, collection: str, settings: Settings) -> dict[str, Any]:
        """A server (``qdrant_url`` setting) or an embedded folder inside the data directory."""
        if settings.qdrant_url:
            return {"url": settings.qdrant_url}
        return {"path": str(Path(data_dir) / "qdrant" / collection)}

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metric: Metric, settings: Settings) -> QdrantStore | EdgeStore:
        """The API key and a server's shards and replicas come from the settings (never recorded with options)."""
        opts = dict(options)
        if opts.get("url"):
            url = str(opts.pop("url"))
            extra = {**qdrant_distribution(settings), **opts}
            return cls(url=url, api_key=settings.qdrant_api_key, metric=metric,
                       read_consistency=settings.qdrant_read_consistency,
                       route_affinity=settings.qdrant_route_affinity, shard_key=settings.qdrant_shard_key, **extra)
        opts.pop("url", None)
        if "path" not in opts:
            raise ConfigError("Qdrant store options need a 'url' (server) or a 'path' (embedded folder)")
        # embedded: Qdrant's own engine (qdrant-edge); a stateless search worker opens it read-only
        graph = {key: value for key, value in (("m", settings.qdrant_hnsw_m),
                                               ("ef_construct", settings.qdrant_ef_construct)) if value}
        return EdgeStore(Path(opts.pop("path")), metric=metric, read_only=settings.stateless,
                         hnsw_ef=settings.qdrant_hnsw_ef, graph=graph)  # explicit values win over the tuning

    # --- snapshots (indexer.ports.StoreSnapshots): backup and restore ---------------------------
    @classmethod
    def single_process(cls, options: Mapping[str, Any]) -> bool:
        """Embedded Qdrant: one process at a time opens a folder (a server takes any number of clients)."""
        return not options.get("url")

    @classmethod
    def writer_guard(cls, options: Mapping[str, Any], collection: str) -> AbstractContextManager[None]:
        """Nothing of its own: a server snapshots while it is written; embedded Qdrant is single-process, so
        backup holds the collection's writer lock instead."""
        return nullcontext()

    @classmethod
    def snapshot(cls, options: Mapping[str, Any], collection: str, dest: Path, settings: Settings) -> int:
        """Embedded: the folder (SQLite files through the online backup API); a server: its snapshot API."""
        if options.get("url"):
            return server_snapshot(str(options["url"]), collection, dest, settings.qdrant_api_key)
        folder = Path(options["path"])
        copy_folder(folder, dest, skip=(".lock",), skip_dir_suffixes=(BUILD_SUFFIX,))  # not a build's copy
        return EdgeStore.count_copy(dest, collection)

    @classmethod
    def restore_snapshot(
        cls, src: Path, options: Mapping[str, Any], collection: str, target: Mapping[str, Any], settings: Settings
    ) -> dict[str, Any]:
        if options.get("url"):
            server_restore(str(options["url"]), collection, src / f"{collection}.snapshot", settings.qdrant_api_key)
            return dict(options)
        if "path" not in target:
            raise ConfigError("this backup is of an embedded Qdrant collection: unset qdrant_url to restore it here")
        restore_folder(src, Path(target["path"]))
        return {**options, "path": str(target["path"])}

    # --- error handling --------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn``; retry connection failures with exponential backoff; translate every error."""
        delay = 0.2
        for attempt in range(1, self.retries + 1):
            try:
                with affinity_headers(self.route_affinity):
                    return fn()
            except (ResponseHandlingException, httpx.TransportError, ConnectionError) as exc:
                failure: Exception = exc
            except UnexpectedResponse as exc:
                if exc.status_code not in _RETRY_STATUS:
                    raise StoreError(
                        f"Qdrant at {self._where} refused to {what}: HTTP {exc.status_code} {_content(exc)}"
                    ) from exc
                failure = exc
            except RuntimeError as exc:
                raise StoreError(f"Qdrant ({self._where}) failed to {what}: {exc}") from exc
            except (ValueError, KeyError, TypeError, AssertionError) as exc:
                raise StoreError(f"Qdrant ({self._where}) failed to {what}: {exc}") from exc
            if attempt == self.retries:
                raise StoreUnavailableError(
                    f"cannot reach Qdrant at {self._where} to {what} after {self.retries} tries "
                    f"({failure}); start the server or check the URL and API key"
                ) from failure
            logger.warning("Qdrant %s: %s (try %d/%d), retrying", what, failure, attempt, self.retries)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    # --- collections -----------------------------------------------------------------------------
    def _exists(self, collection: str) -> bool:
        return self._call("check a collection", lambda: self.client.collection_exists(collection))

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        if dimensions <= 0:
            raise InputError(f"dimensions must be positive, got {dimensions}")
        if not self._exists(collection):
            recorded = {**{str(k): str(v) for k, v in meta.items()}}
            recorded["dimensions"] = str(dimensions)
            recorded["metric"] = self.metric.value
            try:
                self._call(
                    "create a collection",
                    lambda: self._create(collection, dimensions, self.metric, recorded),
                )
            except StoreError:
                if not self._exists(collection):  # lost a creation race: fine; anything else: raise
                    raise
            else:
                logger.info("created Qdrant collection %s (%d dims)", collection, dimensions)
                self._create_payload_indexes(collection)
                if self.url is not None and (self._stored_meta(collection) or {}).get("metric") is None:
                    self._write_fallback_meta(collection, recorded)
        dims, _ = self._shape(collection)
        if dims != dimensions:
            raise CollectionMismatchError(
                f"Qdrant collection {collection!r} holds {dims}-dimensional vectors, not {dimensions}: it was "
                "made with another embedding model; use another collection name or drop it"
            )

    def _create_payload_indexes(self, collection: str) -> None:
        """Keyword indexes on the fields filters use (a Qdrant server only: embedded Qdrant ignores them)."""
        if self.url is None:
            return
        for field in INDEXED_FIELDS:
            self._call("create a payload index", partial(self.client.create_payload_index, collection, field,
                                                         field_schema=qm.PayloadSchemaType.KEYWORD, wait=True))
        self.ensure_field_indexes(collection)  # the filter language's (plugins/qdrant/client_fields.py)

    def _create(self, collection: str, dimensions: int, metric: Metric, meta: Mapping[str, Any] | None) -> None:
        self.client.create_collection(
            collection,
            vectors_config=qm.VectorParams(size=dimensions, distance=_DISTANCE[metric]),
            sparse_vectors_config={LEXICAL: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            metadata=dict(meta) if meta else None,
            shard_number=self.distribution.get("shard_number"),
            replication_factor=self.distribution.get("replication_factor"),
            write_consistency_factor=self.distribution.get("write_consistency_factor"),
        )
        self._lexical.pop(collection, None)

    def _info(self, collection: str) -> qm.CollectionInfo:
        try:
            return self._call("read a collection", lambda: self.client.get_collection(collection))
        except StoreUnavailableError:
            raise
        except StoreError as exc:
            if not self._exists(collection):
                raise StoreError(
                    f"Qdrant collection {collection!r} does not exist at {self._where}; "
                    "create it with ensure_collection() (index the folder first)"
                ) from exc
            raise

    def _shape(self, collection: str) -> tuple[int, Metric]:
        """(dimensions, metric) of the collection's single unnamed dense vector."""
        cached = self._dims.get(collection)
        if cached is not None:
            return cached
        params = self._info(collection).config.params.vectors
        if not isinstance(params, qm.VectorParams):
            names = ", ".join(sorted(params or {}))
            raise StoreError(
                f"Qdrant collection {collection!r} uses named vectors ({names}); indexer writes one unnamed "
                "vector: use a collection that indexer created"
            )
        shape = (int(params.size), _METRIC[params.distance])
        self._dims[collection] = shape
        return shape

    def _stored_meta(self, collection: str) -> dict[str, Any] | None:
        metadata = getattr(self._info(collection).config, "metadata", None)
        return dict(metadata) if metadata else None

    def _write_fallback_meta(self, collection: str, recorded: Mapping[str, str]) -> None:
        logger.info("Qdrant server ignores collection metadata; storing meta in %s%s", collection, META_SUFFIX)
        name = collection + META_SUFFIX
        if not self._exists(name):
            self._call(
                "create the meta collection",
                lambda: self.client.create_collection(
                    name, vectors_config=qm.VectorParams(size=1, distance=qm.Distance.DOT)
                ),
            )
        point = qm.PointStruct(id=str(uuid.UUID(int=1)), vector=[1.0], payload=dict(recorded))
        self._call("write meta", lambda: self.client.upsert(name, [point], wait=True))

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        if not self._exists(collection):
            return None
        meta = self._stored_meta(collection) or {}
        if "metric" not in meta and self._exists(collection + META_SUFFIX):
            got = self._call(
                "read meta",
                lambda: self.client.retrieve(collection + META_SUFFIX, [str(uuid.UUID(int=1))]),
            )
            if got:
                meta = dict(got[0].payload or {})
        dims, metric = self._shape(collection)
        out = {str(k): str(v) for k, v in meta.items()}
        out.setdefault("dimensions", str(dims))
        out.setdefault("metric", metric.value)
        return out

    # --- points ----------------------------------------------------------------------------------
    def _prepare(self, collection: str, vector: Any, what: str) -> tuple[list[float], Metric]:
        dims, metric = self._shape(collection)
        vec = prepare_vector(vector, dims, metric, what, f"Qdrant collection {collection!r}")
        return vec.astype(np.float32).tolist(), metric

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if not points:
            return
        latest: dict[str, Point] = {}
        for p in points:
            latest[canonical_id(p.id)] = p
        structs = []
        version = self.lexical_version(collection)  # its sparse vector, with the terms of its analyzer
        for uid, p in latest.items():
            vec, _ = self._prepare(collection, p.vector, f"point {uid}")
            payload = dict(p.payload)
            path = payload.get("path")
            if isinstance(path, str) and "dirs" not in payload:
                payload["dirs"] = ancestor_dirs(path)
            vector: Any = vec
            if version is not None:
                indices, values = lexical.sparse_document(payload, lexical.analyzer(version))
                vector = {"": vec, lexical.sparse_name(version): qm.SparseVector(indices=indices, values=values)}
            structs.append(qm.PointStruct(id=uid, vector=vector, payload=payload))
        for start in range(0, len(structs), BATCH):
            batch = structs[start : start + BATCH]
            self._call("upsert points", partial(self.client.upsert, collection, batch, wait=True))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        self._shape(collection)  # raises when the collection is missing
        unique = sorted({canonical_id(i) for i in ids})
        for start in range(0, len(unique), BATCH * 4):
            part: list[qm.ExtendedPointId] = list(unique[start : start + BATCH * 4])
            self._call(
                "delete points",
                partial(self.client.delete, collection, qm.PointIdsList(points=part), wait=True),
            )

    def _store_filter(self, where: Filter | None) -> qm.Filter | None:
        return _filter(where)

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        if limit <= 0:
            return []
        query, metric = self._prepare(collection, vector, "query vector")
        found = self._selected(collection, where, limit, lambda n, flt, payload: self.client.query_points(
            collection, query=query, limit=n, query_filter=flt, with_payload=payload,
            consistency=self.read_consistency))
        negate = metric in (Metric.EUCLID, Metric.MANHATTAN)
        return [Hit(id=pid, score=-score if negate else score, payload=payload) for pid, score, payload in found]

    def _selected(self, collection: str, where: Filter | None, limit: int, query: Callable[[int, Any, bool], Any]
                  ) -> list[tuple[str, float, dict[str, Any]]]:
        """(id, score, payload) of the ``limit`` best points ``where`` allows; ``query(n, filter, payloads)`` runs
        the search. A large id selection is checked after a search without payloads, not sent with every query
        (plugins/qdrant/selection.py)."""
        def run(n: int, flt: Filter | None, payload: bool) -> selection.Found:
            points = self._call("search", lambda: query(n, _filter(flt), payload)).points
            return [(str(p.id), float(p.score), dict(p.payload or {}) if payload else None) for p in points]

        def count() -> int:
            return int(self._call("count points", lambda: self.client.count(collection, exact=False)).count)

        def payloads(ids: list[str]) -> dict[str, dict[str, Any]]:
            records = self._call("read payloads", lambda: self.client.retrieve(
                collection, ids, with_payload=True, consistency=self.read_consistency))
            return {str(r.id): dict(r.payload or {}) for r in records}

        return selection.search(where, limit, count, run, payloads)

    # --- the lexical index (indexer.ports.LexicalSearch) ---------------------------------------------
    def lexical_version(self, collection: str) -> str | None:
        """The analyzer version of the collection's lexical vector (``bm25_v<version>``; the newest this indexer
        knows), or None. Only the current one is cached: another process (a server's indexer) may rebuild an older
        collection while this one keeps running."""
        if self._lexical.get(collection):
            return lexical.LEXICAL_VERSION
        sparse = self._info(collection).config.params.sparse_vectors or {}
        found = [v for v in lexical.versions() if lexical.sparse_name(v) in sparse]
        self._lexical[collection] = lexical.LEXICAL_VERSION in found
        return found[-1] if found else None

    def has_lexical(self, collection: str) -> bool:
        return self.lexical_version(collection) is not None  # an older analyzer's: searched with its terms

    def search_lexical(self, collection: str, query: str, limit: int, where: Filter | None = None) -> list[Hit]:
        """Points ranked by BM25: the query's terms against the sparse vectors (Qdrant multiplies in the IDF), the
        query cut by the analyzer that made them."""
        if limit <= 0:
            return []
        version = self.lexical_version(collection)
        if version is None:
            raise StoreError(
                f"Qdrant collection {collection!r} has no lexical vector yet; run `indexer index` once to add it "
                "(no re-embedding)"
            )
        indices, values = lexical.sparse_query(query, lexical.analyzer(version))
        if not indices:
            return []
        sparse = qm.SparseVector(indices=indices, values=values)
        using = lexical.sparse_name(version)
        found = self._selected(collection, where, limit, lambda n, flt, payload: self.client.query_points(
            collection, query=sparse, using=using, limit=n, query_filter=flt, with_payload=payload,
            consistency=self.read_consistency))
        return [Hit(id=pid, score=score, payload=payload) for pid, score, payload in found]

    def ensure_lexical(self, collection: str) -> bool:
        """Re-create a collection made without the lexical vector, or whose terms an older analyzer made, keeping
        every point (vectors and payloads; the sparse vector made anew).

        Qdrant cannot add a vector to an existing collection, so the points are copied to ``<name>__indexer_lexical``,
        the collection is re-created with the sparse vector and the points copied back (with their sparse vectors).
        Each step can be resumed: a run killed anywhere finishes the move on the next call."""
        tmp = collection + MIGRATE_SUFFIX
        self._dims.pop(collection, None)
        self._lexical.pop(collection, None)
        if self._exists(collection):
            if self.lexical_version(collection) == lexical.LEXICAL_VERSION:
                if not self._exists(tmp):
                    return False
                self._copy(tmp, collection)  # killed while copying back: finish it
            else:
                dims, metric = self._shape(collection)
                meta = self._stored_meta(collection)
                if self._exists(tmp):
                    self._call("drop a collection", partial(self.client.delete_collection, tmp))
                self._call("create a collection", lambda: self._create(tmp, dims, metric, meta))
                self._copy(collection, tmp)
                self._call("drop a collection", partial(self.client.delete_collection, collection))
                self._recreate_from(tmp, collection)
        elif self._exists(tmp):
            self._recreate_from(tmp, collection)  # killed between the drop and the re-creation
        else:
            return False
        self._call("drop a collection", partial(self.client.delete_collection, tmp))
        self._dims.pop(collection, None)
        self._lexical.pop(collection, None)
        logger.info("added the lexical vector to Qdrant collection %s", collection)
        return True

    def _recreate_from(self, tmp: str, collection: str) -> None:
        self._dims.pop(collection, None)
        dims, metric = self._shape(tmp)
        self._dims.pop(tmp, None)
        meta = self._stored_meta(tmp)
        self._call("create a collection", lambda: self._create(collection, dims, metric, meta))
        self._create_payload_indexes(collection)
        self._copy(tmp, collection)

    def _copy(self, source: str, target: str) -> None:
        """Copy every point of ``source`` into ``target`` (dense vector and payload; sparse vector recomputed)."""
        for records in self._pages(source, BATCH, with_payload=True, with_vectors=True):
            structs = []
            for r in records:
                dense = r.vector.get("") if isinstance(r.vector, dict) else r.vector
                payload = dict(r.payload or {})
                indices, values = lexical.sparse_document(payload)
                vector: Any = {"": dense, LEXICAL: qm.SparseVector(indices=indices, values=values)}
                structs.append(qm.PointStruct(id=r.id, vector=vector, payload=payload))
            if structs:
                self._call("upsert points", partial(self.client.upsert, target, structs, wait=True))

    def _pages(self, collection: str, limit: int, *, with_payload: bool, with_vectors: bool) -> Iterator[list[Any]]:
        """Every point of ``collection``, a scroll page at a time."""
        offset: Any = None
        while True:
            records, offset = self._call(
                "list points",
                partial(
                    self.client.scroll,
                    collection,
                    limit=limit,
                    offset=offset,
                    with_payload=with_payload,
                    with_vectors=with_vectors,
                ),
            )
            yield records
            if offset is None:
                return

    def payloads(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, payload) of every point (indexer.ports.PayloadScan)."""
        for page in self._pages(collection, LIST_PAGE, with_payload=True, with_vectors=False):
            for r in page:
                yield str(r.id), dict(r.payload or {})

    def count(self, collection: str) -> int:
        self._shape(collection)
        return int(self._call("count points", lambda: self.client.count(collection, exact=True)).count)

    def list_ids(self, collection: str) -> set[str]:
        self._shape(collection)
        pages = self._pages(collection, LIST_PAGE, with_payload=False, with_vectors=False)
        return {str(r.id) for records in pages for r in records}

    def drop(self, collection: str) -> None:
        self._dims.pop(collection, None)
        self._lexical.pop(collection, None)
        for name in (collection, collection + META_SUFFIX, collection + MIGRATE_SUFFIX):
            if self._exists(name):
                self._call("drop a collection", partial(self.client.delete_collection, name))

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the caller's own error
            logger.warning("closing Qdrant client for %s: %s", self._where, exc)


def _client_filter(where: Filter) -> qm.Filter | None:
    must: list[Any] = []
    if where.path_prefix is not None:
        prefix = where.path_prefix.rstrip("/") or "/"
        must.append(
            qm.Filter(
                should=[
                    qm.FieldCondition(key="path", match=qm.MatchValue(value=prefix)),
                    qm.FieldCondition(key="dirs", match=qm.MatchValue(value=prefix)),
                ]
            )
        )
    if where.file_types:
        must.append(qm.FieldCondition(key="file_type", match=qm.MatchAny(any=list(where.file_types))))
    if where.ids is not None:  # the exact selection of the filter's other clauses (indexer.state.fields)
        must.append(qm.HasIdCondition(has_id=sorted(where.ids)))
    if where.clauses:  # a stateless worker's clauses, on the payload the writer keeps (plugins/qdrant/clauses.py)
        must.append(clauses.clauses_filter(where.clauses, dict(where.kinds)))
    if where.committed:  # points a writer has not committed (a large file mid-write): never seen by a worker
        must.append(clauses.COMMITTED)
    # points written but not committed (a large file mid-write): never seen, filtered or not
    must_not: list[Any] = [qm.HasIdCondition(has_id=sorted(where.hidden))] if where.hidden else []
    return qm.Filter(must=must or None, must_not=must_not or None) if must or must_not else None


_filter = selection.Built(_client_filter)  # the last few filters converted (a large selection is ~10 ms)


def _content(exc: UnexpectedResponse) -> str:
    try:
        return exc.content.decode("utf-8", "replace")[:300]
    except Exception:
        return ""
