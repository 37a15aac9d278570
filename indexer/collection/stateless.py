"""A stateless search worker's collection: every search answered from a Qdrant collection and the models alone, with no
state database (setting ``stateless``; docs/deploy.md#stateless-workers).

The collection's record is read from the store's collection meta (model, normalization, metric, dimensions, prompts,
tokenizer), never from ``state.sqlite``, and nothing is written: no state database is created or migrated, no repair
marker, no store write. After a reindex the vectors are the store collection the writer recorded as live in the
store itself (``live_vectors``), re-read every :data:`LIVE_SECONDS` to follow a switch. Filters go to the store as
clauses (:class:`indexer.types.Filter`'s ``clauses``), evaluated on the payload keys the writer keeps for them
(:mod:`indexer.state.payload_fields`, ``plugins/qdrant/clauses.py``) with the same meaning as the state's evaluator;
a clause with no exact Qdrant form is an InputError naming it. Points a writer has not committed are left out by
their payload marker. Facets come from Qdrant's facet API: ``type``, ``folder``, ``modified``, and a metadata
field's folded values (a date field's months), shown in their smallest spelling; a field without a payload index is
refused, naming it. ``/files`` and ``/thumbnail`` are refused: a worker has no files. FAISS keeps the state route
(it has no payload filters: opening it stateless is refused).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from indexer.collection.aliases import VECTORS, raw_store, store_options, vectors_name
from indexer.collection.parts import CollectionParts
from indexer.collection.reader import CollectionReader
from indexer.core import registry
from indexer.core.normalization import Normalization
from indexer.engine import loader
from indexer.engine.adapters import LlamaEmbedder, model_name
from indexer.errors import CollectionMismatchError, ConfigError, InputError, NotFoundError, StateError, StoreError
from indexer.ports import PayloadFields, VectorStore, payload_fields
from indexer.search.filters import Value
from indexer.search.query import SearchRequest, SearchResult, Selection
from indexer.settings import Settings
from indexer.state.database import CollectionRecord
from indexer.state.field_values import BUILTIN, MAX_VALUE_CHARS, chunk_values
from indexer.state.fields import FACET_VALUES, INTERNAL, check_kind, check_names, kind_of, wanted_fields
from indexer.state.payload_fields import DATE, FACET_KEYS, MAX_FIELD_INDEXES, NUMBER
from indexer.state.payload_fields import key as payload_key
from indexer.types import Clause, Filter, Metric

logger = logging.getLogger(__name__)
T = TypeVar("T")

LIVE_SECONDS = 5.0  # a worker reads the store's live-vectors record (a reindex switch) at most this often
KINDS_SECONDS = 5.0  # a worker counts its fields' kinds at most this often (a writer's commits change them)
SPELLING_READS = 64  # chunks read for a facet value's spelling
NAMES_LIMIT = 10_000  # field names counted by one facet call


class _NoState:
    """Where a stateless collection's parts would hold a state database: anything asked of it is a StateError
    naming what needs the writer (closing is a no-op)."""

    def close(self) -> None:
        return None

    def __getattr__(self, name: str) -> NoReturn:
        raise StateError(f"a stateless search worker has no state database ({name} needs one); ask the writer")


class StatelessParts(CollectionParts):
    """The parts of a collection opened from its store alone."""

    def __init__(self, settings: Settings, record: CollectionRecord) -> None:
        super().__init__(settings, _NoState(), record)  # type: ignore[arg-type]
        self._live_checked = time.monotonic()
        self._follow_lock = threading.Lock()

    def follow(self) -> bool:
        return self._follow(force=False)

    def following(self, run: Callable[[], T]) -> T:
        """``run`` (a search) on the live vectors; retried once if the writer's reindex switched them under it."""
        self._follow(force=False)
        try:
            return run()
        except StoreError:
            if not self._follow(force=True):
                raise
            return run()

    def _follow(self, force: bool) -> bool:
        """Take the writer's reindex switch: the store's live-vectors record (read at most every
        :data:`LIVE_SECONDS`, or now with ``force``) names other vectors than this worker searches: the record
        is read again from them and model and store reloaded (the worker's model must be the new one)."""
        with self._follow_lock:  # one reload at a time (a second thread then finds the new record in place)
            return self._follow_locked(force)

    def _follow_locked(self, force: bool) -> bool:
        now = time.monotonic()
        if not force and now - self._live_checked < LIVE_SECONDS:
            return False
        self._live_checked = now
        rec = self.require_record()
        store = raw_store(self.store)
        port = payload_fields(store)
        live = (port.live_vectors(self.name) if port is not None else None) or self.name
        if live == vectors_name(rec):
            return False
        logger.info("collection %s: the writer switched its vectors to %s (reindex); reloading", self.name, live)
        fresh = _record_from(store, self.settings, self.name, store_options(rec.store_options))
        remember(self.settings, self.name, fresh)
        old = self.reload(fresh)
        if old is not None:
            old.close()
        return True

    def _load_model(self) -> LlamaEmbedder:
        from indexer.collection import tokenizer_record

        rec = self.require_record()
        if not Path(rec.model_path).exists():
            raise ConfigError(f"the embedding model of collection {self.name!r} is missing: {rec.model_path}; "
                              "give the worker the writer's model (embed_model)")
        embedder = loader.load_embedder(self.settings, rec.model_path)
        tokenizer_record.apply(embedder, self.store.collection_meta(self.name) or {}, self.name)
        if embedder.model_id != rec.model_id:
            embedder.close()
            raise CollectionMismatchError(
                f"the model {rec.model_path} is {embedder.model_id!r}, but collection {self.name!r} was embedded "
                f"with {rec.model_id!r}; give the worker the writer's model file (embed_model)")
        return embedder

    def mark_repairing(self) -> None:
        raise StateError(f"a stateless search worker never repairs collection {self.name!r}; the writer does")


