"""The rerank stage: the one place that decides whether candidates are reranked and puts them in order.

Every query path uses it: a collection's search (:func:`indexer.search.query.run_search`) and the Qdrant attach
plugin's search of a foreign collection (through :mod:`indexer.plugin_api`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from indexer.errors import InputError
from indexer.ports import Reranker


@dataclass(frozen=True)
class Reranked:
    """The candidates' new order (indices, best first, at most ``k``) with their rerank scores (None when no
    rerank stage ran: then the order is the retrieval order), and the note a result carries."""

    order: tuple[int, ...]
    scores: tuple[float | None, ...]
    ran: bool
    note: str
    ms: float


def rerank_stage(
    query: str,
    texts: Sequence[str],
    reranker: Reranker | None,
    *,
    k: int,
    wanted: bool | None,
    configured: bool,
) -> Reranked:
    """Rerank ``texts`` (the candidates, in retrieval order) for ``query`` and keep the top ``k``.

    ``wanted`` is the request's choice (None: rerank when a reranker is configured); ``reranker`` may be None
    when the caller did not load it because the request asked for no rerank; ``configured`` says whether one
    exists (for the note). Asking for a rerank without a reranker is an InputError naming the setting."""
    want = wanted if wanted is not None else reranker is not None
    if want and reranker is None:
        raise InputError("rerank was requested but no reranker model is configured (set rerank_model)")
    if not want or reranker is None or not texts:
        keep = tuple(range(min(k, len(texts))))
        why = "disabled for this query" if configured else "no reranker model configured"
        return Reranked(keep, (None,) * len(keep), False, f"no rerank stage ran: {why}", 0.0)
    started = time.perf_counter()
    scores = reranker.rerank(query, list(texts))
    ranked = sorted(range(len(texts)), key=lambda i: scores[i], reverse=True)[:k]
    return Reranked(
        tuple(ranked),
        tuple(float(scores[i]) for i in ranked),
        True,
        f"reranked {len(texts)} candidates with {reranker.model_id}",
        (time.perf_counter() - started) * 1000,
    )
