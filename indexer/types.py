"""Frozen values that cross module boundaries."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

import numpy as np

from indexer.errors import InputError, StateError
from indexer.names import printable


class Metric(str, Enum):
    """Distance a vector store computes. FAISS offers IP (= DOT) and L2 (= EUCLID)."""

    COSINE = "cosine"
    DOT = "dot"
    EUCLID = "euclid"
    MANHATTAN = "manhattan"


class Similarity(str, Enum):
    """The similarity an embedding model was trained for (recorded in its GGUF by our converter)."""

    COSINE = "cosine"
    DOT = "dot"
    EUCLIDEAN = "euclidean"


class Normalization(str, Enum):
    """How embedding vectors are normalised before they reach a store (and how queries are)."""

    NONE = "none"
    L2 = "l2"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object) -> Normalization:
        """A Normalization from its name, or from the integer code state databases of version 0.1 recorded."""
        if isinstance(value, Normalization):
            return value
        if isinstance(value, str) and value.strip().lower() in _BY_NAME:
            return _BY_NAME[value.strip().lower()]
        try:
            code = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            code = None
        if code is not None and code in _BY_LEGACY_CODE:
            return _BY_LEGACY_CODE[code]
        raise StateError(
            f"unknown normalization {value!r} (expected one of {', '.join(n.value for n in cls)}); this collection "
            "was written by another version of indexer: drop it and re-index"
        )


_BY_NAME = {n.value: n for n in Normalization}
# Integer codes version 0.1 wrote into the state database and into vector-cache keys. Frozen: old rows and
# cached vectors stay valid. They are a storage encoding only, unrelated to any engine's API.
_LEGACY_CODES = {Normalization.NONE: -1, Normalization.L2: 2}
_BY_LEGACY_CODE = {code: n for n, code in _LEGACY_CODES.items()}

@dataclass(frozen=True)
class SourceRef:
    """A file found by a source scan (stat data only, content not read)."""

    root: str  # absolute, resolved root the file was found under
    path: str  # absolute, resolved path of the file
    size: int
    mtime_ns: int

    @property
    def rel_path(self) -> str:
        return self.path[len(self.root) :].lstrip("/") if self.path.startswith(self.root) else self.path


ROOT_UNAVAILABLE = "root_unavailable"
BAD_NAME = "bad_name"  # ScanProblem code: a file name that is not valid UTF-8 (reported, skipped; rename it)


@dataclass(frozen=True)
class ScanProblem:
    """A file or folder a source scan could not take, and why. ``code`` is one of: ``permission``,
    ``too_large``, ``binary``, ``outside_root``, ``symlink_loop``, ``broken_symlink``, ``not_regular``,
    ``root_unavailable`` (:data:`ROOT_UNAVAILABLE`), ``bad_name`` (:data:`BAD_NAME`: not valid UTF-8, reported
    as failed), ``error``."""

    path: str
    reason: str
    code: str = "error"

    def __iter__(self) -> Iterator[str]:  # unpacks as (path, reason)
        return iter((self.path, self.reason))


LocationValue = str | int
Fields = tuple[tuple[str, LocationValue], ...]  # ordered (name, value) pairs: frozen, JSON-able as an object


@dataclass(frozen=True)
class Section:
    """A part of a document with its own place in the file, in the format's terms: a slide, a sheet's table, a
    message of a mailbox, a notebook cell, an e-book chapter. Sections are listed in text order; a chunk never
    crosses the start of one, and records the one it lies in (``Chunk.locator``, ``Chunk.location``).

    ``locator`` is what a person reads ("slide 3: Results", "Sales!A1:D40", "cell 7 (code)"); ``fields`` the
    same place as data (``(("slide", 3), ("title", "Results"))``), stored in the point's ``location`` payload.
    ``metadata`` adds to the document's metadata for this section's chunks (a message's subject, sender, date).
    """

    start: int  # character offset in Document.text
    locator: str
    fields: Fields = ()
    metadata: Fields = ()


@dataclass(frozen=True)
class OutlineNode:
    """A syntactic unit of source code (a class, function, method, or a statement of a large one) spanning
    ``text[start:end]``, both at line boundaries; ``heading`` is its enclosing names, itself included
    (``("Parser", "parse_header")``). Nodes are listed in pre-order; a node lies inside the one it nests in."""

    start: int
    end: int
    heading: tuple[str, ...] = ()


@dataclass(frozen=True)
class MediaPart:
    """Media a reader found in a file, for a model that embeds it: ``kind`` ``"image"``; ``data`` the bytes the
    projector takes (indexer.plugin_api.prepare_image: first frame, oriented, downscaled, PNG); ``width`` and
    ``height`` the original's pixel size (what a person is told); ``format`` the file's (png, jpeg, gif, webp)."""

    kind: str
    data: bytes
    width: int
    height: int
    format: str = ""


@dataclass(frozen=True)
class Document:
    """A file's text as a reader extracted it.

    ``markup`` tells the chunker how to find headings when ``kind`` does not: ``"markdown"`` (``#`` lines, as
    the Office, e-book and notebook readers write them) or ``""`` (by kind). ``outline`` (source code cut by its
    syntax tree) makes the chunker keep units whole; ``sections`` and ``metadata`` say where a chunk lies and
    what the file is (author, title, created, ...)."""

    ref: SourceRef
    text: str
    kind: str  # reader name: text, markdown, rst, code, html, pdf, docx, ...
    # For PDF: character offset in ``text`` where each page starts (page 1 first). Empty otherwise.
    page_starts: tuple[int, ...] = ()
    content_hash: str = ""  # sha256 of the raw file bytes
    sections: tuple[Section, ...] = ()
    metadata: Fields = ()
    markup: str = ""
    outline: tuple[OutlineNode, ...] = ()
    # What the reader left out or could not parse (a cap hit, a broken part), a sentence each naming the setting
    # that raises a cap: the file is indexed and the run reports it as partly read.
    notes: tuple[str, ...] = ()
    # Media to embed as points of their own (one point each) when the collection's model embeds that kind;
    # a text-only model ignores them. Readers attach them only when asked (docs/plugins.md: media readers).
    media: tuple[MediaPart, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """A piece of a document small enough for the embedding model, with where it came from."""

    path: str
    index: int  # position of the chunk within its document
    text: str
    start_byte: int  # span in the UTF-8 encoded document text
    end_byte: int
    start_line: int  # 1-based, inclusive
    end_line: int
    n_tokens: int  # tokens the model sees, special tokens included
    page: int | None = None  # 1-based page for PDF
    heading: tuple[str, ...] = ()  # Markdown/RST heading path; enclosing names for code
    locator: str = ""  # the section it lies in, as a person reads it ("slide 3: Results"); "" when none
    location: Fields = ()  # the same as data (Section.fields)
    metadata: Fields = ()  # the document's metadata with its section's (author, title, subject, sender, date)
    media: MediaPart | None = None  # an image point: no text, embedded from these bytes
    # what is embedded in front of the text (the heading path, in a collection made with chunk_context
    # "heading"): part of the vector, not of the text shown or matched lexically
    context: str = ""

    @property
    def embed_text(self) -> str:
        """The text the model embeds: the context, a blank line, the text (the text alone without context)."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text

    @property
    def content_hash(self) -> str:
        if self.media is not None:
            return hashlib.sha256(f"{self.media.kind}\0".encode() + self.media.data).hexdigest()
        return hashlib.sha256(self.embed_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Point:
    """A vector with its id (a UUID string) and payload, ready for a store."""

    id: str
    vector: np.ndarray
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Filter:
    """Restrictions a store applies natively at search time.

    ``ids``, when set, is the exact selection of point ids the other clauses of the request matched (computed
    from the state database: :mod:`indexer.state.fields`); a store searches only among them, and among the
    points that also match ``path_prefix`` and ``file_types``. An empty selection matches nothing.

    ``hidden`` are point ids a search must never return, filtered or not: points written but not yet committed
    (a large file's slices while it is being written; the state's pending ids no committed chunk owns). A store
    excludes them inside its search (an id selection), so a partly written file is seen as its previous version.
    """

    path_prefix: str | None = None  # absolute directory or file path
    file_types: tuple[str, ...] = ()  # reader kinds or extensions without dot, e.g. ("md", "py")
    ids: frozenset[str] | None = None
    hidden: frozenset[str] = frozenset()
    # A stateless worker's filter (indexer.ports.PayloadFields: only a store with that port gets these): the
    # clauses themselves, evaluated by the store on the payload the writer keeps for them, with each metadata
    # field's kind ((name, kind) pairs), and whether points a writer has not committed are left out.
    clauses: tuple[Clause, ...] = ()
    kinds: tuple[tuple[str, str], ...] = ()
    committed: bool = False

    def is_empty(self) -> bool:
        return (self.path_prefix is None and not self.file_types and self.ids is None and not self.hidden
                and not self.clauses and not self.committed)


FILTER_OPS = ("=", "==", "!=", "<", "<=", ">", ">=", "^=", "~", "in")


@dataclass(frozen=True)
class Clause:
    """One condition of the filter language (indexer.search.filters parses and checks it).

    ``field`` is ``path``, ``type``, ``modified``, ``size`` or a metadata / location name (sender, date, sheet,
    ...); ``op`` one of :data:`FILTER_OPS`; ``values`` the operand(s) as typed by the parser: text, or numbers
    (``modified`` in ns since the epoch, ``size`` in bytes, metadata dates in seconds since the epoch) and, for a
    period such as ``2025-03``, its start and end. ``negate`` turns the condition around (``not ...``).
    """

    field: str
    op: str
    values: tuple[Any, ...]
    negate: bool = False
    text: str = ""  # the clause as the user wrote it, for messages


@dataclass(frozen=True)
class Hit:
    """A store search result; ``score`` is higher-is-better whatever the metric."""

    id: str
    score: float
    payload: Mapping[str, Any]


def _json_value(value: Any) -> Any:
    """A hit field as JSON data: tuples as lists, mappings as dicts."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


@dataclass(frozen=True)
class SearchHit:
    """A search result as the user sees it."""

    path: str
    score: float
    rerank_score: float | None
    text: str
    start_line: int
    end_line: int
    page: int | None
    heading: tuple[str, ...]
    chunk_id: str
    locator: str = ""  # where in the file, in its format's terms ("slide 3: Results", "Sales!A1:D40")
    location: Mapping[str, Any] = field(default_factory=dict)  # the same as data ({"slide": 3, ...})
    metadata: Mapping[str, Any] = field(default_factory=dict)  # author, title, subject, sender, date, ...
    # the passage around what matched the query (indexer.search.snippets), and its matching words' spans in it
    snippet: str = ""
    marks: tuple[tuple[int, int], ...] = ()
    # an image point: media "image", the file's pixel size (its path is the image's reference); "" for text
    media: str = ""
    width: int | None = None
    height: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """As JSON data: the shape :mod:`indexer.codec` reads back (one field each)."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}


# -- what the facade takes and gives back (every front end uses these) ----------------------------------------
MAX_QUERY_CHARS = 4096  # a longer query is refused (InputError); the HTTP schema states the same cap
MAX_CLAUSES = 32  # filter clauses in one request (search/filters.py checks it; the HTTP schema states it)
MAX_FACETS = 8  # facets asked for in one request (search/query.py checks it; the HTTP schema states it)

@dataclass
class IndexReport:
    """Summary of one run (mutable while the run goes on)."""

    files_seen: int = 0
    files_indexed: int = 0  # read, chunked and written
    files_unchanged: int = 0
    files_touched: int = 0  # stat changed, content did not
    files_removed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    tokens_embedded: int = 0
    points_upserted: int = 0
    points_deleted: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    partial: list[tuple[str, str]] = field(default_factory=list)  # indexed, with parts left out (Document.notes)
    notes: list[str] = field(default_factory=list)  # what the run decided for the user (nested roots adopted)
    reading: list[str] = field(default_factory=list)  # still being read in the background (the watcher's syncs)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage: scan, read, chunk, embed, write, commit
    # The per-file trace: seconds per stage charged to each path (read: its own read's time within the call;
    # chunk; embed: each embedding step split among its chunks' paths; write and commit: split among the files
    # written together). What ``slowest`` ranks: which file held a batch, and in which stage.
    held: dict[str, dict[str, float]] = field(default_factory=dict)
    # Large files part-written (the watcher's calls write a large file's slices for about a second each): the next
    # call of the same writer goes on with them, after the small files it is given
    unfinished: list[str] = field(default_factory=list)
    # Seconds the reads taken in this call had run in the background before it (left there by earlier calls): no
    # batch waited for them, but they are what syncing the file cost (the watcher's rate limit counts them)
    read_before: dict[str, float] = field(default_factory=dict)
    # Files indexed as an older version (a read still running from an earlier call was taken): sync them again
    stale: list[str] = field(default_factory=list)
    cluster: dict[str, Any] | None = None  # what the Ray cluster did (indexer.cluster.embedder.describe), if used

    def timed(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to ``stage`` (what ``-v index`` prints as its stage timings)."""
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def charge(self, path: str, stage: str, seconds: float) -> None:
        """Charge ``seconds`` of ``stage`` to the file ``path`` (the per-file trace, :attr:`held`)."""
        stages = self.held.setdefault(path, {})
        stages[stage] = stages.get(stage, 0.0) + seconds

    def slowest(self, n: int = 3) -> list[dict[str, Any]]:
        """The ``n`` files charged the most seconds: path, seconds and the stage most of them went to."""
        ranked = sorted(self.held.items(), key=lambda item: sum(item[1].values()), reverse=True)[:n]
        return [{"path": path, "seconds": round(sum(stages.values()), 3), "stage": max(stages, key=stages.__getitem__)}
                for path, stages in ranked if stages]  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        """As JSON data for output: names that are not UTF-8 with ``\\x`` escapes (:func:`indexer.names.printable`)."""
        out = dict(self.__dict__)
        out["failed"] = [{"path": printable(p), "reason": printable(r)} for p, r in self.failed]
        out["skipped"] = [{"path": printable(p), "reason": printable(r)} for p, r in self.skipped]
        out["partial"] = [{"path": printable(p), "reason": printable(r)} for p, r in self.partial]
        out["reading"] = [printable(p) for p in self.reading]
        out["unfinished"] = [printable(p) for p in self.unfinished]
        out["stale"] = [printable(p) for p in self.stale]
        out["read_before"] = {printable(p): round(s, 3) for p, s in self.read_before.items()}
        del out["held"]  # the whole per-file map can be long: its top three
        out["slowest"] = [{**row, "path": printable(str(row["path"]))} for row in self.slowest(3)]
        return out


@dataclass(frozen=True)
class SearchRequest:
    """One search, as every front end (CLI, Python API, HTTP, MCP) states it.

    ``None`` means "the configured default" (``top_k``, ``candidates``, the search mode; rerank when a reranker
    is configured). :func:`prepare` fills the defaults in and validates; the facade calls it, so front ends only
    translate their input into this value.
    """

    query: str
    k: int | None = None
    candidates: int | None = None
    path_prefix: str | None = None  # a folder or file; resolved to an absolute path
    path_glob: str | None = None  # fnmatch pattern on the absolute or root-relative path
    file_types: tuple[str, ...] = ()  # extensions or reader kinds, e.g. ("md", "py"); case and dots ignored
    rerank: bool | None = None
    mode: str | None = None  # dense | lexical | hybrid
    rerank_candidates: int | None = None  # rerank exactly this many (default: the rerank budget decides)
    # Metadata every hit must have, e.g. (("sender", "ada@example.org"),): a case-insensitive substring of the
    # hit's metadata or location value of that name (author, title, subject, sender, date, sheet, slide, ...).
    metadata: tuple[tuple[str, str], ...] = ()
    # Conditions in the filter language, all of which a hit must meet: clause strings such as
    # "modified>=2025-01-01", "sender in ada@x.org,linus@y.org", "not type=pdf", or parsed Clauses.
    where: tuple[Any, ...] = ()
    facets: tuple[str, ...] = ()  # fields whose values to count among the filter's matches (e.g. "type")
    # "pictures like this one": an image as the query (the query text then empty): its bytes, or the path of a
    # file inside one of the collection's roots (str); dense retrieval only, no rerank (no text to compare)
    image: bytes | str | None = None

    @classmethod
    def from_options(cls, query: str, **options: Any) -> SearchRequest:
        """Build a request from keyword options, refusing unknown names with the valid ones."""
        known = {f.name for f in fields(cls)} - {"query"}
        unknown = sorted(set(options) - known)
        if unknown:
            valid = ", ".join(sorted(known))
            raise InputError(f"unknown search option(s) {', '.join(unknown)}; valid options: {valid}")
        return cls(query=query, **options)

    def __repr__(self) -> str:  # an image query's bytes are not printed
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.image, bytes):
            shown["image"] = f"<{len(self.image)} bytes>"
        return "SearchRequest(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    reranked: bool
    rerank_note: str  # why no rerank stage ran, or which model ranked
    timings_ms: dict[str, float] = field(default_factory=dict)
    mode: str = "dense"
    rerank_count: int = 0  # candidates the rerank stage scored
    warning: str | None = None  # e.g. the store and the state disagree: the hits may be incomplete
    matched: int | None = None  # chunks the filter matched (None: no filter beyond path and type)
    facets: Mapping[str, Any] = field(default_factory=dict)  # field -> [[value, count], ...] under the filter
    where: tuple[str, ...] = ()  # the filter's clauses as read (one per clause, as written)
    filter_note: str | None = None  # when the filter matched nothing: the clause that left no chunk

    def to_dict(self) -> dict[str, object]:
        return {
            "matched": self.matched,
            "facets": {k: [list(x) for x in v] for k, v in self.facets.items()},
            "where": list(self.where),
            "filter_note": self.filter_note,
            "hits": [h.to_dict() for h in self.hits],
            "reranked": self.reranked,
            "rerank_count": self.rerank_count,
            "rerank_note": self.rerank_note,
            "mode": self.mode,
            "timings_ms": self.timings_ms,
            "warning": self.warning,
        }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class RecallEstimate:
    """An approximate index's recall@k measured against exact search over the same points (docs/stores.md#recall):
    ``sample`` queries, ``searches`` of them the vectors of the collection's recent searches and the rest its own
    chunk vectors (each one's own point left out) when too few searches were seen; ``sample_kind`` says which
    (``searches``, ``chunks``, ``searches+chunks``). The search-time
    parameter ``param`` at ``value`` (``hnsw_ef``, ``nprobe``, ``efSearch``), with ``rescore`` x limit candidates of
    the int8/8-bit codes rescored with the float vectors. ``source``: ``exact`` (the search is
    exact: recall 1.0, nothing sampled), ``tuned`` (chosen from the estimate), ``default``, ``setting`` (an explicit
    setting: not tuned)."""

    recall: float
    sample: int
    k: int = 10
    param: str | None = None
    value: int | None = None
    rescore: int | None = None  # candidates per result rescored with the float vectors (x limit); None: no codes
    source: str = "exact"
    points: int = 0
    latency_ms: float | None = None  # median time of one approximate query of the sample at ``value``
    measured_at: float = 0.0  # unix time
    sample_kind: str = "chunks"  # searches | chunks | searches+chunks (older records: chunks)
    searches: int = 0  # queries of the sample that were recent searches (the rest: chunk vectors)
    graph: dict[str, int] | None = None  # the build-time parameters of the index measured (HNSW m, ef_construct; lists)
    trials: list[list[float]] | None = None  # the tuning's steps: [value, rescore, (list order,) recall, ms, std error]

    @property
    def exact(self) -> bool:
        return self.source == "exact"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["exact"] = self.exact
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallEstimate | None:
        """The estimate a store recorded, or None when it is unreadable (an older or damaged record: a field of the
        wrong type too, so that status never fails on a hand-edited file)."""
        try:
            known = {f.name for f in fields(cls)}
            out = cls(**{k: v for k, v in data.items() if k in known})
        except (TypeError, ValueError):
            return None
        numbers = (out.recall, out.sample, out.k, out.points, out.measured_at, out.searches)
        optional = (out.value, out.rescore, out.latency_ms)
        if not all(_number(v) for v in numbers) or not all(v is None or _number(v) for v in optional):
            return None
        if not all(isinstance(v, str) or v is None for v in (out.param, out.source, out.sample_kind)):
            return None
        if out.graph is not None and not (isinstance(out.graph, dict) and all(map(_number, out.graph.values()))):
            return None
        if out.trials is not None and not isinstance(out.trials, list):
            return None
        if out.trials and not all(isinstance(t, list) and len(t) > 3 and all(map(_number, t)) for t in out.trials):
            return replace(out, trials=None)  # the tuning's steps are only shown: the estimate itself still holds
        return out
