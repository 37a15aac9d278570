"""The parts of one collection, shared by its reader and its writer.

:class:`CollectionParts` holds the collection's record and builds its parts lazily: the vector store (aliased to
the store collection holding its vectors after a reindex), the embedder (its identity checked against the
record), the reranker, the prompts and the chunk size the collection was made with. It also owns the checks both
faces need (explicit settings against the record, the store's collection meta), the repair marker, and following
a reindex switch made by another process (:meth:`CollectionParts.follow`).

A reader (:mod:`indexer.collection.reader`) and a writer (:mod:`indexer.collection.writer`) each drive one parts
object; a single-process store (embedded Qdrant) gives both faces the same one.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from indexer.collection import job, tokenizer_record
from indexer.collection.aliases import store_options, wrap_store
from indexer.collection.identity import same_vectors
from indexer.collection.model import ModelHandle, RerankerHandle
from indexer.core import registry
from indexer.core.locks import collection_lock_path, writer_lock
from indexer.core.normalization import choose_normalization, normalization_name
from indexer.engine import loader
from indexer.errors import CollectionMismatchError, ConfigError, NotFoundError, StoreError
from indexer.index.chunking import META_CHUNK_TOKENS
from indexer.index.context import META_CHUNK_CONTEXT
from indexer.index.prompts import Prompts
from indexer.index.prompts import recorded as recorded_prompts
from indexer.index.prompts import resolve as resolve_prompts
from indexer.models.profiles import profile_for
from indexer.ports import Source, VectorStore, embeds_images
from indexer.settings import Settings
from indexer.state.database import CollectionRecord, StateStore
from indexer.types import Metric

if TYPE_CHECKING:
    from indexer.engine.adapters import LlamaEmbedder

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CollectionParts:
    """One named collection's record and lazily built parts. Thread-safe to share (the parts lock)."""

    def __init__(self, settings: Settings, state: StateStore, record: CollectionRecord | None) -> None:
        self.settings = settings
        self.name = settings.collection
        self.state = state
        self.record = record
        self._store: VectorStore | None = None
        # the collection's model: one handle (collection/model.py), loaded on first use and checked against the record
        self.model = ModelHandle(self._load_model, recorded=lambda: self.record, media=loader.embeds_images)
        self._reranker: RerankerHandle | None = None
        self._prompts: Prompts | None = None
        self._chunk_tokens: int | None = None
        self._chunk_context: str | None = None
        # Parts are built lazily; the lock makes that safe when threads share the collection (see docs/architecture.md).
        self._parts_lock = threading.RLock()
        self.agreement_seen: tuple[float, str | None] | None = None  # (when, problem) of the last agreement check

    def close(self) -> None:
        for part in (self._store, self.model, self._reranker):
            if part is not None:
                part.close()
        self._store = self._reranker = None
        self.state.close()

    # -- parts, built lazily ---------------------------------------------------------------------------
    @property
    def embedder(self) -> ModelHandle:
        """The collection's model, loaded (a missing or replaced model file is an error here)."""
        self.model.engine  # noqa: B018 - loads it
        return self.model

    def _load_model(self) -> LlamaEmbedder:
        """The engine under :attr:`model`; with the ``cluster`` setting, large batches go to the Ray cluster's
        workers (:mod:`indexer.cluster`; it connects on the first such batch, so a search never does)."""
        return self.on_cluster(self._load_local_model())

    def on_cluster(self, embedder: LlamaEmbedder) -> LlamaEmbedder:
        """``embedder`` as is, or, with the ``cluster`` setting, taken over by a ClusterEmbedder (same identity)."""
        if not self.settings.cluster:
            return embedder
        from indexer.cluster.embedder import ClusterEmbedder

        return ClusterEmbedder.around(embedder, self.settings.cluster)

    def join_cluster(self) -> None:
        """Join the ``cluster`` setting's Ray cluster now (a writer's run starts here): unreachable is a clear
        ClusterError before any work, not a failure in the middle."""
        if self.settings.cluster:
            from indexer.cluster.connect import connect

            connect(self.settings.cluster)

    def cluster_work(self) -> dict[str, Any] | None:
        """What the Ray cluster did for this process (workers, nodes, refusals, losses, rate per node), when the
        model embeds on one."""
        from indexer.cluster.embedder import ClusterEmbedder

        if not self.settings.cluster or not self.model.loaded or not isinstance(self.model.engine, ClusterEmbedder):
            return None
        return self.model.engine.describe()

    def _load_local_model(self) -> LlamaEmbedder:
        """The llama.cpp engine: the recorded file, tokenized as the documents were, its identity the
        record's (a rebuilt file with the same weights keeps the vectors; other weights are a mismatch)."""
        path = self.record.model_path if self.record else str(loader.resolve(self.settings.embed_model))
        if not Path(path).exists():
            raise ConfigError(
                f"the embedding model of collection {self.name!r} is missing: {path}; restore it or run "
                "`indexer models build`"
            )
        embedder = loader.load_embedder(self.settings, path)
        if self.record is not None:  # queries tokenized as the documents were
            meta = self.store.collection_meta(self.name)  # None: the store was lost; the record says
            meta = meta if meta is not None else tokenizer_record.from_model_id(self.record.model_id)
            tokenizer_record.apply(embedder, meta, self.name)
        if self.record is not None and embedder.model_id != self.record.model_id:
            if same_vectors(self.record, self.state, self.store, embedder):  # same weights: keeps the vectors
                embedder.model_id = self.record.model_id
                return embedder
            embedder.close()
            raise CollectionMismatchError(
                f"the model file {path} is now {embedder.model_id!r}, but collection {self.name!r} was "
                f"embedded with {self.record.model_id!r} (the file was rebuilt or replaced). Its vectors "
                "cannot be mixed with the new model's: restore the original file, re-embed without downtime "
                f"(`indexer reindex -c {self.name} --model {path}`), or drop and re-index "
                f"(`indexer drop {self.name} --yes`, then `indexer index`)."
            )
        return embedder

    @property
    def reranker(self) -> RerankerHandle | None:
        with self._parts_lock:
            if self._reranker is None and self.settings.rerank_model:
                reranker = loader.load_reranker(self.settings)
                self._reranker = RerankerHandle(reranker) if reranker is not None else None
            return self._reranker

    @property
    def store(self) -> VectorStore:
        with self._parts_lock:
            if self._store is None:
                rec = self.record
                kind = rec.store if rec else self.settings.store
                options = rec.store_options if rec else self.new_store_options()
                metric = Metric(rec.metric if rec else self.settings.metric)
                opts = store_options(self.absolute(options))
                store = registry.open_store(kind, opts, metric, self.settings)
                self._store = wrap_store(store, rec)
            return self._store

    def drop_store(self) -> None:
        """Close the store and forget it (the next use opens it again)."""
        with self._parts_lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    def new_store_options(self) -> dict[str, Any]:
        """Options recorded for a new collection: the store plugin's defaults with the ``store_options`` setting
        over them (:func:`indexer.core.registry.new_store_options`), a ``path`` in the data directory relative."""
        return registry.relative_options(registry.new_store_options(self.settings, self.name), self.settings.data_dir)

    def absolute(self, options: dict[str, Any]) -> dict[str, Any]:
        return registry.absolute_options(options, self.settings.data_dir)

    @property
    def single_process(self) -> bool:
        """Only one process at a time may open this collection's store (embedded Qdrant): ask the store plugin."""
        rec = self.record
        if rec is None:
            return registry.single_process(self.settings.store, registry.new_store_options(self.settings, self.name))
        return registry.single_process(rec.store, rec.store_options)

    def store_location(self, rec: CollectionRecord) -> str:
        opts = self.absolute(rec.store_options)
        return str(opts.get("path") or opts.get("url") or rec.store)

    def source_for(self, root: str, media: bool | None = None) -> Source:
        """The source of ``root``; its readers attach media (images) when the model embeds them (``media``: a
        reindex's new model decides for its shadow)."""
        if media is None:
            media = self.embeds_images
        settings = self.settings.model_copy(update={"embed_media": True}) if media else self.settings
        return registry.open_source(settings, [root])

    @property
    def embeds_images(self) -> bool:
        """Whether the collection's model embeds images (its projector lies beside it), without loading it."""
        if not self.model.loaded and self.record is None:
            return False  # a new collection's model is not asked before it loads
        return embeds_images(self.model)  # a recorded model answers without loading (collection/model.py)

    # -- creation and checks ---------------------------------------------------------------------------
    def require_record(self) -> CollectionRecord:
        if self.record is None:
            raise NotFoundError.collection(self.name)
        return self.record

    def ensure_created(self) -> CollectionRecord:
        """The collection's record, creating the collection (state and store) when it is new. Called by writers
        only: a store collection that went missing is re-created here and refilled by the sync (repair)."""
        if self.record is not None:
            self.check_store_meta(self.record, create_missing=True)
            return self.record
        emb = self.embedder
        try:
            left = self.store.collection_meta(self.name)
        except StoreError:  # unreadable: replaced below (_adoptable_meta)
            left = None
        if left is not None:  # adopting vectors an earlier state database left: tokenized as they were
            tokenizer_record.apply(emb.engine, left, self.name)
        normalization = choose_normalization(emb.similarity, self.settings.metric)
        rec = CollectionRecord(
            name=self.name,
            store=self.settings.store,
            store_options=self.new_store_options(),
            metric=self.settings.metric,
            model_id=emb.model_id,
            model_path=str(loader.resolve(self.settings.embed_model)),
            normalization=normalization,
            dimensions=emb.dimensions,
        )
        existing = self._adoptable_meta(rec.identity_meta())
        if existing is not None:
            self.record = rec
            self.check_store_meta(rec)  # adopting a collection left by an earlier state db must match
        else:
            prompts = self._new_prompts()
            meta = {**rec.identity_meta(), **prompts.meta(), META_CHUNK_TOKENS: str(self._new_chunk_tokens()),
                    META_CHUNK_CONTEXT: self._new_chunk_context(), **tokenizer_record.meta_for(emb.engine)}
            self.store.ensure_collection(self.name, rec.dimensions, meta)
        self.state.create_collection(rec)
        self.record = rec
        return rec

    def _adoptable_meta(self, identity: dict[str, str]) -> dict[str, str] | None:
        """The store's meta of a collection the state does not know (None when there is none), after replacing a
        leftover that cannot be adopted (:mod:`indexer.collection.leftovers`): its settings unreadable, or none
        of ``identity``'s keys recorded (a first write cut short). Nothing of it was committed to the state."""
        try:
            meta = self.store.collection_meta(self.name)
        except StoreError as exc:
            why = f"it cannot be read ({exc})"
        else:
            if meta is None or any(meta.get(key) is not None for key in identity):
                return meta
            why = "its settings were never recorded (a first write cut short)"
        logger.warning("replacing the store's collection %r, unknown to the state database: %s", self.name, why)
        self.store.drop(self.name)
        return None

    def check_store_meta(self, rec: CollectionRecord, *, create_missing: bool = False) -> None:
        """The store's collection must exist and carry the recorded model, normalization and metric.

        A missing store collection is re-created only for a writer (``create_missing``), which then refills it;
        a reader gets a StoreError naming the repair, never a silently empty result."""
        meta = self.store.collection_meta(self.name)
        if meta is None:
            if create_missing:
                logger.warning("the %s store of collection %r is missing; re-creating and refilling it", rec.store,
                               self.name)
                self.mark_repairing()
                meta = {**rec.identity_meta(), META_CHUNK_TOKENS: str(self._new_chunk_tokens()),
                        META_CHUNK_CONTEXT: self._new_chunk_context(),
                        **tokenizer_record.meta_for(self.embedder.engine)}
                self.store.ensure_collection(self.name, rec.dimensions, meta)
                return
            raise StoreError(
                f"the {rec.store} store of collection {self.name!r} is missing ({self.store_location(rec)}); "
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
            if os.path.realpath(asked) != os.path.realpath(rec.model_path) and not job.explains(
                rec, self.settings.data_dir, asked
            ):
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

    # -- the repair marker -------------------------------------------------------------------------------
    def repair_marker(self) -> Path:
        """Present while a repair (store re-created, lost points re-written) is under way, in any process:
        readiness then says so, however close the counts. A sync that completes removes it."""
        return self.settings.data_dir / "repair" / f"{self.name}.repairing"

    def mark_repairing(self) -> None:
        marker = self.repair_marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def repaired(self) -> None:
        self.repair_marker().unlink(missing_ok=True)

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """The collection's writer lock (a file lock: across processes too)."""
        with writer_lock(collection_lock_path(self.settings.data_dir, self.name), f"collection {self.name!r}"):
            yield

    # -- prompts and chunk size, as the collection was made ------------------------------------------------
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
        return dict(self.embedder.engine.engine.metadata or {})

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

    def _new_chunk_context(self) -> str:
        """What a new collection embeds in front of each chunk: the setting (docs/search.md#chunk-context)."""
        return self.settings.chunk_context

    @property
    def chunk_context(self) -> str:
        """What the collection embeds in front of each chunk, as recorded when it was made: "heading" or "none"
        (a collection made before it was recorded: "none"). A differing setting is logged, not used: chunks
        embedded two ways would rank unevenly; index into a new collection to change it (reindex keeps it)."""
        if self._chunk_context is None:
            recorded = (self.store.collection_meta(self.name) or {}).get(META_CHUNK_CONTEXT) or "none"
            if self.settings.chunk_context != recorded and "chunk_context" in self.settings.model_fields_set:
                logger.warning(
                    "collection %s embeds chunks with context %r; chunk_context=%r applies to new collections",
                    self.name, recorded, self.settings.chunk_context,
                )
            self._chunk_context = recorded
        return self._chunk_context

    def recorded_chunk_tokens(self) -> int | None:
        recorded = (self.store.collection_meta(self.name) or {}).get(META_CHUNK_TOKENS)
        return int(recorded) if recorded else None

    @property
    def chunk_tokens(self) -> int:
        """Tokens per chunk, as recorded when the collection was made (collections made before the size was
        recorded were chunked at the model's limit). A differing ``chunk_tokens`` setting is logged, not used:
        files chunked two ways would rank unevenly; index into a new collection to use another size."""
        if self._chunk_tokens is None:
            recorded = self.recorded_chunk_tokens()
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
    def document_embedder(self) -> ModelHandle:
        """The model with the collection's document prompt (what chunks are counted and embedded with); loaded on
        its first call."""
        return self.model.with_prompt(self.prompts.document)

    @property
    def query_embedder(self) -> ModelHandle:
        """The model, loaded, with the collection's query prompt (what queries are embedded with)."""
        return self.embedder.with_prompt(self.prompts.query)

    def forget_made(self) -> None:
        """The collection was dropped: no record, and nothing remembered of how it was made."""
        self.record = None
        self._prompts = None
        self._chunk_tokens = None

    # -- following a reindex switch ------------------------------------------------------------------------
    def reload(self, record: CollectionRecord | None) -> VectorStore | None:
        """Take ``record`` (a reindex switched the vectors) and drop the parts built for the old one; returns the
        old store for the caller to close. The old model is not closed: another thread may still be embedding
        with it (it is freed with its last reference). A search racing this fails with a StoreError and is
        retried on the new parts (:meth:`following`)."""
        with self._parts_lock:
            old_store, self._store = self._store, None
            self.model.unload()
            self.record = record
        return old_store

    def follow(self) -> bool:
        """Reload model and store when the state's record changed (a reindex switched); True when it did."""
        current = self.state.get_collection(self.name)
        if current is not None and self.record is not None:
            if replace(current, created_at=self.record.created_at) == self.record:  # a fresh record has no stamp yet
                return False
        elif current == self.record:
            return False
        logger.info("collection %s changed under this process (reindex switch); reloading", self.name)
        old_store = self.reload(current)
        if old_store is not None:
            try:
                old_store.close()
            except Exception as exc:  # a stale part must not fail the query that replaces it
                logger.warning("closing the replaced store of %s: %s", self.name, exc)
        return True

    def following(self, run: Callable[[], T]) -> T:
        """``run`` (a search) on the current vectors; retried once if a switch happened under it."""
        self.follow()
        try:
            return run()
        except StoreError:
            if not self.follow():
                raise
            return run()


class PartsView:
    """What a face over :class:`CollectionParts` (the reader, the writer, the ``Collection`` composition) shows
    of them: written once here instead of in each face."""

    parts: CollectionParts

    @property
    def name(self) -> str:
        return self.parts.name

    @property
    def settings(self) -> Settings:
        return self.parts.settings

    @property
    def state(self) -> StateStore:
        return self.parts.state

    @property
    def record(self) -> CollectionRecord | None:
        return self.parts.record

    @property
    def store(self) -> VectorStore:
        return self.parts.store

    @property
    def embedder(self) -> ModelHandle:
        return self.parts.embedder

    @property
    def reranker(self) -> RerankerHandle | None:
        return self.parts.reranker
