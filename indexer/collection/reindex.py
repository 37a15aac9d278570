"""``indexer reindex --model NEW``: change a collection's embedding model without a moment of downtime.

How it works (one collection, any store):

1. **Beside the old vectors.** The new vectors go into a new store collection ``<name>__<stamp>`` (FAISS: a new
   index folder in the collection's store; Qdrant: a new collection), written by an ordinary
   :class:`~indexer.index.pipeline.Pipeline` whose state lives in a *shadow* state database
   ``<data dir>/reindex/<name>/state.sqlite`` with its own files, chunks, pending ids and vector cache. Queries keep
   being answered from the old vectors meanwhile, and indexing of the live collection goes on as usual.
2. **Interrupted, it resumes**: the shadow pipeline is crash-safe like the live one, so running the command again
   continues where it stopped (files already done are unchanged in the shadow state and skipped).
   ``--abort`` drops the new store collection and the shadow state; the old vectors were never touched.
3. **File changes reach both.** Once the shadow has caught up, the command takes the collection's writer lock
   (waiting for a running ``index``/watcher batch to finish), syncs the shadow once more — only files changed since
   its first pass are read and embedded — and then switches in **one state transaction**: the collection record
   (model, normalization, dimensions, and ``store_options["vectors"]``, the store collection that holds its
   vectors) and its files and chunks are replaced by the shadow's. Nothing outside that transaction decides which
   vectors are live, so every reader sees either the old model with the old vectors or the new with the new.
4. **Readers follow.** ``Collection.search`` compares its record with the state's before each query (one indexed
   SELECT) and reloads model and store when a switch happened; a query that raced the switch is retried once on
   the new vectors. The old store collection is dropped after the switch.

Progress shows in ``indexer status`` (``reindex``: target model, files done of the live total).

This module is the run; the job's record is :mod:`indexer.collection.job`, the store aliasing that points a
collection at its vectors :mod:`indexer.collection.aliases`.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from indexer.collection import tokenizer_record
from indexer.collection.aliases import VECTORS, AliasedStore, keep_live, raw_store, vectors_name
from indexer.collection.identity import same_vectors
from indexer.collection.job import Job, ReindexReport, job_dir, new_job, record_for, save_job
from indexer.collection.job import load_job as _load_job
from indexer.collection.model import ModelHandle
from indexer.collection.parts import CollectionParts
from indexer.core.locks import collection_lock_path, lock_for
from indexer.core.normalization import Normalization
from indexer.core.paths import within
from indexer.engine import loader
from indexer.engine.adapters import LlamaEmbedder
from indexer.errors import InputError, NotFoundError, StoreError
from indexer.index import batching
from indexer.index.pipeline import IndexReport, Pipeline, Progress
from indexer.index.reads import ReadAhead
from indexer.index.splitting import SplitRecipe
from indexer.ports import Embedder, VectorStore, embeds_images
from indexer.settings import Settings
from indexer.state.database import CollectionRecord, StateStore
from indexer.state.transfer import switch_collection

logger = logging.getLogger(__name__)

LOCK_WAIT_S = 600.0

__all__ = [
    "VECTORS", "AliasedStore", "Job", "ReindexReport", "abort", "job_dir", "load_job", "raw_store", "run",
    "same_vectors", "vectors_name",
]


class _HasParts(Protocol):
    """A :class:`~indexer.collection.facade.Collection` (what the CLI and tests hand in): its parts are used."""

    @property
    def parts(self) -> CollectionParts: ...


def _parts(col: CollectionParts | _HasParts) -> CollectionParts:
    return col if isinstance(col, CollectionParts) else col.parts


def _job_dir(col: CollectionParts) -> Path:
    return job_dir(col.settings.data_dir, col.name)


def load_job(col: CollectionParts | _HasParts) -> Job | None:
    """The reindex under way on collection ``col``, or None."""
    parts = _parts(col)
    return _load_job(parts.settings.data_dir, parts.name)


def _store_meta(col: CollectionParts, rec: CollectionRecord, embedder: LlamaEmbedder) -> dict[str, str]:
    """The new vectors' metadata: the new model's, with the collection's prompts and chunk size kept."""
    from indexer.index.chunking import META_CHUNK_TOKENS
    from indexer.index.context import META_CHUNK_CONTEXT

    chunk_tokens = min(col.chunk_tokens, int(embedder.max_tokens))
    return {**rec.identity_meta(), **col.prompts.meta(), META_CHUNK_TOKENS: str(chunk_tokens),
            META_CHUNK_CONTEXT: col.chunk_context, **tokenizer_record.meta_for(embedder)}


