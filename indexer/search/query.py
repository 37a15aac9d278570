"""Query path: dense, lexical or hybrid retrieval (indexer.search.fusion) of the candidates -> rerank -> top k."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from indexer.core.normalization import Normalization
from indexer.errors import InputError
from indexer.ports import Embedder, Reranker, VectorStore
from indexer.search.fusion import MODES, FusionConfig, retrieve
from indexer.types import Filter, Hit, SearchHit

MAX_QUERY_CHARS = 4096


__all__ = ["MODES", "QueryLimits", "SearchRequest", "SearchResult", "prepare", "run_search"]


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

    @classmethod
    def from_options(cls, query: str, **options: Any) -> SearchRequest:
        """Build a request from keyword options, refusing unknown names with the valid ones."""
        known = {f.name for f in fields(cls)} - {"query"}
        unknown = sorted(set(options) - known)
        if unknown:
            valid = ", ".join(sorted(known))
            raise InputError(f"unknown search option(s) {', '.join(unknown)}; valid options: {valid}")
        return cls(query=query, **options)


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    reranked: bool
    rerank_note: str  # why no rerank stage ran, or which model ranked
    timings_ms: dict[str, float] = field(default_factory=dict)
    mode: str = "dense"

    def to_dict(self) -> dict[str, object]:
        return {
            "hits": [h.to_dict() for h in self.hits],
            "reranked": self.reranked,
            "rerank_note": self.rerank_note,
            "mode": self.mode,
            "timings_ms": self.timings_ms,
        }


@dataclass(frozen=True)
class QueryLimits:
    """The configured defaults and caps a request is prepared against (from Settings)."""

    top_k: int = 10
    candidates: int = 50
    max_top_k: int = 100
    max_candidates: int = 200
    mode: str = "dense"


def prepare(req: SearchRequest, limits: QueryLimits) -> SearchRequest:
    """Apply defaults and validate; every violation is an InputError naming the valid range."""
    if not isinstance(req.query, str):
        raise InputError(f"the query must be text, not {type(req.query).__name__}")
    query = req.query.strip()
    if not query:
        raise InputError("the query is empty; pass some words to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    k = _int_in_range("k", limits.top_k if req.k is None else req.k, limits.max_top_k, "max_top_k")
    candidates = _int_in_range(
        "candidates", limits.candidates if req.candidates is None else req.candidates, limits.max_candidates,
        "max_candidates",
    )
    mode = (req.mode or limits.mode).lower()
    if mode not in MODES:
        raise InputError(f"unknown search mode {req.mode!r}; use one of {', '.join(MODES)}")
    if req.rerank is not None and not isinstance(req.rerank, bool):
        raise InputError(f"rerank must be true, false or unset, not {req.rerank!r}")
    glob = req.path_glob.strip() if req.path_glob else None
    return SearchRequest(
        query=query,
        k=k,
        candidates=max(candidates, k),
        path_prefix=_resolve_prefix(req.path_prefix),
        path_glob=glob or None,
        file_types=_file_types(req.file_types),
        rerank=req.rerank,
        mode=mode,
    )


def _int_in_range(name: str, value: object, maximum: int, setting: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name} must be a whole number in 1..{maximum}, not {value!r}")
    if not 1 <= value <= maximum:
        raise InputError(f"{name}={value} is out of range; use 1..{maximum} (the {setting} setting raises the cap)")
    return value


def _resolve_prefix(prefix: str | None) -> str | None:
    if prefix is None or not str(prefix).strip():
        return None
    return str(Path(str(prefix)).expanduser().resolve())


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
) -> SearchResult:
    """Run one search. ``reranker`` may be None when the caller skipped loading it because the query asked for no
    rerank; ``reranker_configured`` then says whether one exists (for the note in the result)."""
    if req.k is None or req.candidates is None:
        raise ValueError("run_search needs a prepared request (indexer.search.query.prepare fills in k and candidates)")
    k, candidates = req.k, req.candidates
    mode = req.mode or "dense"
    configured = reranker is not None if reranker_configured is None else reranker_configured
    t0 = time.perf_counter()
    if mode != "lexical" and embedder.count_tokens(req.query) > embedder.max_tokens:
        raise InputError(f"the query is longer than the model's {embedder.max_tokens} tokens; shorten it")

    where = Filter(req.path_prefix, req.file_types) if (req.path_prefix or req.file_types) else None
    # A glob is applied after the store search; fetch more so k matching hits survive it.
    limit = candidates * (4 if req.path_glob else 1)
    hits, timings = retrieve(
        store,
        collection,
        mode,
        req.query,
        lambda: embedder.embed_batch([req.query], normalization)[0],
        limit,
        where,
        fusion or FusionConfig(),
    )
    if req.path_glob:
        hits = [h for h in hits if _glob_match(h, req.path_glob)][:candidates]
    t2 = time.perf_counter()
    timings["search"] = (t2 - t0) * 1000

    want_rerank = req.rerank if req.rerank is not None else reranker is not None
    if want_rerank and reranker is None:
        raise InputError("rerank was requested but no reranker model is configured (set rerank_model)")
    if want_rerank and reranker is not None and hits:
        scores = reranker.rerank(req.query, [str(h.payload.get("text", "")) for h in hits])
        ranked = sorted(zip(hits, scores, strict=True), key=lambda pair: pair[1], reverse=True)
        out = [_to_hit(h, s) for h, s in ranked[:k]]
        timings["rerank"] = (time.perf_counter() - t2) * 1000
        note = f"reranked {len(hits)} candidates with {reranker.model_id}"
    else:
        out = [_to_hit(h, None) for h in hits[:k]]
        note = "no rerank stage ran: " + ("disabled for this query" if configured else "no reranker model configured")
    timings["total"] = (time.perf_counter() - t0) * 1000
    return SearchResult(tuple(out), bool(want_rerank and reranker and hits), note, timings, mode)


def _glob_match(hit: Hit, pattern: str) -> bool:
    path = str(hit.payload.get("path", ""))
    rel = str(hit.payload.get("rel_path", ""))
    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(rel, pattern)


def _to_hit(hit: Hit, rerank_score: float | None) -> SearchHit:
    p = hit.payload
    page = p.get("page")
    heading: Sequence[str] = p.get("heading") or ()
    return SearchHit(
        path=str(p.get("path", "")),
        score=float(hit.score),
        rerank_score=None if rerank_score is None else float(rerank_score),
        text=str(p.get("text", "")),
        start_line=int(p.get("start_line", 0)),
        end_line=int(p.get("end_line", 0)),
        page=int(page) if page is not None else None,
        heading=tuple(heading),
        chunk_id=hit.id,
    )
