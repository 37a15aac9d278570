"""The small interfaces (ports) the core talks to. Adapters live in ``plugins/`` and never import each other."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from indexer.types import (
    Chunk,
    Document,
    Filter,
    Hit,
    Metric,
    Normalization,
    Point,
    RecallEstimate,
    ScanProblem,
    SourceRef,
)

if TYPE_CHECKING:
    from indexer.settings import Settings


@runtime_checkable
class TokenCounter(Protocol):
    """What the chunker needs of a model: exact token counts (special tokens included) and the limit."""

    @property
    def max_tokens(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class Embedder(TokenCounter, Protocol):
    """Turns texts into vectors. ``similarity`` is what the model was trained for (cosine, dot, euclidean).

    ``model_id`` names the weights (it keys the vector cache); ``dimensions`` is the vectors' width. Plain
    attributes satisfy these read-only members."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    @property
    def similarity(self) -> str: ...

    @property
    def media_kinds(self) -> tuple[str, ...]:
        """The media it embeds besides text: ``("image",)`` for a multimodal model with its projector, else ``()``."""
        ...

    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dimensions), normalised as asked (core.normalization)."""
        ...

    def embed_images(self, images: Sequence[bytes], normalize: Normalization) -> np.ndarray:
        """float32 (len(images), dimensions), normalised as asked; each item an encoded image (PNG). Only called
        when ``"image" in media_kinds``; a text-only embedder raises InputError."""
        ...


def embeds_images(embedder: Embedder) -> bool:
    """Whether ``embedder`` embeds images (asked of it, never inferred from its name)."""
    return "image" in embedder.media_kinds


@runtime_checkable
class Reranker(Protocol):
    model_id: str

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, higher is more relevant."""
        ...


@runtime_checkable
class VectorStore(Protocol):
    """One interface over every vector store (FAISS on disk, Qdrant embedded or server)."""

    name: str  # "faiss", "qdrant"
    metric: Metric

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        """Create the collection if missing, recording ``meta``. Existing collections are left as they are."""
        ...

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        """The meta recorded at creation (plus ``dimensions`` and ``metric``), or None if missing."""
        ...

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Insert or replace points by id; durable and searchable when this returns."""
        ...

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        ...

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        """Nearest points, best first; ``Hit.score`` is higher-is-better for every metric."""
        ...

    def count(self, collection: str) -> int: ...

    def list_ids(self, collection: str) -> set[str]: ...

    def drop(self, collection: str) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class LexicalSearch(Protocol):
    """What a store offers when it keeps a lexical index beside its vectors (in the same writes): the lexical port.
    A store has it or not (:func:`lexical_index`); the terms it indexes are :mod:`indexer.search.lexical`'s (the
    same for every store), made by the analyzer whose version the collection records (``lexical_version``).

    ``upsert`` and ``delete`` keep the lexical index in step with the points (same transaction or same point);
    ``ensure_lexical`` builds it for a collection made before the store had one (from the payload texts, no
    re-embedding) and is a no-op afterwards; ``search_lexical`` ranks by BM25, higher is better."""

    def ensure_lexical(self, collection: str) -> bool:
        """Build the lexical index if missing or outdated; True when it built one."""
        ...

    def has_lexical(self, collection: str) -> bool: ...

    def lexical_version(self, collection: str) -> str | None:
        """The version of the analyzer that made the collection's terms (:func:`indexer.search.lexical.analyzer`);
        None without a lexical index. A query is cut by it until ``ensure_lexical`` rebuilds with the current."""
        ...

    def search_lexical(self, collection: str, query: str, limit: int, where: Filter | None = None) -> list[Hit]: ...


def lexical_index(store: VectorStore) -> LexicalSearch | None:
    """The store's lexical index, or None when it keeps none: the one place that asks."""
    return store if isinstance(store, LexicalSearch) else None


@runtime_checkable
class PayloadScan(Protocol):
    """A store that can list every point's payload: how a collection made before metadata filters gets its
    filterable fields (indexer.state.fields) without re-embedding."""

    def payloads(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]: ...