_RECORDS: dict[str, CollectionRecord] = {}  # read once per store and collection (an embedded store admits one
_RECORDS_LOCK = threading.Lock()  # opener at a time: the worker's reader holds it from then on)


def _mark(settings: Settings, name: str, options: dict[str, Any]) -> str:
    return repr((settings.store, sorted(options.items()), name, settings.embed_model))


def stateless_record(settings: Settings, name: str) -> CollectionRecord:
    """The record of collection ``name`` as its store's meta says (the store: ``store``, ``store_options`` or
    ``qdrant_url``), read once per process; a NotFoundError when the store holds no such collection. After a
    reindex its vectors are the store collection the writer recorded as live in the store itself
    (:meth:`~indexer.ports.PayloadFields.live_vectors`: a file beside embedded shards, an alias on a server)."""
    options = registry.new_store_options(settings, name)
    with _RECORDS_LOCK:
        mark = _mark(settings, name, options)
        if mark not in _RECORDS:
            _RECORDS[mark] = _read_record(settings, name, options)
        return _RECORDS[mark]


def remember(settings: Settings, name: str, rec: CollectionRecord) -> None:
    """A followed switch: the record this process reads from now on."""
    with _RECORDS_LOCK:
        _RECORDS[_mark(settings, name, registry.new_store_options(settings, name))] = rec


def _read_record(settings: Settings, name: str, options: dict[str, Any]) -> CollectionRecord:
    store = registry.open_store(settings.store, registry.absolute_options(options, settings.data_dir),
                                Metric(settings.metric), settings)
    try:
        return _record_from(store, settings, name, options)
    finally:
        store.close()


def _record_from(store: VectorStore, settings: Settings, name: str, options: dict[str, Any]) -> CollectionRecord:
    port = payload_fields(store)
    if port is None:
        raise ConfigError(f"a stateless search worker needs a store that filters on payloads (qdrant), not "
                          f"{settings.store!r}; a FAISS collection is searched through its writer's state")
    live = port.live_vectors(name)
    vectors = live or name
    meta = store.collection_meta(vectors)
    location = options.get("url") or options.get("path")
    if meta is None or "indexer.model_id" not in meta:
        where = f"collection {name!r}" + (f" (its live vectors {live!r}, the writer's last reindex)" if live else "")
        raise NotFoundError(f"the {settings.store} store at {location} has no {where} written by indexer; point "
                            "store_options (path) or qdrant_url at the writer's store")
    recorded = {**options, VECTORS: vectors} if vectors != name else dict(options)
    return CollectionRecord(
        name=name, store=settings.store, store_options=recorded, metric=meta.get("indexer.metric", settings.metric),
        model_id=meta["indexer.model_id"], model_path=str(loader.resolve(settings.embed_model)),
        normalization=Normalization.parse(meta["indexer.normalization"]), dimensions=int(meta["dimensions"]))


