"""A collection: the facade the CLI, the Python API and (later) the HTTP API use.

It owns the wiring: settings -> state store, vector store plugin, embedder, reranker, source and chunker. The
parts it wires know nothing of each other.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexer.collection import reindex
from indexer.core import registry
from indexer.core.locks import collection_lock_path, writer_lock
from indexer.core.normalization import choose_normalization, normalization_name
from indexer.core.paths import within
from indexer.core.threads import SerialEmbedder, SerialReranker
from indexer.engine import loader
from indexer.errors import CollectionMismatchError, ConfigError, InputError, StoreError
from indexer.index.chunking import META_CHUNK_TOKENS, chunker_for
from indexer.index.pipeline import IndexReport, Pipeline, Progress
from indexer.index.prompts import Prompts, prompted_model_id, with_prompt
from indexer.index.prompts import recorded as recorded_prompts
from indexer.index.prompts import resolve as resolve_prompts
from indexer.models.profiles import profile_for
from indexer.names import encodable, printable
from indexer.ports import Chunker, Embedder, Reranker, Source, VectorStore
from indexer.search.fusion import FusionConfig
from indexer.search.lexical import LexicalSearch
from indexer.search.query import QueryLimits, SearchRequest, SearchResult, prepare, run_search
from indexer.search.rerank import RerankBudget
from indexer.settings import Settings, load_settings
from indexer.state.store import CollectionRecord, StateStore
from indexer.types import Chunk, Document, Metric

logger = logging.getLogger(__name__)


def open_state(settings: Settings) -> StateStore:
    return StateStore(Path(settings.data_dir) / "state.sqlite")


def list_collections(settings: Settings | None = None) -> list[CollectionRecord]:
    settings = settings or load_settings()
    state = open_state(settings)
    try:
        return state.list_collections()
    finally:
        state.close()


AGREEMENT_EVERY_S = 2.0  # how stale a search's view of state/store agreement may be


class Collection:
    """One named collection. Use ``open_collection``; close it (or use ``with``) when done."""

    def __init__(self, settings: Settings, state: StateStore, record: CollectionRecord | None) -> None:
        self.settings = settings
        self.name = settings.collection
        self.state = state
        self.record = record
        self._store: VectorStore | None = None
        self._embedder: Embedder | None = None
        self._reranker: Reranker | None = None
        self._prompts: Prompts | None = None
        self._chunk_tokens: int | None = None
        # Parts are built lazily; the lock makes that safe when threads share the collection (see docs/architecture.md).
        self._parts_lock = threading.RLock()
        self._rerank_budget = RerankBudget(settings.rerank_budget_ms)  # paced by this collection's searches
        self._agreement: tuple[float, str | None] | None = None  # (when, problem) of the last agreement check

    # -- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for part in (self._store, self._embedder, self._reranker):
            closer = getattr(part, "close", None)
            if closer is not None:
                closer()
        self._store = self._embedder = self._reranker = None
        self.state.close()

    # -- parts, built lazily ---------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        with self._parts_lock:
            if self._embedder is None:
                path = self.record.model_path if self.record else str(loader.resolve(self.settings.embed_model))
                if not Path(path).exists():
                    raise ConfigError(
                        f"the embedding model of collection {self.name!r} is missing: {path}; restore it or run "
                        "`indexer models build`"
                    )
                embedder = loader.load_embedder(self.settings, path)
                if self.record is not None and embedder.model_id != self.record.model_id:
                    if reindex.same_vectors(self, embedder):  # rebuilt from the same weights: keeps the vectors
                        embedder.model_id = self.record.model_id
                        self._embedder = SerialEmbedder(embedder)
                        return self._embedder
                    closer = getattr(embedder, "close", None)
                    if closer is not None:
                        closer()
                    raise CollectionMismatchError(
                        f"the model file {path} is now {embedder.model_id!r}, but collection {self.name!r} was "
                        f"embedded with {self.record.model_id!r} (the file was rebuilt or replaced). Its vectors "
                        "cannot be mixed with the new model's: restore the original file, re-embed without downtime "
                        f"(`indexer reindex -c {self.name} --model {path}`), or drop and re-index "
                        f"(`indexer drop {self.name} --yes`, then `indexer index`)."
                    )
                self._embedder = SerialEmbedder(embedder)
            return self._embedder

    @property
    def reranker(self) -> Reranker | None:
        with self._parts_lock:
            if self._reranker is None and self.settings.rerank_model:
                reranker = loader.load_reranker(self.settings)
                self._reranker = SerialReranker(reranker) if reranker is not None else None
            return self._reranker

    @property
    def store(self) -> VectorStore:
        with self._parts_lock:
            if self._store is None:
                rec = self.record
                kind = rec.store if rec else self.settings.store
                options = rec.store_options if rec else self._new_store_options()
                metric = Metric(rec.metric if rec else self.settings.metric)
                opts = reindex.store_options(self._absolute(options))
                store = registry.open_store(kind, opts, metric, self.settings)
                self._store = reindex.wrap_store(store, rec)
            return self._store

    def _new_store_options(self) -> dict[str, Any]:
        """Options recorded for a new collection: the store plugin's defaults with the ``store_options`` setting
        over them (:func:`indexer.core.registry.new_store_options`), a ``path`` in the data directory relative."""
        return registry.relative_options(registry.new_store_options(self.settings, self.name), self.settings.data_dir)

    def _absolute(self, options: dict[str, Any]) -> dict[str, Any]:
        return registry.absolute_options(options, self.settings.data_dir)

    @property
    def single_process(self) -> bool:
        """Only one process at a time may open this collection's store (embedded Qdrant): ask the store plugin."""
        rec = self.record
        if rec is None:
            return registry.single_process(self.settings.store, registry.new_store_options(self.settings, self.name))
        return single_process(rec)

    # -- creation and checks ---------------------------------------------------------------------------
    def _ensure_created(self) -> CollectionRecord:
        """The collection's record, creating the collection (state and store) when it is new. Called by writers
        only: a store collection that went missing is re-created here and refilled by the sync (repair)."""
        if self.record is not None:
            self._check_store_meta(self.record, create_missing=True)
            return self.record
        emb = self.embedder
        normalization = choose_normalization(emb.similarity, self.settings.metric)
        rec = CollectionRecord(
            name=self.name,
            store=self.settings.store,
            store_options=self._new_store_options(),
            metric=self.settings.metric,
            model_id=emb.model_id,
            model_path=str(loader.resolve(self.settings.embed_model)),
            normalization=normalization,
            dimensions=emb.dimensions,
        )
        existing = self.store.collection_meta(self.name)
        if existing is not None:
            self.record = rec
            self._check_store_meta(rec)  # adopting a collection left by an earlier state db must match
        else:
            prompts = self._new_prompts()
            meta = {**rec.identity_meta(), **prompts.meta(), META_CHUNK_TOKENS: str(self._new_chunk_tokens())}
            self.store.ensure_collection(self.name, rec.dimensions, meta)
        self.state.create_collection(rec)
        self.record = rec
        return rec

    def _check_store_meta(self, rec: CollectionRecord, *, create_missing: bool = False) -> None:
        """The store's collection must exist and carry the recorded model, normalization and metric.

        A missing store collection is re-created only for a writer (``create_missing``), which then refills it;
        a reader gets a StoreError naming the repair, never a silently empty result."""
        meta = self.store.collection_meta(self.name)
        if meta is None:
            if create_missing:
                logger.warning("the %s store of collection %r is missing; re-creating and refilling it", rec.store,
                               self.name)
                self._mark_repairing()
                meta = {**rec.identity_meta(), META_CHUNK_TOKENS: str(self._new_chunk_tokens())}
                self.store.ensure_collection(self.name, rec.dimensions, meta)
                return
            raise StoreError(
                f"the {rec.store} store of collection {self.name!r} is missing ({self._store_location(rec)}); "
                f"run `indexer index -c {self.name}` to rebuild it from the cached vectors and the files"
            )
        want = rec.identity_meta()
        diffs = [f"{k}: store has {meta.get(k)!r}, expected {v!r}" for k, v in want.items() if meta.get(k) != v]
        if diffs:
            raise CollectionMismatchError(
                f"collection {self.name!r} in the {rec.store} store was written with other settings ("
                + "; ".join(diffs)
                + "). Index into a new collection (--collection NEW) or drop this one (`indexer drop "
                + f"{self.name}`) and re-index."
            )

    def _store_location(self, rec: CollectionRecord) -> str:
        opts = self._absolute(rec.store_options)
        return str(opts.get("path") or opts.get("url") or rec.store)

    def health(self) -> dict[str, Any]:
        """Whether the store holds exactly the points the state says: counts, missing and orphaned points."""
        rec = self.record
        if rec is None:
            raise InputError(f"collection {self.name!r} does not exist; `indexer collections` lists them")
        state_ids = self.state.point_ids(self.name)
        if self.store.collection_meta(self.name) is None:
            return {"ok": False, "store_points": 0, "state_points": len(state_ids), "missing_points": len(state_ids),
                    "orphan_points": 0, "problem": f"the store is missing ({self._store_location(rec)}); "
                    f"`indexer index -c {self.name}` rebuilds it"}
        store_ids = self.store.list_ids(self.name)
        pending = set(self.state.pending_ids(self.name))
        missing = len(state_ids - store_ids)
        orphans = len(store_ids - state_ids - pending)
        problem = None
        if missing or orphans:
            problem = (
                f"the store holds {len(store_ids)} points, the state expects {len(state_ids)} ({missing} missing, "
                f"{orphans} not owned by any file); `indexer index -c {self.name}` repairs it"
            )
        return {"ok": problem is None, "store_points": len(store_ids), "state_points": len(state_ids),
                "missing_points": missing, "orphan_points": orphans, "problem": problem}

    def agreement(self) -> str | None:
        problem = self._agreement_now()
        self._agreement = (time.monotonic(), problem)  # what searches say, until the next look
        return problem

    def _agreement_now(self) -> str | None:
        """None when the store holds as many points as the state's committed chunks own, give or take the ids of
        a write in flight (recorded as pending until its commit); else the problem and its repair. A store being
        refilled after a loss is short by far more than that. Cheap (three counts), unlike
        :meth:`health`, which compares every id: readiness and searches ask this."""
        rec = self._require_record()
        if self.store.collection_meta(self.name) is None:
            return (
                f"the {rec.store} store of collection {self.name!r} is missing ({self._store_location(rec)}); "
                f"the next sync (`indexer index -c {self.name}`, or the server's watcher) rebuilds it"
            )
        if self._repair_marker().exists():
            held, expected = self.store.count(self.name), self.state.count_points(self.name)
            return (
                f"the store of collection {self.name!r} is being repaired ({held} of {expected} points back); "
                "searches miss the rest until the repair's sync completes"
            )
        before = self.state.change_mark()
        in_flight = self.state.count_pending(self.name)  # a batch between its first write and its commit
        expected = self.state.count_points(self.name)
        held = self.store.count(self.name)
        if abs(held - expected) <= in_flight or self.state.change_mark() != before:  # a commit in between
            return None
        return (
            f"the store of collection {self.name!r} holds {held} points, the state expects {expected}; the next "
            f"sync (`indexer index -c {self.name}`, or the server's watcher) repairs it"
        )

    def _search_warning(self) -> str | None:
        """:meth:`agreement` for searches, asked at most every ``AGREEMENT_EVERY_S`` seconds per collection."""
        if self._agreement is None or time.monotonic() - self._agreement[0] >= AGREEMENT_EVERY_S:
            self.agreement()
        assert self._agreement is not None
        problem = self._agreement[1]
        return f"the hits may be incomplete: {problem}" if problem else None

    def check_settings(self) -> None:
        """Refuse explicit settings that disagree with what the collection was built with."""
        rec = self.record
        if rec is None:
            return
        given = self.settings.model_fields_set
        problems = []
        if "metric" in given and self.settings.metric != rec.metric:
            problems.append(f"metric {rec.metric!r} (asked: {self.settings.metric!r})")
        if "store" in given and self.settings.store != rec.store:
            problems.append(f"store {rec.store!r} (asked: {self.settings.store!r})")
        if "embed_model" in given and not loader.names_recorded_file(self.settings.embed_model, rec.model_path):
            asked = str(loader.resolve(self.settings.embed_model))
            if os.path.realpath(asked) != os.path.realpath(rec.model_path) and not reindex.explains(self, asked):
                problems.append(f"model {rec.model_path!r} (asked: {asked!r})")
        if problems:
            raise CollectionMismatchError(
                f"collection {self.name!r} was built with "
                + ", ".join(problems)
                + f"; its normalization is {normalization_name(rec.normalization)}. To change its model without "
                + f"downtime run `indexer reindex -c {self.name} --model NEW`. Vectors of different models or "
                "metrics cannot be mixed: index into a new collection (--collection NEW), or drop this one "
                f"(`indexer drop {self.name}`) and re-index."
            )

    # -- operations ----------------------------------------------------------------------------------------
    def index(self, paths: Sequence[str | Path], progress: Progress | None = None) -> IndexReport:
        """Add ``paths`` as roots (if new) and sync them. Files under other roots are untouched."""
        self.check_settings()
        roots = [_resolve_root(p) for p in paths]
        return self._sync_roots(lambda: [self._attach_root(root) for root in roots], progress)

    def sync(self, progress: Progress | None = None) -> IndexReport:
        """Re-sync every root of the collection (a root that vanished keeps its points and is reported)."""
        self._require_record()
        self.check_settings()
        return self._sync_roots(lambda: self.state.roots(self.name), progress)

    def sync_paths(self, paths: Iterable[str | Path], progress: Progress | None = None) -> IndexReport:
        """Bring exactly ``paths`` (files or folders: created, changed, deleted or moved) in line with the disk.

        The watcher calls this per batch of events. Paths outside the collection's roots are ignored; a missing
        folder removes every file under it; an existing folder is rescanned (ignore-file edits, moves in).
        Unchanged chunk texts reuse their cached vectors, so a rename re-embeds nothing."""
        self._require_record()
        self.check_settings()
        report = IndexReport()
        started = time.perf_counter()
        with self._writer_lock():
            pipeline = self._pipeline(self._ensure_created(), progress)
            pipeline.recover()
            # the repair a full sync does: files whose points the store lost (e.g. its files were deleted, and
            # _ensure_created re-made it empty) are re-written with this batch, from the vector cache
            lost = self._mark_lost_points()
            for root, group in _group_by_root([*paths, *lost], self.state.roots(self.name)).items():
                pipeline.sync_paths(self.source_for(root), root, group, report)
            if lost:
                report.points_deleted += self._remove_orphans()
            self._repaired()
        self._agreement = None
        report.seconds = time.perf_counter() - started
        return report

    def _sync_roots(self, roots: Callable[[], list[str]], progress: Progress | None) -> IndexReport:
        """Under the writer lock: create (or repair) the collection, sync each root, remove points no file owns,
        refill points the store lost, and drop unused cached vectors."""
        report = IndexReport()
        with self._writer_lock():
            pipeline = self._pipeline(self._ensure_created(), progress)
            pipeline.recover()
            self._ensure_lexical()
            self._mark_lost_points()
            for root in roots():
                pipeline.sync(self.source_for(root), root, report)
            report.points_deleted += self._remove_orphans()
            self.state.gc_vector_cache(pipeline.model_key)
            self._repaired()
        self._agreement = None
        return report

    def _mark_lost_points(self) -> list[str]:
        """Files whose points the store lost are re-read on this sync (their vectors come from the cache); returns
        their paths. The full id comparison runs only when the counts disagree (``health()`` always compares)."""
        expected = self.state.count_points(self.name)
        if expected == 0 or self.store.count(self.name) == expected:
            return []
        lost = self.state.point_ids(self.name) - self.store.list_ids(self.name)
        if not lost:
            return []
        paths = self.state.paths_of_points(self.name, lost)
        logger.warning("the store lost %d points of %d files; re-writing them", len(lost), len(paths))
        self._mark_repairing()
        self.state.invalidate_files(self.name, paths)
        return paths

    def _repair_marker(self) -> Path:
        """Present while a repair (store re-created, lost points re-written) is under way, in any process:
        readiness then says so, however close the counts. A sync that completes removes it."""
        return self.settings.data_dir / "repair" / f"{self.name}.repairing"

    def _mark_repairing(self) -> None:
        marker = self._repair_marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def _repaired(self) -> None:
        self._repair_marker().unlink(missing_ok=True)

    def _remove_orphans(self) -> int:
        """Delete points the store holds but no committed chunk owns (e.g. left behind by a lost state file)."""
        if self.store.count(self.name) == self.state.count_points(self.name):
            return 0  # lost points were re-written above, so equal counts mean equal sets
        orphans = self.store.list_ids(self.name) - self.state.point_ids(self.name)
        if orphans:
            logger.warning("deleting %d points of collection %r that no indexed file owns", len(orphans), self.name)
            self.store.delete(self.name, sorted(orphans))
        return len(orphans)

    def _new_prompts(self) -> Prompts:
        """Prompts for a new collection: settings, else the model's GGUF metadata, else the catalogue's."""
        from indexer.models import CATALOGUE

        entry = CATALOGUE.get(self.settings.embed_model)
        metadata = self._model_metadata()
        profile = profile_for(metadata)
        return resolve_prompts(
            query_setting=self.settings.query_prompt,
            document_setting=self.settings.document_prompt,
            gguf_metadata=metadata,
            catalogue_query=entry.query_prompt if entry else "",
            catalogue_document=entry.document_prompt if entry else "",
            profile_query=profile.query_prompt if profile else "",
            profile_document=profile.document_prompt if profile else "",
        )

    def _model_metadata(self) -> dict[str, str]:
        engine = getattr(getattr(self.embedder, "inner", self.embedder), "engine", None)
        return dict(getattr(engine, "metadata", None) or {})

    def _new_chunk_tokens(self) -> int:
        """Tokens per chunk for a new collection: the setting, else the model's catalogue value, else its limit."""
        from indexer.models import CATALOGUE

        limit = int(self.embedder.max_tokens)
        if self.settings.chunk_tokens is not None:
            if self.settings.chunk_tokens > limit:
                raise ConfigError(
                    f"chunk_tokens {self.settings.chunk_tokens} exceeds the model's limit of {limit} tokens; "
                    f"set chunk_tokens to at most {limit}"
                )
            return self.settings.chunk_tokens
        entry = CATALOGUE.get(self.settings.embed_model)
        if entry is not None and entry.chunk_tokens:
            return min(entry.chunk_tokens, limit)
        profile = profile_for(self._model_metadata())
        return min(profile.chunk_tokens, limit) if profile is not None and profile.chunk_tokens else limit

    def _recorded_chunk_tokens(self) -> int | None:
        recorded = (self.store.collection_meta(self.name) or {}).get(META_CHUNK_TOKENS)
        return int(recorded) if recorded else None

    @property
    def chunk_tokens(self) -> int:
        """Tokens per chunk, as recorded when the collection was made (collections made before the size was
        recorded were chunked at the model's limit). A differing ``chunk_tokens`` setting is logged, not used:
        files chunked two ways would rank unevenly; index into a new collection to use another size."""
        if self._chunk_tokens is None:
            recorded = self._recorded_chunk_tokens()
            value = recorded if recorded is not None else int(self.embedder.max_tokens)
            asked = self.settings.chunk_tokens
            if asked is not None and asked != value:
                logger.warning(
                    "collection %s is chunked at %d tokens; chunk_tokens=%d applies to new collections "
                    "(index into a new one with --collection NEW to use it)", self.name, value, asked
                )
            self._chunk_tokens = value
        return self._chunk_tokens

    @property
    def prompts(self) -> Prompts:
        """The prompts the collection was created with; explicit settings that differ are a mismatch."""
        if self._prompts is None:
            meta = self.store.collection_meta(self.name) or {}
            prompts = recorded_prompts(meta)
            asked = {"query_prompt": prompts.query, "document_prompt": prompts.document}
            diffs = [
                f"{name} {recorded!r} (asked: {getattr(self.settings, name)!r})"
                for name, recorded in asked.items()
                if name in self.settings.model_fields_set and (getattr(self.settings, name) or "") != recorded
            ]
            if diffs:
                raise CollectionMismatchError(
                    f"collection {self.name!r} was embedded with " + ", ".join(diffs) + "; queries must use the "
                    "prompts its documents were embedded with: index into a new collection (--collection NEW), "
                    f"or drop this one (`indexer drop {self.name}`) and re-index."
                )
            self._prompts = prompts
        return self._prompts

    @property
    def document_embedder(self) -> Embedder:
        """The embedder with the collection's document prompt (what chunks are counted and embedded with)."""
        return with_prompt(self.embedder, self.prompts.document)

    def _ensure_lexical(self) -> None:
        """Give a collection made before lexical search its lexical index (from the stored texts, no re-embedding)."""
        store = self.store
        if isinstance(store, LexicalSearch) and store.ensure_lexical(self.name):
            logger.info("built the lexical index of collection %r", self.name)

    def lexical_hint(self) -> str:
        """Why this collection has no lexical index, and whether anything builds one."""
        rec = self._require_record()
        if not isinstance(self.store, LexicalSearch):
            return (
                f"its {rec.store} store keeps no lexical index (the default search mode needs one), and indexing "
                "does not add one; ask for mode 'dense', or set search_mode = \"dense\""
            )
        return f"it has no lexical index yet (made by an older version); `indexer index -c {self.name}` builds it"

    def _lexical_ready(self) -> bool:
        store = self.store
        if not isinstance(store, LexicalSearch):
            return False
        try:
            return store.has_lexical(self.name)
        except StoreError:  # the store's collection is missing: status reports that through health
            return False

    def fusion_config(self) -> FusionConfig:
        return FusionConfig.of(self.settings.fusion, self.settings.fusion_dense_weight)

    def forget(self, path: str | Path) -> IndexReport:
        """Remove a root and every point of its files."""
        root = str(Path(path).expanduser().resolve())
        if self.record is None or root not in self.state.roots(self.name):
            known = ", ".join(self.state.roots(self.name)) or "none"
            raise InputError(f"{root} is not a root of collection {self.name!r} (roots: {known})")
        report = IndexReport()
        with self._writer_lock():
            pipeline = self._pipeline(self.record, None)
            pipeline.recover()
            files = [p for p in self.state.files(self.name) if within(p, root)]
            pipeline.remove_files(files, report)
            self.state.remove_root(self.name, root)
        return report

    def search(self, request: SearchRequest | str, **options: Any) -> SearchResult:
        """Run one search. ``request`` is a :class:`SearchRequest`, or the query text with the request's fields
        as keyword options. Defaults (``top_k``, ``candidates``, mode, rerank) and caps come from the settings;
        anything out of range is an InputError naming the valid range. Follows a model switch made by
        `indexer reindex` in another process (one SELECT per query)."""
        return reindex.following(self, lambda: self._search(request, **options))

    def _search(self, request: SearchRequest | str, **options: Any) -> SearchResult:
        rec = self._require_record()
        if isinstance(request, str):
            request = SearchRequest.from_options(request, **options)
        elif options:
            request = replace(request, **options)
        req = prepare(request, self.query_limits())
        self.check_settings()
        self._check_store_meta(rec)
        if request.mode is None and req.mode != "dense" and not self._lexical_ready():
            # The default needs a lexical index this collection does not have: made by an older version (the next
            # `indexer index` builds it), or in a store that keeps none (an attached collection: never will).
            logger.warning("collection %r: %s; searching dense only", self.name, self.lexical_hint())
            req = replace(req, mode="dense")
        rerank_wanted = req.rerank is not False
        result = run_search(
            req,
            collection=self.name,
            store=self.store,
            embedder=with_prompt(self.embedder, self.prompts.query),
            normalization=rec.normalization,
            reranker=self.reranker if rerank_wanted else None,
            reranker_configured=bool(self.settings.rerank_model),
            fusion=self.fusion_config(),
            budget=self._rerank_budget,
        )
        warning = self._search_warning()
        return replace(result, warning=warning) if warning else result

    def query_limits(self) -> QueryLimits:
        return QueryLimits.from_settings(self.settings)

    def indexed_file(self, path: str) -> dict[str, Any]:
        """The text of ``path`` as the indexing reader extracted it, if it is an indexed file of this collection
        inside one of its roots (anything else is a NotFoundError): the rule of :mod:`indexer.collection.files`."""
        from indexer.collection.files import read_indexed_file

        return read_indexed_file(self, path)

    def status(self) -> dict[str, Any]:
        rec = self._require_record()
        counts = self.state.counts(self.name)
        health = self.health()
        return {
            "collection": self.name,
            "files": counts["files"],
            "failed_files": counts["failed"],
            "chunks": counts["chunks"],
            "tokens": counts["tokens"],
            "points": health["store_points"],
            "store": rec.store,
            "store_options": rec.store_options,
            "store_location": self._store_location(rec),
            "metric": rec.metric,
            "model": rec.model_id,
            "model_path": rec.model_path,
            "dimensions": rec.dimensions,
            "normalization": normalization_name(rec.normalization),
            "roots": self.state.roots(self.name),
            "reranker": self.settings.rerank_model,
            "search_mode": self.settings.search_mode,
            "lexical_index": self._lexical_ready(),
            "lexical_note": None if self._lexical_ready() else self.lexical_hint(),
            "prompts": {"query": self.prompts.query, "document": self.prompts.document},
            "chunk_tokens": self._recorded_chunk_tokens() or "the model's limit",
            "watcher": _watcher_status(self.settings, self.name),
            "health": health,
            "failures": [{"path": p, "reason": r} for p, r in self.state.failures(self.name)],
            "reindex": reindex.progress(self),
        }

    def _require_record(self) -> CollectionRecord:
        if self.record is None:
            raise InputError(f"collection {self.name!r} does not exist yet; run `indexer index PATH` first")
        return self.record

    def drop(self) -> None:
        """Delete the collection: its points, its state and (for embedded stores) its files."""
        if self.record is None:
            raise InputError(f"collection {self.name!r} does not exist")
        with self._writer_lock():
            reindex.abort(self)
            self.store.drop(self.name)
            path = self._absolute(self.record.store_options).get("path")
            self.store.close()
            self._store = None
            if (
                path
                and Path(path).is_dir()
                and within(str(Path(path).resolve()), str(Path(self.settings.data_dir).resolve()))
            ):
                shutil.rmtree(path, ignore_errors=True)
            self.state.drop_collection(self.name)
            self._repaired()
            self.record = None
            self._prompts = None
            self._chunk_tokens = None

    # -- helpers -----------------------------------------------------------------------------------------
    def _pipeline(self, rec: CollectionRecord, progress: Progress | None) -> Pipeline:
        """The pipeline for this collection. The model is loaded on the first chunk or embedding, so a run that
        finds nothing changed never pays for it."""
        return Pipeline(
            collection=self.name,
            state=self.state,
            store=self.store,
            embedder=_LazyEmbedder(self, rec),
            chunker=_LazyChunker(self),
            normalization=rec.normalization,
            batch_chunks=self.settings.embed_batch_chunks,
            progress=progress,
        )

    def source_for(self, root: str) -> Source:
        return registry.open_source(self.settings, [root])

    def _attach_root(self, root: str) -> str:
        """Record ``root``; a path inside an existing root syncs that root, one containing roots absorbs them."""
        roots = self.state.roots(self.name)
        for existing in roots:
            if within(root, existing):
                return existing
        for existing in roots:
            if within(existing, root):
                self.state.remove_root(self.name, existing)
        self.state.add_root(self.name, root)
        return root

    def reload(self, record: CollectionRecord | None) -> VectorStore | None:
        """Take ``record`` (a reindex switched the vectors) and drop the parts built for the old one; returns the
        old store for the caller to close. The old model is not closed: another thread may still be embedding
        with it (it is freed with its last reference). A search racing this fails with a StoreError and is
        retried on the new parts (:func:`indexer.collection.reindex.following`)."""
        with self._parts_lock:
            old_store, self._store, self._embedder = self._store, None, None
            self.record = record
        return old_store

    @contextmanager
    def _writer_lock(self) -> Iterator[None]:
        with writer_lock(collection_lock_path(self.settings.data_dir, self.name), f"collection {self.name!r}"):
            yield


