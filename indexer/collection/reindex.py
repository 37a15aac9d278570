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
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from indexer.core.locks import collection_lock_path, lock_for
from indexer.core.normalization import Normalization
from indexer.core.paths import within
from indexer.engine import loader
from indexer.errors import IndexerError, InputError, StoreError
from indexer.index.pipeline import IndexReport, Pipeline, Progress
from indexer.state.store import CollectionRecord, StateStore, cached_vectors, count_files, switch_collection
from indexer.types import Filter, Hit, Point

if TYPE_CHECKING:
    from indexer.collection.facade import Collection
    from indexer.ports import Embedder, VectorStore

logger = logging.getLogger(__name__)

T = TypeVar("T")
VECTORS = "vectors"  # store_options key: the store collection holding a collection's vectors (default: its name)
PREVIOUS_MODEL = "reindexed_from"  # store_options key: the model path the last reindex switched away from
JOB = "job.json"
LOCK_WAIT_S = 600.0


# -- which store collection holds a collection's vectors ----------------------------------------------------
def vectors_name(rec: CollectionRecord) -> str:
    return str(rec.store_options.get(VECTORS) or rec.name)


class AliasedStore:
    """A VectorStore that sends calls for collection ``name`` to the store collection ``target``."""

    def __init__(self, store: VectorStore, name: str, target: str) -> None:
        self.inner = store
        self.name = getattr(store, "name", "store")
        self._alias = {name: target}

    def _c(self, collection: str) -> str:
        return self._alias.get(collection, collection)

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        self.inner.ensure_collection(self._c(collection), dimensions, meta)

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        return self.inner.collection_meta(self._c(collection))

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        self.inner.upsert(self._c(collection), points)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self.inner.delete(self._c(collection), ids)

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        return self.inner.search(self._c(collection), vector, limit, where)

    def count(self, collection: str) -> int:
        return self.inner.count(self._c(collection))

    def list_ids(self, collection: str) -> set[str]:
        return self.inner.list_ids(self._c(collection))

    def drop(self, collection: str) -> None:
        self.inner.drop(self._c(collection))

    def flush(self) -> None:
        flush = getattr(self.inner, "flush", None)
        if flush is not None:
            flush()

    def close(self) -> None:
        closer = getattr(self.inner, "close", None)
        if closer is not None:
            closer()

    def __getattr__(self, attr: str) -> Any:
        """Anything else the store offers (lexical search, path, client): methods get the collection mapped."""
        value = getattr(self.inner, attr)
        if not callable(value):
            return value

        def mapped(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], str):
                args = (self._c(args[0]), *args[1:])
            if isinstance(kwargs.get("collection"), str):
                kwargs["collection"] = self._c(kwargs["collection"])
            return value(*args, **kwargs)

        return mapped


def store_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Recorded options less ours (``vectors``): what the store plugin is built from."""
    return {k: v for k, v in options.items() if k not in (VECTORS, PREVIOUS_MODEL)}


def explains(col: Collection, asked_model_path: str) -> bool:
    """Whether a configured model that differs from the collection's is the other side of a reindex: the target
    of one under way, or the model the last one switched away from. Such a setting is tolerated (logged), so a
    server configured with either model keeps answering across the switch; the collection's own model embeds."""
    rec = col.record
    if rec is None:
        return False
    asked = os.path.realpath(asked_model_path)
    candidates = [rec.store_options.get(PREVIOUS_MODEL)]
    job = load_job(col)
    if job is not None:
        candidates.append(job.model_path)
    if any(c and os.path.realpath(str(c)) == asked for c in candidates):
        logger.info("collection %s uses %s; the configured %s is the other side of a reindex", col.name,
                    rec.model_path, asked_model_path)
        return True
    return False


def wrap_store(store: VectorStore, rec: CollectionRecord | None) -> VectorStore:
    """The collection's store, aliased to the store collection that holds its vectors after a reindex."""
    if rec is None or vectors_name(rec) == rec.name:
        return store
    return AliasedStore(store, rec.name, vectors_name(rec))


