"""The payload-filter port (:class:`indexer.plugin_api.PayloadFields`) of the embedded store: what lets a stateless
worker answer filters, facets and ``/fields`` from an embedded Qdrant shard (docs/deploy.md#stateless-workers).

A mixin of :class:`plugins.qdrant.edge.EdgeStore`: every write goes through the store's ``_apply`` (its lock,
free-space check, flush, and the journal a background index build replays)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from indexer.plugin_api import Filter, StoreError, canonical_id, payload_fields
from plugins.qdrant import clauses, selection

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

BATCH = 1024
PAGE = 512
LIVE_SUFFIX = ".live.json"  # edge/<collection>.live.json: the store collection a reindex switched its vectors to


def field_indexes(qe: Any, cold: bool) -> list[tuple[str, str, Any]]:
    """(payload key, schema name, index schema) of the keys the filter language reads
    (indexer.state.payload_fields)."""
    memory = qe.Memory.Cold if cold else None
    keyword = qe.KeywordIndexParams(memory=memory, prefix=True)
    integer = qe.IntegerIndexParams(lookup=True, range=True, memory=memory)
    out = [(k, "keyword", keyword) for k in payload_fields.KEYWORD_INDEXES]
    out += [(k, "integer", integer) for k in payload_fields.INTEGER_INDEXES]
    out += [(k, "bool", qe.BoolIndexParams(memory=memory)) for k in payload_fields.BOOL_INDEXES]
    return out


def schema_of(qe: Any, kind: str, cold: bool) -> Any:
    """The qdrant-edge index schema of a kind name (keyword, integer, float, bool)."""
    memory = qe.Memory.Cold if cold else None
    return {"keyword": lambda: qe.KeywordIndexParams(memory=memory, prefix=True),
            "integer": lambda: qe.IntegerIndexParams(lookup=True, range=True, memory=memory),
            "float": lambda: qe.FloatIndexParams(memory=memory),
            "bool": lambda: qe.BoolIndexParams(memory=memory)}[kind]()


class EdgeFields:
    """PayloadFields on qdrant-edge shards (mixed into EdgeStore, whose members these use)."""

    path: Path
    read_only: bool
    cold_indexes: bool
    _dir: Callable[[str], Path]
    _apply: Callable[..., None]
    _require: Callable[[str], Any]
    _call: Callable[..., Any]
    _lock: Any

    def set_payloads(self, collection: str, updates: Sequence[tuple[Sequence[str], Mapping[str, Any]]]) -> None:
        qe = selection.edge()
        ops = []
        for ids, payload in updates:
            uids = sorted({canonical_id(i) for i in ids})
            for start in range(0, len(uids), BATCH):
                part, values = uids[start:start + BATCH], dict(payload)
                ops.append((qe.UpdateOperation.set_payload(part, values), ("set_payload", [(part, values)]), 0))
        if ops:
            self._apply(collection, ops)

    def unmark(self, collection: str, ids: Sequence[str] | None) -> None:
        qe = selection.edge()
        keys = [payload_fields.UNCOMMITTED]
        if ids is None:
            marked = clauses.to_edge(clauses.MARKED)
            self._apply(collection, [(qe.UpdateOperation.delete_payload_by_filter(marked, keys), ("unmark", []), 0)])
            return
        uids = sorted({canonical_id(i) for i in ids})
        self._apply(collection, [(qe.UpdateOperation.delete_payload(uids[s:s + BATCH], keys),
                                  ("unmark", uids[s:s + BATCH]), 0) for s in range(0, len(uids), BATCH)])

    def unfilled(self, collection: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        qe = selection.edge()
        lacking = qe.Filter(must=[qe.IsEmptyCondition(payload_fields.CURRENT)])
        offset: Any = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=PAGE, filter=lacking, with_payload=True,
                                       with_vector=False)
            with self._lock:
                shard = self._require(collection)
                records, offset = self._call("list points", partial(shard.scroll, request))
            if records:
                yield [(str(r.id), dict(r.payload or {})) for r in records]
            if offset is None:
                return

    def ensure_field_indexes(self, collection: str, extra: Mapping[str, str] | None = None) -> None:
        qe = selection.edge()
        with self._lock:
            shard = self._require(collection)
            have = set(self._call("read the payload indexes", lambda: shard.info()).payload_schema)
        more = payload_fields.capped(dict(extra or {}), have)
        wanted = [*field_indexes(qe, self.cold_indexes), *((k, kind, schema_of(qe, kind, self.cold_indexes))
                                                            for k, kind in more.items())]
        ops = [(qe.UpdateOperation.create_field_index(k, schema), ("index", [(k, name)]), 0)
               for k, name, schema in wanted if k not in have]
        if ops:
            self._apply(collection, ops)

    def filled(self, collection: str) -> bool:
        qe = selection.edge()
        lacking = qe.Filter(must=[qe.IsEmptyCondition(payload_fields.CURRENT)])
        with self._lock:
            shard = self._require(collection)
            return int(self._call("count points", lambda: shard.count(qe.CountRequest(exact=True,
                                                                                        filter=lacking)))) == 0

    def count_where(self, collection: str, where: Filter | None) -> int:
        qe = selection.edge()
        flt = selection.edge_filter(where)
        with self._lock:
            shard = self._require(collection)
            return int(self._call("count points", lambda: shard.count(qe.CountRequest(exact=True, filter=flt))))

    def facet(self, collection: str, key: str, where: Filter | None, limit: int) -> list[tuple[str, int]] | None:
        qe = selection.edge()
        request = qe.FacetRequest(key, limit=limit, exact=True, filter=selection.edge_filter(where))
        with self._lock:
            shard = self._require(collection)
            found = self._call("count facet values", lambda: shard.facet(request))
        return [(str(h.value), int(h.count)) for h in found.hits]

    def payloads_where(self, collection: str, where: Filter | None, limit: int) -> list[dict[str, Any]]:
        qe = selection.edge()
        request = qe.ScrollRequest(limit=limit, filter=selection.edge_filter(where), with_payload=True,
                                   with_vector=False)
        with self._lock:
            shard = self._require(collection)
            records, _ = self._call("list points", partial(shard.scroll, request))
        return [dict(r.payload or {}) for r in records]

    # -- the live vectors: a file beside the shards (qdrant-edge has no collection aliases) ---------------------
    def _live_file(self, collection: str) -> Path:
        folder = self._dir(collection)  # checks the name
        return folder.with_name(collection + LIVE_SUFFIX)

    def live_vectors(self, collection: str) -> str | None:
        try:
            record = json.loads(self._live_file(collection).read_text())
            return str(record["vectors"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"the live-vectors record {self._live_file(collection)} cannot be read ({exc}); "
                             f"`indexer index -c {collection}` on the writer writes it again") from None

    def set_live_vectors(self, collection: str, target: str) -> None:
        if self.read_only:
            raise StoreError(f"the embedded Qdrant store {self.path} is open read-only (a stateless search worker)")
        self._dir(target)
        path = self._live_file(collection)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "w") as out:  # written whole, synced, then renamed over: a reader sees old or new
            out.write(json.dumps({"vectors": target}))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)

    def _forget_live(self, dropped: str) -> None:
        """A dropped store collection is no collection's live vectors any more (the records naming it go)."""
        if self.read_only:
            return
        for path in self._dir(dropped).parent.glob("*" + LIVE_SUFFIX):
            try:
                if json.loads(path.read_text()).get("vectors") == dropped:
                    path.unlink(missing_ok=True)
            except (OSError, ValueError, AttributeError):
                continue
