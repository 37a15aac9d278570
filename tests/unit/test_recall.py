"""The pure parts of recall that holds (indexer/search/recall.py): the estimate, the values tried, the tuning rule,
the schedule and the one warning; and how status and /metrics show an estimate."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.cli.status_view import lines
from indexer.search import recall
from indexer.server.metrics import Metrics
from indexer.types import Point, RecallEstimate
from plugins.faiss import FaissStore


def test_recall_at_k_counts_found_ids_and_ties_with_the_kth_exact_score():
    exact = [[("a", 0.9), ("b", 0.8), ("c", 0.7)]]
    assert recall.recall_at_k([[("a", 0.9), ("b", 0.8), ("c", 0.7)]], exact, k=3) == 1.0
    assert recall.recall_at_k([[("a", 0.9), ("x", 0.5), ("y", 0.4)]], exact, k=3) == pytest.approx(1 / 3)
    # "d" is not among the exact ids but ties the third exact score: a near-duplicate of "c", a right answer
    assert recall.recall_at_k([[("a", 0.9), ("b", 0.8), ("d", 0.7)]], exact, k=3) == 1.0
    # queries with no exact neighbour are skipped; none at all reads as 1.0
    assert recall.recall_at_k([[], [("a", 1.0)]], [[], [("b", 1.0), ("c", 0.5)]], k=2) == 0.5
    assert recall.recall_at_k([], [], k=10) == 1.0


def test_steps_and_ladder_double_up_to_their_caps():
    assert recall.steps(64, 1000) == [64, 128, 256, 512, 1000]
    assert recall.steps(128, 128) == [128]
    assert recall.ladder(64, 256, 1, 4) == [(64, 1), (64, 2), (128, 2), (128, 4), (256, 4)]
    assert recall.ladder(128, 512, 2, 2) == [(128, 2), (256, 2), (512, 2)]
    assert recall.ladder(128, 128, 2, 16) == [(128, 2), (128, 4), (128, 8), (128, 16)]


def test_tune_stops_at_the_first_value_that_meets_the_floor():
    seen = []

    def measure(v):
        seen.append(v)
        return {1: 0.80, 2: 0.95, 4: 0.975, 8: 0.99}[v], 1.0

    chosen, trials = recall.tune(measure, [1, 2, 4, 8], floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == 4 and chosen.recall == 0.975 and seen == [1, 2, 4] and len(trials) == 3


def test_tune_keeps_the_last_value_within_the_latency_budget():
    timing = {1: (0.8, 1.0), 2: (0.9, 3.0), 4: (0.99, 9.0)}
    chosen, trials = recall.tune(lambda v: timing[v], [1, 2, 4], floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == 2 and [t.value for t in trials] == [1, 2, 4]
    # even the first over budget: it is kept (the default is never lowered)
    chosen, _ = recall.tune(lambda v: (0.5, 50.0), [1, 2], floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == 1
    # none meets the floor within the budget: the last tried
    chosen, _ = recall.tune(lambda v: (0.5, 1.0), [1, 2, 3], floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == 3


def test_sample_rows_are_distinct_sorted_and_repeatable():
    rows = recall.sample_rows(1000, 50)
    assert len(set(rows.tolist())) == 50 and list(rows) == sorted(rows) and (rows == recall.sample_rows(1000, 50)).all()
    assert recall.sample_rows(10, 50).tolist() == list(range(10))


def _estimate(value: float, source: str = "tuned") -> RecallEstimate:
    return RecallEstimate(value, 50, 10, "nprobe", 64, 2, source, 200_000, 0.5, time.time())


def test_a_drop_below_the_floor_is_said_once(caplog):
    watch = recall.RecallWatch()
    with caplog.at_level(logging.WARNING, logger="indexer.search.recall"):
        assert watch.say("c", _estimate(0.93))
        assert not watch.say("c", _estimate(0.92))  # still below: said already
        assert not watch.say("c", _estimate(0.99))  # back above
        assert watch.say("c", _estimate(0.95))  # a new drop is said again
    assert sum("below the floor" in r.message for r in caplog.records) == 2
    assert not watch.say("d", RecallEstimate(1.0, 0, points=10))  # exact search: never below


def _small_store(tmp_path: Path) -> FaissStore:
    store = FaissStore(tmp_path / "faiss")
    store.ensure_collection("c", 8, {})
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((30, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.upsert("c", [Point(str(uuid.UUID(int=i + 1)), v, {}) for i, v in enumerate(vectors)])
    return store


def test_the_watch_measures_after_a_write_at_most_once_per_interval(tmp_path: Path):
    store = _small_store(tmp_path)
    try:
        watch = recall.RecallWatch(interval=600)
        assert watch.after_write(store, "c", now=1000.0)
        watch.wait(30)
        estimate = store.recall_estimate("c")
        assert estimate is not None and estimate.exact and estimate.recall == 1.0 and estimate.points == 30
        assert not watch.after_write(store, "c", now=1100.0)  # within the interval
        assert watch.after_write(store, "c", now=1700.0)
        watch.wait(30)
    finally:
        store.close()


def test_status_text_and_metrics_show_the_estimate_with_its_sample():
    estimate = _estimate(0.912)
    info = {
        "collection": "c", "files": 1, "chunks": 1, "tokens": 1, "points": 1, "health": {"ok": True},
        "model": "m", "dimensions": 8, "metric": "cosine", "normalization": "unit", "store": "faiss",
        "recall": {"estimate": estimate.to_dict(), "floor": 0.97, "below_floor": True,
                   "text": recall.describe(estimate, 0.97)},
    }
    rows = dict(lines(info))
    assert "0.912 recall@10 on 50 sampled queries" in rows["recall"] and "BELOW the floor 0.97" in rows["recall"]
    assert "nprobe 64, rescoring 2 x k (tuned)" in rows["recall"]
    assert "exact search" in recall.describe(RecallEstimate(1.0, 0, points=12), 0.97)
    metrics = Metrics(lambda: 0.0)
    metrics.observe_status(info)
    text = metrics.render().decode()
    assert 'indexer_recall_estimate{collection="c"} 0.912' in text
    assert 'indexer_recall_sample_queries{collection="c"} 50.0' in text
    assert 'indexer_recall_below_floor{collection="c"} 1.0' in text