@runtime_checkable
class PayloadFields(Protocol):
    """A store that filters on payloads (Qdrant): the writer keeps in each point what the filter language needs
    (:mod:`indexer.state.payload_fields`), and a stateless worker evaluates :class:`Filter`'s ``clauses`` there,
    with no state database (docs/deploy.md#stateless-workers). A store without it keeps the state route.

    Writing (the pipeline, under the writer lock): ``set_payloads`` merges each payload into its ids' payloads
    (a touch's ``stat``); ``unmark`` removes the ``uncommitted`` marker from ``ids`` once their file is committed
    (None: from every point, after a crash between commit and unmark); ``unfilled`` lists (id, payload) of points
    written before these keys; ``ensure_field_indexes`` creates the payload indexes a collection lacks (each
    metadata field's too, as the writer meets it: a filter on an indexed key costs a search ~0.3 ms, unindexed
    ~4 ms at 400 points).
    Reading (the worker): ``count_where`` counts the points a filter keeps (exact), ``facet`` counts values of a
    keyword-indexed payload key among them (None: the store has no facet call), ``filled`` whether every point
    has the keys (else a worker refuses clauses, naming ``indexer index``).
    The live vectors (a reindex, :mod:`indexer.collection.aliases`): ``set_live_vectors`` records in the store
    itself which store collection holds collection ``collection``'s vectors (the writer, at a reindex switch);
    ``live_vectors`` reads it (a worker, which has no state record to say so), None when none was recorded."""

    def set_payloads(self, collection: str, updates: Sequence[tuple[Sequence[str], Mapping[str, Any]]]) -> None: ...

    def unmark(self, collection: str, ids: Sequence[str] | None) -> None: ...

    def unfilled(self, collection: str) -> Iterator[list[tuple[str, dict[str, Any]]]]: ...

    def ensure_field_indexes(self, collection: str, extra: Mapping[str, str] | None = None) -> None:
        """The payload indexes of :mod:`indexer.state.payload_fields` and the ``extra`` keys (key -> ``keyword`` or
        ``float``: a metadata field's) the collection lacks; the ones it has are left as they are."""
        ...

    def filled(self, collection: str) -> bool: ...

    def count_where(self, collection: str, where: Filter | None) -> int: ...

    def facet(self, collection: str, key: str, where: Filter | None, limit: int) -> list[tuple[str, int]] | None: ...

    def payloads_where(self, collection: str, where: Filter | None, limit: int) -> list[dict[str, Any]]:
        """The payloads of (at most ``limit``) points ``where`` keeps: a worker reads the spellings of a facet's
        values there."""
        ...

    def live_vectors(self, collection: str) -> str | None: ...

    def set_live_vectors(self, collection: str, target: str) -> None: ...


def payload_fields(store: VectorStore) -> PayloadFields | None:
    """The store's payload-filter port, or None (the one place that asks)."""
    return store if isinstance(store, PayloadFields) else None


@runtime_checkable
class RecallCheck(Protocol):
    """A store whose approximate index measures its own recall and tunes its search-time parameter from it
    (docs/stores.md#recall-that-holds). A store without it (the default: :func:`recall_check` answers None) is
    reported as "not measured by this store".

    ``recall_estimate`` is the last recorded estimate (no search: status and /metrics read it), None before the
    first measurement; ``measure_recall`` measures now (costly: ``sample`` exact searches, run in the background by
    :mod:`indexer.search.recall`) and, with ``tune`` and no explicit setting, raises the search-time parameter step
    by step until the estimate meets ``floor`` or ``latency_budget_ms`` (one query) is spent; it records and returns
    the estimate. A collection searched exactly answers ``source="exact"``, recall 1.0, without sampling."""

    def recall_estimate(self, collection: str) -> RecallEstimate | None: ...

    def measure_recall(
        self, collection: str, sample: int, tune: bool, floor: float, latency_budget_ms: float
    ) -> RecallEstimate: ...


def recall_check(store: VectorStore) -> RecallCheck | None:
    """The store's recall measurement, or None (the one place that asks)."""
    return store if isinstance(store, RecallCheck) else None


@runtime_checkable
class StoreFactory(Protocol):
    """What an ``indexer.stores`` entry point names (usually the VectorStore class, with two classmethods).

    The core never calls a store's constructor itself: it asks the plugin for a new collection's options, records
    them in the state database (JSON; never secrets), and builds the store from them whenever it opens it."""

    def default_options(self, data_dir: Path, collection: str, settings: Settings) -> dict[str, Any]:
        """JSON-able options for a new collection; locations inside ``data_dir`` belong to it."""
        ...

    def from_options(self, options: Mapping[str, Any], metric: Metric, settings: Settings) -> VectorStore:
        """The store for recorded ``options`` (secrets such as API keys come from ``settings``)."""
        ...