def raw_store(store: VectorStore) -> VectorStore:
    return store.inner if isinstance(store, AliasedStore) else store


# -- readers follow a switch ------------------------------------------------------------------------------------
def follow(col: Collection) -> bool:
    """Reload model and store when the state's record changed (a reindex switched); True when it did."""
    current = col.state.get_collection(col.name)
    if current is not None and col.record is not None:
        if replace(current, created_at=col.record.created_at) == col.record:  # a fresh record has no stamp yet
            return False
    elif current == col.record:
        return False
    logger.info("collection %s changed under this process (reindex switch); reloading", col.name)
    old_store = col.reload(current)
    closer = getattr(old_store, "close", None)
    if closer is not None:
        try:
            closer()
        except Exception as exc:  # a stale part must not fail the query that replaces it
            logger.warning("closing the replaced store of %s: %s", col.name, exc)
    return True


def following(col: Collection, run: Callable[[], T]) -> T:
    """``run`` (a search) on the current vectors; retried once if a switch happened under it."""
    follow(col)
    try:
        return run()
    except StoreError:
        if not follow(col):
            raise
        return run()


# -- the job ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    collection: str
    model_spec: str
    model_path: str
    model_id: str
    normalization: str  # Normalization value
    dimensions: int
    target: str  # new store collection
    source: str  # store collection of the old vectors
    started_at: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReindexReport:
    collection: str
    model: str
    old_model: str
    first_pass: dict[str, object]
    catch_up: dict[str, object]
    switched: bool
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def job_dir(col: Collection) -> Path:
    return Path(col.settings.data_dir) / "reindex" / col.name


