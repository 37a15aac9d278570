"""A collection: the facade the CLI, the Python API and the HTTP API use.

:class:`Collection` is a thin composition over one :class:`~indexer.collection.parts.CollectionParts` (the record
and the lazily built store, embedder, reranker, prompts and chunk size) with its two faces: a
:class:`~indexer.collection.reader.CollectionReader` (search, status, indexed file) and a
:class:`~indexer.collection.writer.CollectionWriter` (index, sync, sync paths, forget, drop). Front ends that keep
the two apart (the server) open the faces themselves: :func:`open_reader`, :func:`open_writer`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from indexer.collection.parts import CollectionParts, PartsView
from indexer.collection.reader import CollectionReader
from indexer.collection.records import (
    add_record,
    get_record,
    list_collections,
    open_state,
    remove_record,
    single_process,
)
from indexer.collection.writer import CollectionWriter
from indexer.errors import InputError
from indexer.index.pipeline import IndexReport, Progress
from indexer.ports import Source
from indexer.search.query import QueryLimits, SearchRequest, SearchResult
from indexer.settings import Settings, load_settings
from indexer.state.database import CollectionRecord, StateStore

__all__ = [
    "Collection", "CollectionParts", "CollectionReader", "CollectionWriter", "add_record", "forget_path",
    "get_record", "index_paths", "list_collections", "open_collection", "open_parts", "open_reader", "open_state",
    "open_writer", "remove_record", "single_process",
]


class Collection(PartsView):
    """One named collection. Use ``open_collection``; close it (or use ``with``) when done."""

    def __init__(self, settings: Settings, state: StateStore, record: CollectionRecord | None) -> None:
        self.parts = CollectionParts(settings, state, record)
        self.reader = CollectionReader(self.parts, owns_parts=False)
        self.writer = CollectionWriter(self.parts, owns_parts=False)

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.writer.close()  # its background reads (the parts are the facade's)
        self.reader.close()  # a recall measurement its searches started finishes first
        self.parts.close()

    # -- the parts -----------------------------------------------------------------------------------------
    @property
    def chunk_tokens(self) -> int:
        return self.parts.chunk_tokens

    @property
    def single_process(self) -> bool:
        """Only one process at a time may open this collection's store (embedded Qdrant): ask the store plugin."""
        return self.parts.single_process

    def check_settings(self) -> None:
        """Refuse explicit settings that disagree with what the collection was built with."""
        self.parts.check_settings()

    def source_for(self, root: str) -> Source:
        return self.parts.source_for(root)

    # -- reading -------------------------------------------------------------------------------------------
    def search(self, request: SearchRequest | str = "", **options: Any) -> SearchResult:
        """Run one search (:meth:`CollectionReader.search`): a :class:`SearchRequest`, or the query text with the
        request's fields as keyword options (``image=`` bytes or an indexed file's path: pictures like it);
        defaults and caps come from the settings."""
        return self.reader.search(request, **options)

    def status(self) -> dict[str, Any]:
        return self.reader.status()

    def fields(self) -> list[dict[str, Any]]:
        """The fields a search can filter on, with example values and counts (:meth:`CollectionReader.fields`)."""
        return self.reader.fields()

    def health(self) -> dict[str, Any]:
        """Whether the store holds exactly the points the state says: counts, missing and orphaned points."""
        return self.reader.health()

    def agreement(self) -> str | None:
        """None when state and store agree (give or take a write in flight), else the problem and its repair."""
        return self.reader.agreement()

    def indexed_file(
        self, path: str, query: str | None = None, lines: tuple[int, int | None] = (1, None)
    ) -> dict[str, Any]:
        """The text of an indexed file of this collection, as the indexing reader extracted it; with ``query``,
        the marks of the words that match it on ``lines`` (:meth:`CollectionReader.indexed_file`)."""
        return self.reader.indexed_file(path, query, lines)

    def overview(self) -> dict[str, Any]:
        """The collection at a glance for a person (:meth:`CollectionReader.overview`)."""
        return self.reader.overview()

    def thumbnail(self, path: str, size: int = 256) -> bytes:
        """A JPEG thumbnail of an indexed image of this collection (:meth:`CollectionReader.thumbnail`)."""
        return self.reader.thumbnail(path, size)

    def lexical_hint(self) -> str:
        """Why this collection has no lexical index, and whether anything builds one."""
        return self.reader.lexical_hint()

    def query_limits(self) -> QueryLimits:
        return self.reader.query_limits()

    # -- writing -------------------------------------------------------------------------------------------
    def index(self, paths: Sequence[str | Path], progress: Progress | None = None) -> IndexReport:
        """Add ``paths`` as roots (if new) and sync them. Files under other roots are untouched."""
        return self.writer.index(paths, progress)

    def sync(self, progress: Progress | None = None) -> IndexReport:
        """Re-sync every root of the collection (a root that vanished keeps its points and is reported)."""
        return self.writer.sync(progress)

    def sync_paths(self, paths: Iterable[str | Path], progress: Progress | None = None) -> IndexReport:
        """Bring exactly ``paths`` (files or folders) in line with the disk (what the watcher calls)."""
        return self.writer.sync_paths(paths, progress)

    def repair_store(self) -> None:
        """Drop the store's copy of the collection so the next index or sync rebuilds it from the cached vectors
        and the files (``indexer index --repair``)."""
        self.writer.repair_store()

    def forget(self, path: str | Path) -> IndexReport:
        """Remove a root and every point of its files."""
        return self.writer.forget(path)

    def drop(self) -> None:
        """Delete the collection: its points, its state and (for embedded stores) its files."""
        self.writer.drop()

    def warm_up(self) -> None:
        """Load the embedding model (a watcher's first change then does not pay for it)."""
        self.writer.warm_up()

    def follow_reads(self, listener: Callable[[str], None] | None) -> None:
        """Let syncs leave a slow read running in the background; ``listener(path)`` hears when it ends
        (:meth:`CollectionWriter.follow_reads`: the watcher)."""
        self.writer.follow_reads(listener)

    def reading(self) -> list[dict[str, Any]]:
        """Files being read in the background (path, seconds so far)."""
        return self.writer.reading()


