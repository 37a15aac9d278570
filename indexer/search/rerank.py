"""The rerank stage: the one place that decides whether candidates are reranked and puts them in order.

Every query path uses it: a collection's search (:func:`indexer.search.query.run_search`) and the Qdrant attach
plugin's search of a foreign collection (through :mod:`indexer.plugin_api`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from indexer.engine.adapters import model_name
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
    count: int = 0  # candidates reranked


MIN_RERANKED = 10  # a budget never reranks fewer candidates than this (or k, if larger)


# The share of the budget the stage plans for: the time per pair varies with the pairs' lengths, so a plan for the
# whole budget lands on it at the median and over it at the tail. Measured (SciFact train, the test reranker,
# 1000 ms, quiet machine): planning for all of it gave p50 990 ms, p95 1243 ms (p95/p50 1.26); 0.8 keeps the p95
# of a whole search (embedding and retrieval included) inside the budget.
HEADROOM = 0.8


class RerankBudget:
    """Sizes the rerank stage so that one search stays inside ``budget_ms``, from the measured time per pair
    (planning for :data:`HEADROOM` of it).

    The pace (milliseconds per candidate pair) is an exponential moving average over the searches so far; before
    the first measurement the stage reranks the floor (``max(MIN_RERANKED, k)``). A fixed ``rerank_candidates``
    (a setting or a request's) always wins: then the stage is deterministic."""

    def __init__(self, budget_ms: float, clock: Callable[[], float] = time.perf_counter, alpha: float = 0.3) -> None:
        self.budget_ms = budget_ms
        self.clock = clock
        self.alpha = alpha
        self.ms_per_pair: float | None = None
        self._lock = threading.Lock()

    def limit(self, k: int, available: int, fixed: int | None = None) -> int:
        """How many of ``available`` candidates to rerank for a top ``k``."""
        if fixed is not None:
            return min(available, max(fixed, k))
        floor = min(available, max(MIN_RERANKED, k))
        if self.budget_ms <= 0:
            return available
        with self._lock:
            pace = self.ms_per_pair
        if pace is None or pace <= 0:
            return floor
        return min(available, max(floor, int(self.budget_ms * HEADROOM / pace)))

    def record(self, pairs: int, ms: float) -> None:
        if pairs <= 0 or ms < 0:
            return
        pace = ms / pairs
        with self._lock:
            old = self.ms_per_pair
            self.ms_per_pair = pace if old is None else old + self.alpha * (pace - old)


def rerank_stage(
    query: str,
    texts: Sequence[str],
    reranker: Reranker | None,
    *,
    k: int,
    wanted: bool | None,
    configured: bool,
    budget: RerankBudget | None = None,
    fixed: int | None = None,
    pictures: Sequence[bool] | None = None,
) -> Reranked:
    """Rerank ``texts`` (the candidates, in retrieval order) for ``query`` and keep the top ``k``.

    ``wanted`` is the request's choice (None: rerank when a reranker is configured); ``reranker`` may be None
    when the caller did not load it because the request asked for no rerank; ``configured`` says whether one
    exists (for the note). Asking for a rerank without a reranker is an InputError naming the setting.

    ``pictures`` marks the candidates that are image points: a text cross-encoder has nothing to read in them,
    so they are never sent to it nor dropped by it. Each keeps its place in the retrieval order (its dense
    rank); the text candidates are reranked among themselves into the other places."""
    if pictures is not None and any(pictures):
        return _around_pictures(query, texts, reranker, k=k, wanted=wanted, configured=configured, budget=budget,
                                fixed=fixed, pictures=pictures)
    want = wanted if wanted is not None else reranker is not None
    if want and reranker is None:
        raise InputError("rerank was requested but no reranker model is configured (set rerank_model)")
    if not want or reranker is None or not texts:
        keep = tuple(range(min(k, len(texts))))
        why = "disabled for this query" if configured else "no reranker model configured"
        return Reranked(keep, (None,) * len(keep), False, f"no rerank stage ran: {why}", 0.0)
    scores, ms = _score(query, texts, reranker, k, budget, fixed)
    n = len(scores)
    ranked = sorted(range(n), key=lambda i: scores[i], reverse=True)[:k]  # n >= min(k, candidates) always
    of = "" if n == len(texts) else f" of {len(texts)}"
    note = f"reranked {n}{of} candidates with {model_name(reranker.model_id)}"
    if budget is not None and fixed is None and n < len(texts):
        note += f" (rerank_budget_ms={budget.budget_ms:g}; measured {budget.ms_per_pair or 0:.1f} ms per pair)"
    return Reranked(
        tuple(ranked),
        tuple(float(scores[i]) for i in ranked),
        True,
        note,
        ms,
        n,
    )


def _around_pictures(
    query: str,
    texts: Sequence[str],
    reranker: Reranker | None,
    *,
    k: int,
    wanted: bool | None,
    configured: bool,
    budget: RerankBudget | None,
    fixed: int | None,
    pictures: Sequence[bool],
) -> Reranked:
    """:func:`rerank_stage` with image candidates held in their retrieval places (see there)."""
    words = [i for i, pic in enumerate(pictures) if not pic]
    inner = rerank_stage(query, [texts[i] for i in words], reranker, k=len(words), wanted=wanted,
                         configured=configured, budget=budget, fixed=fixed)
    if not inner.ran:
        keep = tuple(range(min(k, len(texts))))
        return Reranked(keep, (None,) * len(keep), False, inner.note, 0.0)
    ranked = iter(zip((words[i] for i in inner.order), inner.scores, strict=True))
    order: list[int] = []
    scores: list[float | None] = []
    for i, pic in enumerate(pictures):
        if len(order) == k:
            break
        if pic:
            order.append(i)
            scores.append(None)
            continue
        nxt = next(ranked, None)  # the text candidates past the reranked ones are dropped, as without pictures
        if nxt is not None:
            order.append(nxt[0])
            scores.append(nxt[1])
    n_pics = sum(1 for i in order if pictures[i])
    note = f"{inner.note}; {n_pics} image hit(s) kept in their dense places (no text for the cross-encoder)"
    return Reranked(tuple(order), tuple(scores), True, note, inner.ms, inner.count)


def _score(
    query: str, texts: Sequence[str], reranker: Reranker, k: int, budget: RerankBudget | None, fixed: int | None
) -> tuple[list[float], float]:
    """Rerank scores of the first candidates (as many as the budget allows) and the milliseconds taken. Without a
    measured pace yet, the floor is reranked first, then as many more as the rest of the budget allows at the
    pace just measured (cross-encoder scores are per pair, so the two calls' scores compare)."""
    if budget is None:
        n = min(len(texts), max(fixed, k)) if fixed is not None else len(texts)
        started = time.perf_counter()
        return list(reranker.rerank(query, list(texts[:n]))), (time.perf_counter() - started) * 1000
    first_time = budget.ms_per_pair is None
    n = budget.limit(k, len(texts), fixed)
    started = budget.clock()
    scores = list(reranker.rerank(query, list(texts[:n])))
    ms = (budget.clock() - started) * 1000
    budget.record(n, ms)
    if first_time and fixed is None and budget.budget_ms > 0 and n < len(texts) and budget.ms_per_pair:
        more = min(len(texts), n + int(max(0.0, budget.budget_ms * HEADROOM - ms) / budget.ms_per_pair))
        if more > n:
            again = budget.clock()
            scores += list(reranker.rerank(query, list(texts[n:more])))
            extra_ms = (budget.clock() - again) * 1000
            budget.record(more - n, extra_ms)
            ms += extra_ms
    return scores, ms
