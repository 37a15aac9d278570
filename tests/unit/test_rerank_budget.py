"""The rerank stage's latency budget: candidates sized from the measured time per pair (fake clock and a fake
reranker: our own logic), a floor of max(10, k), and a fixed count that always wins."""

from __future__ import annotations

import pytest

from indexer.errors import InputError
from indexer.search.query import QueryLimits, prepare
from indexer.search.rerank import HEADROOM, MIN_RERANKED, RerankBudget, rerank_stage
from indexer.types import SearchRequest


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowReranker:
    """Scores a text by its number; each pair costs ``ms_per_pair`` on the fake clock."""

    model_id = "fake-reranker"

    def __init__(self, clock: Clock, ms_per_pair: float) -> None:
        self.clock, self.ms_per_pair, self.calls = clock, ms_per_pair, []

    def rerank(self, query: str, texts: list[str]) -> list[float]:
        self.calls.append(len(texts))
        self.clock.now += len(texts) * self.ms_per_pair / 1000
        return [float(t.split()[-1]) for t in texts]


TEXTS = [f"candidate {i}" for i in range(50)]  # the later a candidate, the higher its true score


def test_the_first_search_reranks_the_floor_then_fills_the_budget_at_the_measured_pace():
    clock = Clock()
    rr = SlowReranker(clock, ms_per_pair=40.0)
    budget = RerankBudget(1000.0, clock=clock)
    stage = rerank_stage("q", TEXTS, rr, k=5, wanted=None, configured=True, budget=budget)
    assert HEADROOM == 0.8  # the stage plans for 800 ms of the 1000 (the tail of pair times needs the rest)
    assert rr.calls == [MIN_RERANKED, 10]  # 10 pairs took 400 ms: 400 ms of the plan left = 10 more
    assert stage.count == 20 and stage.ms == pytest.approx(800.0)
    assert stage.order == (19, 18, 17, 16, 15) and stage.scores[0] == 19.0
    assert "reranked 20 of 50" in stage.note and "rerank_budget_ms=1000" in stage.note
    # the next search sizes itself from the pace at once, and stays inside the budget
    rr.calls.clear()
    stage = rerank_stage("q", TEXTS, rr, k=5, wanted=None, configured=True, budget=budget)
    assert rr.calls == [20] and stage.ms <= 1000.0 * HEADROOM


def test_a_slower_reranker_gets_fewer_candidates_but_never_fewer_than_the_floor():
    clock = Clock()
    budget = RerankBudget(1000.0, clock=clock)
    rerank_stage("q", TEXTS, SlowReranker(clock, 500.0), k=5, wanted=None, configured=True, budget=budget)
    rr = SlowReranker(clock, 500.0)
    stage = rerank_stage("q", TEXTS, rr, k=12, wanted=None, configured=True, budget=budget)
    assert rr.calls == [12] and stage.count == 12  # the floor is max(10, k)


def test_a_fast_reranker_reranks_every_candidate():
    clock = Clock()
    budget = RerankBudget(1000.0, clock=clock)
    rr = SlowReranker(clock, 1.0)
    stage = rerank_stage("q", TEXTS, rr, k=10, wanted=None, configured=True, budget=budget)
    assert sum(rr.calls) == 50 and stage.count == 50 and "rerank_budget_ms" not in stage.note
    assert stage.note == "reranked 50 candidates with fake-reranker"


def test_a_fixed_count_always_wins_and_is_deterministic():
    clock = Clock()
    budget = RerankBudget(1000.0, clock=clock)
    for _ in range(3):
        rr = SlowReranker(clock, 400.0)  # the budget would allow 2; fixed says 30
        stage = rerank_stage("q", TEXTS, rr, k=5, wanted=None, configured=True, budget=budget, fixed=30)
        assert rr.calls == [30] and stage.order[0] == 29


def test_a_zero_budget_reranks_all():
    clock = Clock()
    rr = SlowReranker(clock, 400.0)
    stage = rerank_stage("q", TEXTS, rr, k=5, wanted=None, configured=True, budget=RerankBudget(0, clock=clock))
    assert rr.calls == [50] and stage.count == 50


def test_the_top_k_is_always_reranked_whole():
    clock = Clock()
    rr = SlowReranker(clock, 1.0)
    stage = rerank_stage("q", TEXTS[:30], rr, k=20, wanted=None, configured=True, fixed=12)
    assert rr.calls == [20] and stage.order == tuple(range(19, -1, -1))  # a fixed count below k reranks k
    assert None not in stage.scores


def test_rerank_candidates_is_validated_and_defaults_from_the_settings():
    limits = QueryLimits(max_candidates=200, rerank_candidates=40)
    assert prepare(SearchRequest("q"), limits).rerank_candidates == 40
    assert prepare(SearchRequest("q", rerank_candidates=7), limits).rerank_candidates == 7
    with pytest.raises(InputError, match="rerank_candidates"):
        prepare(SearchRequest("q", rerank_candidates=0), limits)
    with pytest.raises(InputError, match="rerank_candidates"):
        prepare(SearchRequest("q", rerank_candidates=500), limits)