# -- run, abort -------------------------------------------------------------------------------------------------
def run(
    col: CollectionParts | _HasParts,
    model_spec: str,
    progress_cb: Progress | None = None,
    *,
    lock_wait_s: float = LOCK_WAIT_S,
) -> ReindexReport:
    """Build the collection's vectors with ``model_spec`` beside the old ones, then switch (resumes a job)."""

    col = _parts(col)
    started = time.perf_counter()
    live = col.record
    if live is None:
        raise NotFoundError.collection(col.name)
    refuse_shared(col.settings, live)
    model_path = str(loader.resolve(model_spec))
    job = load_job(col)
    if job is not None and Path(job.model_path).resolve() != Path(model_path).resolve():
        raise InputError(
            f"a reindex of {col.name!r} to {job.model_spec!r} is under way; resume it with --model "
            f"{job.model_spec} or cancel it with `indexer reindex --abort -c {col.name}`"
        )
    if job is not None and vectors_name(live) == job.target:  # switched before an interruption: finish up
        _cleanup(col, job)
        return ReindexReport(col.name, job.model_id, job.model_id, {}, {}, True, time.perf_counter() - started)
    col.join_cluster()  # with the cluster setting: unreachable is a clear error before any work
    embedder = col.on_cluster(loader.load_embedder(col.settings, model_path))
    try:
        if job is None:
            if embedder.model_id == live.model_id and Path(model_path).resolve() == Path(live.model_path).resolve():
                raise InputError(f"collection {col.name!r} already uses {model_spec} ({live.model_id}); nothing to do")
            job = new_job(live, col.store, model_spec, embedder, model_path)
            save_job(col.settings.data_dir, job)
        elif embedder.model_id != job.model_id:
            raise InputError(
                f"the model file {model_path} changed since the reindex started ({job.model_id} -> "
                f"{embedder.model_id}); cancel it with `indexer reindex --abort -c {col.name}` and start again"
            )
        new_rec = record_for(job, live)
        store = raw_store(col.store)
        store.ensure_collection(job.target, job.dimensions, _store_meta(col, new_rec, embedder))
        shadow = StateStore(_job_dir(col) / "state.sqlite")
        try:
            if shadow.get_collection(col.name) is None:
                shadow.create_collection(new_rec)
            model = ModelHandle.over(embedder).with_prompt(col.prompts.document)  # documents as recorded
            with _reads(col, embedder) as reads:
                first = _sync_shadow(col, shadow, store, model, job, progress_cb, reads)
                with _wait_writer_lock(col, lock_wait_s):
                    catch_up = _sync_shadow(col, shadow, store, model, job, progress_cb, reads)
                    _switch(col, job, new_rec, shadow)
        finally:
            shadow.close()
    finally:
        embedder.close()
    old_model = live.model_id
    col.follow()
    _cleanup(col, job)
    return ReindexReport(
        col.name, job.model_id, old_model, first.to_dict(), catch_up.to_dict(), True, time.perf_counter() - started
    )


def refuse_shared(settings: Settings, live: CollectionRecord) -> None:
    """A collection shared by tenants (``qdrant_shard_key = tenant:NAME``) is not reindexed: the new vectors would
    hold one tenant's points and the switch would drop the others' (docs/qdrant-plugin.md#custom-sharding)."""
    rule = str(settings.qdrant_shard_key or "")
    if live.store == "qdrant" and live.store_options.get("url") and rule.startswith("tenant:"):
        raise InputError(
            f"collection {live.name!r} is shared by tenants (qdrant_shard_key={rule}): a reindex would build a "
            "collection of this tenant's points only and drop the shared one; index into a new collection name "
            "with the new model (`indexer index -c NEW --model ...`) instead")


def abort(col: CollectionParts | _HasParts) -> bool:
    """Cancel a reindex: drop the new vectors and the shadow state; the collection is as it was."""
    col = _parts(col)
    job = load_job(col)
    if job is None:
        return False
    if col.record is not None and vectors_name(col.record) == job.target:
        _cleanup(col, job)  # already switched: nothing to undo, only to tidy
        return True
    store = raw_store(col.store)
    try:
        store.drop(job.target)
    except StoreError as exc:
        logger.warning("dropping the reindex target %s: %s", job.target, exc)
    shutil.rmtree(_job_dir(col), ignore_errors=True)
    return True


