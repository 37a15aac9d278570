"""AttachedStore: the VectorStore port over a collection someone else created (entry point ``qdrant_attach``).

It writes our chunks as points in *their* payload layout, into one vector slot, and touches nothing else:

- never creates, drops or reconfigures the collection (``ensure_collection`` only checks; ``drop`` deletes our
  points, found by our marker field);
- upserts refuse ids that already belong to a foreign point; deletes skip ids that are not ours;
- ``count`` and ``list_ids`` see our points only; ``search`` sees every point (theirs too) in the chosen vector.

The ``collection`` argument of the port methods is our attachment's name; the Qdrant collection is fixed at
construction. Store options (recorded in the state store by :func:`plugins.qdrant_attach.attach`) never hold the
API key: it comes from ``api_key``, from a key given to :func:`plugins.qdrant_attach.attach` for the same URL
earlier in this process (:func:`remember_api_key`, memory only), or from the ``qdrant_api_key`` setting
(``INDEXER_QDRANT_API_KEY``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from indexer.plugin_api import (
    CollectionMismatchError,
    ConfigError,
    Filter,
    Hit,
    Metric,
    Point,
    StoreError,
    canonical_id,
    prepare_vector,
)
from plugins.qdrant_attach.connect import call, close_client, open_client
from plugins.qdrant_attach.inspection import dense_vectors
from plugins.qdrant_attach.layout import Layout, get_path
from plugins.qdrant_attach.sharding import ShardKeyRule, by_key, custom_sharded, refusal

if TYPE_CHECKING:
    from indexer.plugin_api import Settings

logger = logging.getLogger(__name__)

BATCH = 256
PAGE = 1024
# What of our pipeline's payload goes into the foreign payload's metadata (besides the source path).
_META_KEYS = ("rel_path", "file_type", "chunk_index", "start_line", "end_line", "page", "heading", "locator")


class AttachedStore:
    name = "qdrant_attach"

    def __init__(
        self,
        *,
        collection: str,
        vector: str,
        layout: Mapping[str, Any],
        marker: str,
        metric: Metric | str = Metric.COSINE,
        url: str | None = None,
        qdrant_path: str | None = None,
        api_key: str | None = None,
        meta: Mapping[str, str] | None = None,
        client: QdrantClient | None = None,
        shard_key: str | None = None,
        **_ignored: Any,
    ) -> None:
        self.metric = Metric(metric)
        self.collection = collection
        self.vector = vector
        self.layout = Layout.from_dict(layout)
        self.marker = marker
        self.meta = dict(meta or {})
        self.where = url or str(qdrant_path)
        self._owns_client = client is None
        if client is None:
            if url is not None and api_key is None:
                api_key = api_key_for(url)
            client = open_client(url, Path(qdrant_path) if qdrant_path else None, api_key)
        self.client = client
        self._checked = False
        self.shard_rule = ShardKeyRule.parse(shard_key)  # a custom-sharded collection's writes (sharding.py)
        self.sharded = False  # known once _check has read the collection

    # -- plugin factory (indexer.ports.StoreFactory) ------------------------------------------------------
    @classmethod
    def default_options(cls, data_dir: Path, collection: str, settings: Settings) -> dict[str, Any]:
        """Attached stores are never made from settings: ``indexer qdrant attach`` records their options."""
        raise ConfigError(
            f"the {cls.name} store attaches to an existing Qdrant collection and cannot create {collection!r}: "
            "attach one with `indexer qdrant index COLLECTION PATH --url URL` (or --path DIR), or choose another "
            "store (--store faiss)"
        )

    @classmethod
    def single_process(cls, options: Mapping[str, Any]) -> bool:
        """An embedded folder admits one process (inside it, one shared client: connect.open_client)."""
        return not options.get("url")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metric: Metric, settings: Settings) -> AttachedStore:
        """The API key is found as the module docstring says (never recorded with the options)."""
        opts: dict[str, Any] = {**options, "metric": metric}
        if opts.get("url") and not opts.get("api_key"):
            opts["api_key"] = api_key_for(str(opts["url"]), settings)
        return cls(**opts)

    # -- checks -------------------------------------------------------------------------------------------
    def _check(self) -> None:
        """The collection still has our vector slot, same size and distance as when we attached."""
        if self._checked:
            return
        if not call(self.where, "check a collection", lambda: self.client.collection_exists(self.collection)):
            raise StoreError(
                f"Qdrant collection {self.collection!r} is gone from {self.where}; indexer never creates collections "
                "it attached to: restore it, or detach (`indexer qdrant detach`)"
            )
        info = call(self.where, "read the collection", lambda: self.client.get_collection(self.collection))
        self.sharded = custom_sharded(info)
        _, dense = dense_vectors(info)
        vec = next((v for v in dense if v.name == self.vector), None)
        dims = self.meta.get("dimensions")
        if vec is None or (dims is not None and str(vec.size) != dims) or vec.distance != self.metric.value:
            found = f"{vec.size} dims, {vec.distance}" if vec else "missing"
            raise CollectionMismatchError(
                f"vector {self.vector or '(unnamed)'} of Qdrant collection {self.collection!r} changed since it was "
                f"attached ({found}; attached as {dims} dims, {self.metric.value}); detach and attach again"
            )
        self._checked = True

    def _own(self, collection: str) -> None:
        """The port's ``collection`` must be this attachment: it holds exactly one set of vectors (ours, in one
        slot of their collection), so no second store collection can live beside it (e.g. ``indexer reindex``)."""
        if collection != self.marker:
            raise ConfigError(
                f"the attached Qdrant collection {self.collection!r} holds one set of our vectors, as {self.marker!r}; "
                f"it cannot hold {collection!r} too. To change the model, detach (`indexer qdrant detach`) and index "
                "again with the new model (into a vector that fits it, or --add-vector)"
            )

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        self._own(collection)
        self._check()
        want = self.meta.get("dimensions")
        if want is not None and int(want) != dimensions:
            raise CollectionMismatchError(
                f"the model makes {dimensions}-dimensional vectors but vector {self.vector or '(unnamed)'} of "
                f"{self.collection!r} holds {want}; use the model the attachment was made with"
            )

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        if collection != self.marker:
            return None
        self._check()
        return {**self.meta, "metric": self.metric.value}

    # -- writes -------------------------------------------------------------------------------------------
    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        self._own(collection)
        if not points:
            return
        self._check()
        if self.sharded and self.shard_rule is None:
            raise refusal(self.collection, self.where)
        dims = int(self.meta.get("dimensions", 0)) or len(np.asarray(points[0].vector).reshape(-1))
        latest = {canonical_id(p.id): p for p in points}
        self._refuse_foreign(list(latest))
        structs = []
        for uid, p in latest.items():
            vec = prepare_vector(p.vector, dims, self.metric, f"point {uid}", f"Qdrant collection {self.collection!r}")
            text = str(p.payload.get("text", ""))
            payload = self.layout.build(uid, text, _metadata(self.layout, p.payload), self.marker)
            vector: Any = {self.vector: vec.tolist()} if self.vector else vec.tolist()
            structs.append(qm.PointStruct(id=uid, vector=vector, payload=payload))
        for key, group in self._by_shard(structs, lambda s: s.payload or {}).items():
            for start in range(0, len(group), BATCH):
                batch = group[start : start + BATCH]
                call(self.where, "upsert points", partial(self.client.upsert, self.collection, batch, wait=True,
                                                          shard_key_selector=key))

    def _by_shard(self, items: list[Any], payload_of: Any) -> dict[str | None, list[Any]]:
        """``items`` by the shard key each is written with (None: the collection is not custom-sharded)."""
        if not self.sharded or self.shard_rule is None:
            return {None: items}
        return {key: group for key, group in by_key(items, payload_of, self.shard_rule, self.collection).items()}

    def _refuse_foreign(self, ids: list[str]) -> None:
        """Our uuid5 ids never collide with theirs in practice; this proves it before every write."""
        for start in range(0, len(ids), PAGE):
            part: list[qm.ExtendedPointId] = list(ids[start : start + PAGE])
            found = call(self.where, "check point ids", partial(self._retrieve, part))
            others = [r for r in found if not self.layout.is_ours(r.payload or {}, self.marker)]
            if not others:
                continue
            shown = ", ".join(str(r.id) for r in others[:3])
            owners = sorted({str(m) for r in others if (m := get_path(r.payload or {}, self.layout.marker_key))})
            if owners:  # written by indexer, for another attachment of this collection: the same files
                raise StoreError(
                    f"point id(s) {shown} of {self.collection!r} were written by indexer for attachment "
                    f"{', '.join(repr(o) for o in owners)}: those files are already indexed into this collection there "
                    "(a point's id comes from its file and chunk, not from the attachment's name). Nothing was "
                    f"written; index them through {owners[0]!r}, or forget them there first "
                    f"(`indexer forget -c {owners[0]} PATH`)"
                )
            raise StoreError(
                f"point id(s) {shown} of {self.collection!r} belong to points indexer did not write; nothing was "
                "written, and theirs are never overwritten"
            )

    def _retrieve(self, ids: list[qm.ExtendedPointId]) -> list[qm.Record]:
        return self.client.retrieve(self.collection, ids, with_payload=True, with_vectors=False)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self._own(collection)
        if not ids:
            return
        self._check()
        unique = sorted({canonical_id(i) for i in ids})
        for start in range(0, len(unique), PAGE):
            part: list[qm.ExtendedPointId] = list(unique[start : start + PAGE])
            found = call(self.where, "read points", partial(self._retrieve, part))
            ours = [r for r in found if self.layout.is_ours(r.payload or {}, self.marker)]
            if len(ours) < len(found):
                logger.warning("not deleting %d point(s) that indexer did not write", len(found) - len(ours))
            for key, group in self._by_shard(ours, lambda r: r.payload or {}).items() if ours else ():
                mine: list[qm.ExtendedPointId] = [r.id for r in group]
                call(self.where, "delete points", partial(self.client.delete, self.collection,
                                                          qm.PointIdsList(points=mine), wait=True,
                                                          shard_key_selector=key))

    def drop(self, collection: str) -> None:
        """Delete our points only; the collection, its config and everyone else's points stay. Another name
        (no such store collection here) is a no-op."""
        if collection != self.marker:
            return
        if not call(self.where, "check a collection", lambda: self.client.collection_exists(self.collection)):
            return
        call(
            self.where,
            "delete our points",
            partial(self.client.delete, self.collection, qm.FilterSelector(filter=self.ours_filter()), wait=True),
        )

    # -- reads --------------------------------------------------------------------------------------------
    def ours_filter(self) -> qm.Filter:
        return qm.Filter(must=[qm.FieldCondition(key=self.layout.marker_key, match=qm.MatchValue(value=self.marker))])

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        """Nearest points of the whole collection (theirs and ours), in our payload terms (path, text, lines)."""
        self._own(collection)
        if limit <= 0:
            return []
        self._check()
        dims = int(self.meta.get("dimensions", 0)) or len(np.asarray(vector).reshape(-1))
        query = prepare_vector(vector, dims, self.metric, "query vector", f"Qdrant collection {self.collection!r}")
        # The exact id selection of a filter's clauses runs in Qdrant; path and type are checked here, in our
        # terms, widening the search until ``limit`` hits match or the collection is exhausted (never fewer
        # hits than match: the true top-k of the matching points).
        must: list[Any] = [] if where is None or where.ids is None else [qm.HasIdCondition(has_id=sorted(where.ids))]
        # points written but not committed (a large file mid-write) are never seen, filtered or not
        hidden = where.hidden if where is not None else frozenset()
        must_not: list[Any] = [qm.HasIdCondition(has_id=sorted(hidden))] if hidden else []
        flt = qm.Filter(must=must or None, must_not=must_not or None) if must or must_not else None
        local = where is not None and (where.path_prefix is not None or bool(where.file_types))
        fetch = limit * 4 if local else limit
        while True:
            response = call(
                self.where,
                "search",
                partial(self.client.query_points, self.collection, query=query.tolist(), using=self.vector or None,
                        limit=fetch, with_payload=True, query_filter=flt),
            )
            hits = self._hits(response.points, where if local else None)
            if len(hits) >= limit or len(response.points) < fetch:
                return hits[:limit]
            fetch *= 4

    def _hits(self, points: Sequence[Any], where: Filter | None) -> list[Hit]:
        negate = self.metric in (Metric.EUCLID, Metric.MANHATTAN)
        hits = []
        for p in points:
            payload = _ours_terms(self.layout, dict(p.payload or {}))
            if where is not None and not _matches(payload, where):
                continue
            hits.append(Hit(id=str(p.id), score=-float(p.score) if negate else float(p.score), payload=payload))
        return hits

    def count(self, collection: str) -> int:
        self._own(collection)
        self._check()
        flt = self.ours_filter()
        return int(call(self.where, "count points", lambda: self.client.count(self.collection, flt, exact=True)).count)

    def list_ids(self, collection: str) -> set[str]:
        self._own(collection)
        self._check()
        out: set[str] = set()
        offset: Any = None
        while True:
            records, offset = call(
                self.where,
                "list our points",
                partial(
                    self.client.scroll,
                    self.collection,
                    scroll_filter=self.ours_filter(),
                    limit=PAGE,
                    offset=offset,
                    with_payload=False,
                    with_vectors=False,
                ),
            )
            out.update(str(r.id) for r in records)
            if offset is None:
                return out

    def close(self) -> None:
        if self._owns_client:
            try:
                close_client(self.client)
            except Exception as exc:  # closing must not mask the caller's own error
                logger.warning("closing Qdrant client for %s: %s", self.where, exc)


_API_KEYS: dict[str, str] = {}


def remember_api_key(url: str, api_key: str) -> None:
    """Let stores the facade opens for ``url`` in this process use ``api_key`` (never written anywhere)."""
    _API_KEYS[url] = api_key


def api_key_for(url: str, settings: Settings | None = None) -> str | None:
    """The API key for ``url``: one given to attach() in this process, else the ``qdrant_api_key`` setting (of
    ``settings`` when given, else as loaded from the environment and config file)."""
    if url in _API_KEYS:
        return _API_KEYS[url]
    if settings is not None:
        return settings.qdrant_api_key
    return os.environ.get("INDEXER_QDRANT_API_KEY") or _settings_api_key()


def _settings_api_key() -> str | None:
    from indexer.plugin_api import load_settings

    return load_settings().qdrant_api_key


def _metadata(layout: Layout, ours: Mapping[str, Any]) -> dict[str, Any]:
    """Our pipeline payload -> flat metadata for their layout: the source path under their key, and our lines."""
    meta: dict[str, Any] = {layout.source_key(): ours.get("path")}
    for key in _META_KEYS:
        value = ours.get(key)
        if key == "heading":
            value = " > ".join(value) if value else None
        if value is not None and value != "":
            meta[key] = value
    for group in ("location", "metadata"):  # a document's place and facts (slide, sender, author): flat, ours last
        values = ours.get(group)
        if isinstance(values, Mapping):
            for name, value in values.items():
                meta.setdefault(str(name), value)
    return meta


def _ours_terms(layout: Layout, payload: Mapping[str, Any]) -> dict[str, Any]:
    """A foreign payload in the terms our query path reads (path, text, start_line, ...)."""
    meta = layout.metadata(payload)
    source = layout.source(payload) or ""
    heading = meta.get("heading")
    return {
        "path": source,
        "rel_path": meta.get("rel_path", source),
        "file_type": meta.get("file_type") or os.path.splitext(source)[1].lstrip(".").lower(),
        "text": layout.text(payload),
        "start_line": _int(meta.get("start_line")),
        "end_line": _int(meta.get("end_line")),
        "page": meta.get("page") if isinstance(meta.get("page"), int) else None,
        "heading": [h for h in heading.split(" > ") if h] if isinstance(heading, str) else [],
        "locator": meta.get("locator") if isinstance(meta.get("locator"), str) else "",
        "metadata": meta,
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _matches(payload: Mapping[str, Any], where: Filter) -> bool:
    path = str(payload.get("path", ""))
    if where.path_prefix is not None:
        prefix = where.path_prefix.rstrip("/") or "/"
        if not (path == prefix or path.startswith(prefix.rstrip("/") + "/")):
            return False
    return not where.file_types or str(payload.get("file_type", "")) in where.file_types