@runtime_checkable
class StoreProcesses(Protocol):
    """Optional on a StoreFactory: whether its stores may be open in one process only (default: any number)."""

    def single_process(self, options: Mapping[str, Any]) -> bool:
        """True when only one process at a time may open the store with these options (embedded Qdrant): the
        server then runs its watcher in-process, and backup waits for the collection's writer lock."""
        ...


@runtime_checkable
class StoreSnapshots(StoreProcesses, Protocol):
    """Optional capabilities of a StoreFactory, asked by backup, restore and the server (never by store name).

    A plugin without them still indexes and searches; ``indexer backup`` then refuses its collections, naming
    the store. ``options`` are the recorded options with locations made absolute; ``collection`` is the store
    collection holding the vectors (another name after ``indexer reindex``); ``single_process`` is
    :class:`StoreProcesses`'s."""

    def writer_guard(self, options: Mapping[str, Any], collection: str) -> AbstractContextManager[None]:
        """Held while the store and then the state are copied: no store write falls between the two copies."""
        ...

    def snapshot(self, options: Mapping[str, Any], collection: str, dest: Path, settings: Settings) -> int:
        """Copy the collection's vectors consistently into the empty folder ``dest``; returns the points."""
        ...

    def restore_snapshot(
        self, src: Path, options: Mapping[str, Any], collection: str, target: Mapping[str, Any], settings: Settings
    ) -> dict[str, Any]:
        """Put the vectors of snapshot ``src`` back. ``target`` are the options a new collection would get here
        (an embedded store's folder in this data directory); returns the options to record."""
        ...


@runtime_checkable
class SourcePlugin(Protocol):
    """The least a source plugin must have (what the registry checks with ``isinstance``): scan, read, say what
    one path is, and whether the last scan reached every root. Every other ability has a default on
    :class:`Source`, which a plugin may inherit; one that does not is given the defaults by the registry."""

    def scan(self) -> Iterator[SourceRef]: ...

    def available(self) -> bool: ...

    def read(self, ref: SourceRef) -> Document: ...

    def ref_for(self, path: str) -> SourceRef | None: ...


class Source:
    """Finds files (stat only) and reads them into documents: the port the core calls, every ability declared
    here with its default (a plugin overrides what it does differently).

    A root that is unmounted or gone scans as empty: when ``available()`` is False the caller must not read the
    missing files as deleted."""

    #: what the last scan could not take (reported to the user as skipped files); a list the core may clear
    problems: Sequence[ScanProblem] = ()
    #: how many files the pipeline may read at once from this source (threads; 1: one after another)
    parallel_reads: int = 1

    def scan(self) -> Iterator[SourceRef]:
        """Every indexable file under the roots."""
        raise NotImplementedError

    def available(self) -> bool:
        """True when the last scan could list every root."""
        raise NotImplementedError

    def read(self, ref: SourceRef) -> Document:
        """Read and extract text; raises SourceError with path and reason."""
        raise NotImplementedError

    def ref_for(self, path: str) -> SourceRef | None:
        """What a scan would yield for this one path now, or None (missing, ignored, excluded, not indexable).
        Per-path sync (the watcher) uses it instead of a full scan."""
        raise NotImplementedError

    def claims(self, path: str) -> bool:
        """Whether a change at ``path`` (an absolute path inside a root, which may no longer exist) may concern
        this source. A watcher asks it for every file event, so answer by name only, without touching the disk.
        Default: every path inside a root is synced, and :meth:`ref_for` then decides."""
        return True

    def scan_below(self, folder: str) -> Iterator[SourceRef] | None:
        """What a scan would yield below one folder inside a root (per-path sync of a folder that appeared or
        moved); None (the default): the pipeline filters a full scan."""
        return None

    def heavy_read(self, ref: SourceRef) -> bool:
        """Whether reading ``ref`` takes a scarce resource (a parse worker): such reads and the others get
        separate lanes, so a cheap file is never queued behind heavy ones. Default: every read is heavy (one
        lane)."""
        return True

    def parse_job(self, ref: SourceRef, *, shared: bool = False) -> Callable[[], Document] | None:
        """A heavy read that may run on another machine (a Ray node: docs/deploy.md#indexing-on-a-ray-cluster): a
        picklable callable returning the Document :meth:`read` would. It carries the file's bytes, read here (the
        file may exist only on this machine); with ``shared`` (the roots are visible at the same paths there) only
        the path, and it reads the file where it runs. Default None: the read runs here."""
        return None

    def abort_reads(self) -> None:
        """End the reads in flight now (a shutdown never waits for a long parse). Default: nothing to end."""

    def close(self) -> None:
        """Release what the source holds (parse workers). Default: nothing."""