# -- collection records, for plugins that attach collections of their own kind (indexer.plugin_api) ----------------
def get_record(name: str, settings: Settings) -> CollectionRecord | None:
    """The recorded collection ``name``, or None."""
    state = open_state(settings)
    try:
        return state.get_collection(name)
    finally:
        state.close()


def add_record(rec: CollectionRecord, settings: Settings) -> None:
    """Record a new collection (its store already holds, or will create, its vectors)."""
    state = open_state(settings)
    try:
        state.create_collection(rec)
    finally:
        state.close()


def remove_record(name: str, settings: Settings) -> bool:
    """Forget collection ``name`` (its roots, files and chunks) without touching its store; True if it existed."""
    state = open_state(settings)
    try:
        if state.get_collection(name) is None:
            return False
        state.drop_collection(name)
        return True
    finally:
        state.close()


def index_paths(
    name: str, paths: Sequence[str | Path], settings: Settings, progress: Progress | None = None
) -> IndexReport:
    """``Collection.index`` on collection ``name`` (opened and closed here)."""
    with open_collection(name, settings=settings) as col:
        return col.index(paths, progress=progress)


def forget_path(name: str, path: str | Path, settings: Settings) -> IndexReport:
    """``Collection.forget`` on collection ``name`` (opened and closed here)."""
    with open_collection(name, settings=settings) as col:
        return col.forget(path)


