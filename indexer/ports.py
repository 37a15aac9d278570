"""The small interfaces (ports) the core talks to. Adapters live in ``plugins/`` and never import each other."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from indexer.types import Chunk, Document, Filter, Hit, Metric, Normalization, Point, ScanProblem, SourceRef

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
    """Turns texts into vectors. ``similarity`` is what the model was trained for (cosine, dot, euclidean)."""

    model_id: str
    dimensions: int

    @property
    def similarity(self) -> str: ...

    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dimensions), normalised as asked (core.normalization)."""
        ...


@runtime_checkable
class MediaEmbedder(Protocol):
    """An Embedder that also embeds media (a multimodal model with its projector): ``media_kinds`` names what
    (``("image",)``); a text-only embedder has none of this (or empty ``media_kinds``)."""

    media_kinds: tuple[str, ...]

    def embed_images(self, images: Sequence[bytes], normalize: Normalization) -> np.ndarray:
        """float32 (len(images), dimensions), normalised as asked; each item an encoded image (PNG)."""
        ...


def embeds_images(embedder: object) -> bool:
    """Whether ``embedder`` embeds images (asked of it, never inferred from its name)."""
    return "image" in tuple(getattr(embedder, "media_kinds", ()) or ()) and hasattr(embedder, "embed_images")


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
class PayloadScan(Protocol):
    """A store that can list every point's payload: how a collection made before metadata filters gets its
    filterable fields (indexer.state.fields) without re-embedding."""

    def payloads(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]: ...


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
class StoreSnapshots(Protocol):
    """Optional capabilities of a StoreFactory, asked by backup, restore and the server (never by store name).

    A plugin without them still indexes and searches; ``indexer backup`` then refuses its collections, naming
    the store. ``options`` are the recorded options with locations made absolute; ``collection`` is the store
    collection holding the vectors (another name after ``indexer reindex``)."""

    def single_process(self, options: Mapping[str, Any]) -> bool:
        """True when only one process at a time may open the store with these options (embedded Qdrant): the
        server then runs its watcher in-process, and backup waits for the collection's writer lock."""
        ...

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
class Source(Protocol):
    """Finds files (stat only) and reads them into documents.

    ``problems`` lists what the last scan could not take (reported to the user as skipped files);
    ``available()`` says whether the last scan reached every root. A root that is unmounted or gone scans as
    empty: when ``available()`` is False the caller must not read the missing files as deleted."""

    problems: Sequence[ScanProblem]

    def scan(self) -> Iterator[SourceRef]: ...

    def available(self) -> bool:
        """True when the last scan could list every root."""
        ...

    def read(self, ref: SourceRef) -> Document:
        """Read and extract text; raises SourceError with path and reason."""
        ...

    def ref_for(self, path: str) -> SourceRef | None:
        """What a scan would yield for this one path now, or None (missing, ignored, excluded, not indexable).
        Per-path sync (the watcher) uses it instead of a full scan."""
        ...


def source_claims(source: Source, path: str) -> bool:
    """The source's answer to "is this path mine?": whether a change at ``path`` (an absolute path inside one of
    its roots, which may no longer exist) may concern it. A watcher asks this for every file event, so a source
    answers by name only, without touching the disk (the filesystem source: no hidden part, except its ignore
    files). A source may define ``claims(path) -> bool``; the default for one that does not is True: every path
    inside a root is synced, and :meth:`Source.ref_for` then decides."""
    claims = getattr(source, "claims", None)
    return True if claims is None else bool(claims(path))


@runtime_checkable
class FolderScan(Protocol):
    """Optional capability of a Source: what a scan would yield below one folder inside a root (per-path sync of a
    folder that appeared or moved). Without it, the pipeline filters a full scan."""

    def scan_below(self, folder: str) -> Iterator[SourceRef]: ...


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


class Progress(Protocol):
    """What the pipeline reports while it works (the CLI draws bars from it)."""

    def files_total(self, n: int) -> None: ...

    def file_done(self, path: str) -> None: ...

    def embedded(self, chunks: int, tokens: int) -> None: ...

    # Optional: ``chunked(n: int) -> None``, n more chunks split from the file being read (found with getattr, so
    # a progress without it works); the CLI shows embedded chunks of those split.