class _PluginSource(Source):
    """A plain-protocol source plugin under :class:`Source`'s defaults: its own abilities are looked up once,
    here, never at a call site."""

    def __init__(self, inner: SourcePlugin) -> None:
        self.inner = inner
        for name in ("claims", "scan_below", "heavy_read", "parse_job", "abort_reads", "close"):
            own = getattr(inner, name, None)  # the one place a source's optional ability is asked by name
            if callable(own):
                setattr(self, name, own)
        self.parallel_reads = int(getattr(inner, "parallel_reads", 1) or 1)
        self._problems()

    def _problems(self) -> None:  # the plugin's list (it may bind a new one per scan)
        self.problems = getattr(self.inner, "problems", ())

    def scan(self) -> Iterator[SourceRef]:
        try:
            yield from self.inner.scan()
        finally:
            self._problems()

    def available(self) -> bool:
        self._problems()
        return self.inner.available()

    def read(self, ref: SourceRef) -> Document:
        return self.inner.read(ref)

    def ref_for(self, path: str) -> SourceRef | None:
        try:
            return self.inner.ref_for(path)
        finally:
            self._problems()


def as_source(plugin: SourcePlugin) -> Source:
    """``plugin`` as the core's :class:`Source`: itself when it inherits it, else under the defaults."""
    return plugin if isinstance(plugin, Source) else _PluginSource(plugin)


@runtime_checkable
class SourceFactory(Protocol):
    """What an ``indexer.sources`` entry point names (usually the Source class, with one classmethod)."""

    def from_settings(self, roots: Sequence[Path], settings: Settings, readers: Sequence[Reader]) -> Source:
        """A source over ``roots`` reading with ``readers`` (every registered reader, loaded by the core)."""
        ...


@runtime_checkable
class Reader(Protocol):
    """Extracts text from one kind of file. Registered through the ``indexer.readers`` entry point."""

    kind: str
    extensions: tuple[str, ...]  # lower-case, with dot: (".md", ".markdown")

    def read(self, ref: SourceRef, data: bytes) -> Document: ...


@runtime_checkable
class Chunker(Protocol):
    def chunk(self, doc: Document) -> Iterator[Chunk]: ...


class Progress:
    """What the pipeline reports while it works (the CLI draws bars from it); every member a no-op by default,
    so a listener overrides only what it shows."""

    def files_total(self, n: int) -> None:
        """``n`` files will be looked at."""

    def file_done(self, path: str) -> None:
        """One file is done (indexed, unchanged, skipped or failed)."""

    def embedded(self, chunks: int, tokens: int) -> None:
        """``chunks`` more chunks (``tokens`` tokens) were embedded."""

    def chunked(self, chunks: int) -> None:
        """``chunks`` more chunks were split from the file being read (the CLI shows embedded of split)."""

    def file_part(self, path: str, done: int, total: int) -> None:
        """A large file is written in parts: ``done`` of its ``total`` chunks are searchable."""

    def cluster(self, work: Mapping[str, Any]) -> None:
        """What the Ray cluster has done for the run so far (nodes, workers, rate per node: the ``cluster`` of the
        run's report), every few seconds while it works for it."""


class _PluginProgress(Progress):
    """A progress listener object that does not inherit :class:`Progress`: each member it lacks is a no-op."""

    def __init__(self, inner: object) -> None:
        for name in ("files_total", "file_done", "embedded", "chunked", "file_part", "cluster"):
            own = getattr(inner, name, None)  # the one place a listener's members are asked by name
            setattr(self, name, own if callable(own) else (lambda *args, **kwargs: None))


def as_progress(listener: object | None) -> Progress | None:
    """``listener`` as a :class:`Progress` (itself when it inherits it; else its members over no-op defaults)."""
    if listener is None or isinstance(listener, Progress):
        return listener
    return _PluginProgress(listener)
