"""Query path: dense, lexical or hybrid retrieval (indexer.search.fusion) of the candidates -> rerank -> top k."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from indexer.core.images import MAX_IMAGE_BYTES, ImageError, prepare_image
from indexer.core.normalization import Normalization
from indexer.core.paths import user_path
from indexer.errors import InputError
from indexer.ports import Embedder, Reranker, VectorStore, embeds_images
from indexer.search import filters
from indexer.search.fusion import MODES, FusionConfig, retrieve
from indexer.search.rerank import RerankBudget, rerank_stage
from indexer.search.rows import matched_rows
from indexer.search.snippets import matched_lines, snippet, without_shown_headings
from indexer.settings import default as settings_default
from indexer.types import MAX_FACETS, MAX_QUERY_CHARS, Clause, Filter, Hit, SearchHit, SearchRequest, SearchResult

if TYPE_CHECKING:
    from indexer.settings import Settings



__all__ = [
    "MODES", "QueryLimits", "SearchRequest", "SearchResult", "Selection", "check_query_length", "check_text",
    "prepare", "run_search",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    """What the state database says of a request's filter: the exact point ids it matches (None: no clause
    beyond path and type, the store filters natively), their number, and the facet counts asked for."""

    ids: frozenset[str] | None = None
    matched: int | None = None
    facets: Mapping[str, list[tuple[str, int]]] = field(default_factory=dict)
    # A broad filter (most chunks match): which of a search's candidate ids it matches; the search widens until
    # enough of them do (indexer.search.fusion.retrieve), instead of listing every matching id.
    keep: Callable[[Sequence[str]], set[str]] | None = None
    share: float = 1.0  # the estimated share of the chunks a broad filter keeps: sizes the first fetch
    # a broad filter's exact matches, listed only when its first fetch holds too few of them (matches far from the
    # query): the search then runs among them once instead of widening to most of the collection
    listing: Callable[[], frozenset[str]] | None = None
    note: str | None = None  # when nothing matches: the clause that left no chunk
    # a stateless worker's selection: the clauses go to the store itself (indexer.ports.PayloadFields), with each
    # metadata field's kind, and the store evaluates them on the payload the writer keeps (no id list)
    clauses: tuple[Clause, ...] = ()
    kinds: tuple[tuple[str, str], ...] = ()


Selector = Callable[[SearchRequest], Selection]


@dataclass(frozen=True)
class QueryLimits:
    """The configured defaults and caps a request is prepared against (from Settings)."""

    top_k: int = settings_default("top_k")
    candidates: int = settings_default("candidates")
    max_top_k: int = settings_default("max_top_k")
    max_candidates: int = settings_default("max_candidates")
    mode: str = settings_default("search_mode")
    rerank_candidates: int | None = settings_default("rerank_candidates")

    @classmethod
    def from_settings(cls, settings: Settings) -> QueryLimits:
        return cls(
            top_k=settings.top_k,
            candidates=settings.candidates,
            max_top_k=settings.max_top_k,
            max_candidates=settings.max_candidates,
            mode=settings.search_mode,
            rerank_candidates=settings.rerank_candidates,
        )


def prepare(req: SearchRequest, limits: QueryLimits) -> SearchRequest:
    """Apply defaults and validate; every violation is an InputError naming the valid range."""
    if not isinstance(req.query, str):
        raise InputError(f"the query must be text, not {type(req.query).__name__}")
    query = req.query.strip()
    if req.image is not None:
        req = _image_request(req, query)
    elif not query:
        raise InputError("the query is empty; pass some words to search for (or an image)")
    else:
        check_query_length(query)
    k = _int_in_range("k", limits.top_k if req.k is None else req.k, limits.max_top_k, "max_top_k")
    candidates = _int_in_range(
        "candidates", limits.candidates if req.candidates is None else req.candidates, limits.max_candidates,
        "max_candidates",
    )
    if req.mode is not None and not isinstance(req.mode, str):
        raise InputError(f"mode must be one of {', '.join(MODES)}, as text")
    mode = (req.mode or limits.mode).lower()
    if mode not in MODES:
        raise InputError(f"unknown search mode '{str(req.mode)[:40]}'; use one of {', '.join(MODES)}")
    if req.rerank is not None and not isinstance(req.rerank, bool):
        raise InputError(f"rerank must be true, false or unset, not {req.rerank!r}")
    fixed = req.rerank_candidates if req.rerank_candidates is not None else limits.rerank_candidates
    if fixed is not None:
        fixed = _int_in_range("rerank_candidates", fixed, limits.max_candidates, "max_candidates")
    glob = req.path_glob.strip() if req.path_glob else None
    where = _where(req.where) + filters.legacy_clauses(glob, _metadata_filter(req.metadata))
    filters.check_clause_count(len(where))
    return SearchRequest(
        query=query,
        k=k,
        candidates=max(candidates, k),
        path_prefix=_resolve_prefix(req.path_prefix),
        path_glob=None,  # now the clause path~GLOB in ``where``
        file_types=_file_types(req.file_types),
        rerank=req.rerank,
        mode=mode,
        rerank_candidates=fixed,
        metadata=(),  # now NAME=VALUE clauses in ``where``
        where=where,
        facets=_facets(req.facets),
        image=req.image,
    )


def _image_request(req: SearchRequest, query: str) -> SearchRequest:
    """An image query: its bytes (a path was read by the collection), no text beside it, dense retrieval and no
    rerank (an image has no words for the lexical side nor for a text cross-encoder)."""
    if not isinstance(req.image, (bytes, bytearray)):
        raise InputError("the image must be the file's bytes here (a path is read by the collection first)")
    if not req.image:
        raise InputError("the image is empty")
    if len(req.image) > MAX_IMAGE_BYTES:
        raise InputError(f"the image has {len(req.image):,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
    if query:
        raise InputError("give a query or an image, not both: an image query finds pictures like it")
    if req.mode is not None and req.mode.lower() == "lexical":
        raise InputError("an image query has no words for the lexical search; use mode 'dense'")
    if req.rerank:
        raise InputError("an image query cannot be reranked: the cross-encoder reads text; leave rerank unset")
    return replace(req, image=bytes(req.image), mode="dense", rerank=False)


def _where(items: object) -> tuple[object, ...]:
    if isinstance(items, (str, Mapping)):
        items = [items]
    if not isinstance(items, (list, tuple)):
        raise InputError(
            "the filter (where) must be a clause such as 'type=md', or a list of clauses (texts or objects "
            "{field, op, value, not}), not " + filters.show(items, 60)
        )
    return filters.parse(items)


def _facets(names: object) -> tuple[str, ...]:
    items = [names] if isinstance(names, str) else list(names or ())  # type: ignore[call-overload]
    if len(items) > MAX_FACETS:
        raise InputError(f"{len(items)} facets asked for; the limit is {MAX_FACETS}")
    out = []
    for name in items:
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"facet {name!r} is not a field name; e.g. type, folder, modified, sender")
        out.append(name.strip().lower())
    return tuple(dict.fromkeys(out))


def _metadata_filter(items: object) -> tuple[tuple[str, str], ...]:
    """(name, value) pairs from a mapping or pairs; names and values must be non-empty strings."""
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items or ())  # type: ignore[call-overload]
    out = []
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise InputError(f"metadata filter {pair!r} is not a (name, value) pair of strings")
        name, value = pair[0].strip().lower(), pair[1].strip()
        if not name or not value:
            raise InputError(f"metadata filter {pair!r} needs a name and a value, e.g. sender=ada@example.org")
        out.append((name, value))
    return tuple(out)


def check_query_length(query: str) -> None:
    """The one check on a query's text: its length cap and valid Unicode (searches, attached collections,
    /v1/rerank)."""
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    check_text(query, "the query")


def check_text(text: str, what: str) -> None:
    """The one rule on text sent to a model: it must be encodable as UTF-8. A lone surrogate (e.g. JSON's
    ``"\\ud800"``) is not text; the tokenizer would fail on it, so it is refused as an InputError naming where."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise InputError(
            f"{what} holds a lone surrogate (U+{ord(bad):04X} at character {exc.start}), which is not valid Unicode "
            "text; send UTF-8 text (escape sequences must come in surrogate pairs)"
        ) from None