def load_job(col: Collection) -> Job | None:
    path = job_dir(col) / JOB
    if not path.exists():
        return None
    try:
        return Job(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise IndexerError(f"unreadable reindex job {path}: {exc}; run `indexer reindex --abort`") from exc


def progress(col: Collection) -> dict[str, Any] | None:
    """What ``status`` shows while a reindex is under way."""
    job = load_job(col)
    if job is None:
        return None
    shadow_file = job_dir(col) / "state.sqlite"
    done = count_files(shadow_file, col.name) if shadow_file.exists() else 0
    total = len(col.state.files(col.name))
    return {
        "model": job.model_spec,
        "model_id": job.model_id,
        "files_done": done,
        "files_total": total,
        "started_at": job.started_at,
        "target": job.target,
    }


def _record_for(job: Job, live: CollectionRecord) -> CollectionRecord:
    return CollectionRecord(
        name=live.name,
        store=live.store,
        store_options={**live.store_options, VECTORS: job.target, PREVIOUS_MODEL: live.model_path},
        metric=live.metric,
        model_id=job.model_id,
        model_path=job.model_path,
        normalization=Normalization.parse(job.normalization),
        dimensions=job.dimensions,
        created_at=live.created_at,
    )


def _new_job(col: Collection, model_spec: str, embedder: Embedder, model_path: str) -> Job:
    from indexer.core.normalization import choose_normalization

    assert col.record is not None
    normalization = choose_normalization(embedder.similarity, col.record.metric)
    return Job(
        collection=col.name,
        model_spec=model_spec,
        model_path=model_path,
        model_id=embedder.model_id,
        normalization=Normalization.parse(normalization).value,
        dimensions=embedder.dimensions,
        target=_target_name(col),
        source=vectors_name(col.record),
        started_at=time.time(),
    )


def _target_name(col: Collection) -> str:
    """A store collection name for the new vectors that is neither the live one nor any existing one.

    A timestamp alone is not enough: two reindexes within one second would name the live vectors as their
    target, and an abort would then drop them."""
    assert col.record is not None
    live = vectors_name(col.record)
    store = raw_store(col.store)
    while True:
        target = f"{col.name}__{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(3)}"
        if target != live and store.collection_meta(target) is None:
            return target


def _store_meta(col: Collection, rec: CollectionRecord, embedder: Embedder) -> dict[str, str]:
    """The new vectors' metadata: the new model's, with the collection's prompts and chunk size kept."""
    from indexer.index.chunking import META_CHUNK_TOKENS

    chunk_tokens = min(col.chunk_tokens, int(embedder.max_tokens))
    return {**rec.identity_meta(), **col.prompts.meta(), META_CHUNK_TOKENS: str(chunk_tokens)}


# -- run, abort -------------------------------------------------------------------------------------------------
def run(
    col: Collection,
    model_spec: str,
    progress_cb: Progress | None = None,
    *,
    lock_wait_s: float = LOCK_WAIT_S,
) -> ReindexReport:
    """Build the collection's vectors with ``model_spec`` beside the old ones, then switch (resumes a job)."""

    started = time.perf_counter()
    live = col.record
    if live is None:
        raise InputError(f"collection {col.name!r} does not exist yet; run `indexer index PATH` first")
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
    embedder = loader.load_embedder(col.settings, model_path)
    try:
        if job is None:
            if embedder.model_id == live.model_id and Path(model_path).resolve() == Path(live.model_path).resolve():
                raise InputError(f"collection {col.name!r} already uses {model_spec} ({live.model_id}); nothing to do")
            job = _new_job(col, model_spec, embedder, model_path)
            job_dir(col).mkdir(parents=True, exist_ok=True)
            (job_dir(col) / JOB).write_text(json.dumps(job.to_dict(), indent=2))
        elif embedder.model_id != job.model_id:
            raise InputError(
                f"the model file {model_path} changed since the reindex started ({job.model_id} -> "
                f"{embedder.model_id}); cancel it with `indexer reindex --abort -c {col.name}` and start again"
            )
        new_rec = _record_for(job, live)
        store = raw_store(col.store)
        store.ensure_collection(job.target, job.dimensions, _store_meta(col, new_rec, embedder))
        shadow = StateStore(job_dir(col) / "state.sqlite")
        try:
            if shadow.get_collection(col.name) is None:
                shadow.create_collection(new_rec)
            first = _sync_shadow(col, shadow, store, embedder, job, progress_cb)
            with _wait_writer_lock(col, lock_wait_s):
                catch_up = _sync_shadow(col, shadow, store, embedder, job, progress_cb)
                _switch(col, job, new_rec, shadow)
        finally:
            shadow.close()
    finally:
        embedder.close()
    old_model = live.model_id
    follow(col)
    _cleanup(col, job)
    return ReindexReport(
        col.name, job.model_id, old_model, first.to_dict(), catch_up.to_dict(), True, time.perf_counter() - started
    )


def abort(col: Collection) -> bool:
    """Cancel a reindex: drop the new vectors and the shadow state; the collection is as it was."""
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
    shutil.rmtree(job_dir(col), ignore_errors=True)
    return True


def _sync_shadow(
    col: Collection,
    shadow: StateStore,
    store: VectorStore,
    embedder: Embedder,
    job: Job,
    progress_cb: Progress | None,
) -> IndexReport:
    """Bring the shadow (new model) in line with the files under the live collection's current roots."""
    from indexer.index.chunking import chunker_for

    pipeline = Pipeline(
        collection=col.name,
        state=shadow,
        store=AliasedStore(store, col.name, job.target),
        embedder=embedder,
        chunker=chunker_for(embedder, col.chunk_tokens, col.settings.chunk_overlap),  # capped at its limit
        normalization=Normalization.parse(job.normalization),
        batch_chunks=col.settings.embed_batch_chunks,
        progress=progress_cb,
    )
    report = IndexReport()
    roots = col.state.roots(col.name)
    for old in shadow.roots(col.name):
        if old not in roots:  # forgotten from the live collection meanwhile
            pipeline.remove_files([p for p in shadow.files(col.name) if within(p, old)], report)
            shadow.remove_root(col.name, old)
    for root in roots:
        shadow.add_root(col.name, root)
        pipeline.sync(col.source_for(root), root, report)
    return report


@contextmanager
def _wait_writer_lock(col: Collection, wait_s: float) -> Iterator[None]:
    """The collection's writer lock, waiting for a running index or watcher batch to finish."""
    message = (
        f"collection {col.name!r} has been written by another process for {wait_s:.0f} s; the new vectors are "
        "kept: run `indexer reindex` again to switch when it is idle"
    )
    with lock_for(collection_lock_path(col.settings.data_dir, col.name)).hold(timeout=wait_s, message=message):
        yield


def _switch(col: Collection, job: Job, new_rec: CollectionRecord, shadow: StateStore) -> None:
    """One transaction: the collection's record, files and chunks become the shadow's."""
    switch_collection(col.state.path, shadow.path, replace(new_rec, name=col.name))
    logger.info("collection %s switched to %s (store collection %s)", col.name, job.model_id, job.target)


def _cleanup(col: Collection, job: Job) -> None:
    """After the switch: drop the old vectors and the shadow state."""
    store = raw_store(col.store)
    if col.record is not None and job.source == vectors_name(col.record):  # never the live vectors
        logger.warning("reindex job of %s names the live vectors %s as old; keeping them", col.name, job.source)
        shutil.rmtree(job_dir(col), ignore_errors=True)
        return
    try:
        store.drop(job.source)
    except StoreError as exc:  # readers still finishing a query may hold it; it is unused from now on
        logger.warning("dropping the old vectors %s of %s: %s", job.source, col.name, exc)
    shutil.rmtree(job_dir(col), ignore_errors=True)


# -- a rebuilt model file with the same weights -----------------------------------------------------------------
SAME_VECTORS_TOLERANCE = 2e-4  # max |difference| per component; f16 vs q8_0 of one model differ by ~5e-3
SAME_VECTORS_SAMPLES = 4


def same_vectors(col: Collection, embedder: Embedder, samples: int = SAME_VECTORS_SAMPLES) -> bool:
    """True when ``embedder`` reproduces the collection's stored vectors (within float noise).

    The model identity is a fingerprint of the GGUF file, so a file rebuilt from the same weights (a new
    converter version, a copy elsewhere) gets a new id although it embeds exactly as before. This re-embeds the
    texts of a few stored points and compares them with their vectors; only a match lets the collection keep
    its vectors (an upgraded 0.1 data directory then searches and syncs without re-embedding). Any other
    model, including another quantization of the same one, fails the comparison.
    """
    from indexer.core.normalization import cache_tag

    rec = col.record
    if rec is None or embedder.dimensions != rec.dimensions:
        return False
    key = f"{rec.model_id}|norm={cache_tag(rec.normalization)}"
    rows = cached_vectors(col.state.path, col.name, key, samples * 4)
    texts: list[str] = []
    stored: list[np.ndarray] = []
    for content_hash, blob in rows:
        vector = np.frombuffer(blob, dtype=np.float32)
        hits = col.store.search(col.name, vector, 3)
        text = next((h.payload.get("text") for h in hits if h.payload.get("content_hash") == content_hash), None)
        if isinstance(text, str) and text.strip():
            texts.append(text)
            stored.append(vector)
        if len(texts) >= samples:
            break
    if not texts:
        return False  # nothing to compare with: keep refusing
    fresh = np.asarray(embedder.embed_batch(texts, rec.normalization), dtype=np.float32)
    worst = float(np.abs(fresh - np.stack(stored)).max())
    logger.info("model check for %s: %d texts re-embedded, max difference %.2e", col.name, len(texts), worst)
    return worst <= SAME_VECTORS_TOLERANCE