def _sync_shadow(
    col: CollectionParts,
    shadow: StateStore,
    store: VectorStore,
    embedder: Embedder,
    job: Job,
    progress_cb: Progress | None,
    reads: ReadAhead,
) -> IndexReport:
    """Bring the shadow (new model) in line with the files under the live collection's current roots."""
    from indexer.index.chunking import chunker_for

    pipeline = Pipeline(
        reads=reads,
        step_tokens=batching.CLUSTER_STEP_TOKENS if col.settings.cluster else None,
        collection=col.name,
        state=shadow,
        store=AliasedStore(store, col.name, job.target),
        embedder=embedder,
        chunker=chunker_for(embedder, col.chunk_tokens, col.settings.chunk_overlap),  # capped at its limit
        normalization=Normalization.parse(job.normalization),
        batch_chunks=col.settings.embed_batch_chunks,
        progress=progress_cb,
        chunk_context=col.chunk_context,  # kept, as the chunk size is
    )
    report = IndexReport()
    roots = col.state.roots(col.name)
    for old in shadow.roots(col.name):
        if old not in roots:  # forgotten from the live collection meanwhile
            pipeline.remove_files([p for p in shadow.files(col.name) if within(p, old)], report)
            shadow.remove_root(col.name, old)
    for root in roots:
        shadow.add_root(col.name, root)
        # the new model's readers: a multimodal model re-reads the images a text-only one skipped or OCR'd
        pipeline.sync(col.source_for(root, media=embeds_images(embedder)), root, report)
    return report


@contextmanager
def _reads(col: CollectionParts, engine: LlamaEmbedder) -> Iterator[ReadAhead]:
    """The reindex's read-ahead: with the ``cluster`` setting, documents parsed and chunked on the Ray cluster's
    nodes for the new model (indexer.cluster.parsing), as an index run's are."""
    reads = ReadAhead(col.settings.parse_workers if col.settings.cluster else 1)  # 1: as before the cluster
    far = None
    if col.settings.cluster:
        from indexer.cluster.parsing import ClusterReads

        recipe = SplitRecipe(col.chunk_tokens, col.settings.chunk_overlap, col.chunk_context, col.prompts.document)
        far = reads.far = ClusterReads(lambda: engine, lambda: recipe, shared=col.settings.cluster_shared_roots)
    try:
        yield reads
    finally:
        reads.close()
        if far is not None:
            far.close()


@contextmanager
def _wait_writer_lock(col: CollectionParts, wait_s: float) -> Iterator[None]:
    """The collection's writer lock, waiting for a running index or watcher batch to finish."""
    message = (
        f"collection {col.name!r} has been written by another process for {wait_s:.0f} s; the new vectors are "
        "kept: run `indexer reindex` again to switch when it is idle"
    )
    with lock_for(collection_lock_path(col.settings.data_dir, col.name)).hold(timeout=wait_s, message=message):
        yield


def _switch(col: CollectionParts, job: Job, new_rec: CollectionRecord, shadow: StateStore) -> None:
    """One transaction: the collection's record, files and chunks become the shadow's."""
    switch_collection(col.state.path, shadow.path, replace(new_rec, name=col.name))
    keep_live(col.store, col.state.get_collection(col.name))  # stateless workers find the new vectors
    logger.info("collection %s switched to %s (store collection %s)", col.name, job.model_id, job.target)


def _cleanup(col: CollectionParts, job: Job) -> None:
    """After the switch: drop the old vectors and the shadow state."""
    store = raw_store(col.store)
    keep_live(store, col.record)  # again: a crash may have fallen right after the switch
    if col.record is not None and job.source == vectors_name(col.record):  # never the live vectors
        logger.warning("reindex job of %s names the live vectors %s as old; keeping them", col.name, job.source)
        shutil.rmtree(_job_dir(col), ignore_errors=True)
        return
    try:
        store.drop(job.source)
    except StoreError as exc:  # readers still finishing a query may hold it; it is unused from now on
        logger.warning("dropping the old vectors %s of %s: %s", job.source, col.name, exc)
    shutil.rmtree(_job_dir(col), ignore_errors=True)