class StatelessReader(CollectionReader):
    """Searches one collection from its store and the models alone (see the module's docstring)."""

    def __init__(self, parts: StatelessParts) -> None:
        super().__init__(parts)
        self._kinds: tuple[float, dict[str, str]] | None = None
        self._shown: dict[tuple[str, str], tuple[float, str]] = {}  # (field, folded value) -> (when, spelling)
        self._filled = False
        self._lock = threading.Lock()

    committed_only = True

    def _search(self, request: SearchRequest | str, **options: Any) -> SearchResult:
        image = options.get("image", None if isinstance(request, str) else request.image)
        if isinstance(image, (str, os.PathLike)):
            self._no_files("an image query by path (send the image's bytes)")
        return super()._search(request, **options)

    def search_warning(self) -> str | None:
        return None  # no state to compare with: the writer checks agreement

    def _port(self) -> PayloadFields:
        port = payload_fields(self.parts.store)
        if port is None:
            raise ConfigError(f"the store of collection {self.name!r} does not filter on payloads")
        return port

    def hidden(self) -> frozenset[str]:
        return frozenset()  # the store leaves out uncommitted points by their marker (committed_only)

    def _ready(self, port: PayloadFields) -> None:
        if not self._filled:
            if not port.filled(self.name):
                raise InputError(
                    f"collection {self.name!r} has points without the payload keys filters read (written before "
                    f"them); run `indexer index -c {self.name}` on the writer once (no re-embedding), then filter")
            self._filled = True

    def field_kinds(self) -> dict[str, tuple[int, str]]:
        """Each metadata field's (chunks that have it, kind), counted by Qdrant's facet API over the committed
        points (kept :data:`KINDS_SECONDS`)."""
        with self._lock:
            if self._kinds is not None and time.monotonic() - self._kinds[0] < KINDS_SECONDS:
                return dict(self._kinds[1])  # type: ignore[arg-type]
        port, committed = self._port(), Filter(committed=True)

        def counts(key: str) -> dict[str, int]:
            return dict(port.facet(self.name, key, committed, NAMES_LIMIT) or [])

        names = counts("filter.names")  # NAME, and #NAME / @NAME for its values that read as numbers / dates
        out = {n: (c, kind_of(c, names.get(NUMBER + n, 0), names.get(DATE + n, 0)))
               for n, c in names.items() if not n.startswith((NUMBER, DATE))}
        with self._lock:
            self._kinds = (time.monotonic(), out)  # type: ignore[assignment]
        return out

    def select(self, req: SearchRequest) -> Selection:
        port = self._port()
        wanted = wanted_fields(req.where, req.facets)
        if req.where or wanted:
            self._ready(port)
        known = self.field_kinds() if wanted else {}
        check_names(self.name, wanted, req.facets, known)
        kinds = {n: known[n][1] for n in wanted if n in known}
        for c in req.where:
            check_kind(c, "text" if c.field in BUILTIN else kinds.get(c.field, "text"))
        pairs = tuple(sorted(kinds.items()))
        where = Filter(req.path_prefix, req.file_types, clauses=tuple(req.where), kinds=pairs, committed=True)
        facets = {n: self._facet(port, FACET_KEYS[n], where) if n in FACET_KEYS else
                  self._field_facet(port, n, kinds.get(n, "text"), where) for n in req.facets}
        if not req.where:
            return Selection(None, None, facets, clauses=(), kinds=pairs)
        matched = port.count_where(self.name, where)
        note = self._emptied(req, pairs) if not matched else None
        return Selection(None, matched, facets, note=note, clauses=tuple(req.where), kinds=pairs)

    def _facet(self, port: PayloadFields, key: str, where: Filter) -> list[tuple[str, int]]:
        """The state's facet: the FACET_VALUES values with most chunks, ties by value (Qdrant orders ties its own
        way: a few more are asked, then sorted and cut)."""
        found = port.facet(self.name, key, where, FACET_VALUES + 20) or []
        return sorted(found, key=lambda vc: (-vc[1], vc[0]))[:FACET_VALUES]

    def _field_facet(self, port: PayloadFields, name: str, kind: str, where: Filter) -> list[tuple[str, int]]:
        """A metadata field's facet, as the state counts it: a date field by month (``filter.m``), any other by
        its folded value (``filter.t``), shown in its smallest spelling (:meth:`_spellings`)."""
        key = f"filter.{'m' if kind == 'date' else 't'}.{payload_key(name)}"
        try:
            found = port.facet(self.name, key, where, FACET_VALUES + 20) or []
        except StoreError as exc:
            raise InputError(
                f"facet {name!r}: the writer keeps payload indexes for the first {MAX_FIELD_INDEXES} metadata fields "
                f"it meets, and {name!r} has none (Qdrant's facet API counts indexed keys only); search through the "
                f"writer for this facet ({exc})") from None
        if kind != "date":
            found = self._spelled(port, name, found, FACET_VALUES)
        return sorted(found, key=lambda vc: (-vc[1], vc[0]))[:FACET_VALUES]

    def _spelled(self, port: PayloadFields, name: str, found: list[tuple[str, int]], limit: int
                 ) -> list[tuple[str, int]]:
        """The ``limit`` commonest of ``found`` (folded value, count) in their spellings (:meth:`_spellings`);
        only the values that can make the cut are spelled (those tied at it included)."""
        ranked = sorted(found, key=lambda vc: -vc[1])
        if len(ranked) > limit:
            ranked = [vc for vc in ranked if vc[1] >= ranked[limit - 1][1]]
        shown = self._spellings(port, name, [v for v, _ in ranked])
        return [(shown.get(v, v), c) for v, c in ranked]

    def _spellings(self, port: PayloadFields, name: str, folded: list[str]) -> dict[str, str]:
        """Each folded value's spelling: the smallest (as the state's ``MIN(value)``) among up to
        :data:`SPELLING_READS` committed chunks with it (the state: among all the matches), kept
        :data:`KINDS_SECONDS`."""
        now, out = time.monotonic(), {}
        for value in folded:
            mark = (name, value)
            seen = self._shown.get(mark)
            if seen is None or now - seen[0] > KINDS_SECONDS:
                equal = Clause(name, "==", (Value(value, None, None, None),), text=f"{name}=={value}")
                read = port.payloads_where(self.name, Filter(clauses=(equal,), kinds=((name, "text"),), committed=True),
                                     SPELLING_READS)
                spelled = [str(v)[:MAX_VALUE_CHARS] for p in read for n, v in chunk_values(p)
                           if str(n).strip().lower() == name and str(v)[:MAX_VALUE_CHARS].lower() == value]
                seen = self._shown[mark] = (now, min(spelled, default=value))
            out[value] = seen[1]
        if len(self._shown) > 4096:
            self._shown.clear()
        return out

    def _emptied(self, req: SearchRequest, kinds: tuple[tuple[str, str], ...]) -> str:
        port = self._port()
        for i, clause in enumerate(req.where):
            upto = Filter(req.path_prefix, req.file_types, clauses=tuple(req.where[: i + 1]), kinds=kinds,
                          committed=True)
            if not port.count_where(self.name, upto):
                alone = port.count_where(self.name, Filter(clauses=(clause,), kinds=kinds, committed=True))
                why = "together with the clauses before it" if alone and i else "on its own"
                return (f"no chunk matches '{clause.text}' {why}; `indexer fields` lists the fields and their "
                        "commonest values")
        return "no chunk matches the path and type filters"

    # -- what a worker shows without a state ---------------------------------------------------------------
    def fields(self) -> list[dict[str, Any]]:
        port = self._port()
        self._ready(port)
        chunks = port.count_where(self.name, Filter(committed=True))
        types = port.facet(self.name, "file_type", Filter(committed=True), 3) or []
        out: list[dict[str, Any]] = [
            {"field": "path", "kind": "path", "chunks": chunks, "examples": []},
            {"field": "type", "kind": "text", "chunks": chunks, "examples": [list(t) for t in types]},
            {"field": "modified", "kind": "date", "chunks": chunks, "examples": []},
            {"field": "size", "kind": "number", "chunks": chunks, "examples": []},
        ]
        ranked = sorted(self.field_kinds().items(), key=lambda item: (-item[1][0], item[0]))
        out += [{"field": n, "kind": kind, "chunks": c, "examples": self._examples(port, n)}
                for n, (c, kind) in ranked if n not in INTERNAL]
        return out

    def _examples(self, port: PayloadFields, name: str, examples: int = 3) -> list[list[Any]]:
        """A metadata field's commonest values (as the state's ``indexer fields``), from Qdrant's facet API over
        its folded values' payload index; none for a field without one (past the writer's index cap)."""
        try:
            found = port.facet(self.name, f"filter.t.{payload_key(name)}", Filter(committed=True), examples + 20)
        except StoreError:
            return []
        ranked = sorted(self._spelled(port, name, found or [], examples), key=lambda vc: (-vc[1], vc[0]))
        return [[v, c] for v, c in ranked[:examples]]

    def overview(self, watcher: dict[str, Any] | None = None) -> dict[str, Any]:
        rec = self.parts.require_record()
        port = self._port()
        settings = self.parts.settings
        return {
            "collection": self.name, "now": time.time(), "stateless": True,
            "files": None, "failed_files": None, "chunks": port.count_where(self.name, Filter(committed=True)),
            "roots": [], "last_commit": None, "model": model_name(rec.model_id),
            "reranker": model_name(Path(settings.rerank_model).name) if settings.rerank_model else None,
            "store": rec.store, "search_mode": settings.search_mode,
            "watcher": {"running": False, "state": "stateless worker", "queued": 0,
                        "freshness_ms": {"last": None, "p50": None, "p95": None}, "updated_at": None,
                        "line": "a stateless search worker: the writer indexes"},
            "folders": port.facet(self.name, "filter.folder", Filter(committed=True), FACET_VALUES),
            "examples": [],
        }

    def _no_files(self, what: str) -> NoReturn:
        raise NotFoundError(f"{what}: a stateless search worker has no files (only the collection and the models); "
                            "ask the writer, which reads them")

    def indexed_file(self, path: str, query: str | None = None,
                     lines: tuple[int, int | None] = (1, None)) -> dict[str, Any]:
        self._no_files("the text of an indexed file")

    def thumbnail(self, path: str, size: int = 256) -> bytes:
        self._no_files("a thumbnail")

    def health(self) -> dict[str, Any]:
        points = self.parts.store.count(self.name)
        return {"ok": True, "store_points": points, "state_points": None,
                "note": "a stateless search worker: no state to compare (the writer checks agreement)"}

    def agreement(self) -> str | None:
        try:
            self.parts.store.count(self.name)
        except StoreError as exc:
            return str(exc)
        return None

    def status(self) -> dict[str, Any]:
        rec = self.parts.require_record()
        return {
            "collection": self.name, "stateless": True, "files": None, "failed_files": None,
            "chunks": None, "points": self.parts.store.count(self.name), "store": rec.store,
            "store_location": self.parts.store_location(rec), "metric": rec.metric, "model": rec.model_id,
            "model_name": model_name(rec.model_id), "model_path": rec.model_path, "dimensions": rec.dimensions,
            "normalization": rec.normalization.value, "vectors": vectors_name(rec),  # after a reindex: <name>__<stamp>
            "reranker": self.parts.settings.rerank_model, "search_mode": self.parts.settings.search_mode,
            "lexical_index": self.lexical_ready(), "lexical_terms": self.lexical_terms(),
            "health": self.health(), "watcher": None, "roots": [], "writing": [],
            "recall": self.recall(),  # the writer's recorded estimate (the worker reads the store's record)
        }


def open_stateless_reader(name: str, settings: Settings) -> StatelessReader:
    """A stateless worker's reader of collection ``name`` (setting ``stateless``): nothing is written."""
    return StatelessReader(StatelessParts(settings.model_copy(update={"collection": name}),
                                          stateless_record(settings, name)))


def stateless_records(settings: Settings) -> list[CollectionRecord]:
    """The collections a stateless worker serves: its ``collection`` setting's."""
    return [stateless_record(settings, settings.collection)]


__all__ = ["StatelessReader", "open_stateless_reader", "stateless_records"]
