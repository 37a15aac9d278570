"""The payload-filter port (:class:`indexer.plugin_api.PayloadFields`) of the Qdrant server store: what lets
stateless search workers answer filters, facets and ``/fields`` from a Qdrant cluster
(docs/deploy.md#stateless-workers). A mixin of :class:`plugins.qdrant.client_store.QdrantStore`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from qdrant_client import models as qm

from indexer.plugin_api import ConfigError, Filter, caller, canonical_id, payload_fields
from plugins.qdrant import clauses

if TYPE_CHECKING:
    from collections.abc import Callable

    from qdrant_client import QdrantClient

BATCH = 1024
PAGE = 512
LIVE_ALIAS = "__live"  # the alias <collection>__live: the store collection a reindex switched its vectors to
LACKING = qm.Filter(must=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key=payload_fields.CURRENT))])


def field_schemas() -> list[tuple[str, Any]]:
    """(payload key, index schema) of the keys the filter language reads (indexer.state.payload_fields). No
    full-text index: ``MatchSubstring`` and ``MatchPrefix`` are exact without one (a text index would tokenize)."""
    out: list[tuple[str, Any]] = [(k, qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD))
                                  for k in payload_fields.KEYWORD_INDEXES]
    out += [(k, qm.IntegerIndexParams(type=qm.IntegerIndexType.INTEGER, lookup=True, range=True))
            for k in payload_fields.INTEGER_INDEXES]
    out += [(k, qm.BoolIndexParams(type=qm.BoolIndexType.BOOL)) for k in payload_fields.BOOL_INDEXES]
    return out


def read_consistency_of(value: str | int | None) -> int | qm.ReadConsistencyType | None:
    """The ``qdrant_read_consistency`` setting as qdrant-client takes it: how many replicas of each shard a search
    asks (``majority``, ``quorum``, ``all`` or a number; unset: Qdrant's default, one). A worker that must never see
    an older replica's answer than another worker uses ``majority`` with a write consistency that overlaps it."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return qm.ReadConsistencyType(text)
    except ValueError:
        raise ConfigError(f"qdrant_read_consistency {value!r} is not majority, quorum, all or a number of replicas "
                          "(at least 1)") from None


AFFINITY = "X-Qdrant-Route-Affinity"
CALLER = "caller"  # qdrant_route_affinity: each HTTP caller its own value (indexer.plugin_api.caller)


def route_affinity_of(value: str | None) -> str | None:
    """The ``qdrant_route_affinity`` setting checked: unset, ``caller``, or a fixed value (sent as a header: one
    line of visible ASCII). qdrant-client sends per-request headers from 1.x's ``context_headers`` on."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    if not text.isascii() or not text.isprintable() or len(text) > 256:
        raise ConfigError(f"qdrant_route_affinity {value!r} is not 'caller' or a header value (printable ASCII, "
                          "at most 256 characters)")
    if _context_headers() is None:
        raise ConfigError("qdrant_route_affinity needs a qdrant-client that sends per-request headers "
                          "(qdrant_client.context_headers); upgrade it: pip install -U qdrant-client")
    return text


def _context_headers() -> Any:
    try:
        from qdrant_client import context_headers
    except ImportError:
        return None
    return context_headers


def affinity_headers(setting: str | None) -> AbstractContextManager[None]:
    """The ``X-Qdrant-Route-Affinity`` header of this request (none when unset, or ``caller`` outside an HTTP
    request): Qdrant routes requests with one value to the same replicas, so a caller sees one view."""
    if setting is None:
        return nullcontext()
    who = caller.current() if setting == CALLER else setting
    if not who:
        return nullcontext()
    return cast(AbstractContextManager[None], _context_headers().headers({AFFINITY: who}))


class ClientFields:
    """PayloadFields over qdrant-client (mixed into QdrantStore, whose members these use)."""

    client: QdrantClient
    url: str | None
    read_consistency: int | qm.ReadConsistencyType | None
    _call: Callable[..., Any]
    _store_filter: Callable[[Filter | None], Any]

    def set_payloads(self, collection: str, updates: Sequence[tuple[Sequence[str], Mapping[str, Any]]]) -> None:
        for ids, payload in updates:
            uids: list[Any] = sorted({canonical_id(i) for i in ids})
            for start in range(0, len(uids), BATCH):
                self._call("set payloads", partial(self.client.set_payload, collection, dict(payload),
                                                   uids[start:start + BATCH], wait=True))

    def unmark(self, collection: str, ids: Sequence[str] | None) -> None:
        keys = [payload_fields.UNCOMMITTED]
        if ids is None:
            marked = clauses.MARKED
            self._call("clear markers", partial(self.client.delete_payload, collection, keys, marked, wait=True))
            return
        uids: list[Any] = sorted({canonical_id(i) for i in ids})
        for start in range(0, len(uids), BATCH):
            self._call("clear markers", partial(self.client.delete_payload, collection, keys,
                                                uids[start:start + BATCH], wait=True))

    def unfilled(self, collection: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        offset: Any = None
        while True:
            records, offset = self._call("list points", partial(
                self.client.scroll, collection, scroll_filter=LACKING, limit=PAGE, offset=offset,
                with_payload=True, with_vectors=False))
            if records:
                yield [(str(r.id), dict(r.payload or {})) for r in records]
            if offset is None:
                return

    def ensure_field_indexes(self, collection: str, extra: Mapping[str, str] | None = None) -> None:
        if self.url is None:  # qdrant-client's local mode keeps no payload index
            return
        info = self._call("read a collection", partial(self.client.get_collection, collection))
        have = set(info.payload_schema or {})
        kinds = {"keyword": qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD),
                 "float": qm.FloatIndexParams(type=qm.FloatIndexType.FLOAT)}
        more = payload_fields.capped(dict(extra or {}), have)
        for key, schema in [*field_schemas(), *((k, kinds[kind]) for k, kind in more.items())]:
            if key not in have:
                self._call("create a payload index", partial(self.client.create_payload_index, collection, key,
                                                             field_schema=schema, wait=True))

    def filled(self, collection: str) -> bool:
        found = self._call("count points", partial(self.client.count, collection, count_filter=LACKING, exact=True))
        return int(found.count) == 0

    def count_where(self, collection: str, where: Filter | None) -> int:
        flt = self._store_filter(where)
        return int(self._call("count points", partial(self.client.count, collection, count_filter=flt,
                                                      exact=True)).count)

    def facet(self, collection: str, key: str, where: Filter | None, limit: int) -> list[tuple[str, int]] | None:
        flt = self._store_filter(where)
        found = self._call("count facet values", partial(self.client.facet, collection, key, facet_filter=flt,
                                                         limit=limit, exact=True, consistency=self.read_consistency))
        return [(str(h.value), int(h.count)) for h in found.hits]

    def payloads_where(self, collection: str, where: Filter | None, limit: int) -> list[dict[str, Any]]:
        records, _ = self._call("list points", partial(
            self.client.scroll, collection, scroll_filter=self._store_filter(where), limit=limit, with_payload=True,
            with_vectors=False, consistency=self.read_consistency))
        return [dict(r.payload or {}) for r in records]

    # -- the live vectors: a Qdrant collection alias the writer keeps current ---------------------------------
    # An alias of its own name (``<collection>__live``), not ``<collection>``: an alias cannot share the name of a
    # collection, and ``<collection>`` exists until the first reindex's cleanup drops it (an alias made then would
    # leave a moment with neither). Switched by one aliases request (delete and create together, atomic in Qdrant).
    def live_vectors(self, collection: str) -> str | None:
        alias = collection + LIVE_ALIAS
        found = self._call("read the collection aliases", self.client.get_aliases)
        return next((a.collection_name for a in found.aliases if a.alias_name == alias), None)

    def set_live_vectors(self, collection: str, target: str) -> None:
        self._call("switch the live alias", partial(self.client.update_collection_aliases,
                                                    live_alias_operations(collection, target,
                                                                          self.live_vectors(collection))))


def live_alias_operations(collection: str, target: str, current: str | None) -> list[Any]:
    """The aliases request that points ``<collection>__live`` at ``target`` (the old alias deleted in the same
    request when there is one: Qdrant applies the list atomically)."""
    alias = collection + LIVE_ALIAS
    ops: list[Any] = []
    if current is not None:
        ops.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=alias)))
    ops.append(qm.CreateAliasOperation(create_alias=qm.CreateAlias(collection_name=target, alias_name=alias)))
    return ops
