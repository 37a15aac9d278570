"""Query path: embed the query -> store.search(candidates, filters) -> rerank -> top k."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from indexer.errors import InputError
from indexer.normalization import Normalization
from indexer.ports import Embedder, Reranker, VectorStore
from indexer.types import Filter, Hit, SearchHit

MAX_QUERY_CHARS = 4096


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int = 10
    candidates: int = 50
    path_glob: str | None = None
    path_prefix: str | None = None
    file_types: tuple[str, ...] = ()
    rerank: bool | None = None  # None: rerank when a reranker is configured


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    reranked: bool
    rerank_note: str  # why no rerank stage ran, or which model ranked
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "hits": [h.to_dict() for h in self.hits],
            "reranked": self.reranked,
            "rerank_note": self.rerank_note,
            "timings_ms": self.timings_ms,
        }


def validate(req: SearchRequest, *, max_k: int, max_candidates: int) -> SearchRequest:
    query = req.query.strip()
    if not query:
        raise InputError("the query is empty; pass some words to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    if not 1 <= req.k <= max_k:
        raise InputError(f"k={req.k} is out of range; use 1..{max_k} (max_top_k setting)")
    if not 1 <= req.candidates <= max_candidates:
        raise InputError(f"candidates={req.candidates} is out of range; use 1..{max_candidates} (max_candidates)")
    candidates = max(req.candidates, req.k)
    return SearchRequest(query, req.k, candidates, req.path_glob, req.path_prefix, req.file_types, req.rerank)


def run_search(
    req: SearchRequest,
    *,
    collection: str,
    store: VectorStore,
    embedder: Embedder,
    normalization: Normalization,
    reranker: Reranker | None,
    reranker_configured: bool | None = None,
) -> SearchResult:
    """Run one search. ``reranker`` may be None when the caller skipped loading it because the query asked for no
    rerank; ``reranker_configured`` then says whether one exists (for the note in the result)."""
    configured = reranker is not None if reranker_configured is None else reranker_configured
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if embedder.count_tokens(req.query) > embedder.max_tokens:
        raise InputError(f"the query is longer than the model's {embedder.max_tokens} tokens; shorten it")
    vector = embedder.embed_batch([req.query], normalization)[0]
    t1 = time.perf_counter()
    timings["embed"] = (t1 - t0) * 1000

    where = Filter(req.path_prefix, req.file_types) if (req.path_prefix or req.file_types) else None
    # A glob is applied after the store search; fetch more so k matching hits survive it.
    limit = req.candidates * (4 if req.path_glob else 1)
    hits = store.search(collection, vector, limit, where)
    if req.path_glob:
        hits = [h for h in hits if _glob_match(h, req.path_glob)][: req.candidates]
    t2 = time.perf_counter()
    timings["search"] = (t2 - t1) * 1000

    want_rerank = req.rerank if req.rerank is not None else reranker is not None
    if want_rerank and reranker is None:
        raise InputError("rerank was requested but no reranker model is configured (set rerank_model)")
    if want_rerank and reranker is not None and hits:
        scores = reranker.rerank(req.query, [str(h.payload.get("text", "")) for h in hits])
        ranked = sorted(zip(hits, scores, strict=True), key=lambda pair: pair[1], reverse=True)
        out = [_to_hit(h, s) for h, s in ranked[: req.k]]
        timings["rerank"] = (time.perf_counter() - t2) * 1000
        note = f"reranked {len(hits)} candidates with {reranker.model_id}"
    else:
        out = [_to_hit(h, None) for h in hits[: req.k]]
        note = "no rerank stage ran: " + ("disabled for this query" if configured else "no reranker model configured")
    timings["total"] = (time.perf_counter() - t0) * 1000
    return SearchResult(tuple(out), bool(want_rerank and reranker and hits), note, timings)


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