def open_parts(name: str | None = None, settings: Settings | None = None, **overrides: Any) -> CollectionParts:
    """The parts of collection ``name`` (or of one to create). ``overrides`` are settings fields."""
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
    return CollectionParts(settings, state, record)


def open_collection(name: str | None = None, settings: Settings | None = None, **overrides: Any) -> Collection:
    """Open (or prepare to create) a collection. ``overrides`` are settings fields, e.g. ``store="qdrant"``."""
    if settings is None:  # the environment's settings too (INDEXER_STATELESS)
        settings, overrides = load_settings(collection=name, **overrides), {}
    if settings.stateless:
        raise InputError("the stateless setting is for search workers (`indexer serve --stateless`, or open_reader): "
                         "query the worker over HTTP; a collection with both faces needs the state database")
    parts = open_parts(name, settings, **overrides)
    return Collection(parts.settings, parts.state, parts.record)


def open_reader(name: str, settings: Settings) -> CollectionReader:
    """A reader of collection ``name`` over parts of its own; with the ``stateless`` setting, a search worker's
    reader of the store alone (:mod:`indexer.collection.stateless`: no state database, nothing written)."""
    if settings.stateless:
        from indexer.collection.stateless import open_stateless_reader

        return open_stateless_reader(name, settings)
    return CollectionReader(open_parts(name, settings))


def open_writer(name: str, settings: Settings, beside: CollectionParts | None = None) -> CollectionWriter:
    """A writer of collection ``name``. Beside a reader's parts whose store admits one process at a time
    (embedded Qdrant) it is their second face; else it has parts of its own, and so its own embedding context."""
    if settings.stateless:
        raise InputError(f"a stateless search worker does not write collection {name!r}; index through the writer")
    if beside is not None and beside.single_process:
        return CollectionWriter(beside, owns_parts=False)
    return CollectionWriter(open_parts(name, settings))


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
