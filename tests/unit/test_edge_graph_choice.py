"""When embedded Qdrant builds a denser HNSW graph (plugins/qdrant/edge_recall.graph_reason): the floor missed, or
met only at a beam that costs more than GRAPH_SPEED_SHARE of the latency budget; a speed step after another only
when the last one paid. The figures are 2026-12-06's 1M SciFact-derived run (m 16: the floor at hnsw_ef 2048,
4.36 ms median)."""

from __future__ import annotations

from indexer.plugin_api import RecallEstimate
from plugins.qdrant.edge_recall import GRAPH_SPEED_SHARE, graph_reason

FLOOR, BUDGET, DEFAULT_EF = 0.97, 5.0, 128


def tuned(recall: float, ef: int, ms: float) -> RecallEstimate:
    return RecallEstimate(recall, 100, 10, "hnsw_ef", ef, 2, "tuned", 1_000_000, ms)


def test_a_missed_floor_asks_for_a_denser_graph_whatever_the_time():
    assert graph_reason(tuned(0.947, 2048, 4.9), FLOOR, BUDGET, DEFAULT_EF, None) == "recall"
    after_speed = {"for": "speed", "latency_ms": 0.4}
    assert graph_reason(tuned(0.9, 128, 0.5), FLOOR, BUDGET, DEFAULT_EF, after_speed) == "recall"


def test_the_floor_met_only_with_a_costly_beam_asks_for_a_denser_graph_for_speed():
    assert GRAPH_SPEED_SHARE * BUDGET == 3.0  # the goal for embedded Qdrant at the default budget
    assert graph_reason(tuned(0.981, 2048, 4.36), FLOOR, BUDGET, DEFAULT_EF, None) == "speed"
    assert graph_reason(tuned(0.981, 2048, 2.9), FLOOR, BUDGET, DEFAULT_EF, None) is None  # within the share
    # at the default beam a slow median is the machine (load, a tiny collection's exact scan), not the graph
    assert graph_reason(tuned(0.99, DEFAULT_EF, 4.0), FLOOR, BUDGET, DEFAULT_EF, None) is None
    # a recall step before: its time was not at the floor, so a first speed step is taken
    assert graph_reason(tuned(0.98, 1024, 3.5), FLOOR, BUDGET, DEFAULT_EF, {"for": "recall", "latency_ms": 3.0}) \
        == "speed"


def test_another_speed_step_only_when_the_last_one_paid():
    before = {"for": "speed", "latency_ms": 4.36}
    assert graph_reason(tuned(0.98, 1024, 3.2), FLOOR, BUDGET, DEFAULT_EF, before) == "speed"  # 27 % faster
    assert graph_reason(tuned(0.98, 1024, 4.0), FLOOR, BUDGET, DEFAULT_EF, before) is None  # 8 %: stop there
    assert graph_reason(tuned(0.98, 1024, 3.2), FLOOR, BUDGET, DEFAULT_EF, {"for": "speed"}) == "speed"  # older record