def _int_in_range(name: str, value: object, maximum: int, setting: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        shown = value if isinstance(value, (int, float)) else filters.show(value, 40)
        raise InputError(f"{name} must be a whole number in 1..{maximum}, not {shown}")
    if not 1 <= value <= maximum:
        raise InputError(f"{name}={value} is out of range; use 1..{maximum} (the {setting} setting raises the cap)")
    return value


def _resolve_prefix(prefix: str | None) -> str | None:
    if prefix is None or not str(prefix).strip():
        return None
    return str(user_path(str(prefix)))


def _file_types(types: Sequence[str] | str) -> tuple[str, ...]:
    items = [types] if isinstance(types, str) else list(types)
    out = []
    for t in items:
        if not isinstance(t, str) or not t.strip(".").strip():
            raise InputError(f"file type {t!r} is not an extension; use e.g. md, py, pdf")
        out.append(t.strip().lower().lstrip("."))
    return tuple(dict.fromkeys(out))


def run_search(
    req: SearchRequest,
    *,
    collection: str,
    store: VectorStore,
    embedder: Embedder,
    normalization: Normalization,
    reranker: Reranker | None,
    reranker_configured: bool | None = None,
    fusion: FusionConfig | None = None,
    budget: RerankBudget | None = None,
    select: Selector | None = None,
    hidden: Callable[[], frozenset[str]] | None = None,
    committed_only: bool = False,
) -> SearchResult:
    """Run one search. ``reranker`` may be None when the caller skipped loading it because the query asked for no
    rerank; ``reranker_configured`` then says whether one exists (for the note in the result). ``select``
    evaluates the request's filter clauses exactly (the collection's state database); the store then searches
    among the matching points only, so a filter never loses a match to a limited candidate list. ``hidden``
    gives the point ids no search may return (written, not yet committed: a large file mid-write), which the
    store excludes inside its search, filtered or not; ``committed_only`` (a stateless worker, which has no state to
    ask): the store leaves out the points its payload marks as not yet committed."""
    if req.k is None or req.candidates is None:
        raise ValueError("run_search needs a prepared request (indexer.search.query.prepare fills in k and candidates)")
    k, candidates = req.k, req.candidates
    mode = req.mode or "dense"
    configured = reranker is not None if reranker_configured is None else reranker_configured
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    image_ms = 0.0
    if isinstance(req.image, bytes):  # prepared: a path was read by the collection
        # the image is decoded now (a bad one is refused before any filter or store work) and embedded in the
        # embed stage, where the timings count it with its decode (not as search time)
        query_vector = _image_vector(req.image, embedder, normalization)
        image_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
    # a query longer than the model's limit: its dense side embeds the prefix that fits (fit_query)

    where = Filter(req.path_prefix, req.file_types) if (req.path_prefix or req.file_types) else None
    selection = Selection()
    if req.where or req.facets:
        if select is None:
            raise InputError("this search path cannot evaluate filter clauses or facets; use path and type filters")
        selection = select(req)
        timings["filter"] = (time.perf_counter() - t0) * 1000
    if selection.ids is not None:
        where = Filter(req.path_prefix, req.file_types, ids=selection.ids)
    if selection.clauses or committed_only:
        where = replace(where or Filter(), clauses=selection.clauses, kinds=selection.kinds, committed=committed_only)
    unseen = hidden() if hidden is not None else frozenset()
    if unseen:
        where = replace(where, hidden=unseen) if where is not None else Filter(hidden=unseen)
    if where is not None and where.ids is not None and not where.ids:
        hits: list[Hit] = []
    else:
        hits, found = retrieve(
            store,
            collection,
            mode,
            req.query,
            (lambda: query_vector) if req.image is not None else (
                lambda: embedder.embed_batch([fit_query(req.query, embedder)], normalization)[0]),
            candidates,
            where,
            fusion or FusionConfig(),
            keep=selection.keep,
            share=selection.share,
            listing=selection.listing,
        )
        timings.update(found)
    if req.image is not None:
        timings["embed"] = image_ms + timings.get("embed", 0.0)
    t2 = time.perf_counter()
    timings["search"] = (t2 - t0) * 1000

    stage = rerank_stage(
        req.query, [str(h.payload.get("text", "")) for h in hits], reranker, k=k, wanted=req.rerank,
        configured=configured, budget=budget, fixed=req.rerank_candidates,
        pictures=[bool(h.payload.get("media")) for h in hits],
    )
    out = [_to_hit(hits[i], score, req.query) for i, score in zip(stage.order, stage.scores, strict=True)]
    if stage.ran:
        timings["rerank"] = stage.ms
    timings["total"] = (time.perf_counter() - t0) * 1000 + image_ms
    return SearchResult(
        tuple(out), stage.ran, stage.note, timings, mode, stage.count, matched=selection.matched,
        facets=dict(selection.facets), where=tuple(getattr(c, "text", str(c)) for c in req.where),
        filter_note=selection.note,
    )


def fit_query(query: str, embedder: Embedder) -> str:
    """``query`` cut to the model's token limit for the dense side (a pasted paragraph is searched, not refused;
    the lexical side keeps every word): the longest prefix that fits, found by bisection on exact counts."""
    limit = int(embedder.max_tokens or 0)
    if limit <= 0 or embedder.count_tokens(query) <= limit:
        return query
    lo, hi = 0, len(query)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if embedder.count_tokens(query[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    logger.info("the query has more tokens than the model's limit of %d: its first %d characters embedded",
                limit, lo)
    return query[:lo]


def _image_vector(data: bytes, embedder: Embedder, normalization: Normalization) -> np.ndarray:
    """The vector of an image query: prepared exactly as an indexed image is (so an indexed image used as the
    query finds itself with its own vector)."""
    if not embeds_images(embedder):
        raise InputError("this collection's model embeds text only, so it cannot search by image; search with "
                         "words, or re-embed with a multimodal model (`indexer reindex --model <multimodal model>`)")
    try:
        image = prepare_image(data)
    except ImageError as exc:
        raise InputError(f"the query image: {exc.reason}") from None
    vector: np.ndarray = embedder.embed_images([image.data], normalization)[0]
    return vector


def _to_hit(hit: Hit, rerank_score: float | None, query: str) -> SearchHit:
    p = hit.payload
    text = str(p.get("text", ""))
    page = p.get("page")
    heading: Sequence[str] = p.get("heading") or ()
    locator, location = str(p.get("locator") or ""), dict(p.get("location") or {})
    passage, marks = snippet(without_shown_headings(text, locator), query)
    if "range" in location:  # a spreadsheet block: name the rows that matched, and show them
        lines = matched_lines(text, query)
        named = matched_rows(text, location, lines, int(p.get("start_line", 0)))
        if named is not None:
            locator, location = named
            passage, marks = snippet("\n".join(line for i, line in enumerate(text.split("\n")) if i in lines), query)
    return SearchHit(
        path=str(p.get("path", "")),
        score=float(hit.score),
        rerank_score=None if rerank_score is None else float(rerank_score),
        text=text,
        start_line=int(p.get("start_line", 0)),
        end_line=int(p.get("end_line", 0)),
        page=int(page) if page is not None else None,
        heading=tuple(heading),
        chunk_id=hit.id,
        locator=locator,
        location=location,
        metadata=dict(p.get("metadata") or {}),
        snippet=passage,
        marks=tuple(marks),
        media=str(p.get("media") or ""),
        width=_int_or_none(p.get("width")),
        height=_int_or_none(p.get("height")),
    )


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