def single_process(rec: CollectionRecord) -> bool:
    """Whether only one process at a time may open the store of collection ``rec`` (asks its store plugin)."""
    return registry.single_process(rec.store, rec.store_options)


def open_collection(name: str | None = None, settings: Settings | None = None, **overrides: Any) -> Collection:
    """Open (or prepare to create) a collection. ``overrides`` are settings fields, e.g. ``store="qdrant"``."""
    if settings is None:
        settings = load_settings(collection=name, **overrides)
    elif name is not None:
        settings = settings.model_copy(update={"collection": name})
    state = open_state(settings)
    try:
        record = state.get_collection(settings.collection)
    except BaseException:
        state.close()
        raise
    return Collection(settings, state, record)



def _watcher_status(settings: Settings, name: str) -> dict[str, Any] | None:
    from indexer.state.watch_files import read_status

    return read_status(settings.data_dir, name)


def _resolve_root(path: str | Path) -> str:
    p = Path(path).expanduser()
    shown = printable(str(p))
    if not p.exists():
        raise InputError(f"{shown} does not exist; pass an existing folder")
    if not p.is_dir():
        raise InputError(f"{shown} is a file; pass the folder that contains it (roots are folders)")
    resolved = str(p.resolve())
    if not encodable(resolved):
        raise InputError(
            f"{printable(resolved)} is not valid UTF-8 and cannot be a root (names are stored as UTF-8); rename it, "
            "or add its parent folder (the name is then reported and skipped)"
        )
    return resolved


class _LazyEmbedder:
    """The collection's embedder, loaded on first use; identity and size come from the collection's record."""

    def __init__(self, collection: Collection, rec: CollectionRecord) -> None:
        self._collection = collection
        self.model_id = prompted_model_id(rec.model_id, collection.prompts.document)
        self.dimensions = rec.dimensions

    @property
    def similarity(self) -> str:
        return self._collection.embedder.similarity

    @property
    def max_tokens(self) -> int:
        return self._collection.embedder.max_tokens

    def count_tokens(self, text: str) -> int:
        return self._collection.document_embedder.count_tokens(text)

    def embed_batch(self, texts: Sequence[str], normalize: Any) -> Any:
        return self._collection.document_embedder.embed_batch(texts, normalize)


class _LazyChunker:
    """A TokenChunker on the collection's embedder, built on the first document."""

    def __init__(self, collection: Collection) -> None:
        self._collection = collection
        self._chunker: Chunker | None = None

    def chunk(self, doc: Document) -> Iterator[Chunk]:
        if self._chunker is None:
            col = self._collection
            self._chunker = chunker_for(col.document_embedder, col.chunk_tokens, col.settings.chunk_overlap)
        return self._chunker.chunk(doc)


def _group_by_root(paths: Iterable[str | Path], roots: Sequence[str]) -> dict[str, list[str]]:
    """Absolute, resolved paths grouped by the (innermost) root that holds them; others are dropped."""
    out: dict[str, list[str]] = {}
    for raw in paths:
        path = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(raw))))
        owners = [r for r in roots if within(path, r)]
        if owners:
            out.setdefault(max(owners, key=len), []).append(path)
        else:
            logger.debug("ignoring %s: outside every root", path)
    return out
