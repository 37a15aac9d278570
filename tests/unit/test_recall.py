"""The pure parts of recall that holds (indexer/search/recall.py): the estimate, the values tried, the tuning rule,
the schedule and the one warning; and how status and /metrics show an estimate."""

from __future__ import annotations

import json
import logging
import threading
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


def test_climb_follows_the_lever_that_pays_per_millisecond():
    # boilerplate on FAISS (measured): rescoring gains nothing, nprobe does; the climb never doubles the depth twice
    def lists_lose(at):
        nprobe, depth = at
        found = float(np.interp(nprobe, [64, 128, 192, 256, 512], [0.88, 0.94, 0.962, 0.977, 0.99]))
        return found + 0.001 * (depth > 1), nprobe / 256 + 0.05 * depth

    chosen, trials = recall.climb(lists_lose, (64, 1), (4096, 16), floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == (256, 1) and chosen.recall == pytest.approx(0.977)  # 192 and 224 between fall short
    assert [t.value for t in trials] == [(64, 1), (128, 1), (64, 2), (256, 1), (128, 2), (192, 1), (224, 1)]

    # the mailbox set: the codes lose the neighbours, so the rescoring depth is the cheap lever
    def codes_lose(at):
        nprobe, depth = at
        return min(0.99, 0.90 + 0.04 * (depth.bit_length() - 1) + 0.001 * (nprobe // 64)), 0.5 * nprobe / 64
    chosen, trials = recall.climb(codes_lose, (64, 1), (4096, 16), floor=0.97, latency_budget_ms=5.0)
    assert chosen.value == (64, 4) and all(t.value[0] <= 128 for t in trials)


def test_climb_takes_a_step_that_gains_recall_at_no_more_time_before_the_one_that_pays_most_per_millisecond():
    # the boilerplate million on FAISS's pq lists (measured, AMD EPYC Zen 3): the grouped list order (third lever,
    # 1 -> 2) gains a little recall and costs no time; nprobe gains more per millisecond but is not free
    def boilerplate(at):
        nprobe, depth, order = at
        found = float(np.interp(nprobe, [64, 128, 256, 384, 512], [0.79, 0.88, 0.94, 0.968, 0.978]))
        found = min(found + 0.005 * (order - 1) * (nprobe > 64), 0.995)
        return found, nprobe / 256 + 0.6 * depth - 0.3 * (order - 1), 0.005

    chosen, trials = recall.climb(boilerplate, (64, 2, 1), (4096, 16, 2), 0.97, 5.0)
    assert [t.value for t in trials][:4] == [(64, 2, 1), (128, 2, 1), (64, 4, 1), (64, 2, 2)]
    assert chosen.value[2] == 2, trials  # the free step taken, and kept to the end
    # between 256 and 512: 384 falls short (0.973 - 0.005), 448 meets it sooner (0.978 - 0.005), so does 416
    # (0.9755 - 0.005); 400 is within an eighth of 416: not measured
    assert chosen.value == (416, 2, 2) and chosen.recall == pytest.approx(0.9755)
    assert [t.value for t in trials][-3:] == [(384, 2, 2), (448, 2, 2), (416, 2, 2)]
    # a step with the same gain that costs time is weighed per millisecond as before: nprobe first
    costly = {(64, 1, 1): (0.80, 1.0), (128, 1, 1): (0.90, 1.5), (64, 2, 1): (0.80, 1.6), (64, 1, 2): (0.81, 1.2),
              (256, 1, 1): (0.975, 2.0), (128, 2, 1): (0.90, 2.1), (128, 1, 2): (0.91, 1.7), (192, 1, 1): (0.96, 1.8),
              (224, 1, 1): (0.972, 1.9), (208, 1, 1): (0.965, 1.85)}
    chosen, trials = recall.climb(lambda at: costly[at], (64, 1, 1), (4096, 16, 2), 0.97, 5.0)
    assert chosen.value == (224, 1, 1) and (64, 1, 2) in [t.value for t in trials]


def test_climb_asks_the_estimate_less_its_standard_error_to_meet_the_floor():
    assert recall.estimate([[("a", 1.0)], [("x", 0.1)]], [[("a", 1.0)], [("b", 0.9)]], k=1) == (0.5, 0.5)
    assert recall.estimate([], [], k=10) == (1.0, 0.0)
    # 0.975 +- 0.015 may well be below 0.97 for other queries: one more step (0.99 +- 0.005) is taken
    table = {(64, 1): (0.90, 1.0, 0.03), (128, 1): (0.975, 1.5, 0.015), (64, 2): (0.91, 1.4, 0.03),
             (256, 1): (0.99, 2.0, 0.005), (128, 2): (0.976, 2.0, 0.015), (192, 1): (0.98, 1.75, 0.012),
             (224, 1): (0.982, 1.9, 0.013)}  # (the values between: short of the floor less their error)
    chosen, _ = recall.climb(lambda at: table[at], (64, 1), (256, 2), 0.97, 5.0)
    assert chosen.value == (256, 1) and chosen.error == 0.005


def test_climb_takes_the_value_halfway_back_when_it_meets_the_floor_sooner():
    # the mailbox at 1M on FAISS (measured, AMD EPYC Zen 3, int8 codes): nprobe 64 0.968 +- 0.015, 128 0.990 +-
    # 0.010 at +0.76 ms; the doubling may overshoot: 96 at 0.984 +- 0.012 would meet the floor sooner and be kept
    table = {(64, 2): (0.968, 1.08, 0.015), (128, 2): (0.990, 1.84, 0.010), (64, 4): (0.968, 1.29, 0.015),
             (96, 2): (0.984, 1.46, 0.012), (80, 2): (0.975, 1.27, 0.014), (88, 2): (0.980, 1.37, 0.012)}
    chosen, trials = recall.climb(lambda at: table[at], (64, 2), (4096, 16), 0.97, 5.0)
    # bisected while the gap is over an eighth of the value that meets: 80 and 88 fall short, 92 is not measured
    assert chosen.value == (96, 2) and [t.value for t in trials][-3:] == [(96, 2), (80, 2), (88, 2)]
    # halfway back below the floor less its error (as measured there: 0.977 +- 0.014): the bisection goes on above
    # it, and keeps 112, which meets it sooner than 128
    table[(96, 2)] = (0.977, 1.41, 0.014)
    table[(112, 2)], table[(104, 2)] = (0.985, 1.65, 0.011), (0.981, 1.55, 0.012)
    chosen, trials = recall.climb(lambda at: table[at], (64, 2), (4096, 16), 0.97, 5.0)
    assert chosen.value == (112, 2) and [t.value for t in trials][-3:] == [(96, 2), (112, 2), (104, 2)]
    # a value between that meets the floor no sooner ends the search: the doubled value stays
    table[(96, 2)] = (0.984, 1.9, 0.012)
    assert recall.climb(lambda at: table[at], (64, 2), (4096, 16), 0.97, 5.0)[0].value == (128, 2)
    # the rescoring depth 2 -> 4 has 3 between; 1 -> 2 has nothing between (no extra trial)
    table = {(64, 2): (0.95, 1.0, 0.01), (128, 2): (0.95, 2.0, 0.01), (64, 4): (0.99, 1.3, 0.005),
             (64, 3): (0.985, 1.15, 0.008)}
    assert recall.climb(lambda at: table[at], (64, 2), (4096, 16), 0.97, 5.0)[0].value == (64, 3)
    table = {(64, 1): (0.95, 1.0, 0.01), (128, 1): (0.95, 2.0, 0.01), (64, 2): (0.99, 1.3, 0.005)}
    chosen, trials = recall.climb(lambda at: table[at], (64, 1), (4096, 16), 0.97, 5.0)
    assert chosen.value == (64, 2) and len(trials) == 3


def test_climb_stops_at_the_budget_and_the_caps():
    # every next step over the budget: the last value taken (not a faster one that was never better)
    chosen, trials = recall.climb(lambda at: (0.5 + 0.01 * at[0], float(at[0])), (1, 1), (64, 1), 0.97, 5.0)
    assert chosen.value == (4, 1) and trials[-1].value == (8, 1)
    # the start over the budget is kept (a default is never lowered); at the caps: the last value
    assert recall.climb(lambda at: (0.5, 50.0), (64, 2), (4096, 16), 0.97, 5.0)[0].value == (64, 2)
    chosen, _ = recall.climb(lambda at: (0.5 + 0.1 * at[0], 1.0), (1, 1), (2, 1), 0.97, 5.0)
    assert chosen.value == (2, 1)
    # no lever gains: the first (the wider search) is raised up to its cap; the other, gaining nothing, never
    chosen, trials = recall.climb(lambda at: (0.5, 1.0), (1, 1), (4, 4), 0.97, 5.0)
    assert [t.value for t in trials] == [(1, 1), (2, 1), (1, 2), (4, 1), (2, 2), (4, 2)]
    assert chosen.value == (4, 1)
    # boilerplate at 1M on embedded Qdrant (measured): the wider beam is over the budget and the only step within
    # it (oversampling) gains nothing: the climb stays put instead of paying for oversampling 16 for nothing
    table = {(2048, 2): (0.947, 3.73), (4096, 2): (0.964, 6.7), (2048, 4): (0.947, 3.9)}
    chosen, trials = recall.climb(lambda at: table[at], (2048, 2), (8192, 16), 0.97, 5.0)
    assert chosen.value == (2048, 2) and [t.value for t in trials] == [(2048, 2), (4096, 2), (2048, 4)]
    # the fastest of two steps that both meet the floor
    chosen, _ = recall.climb(lambda at: (0.5 if at == (1, 1) else 0.98, float(at[0] + 3 * at[1])), (1, 1), (8, 8))
    assert chosen.value == (2, 1)


def test_climb_keeps_the_fastest_value_within_noise_of_the_best_when_the_floor_is_not_met():
    # versions at 1M on FAISS (measured, AMD EPYC Zen 3): the estimate plateaus below the floor less its error;
    # the climb went on to 128 / 4 (+0.004 for +1.3 ms) and kept it; 64 / 2 is as good within the sample's noise
    table = {(64, 1): (0.887, 1.52, 0.017), (128, 1): (0.887, 2.76, 0.017), (64, 2): (0.970, 1.69, 0.015),
             (128, 2): (0.971, 2.88, 0.015), (64, 4): (0.973, 1.79, 0.015), (128, 4): (0.974, 2.99, 0.015),
             (64, 8): (0.973, 2.01, 0.015), (256, 4): (0.974, 5.40, 0.015), (128, 8): (0.974, 3.26, 0.015)}
    chosen, trials = recall.climb(lambda at: table[at], (64, 1), (4096, 16), 0.97, 5.0)
    assert chosen.value == (64, 2) and (128, 4) in [t.value for t in trials]
    # a real gain (more than the noise) is still paid for: boilerplate, 256 / 2 over 256 / 1 is noise, 512 is not
    table = {(64, 1): (0.789, 1.09), (128, 1): (0.864, 2.31), (64, 2): (0.792, 1.39), (256, 1): (0.935, 4.17),
             (128, 2): (0.867, 2.65), (512, 1): (0.972, 7.86), (256, 2): (0.939, 4.75),
             (512, 2): (0.977, 8.19), (256, 4): (0.939, 4.77)}
    chosen, _ = recall.climb(lambda at: table[at], (64, 1), (4096, 16), 0.97, 5.0)
    assert chosen.value == (256, 1)
    table[(256, 2)] = (0.95, 4.75)
    assert recall.climb(lambda at: table[at], (64, 1), (4096, 16), 0.97, 5.0)[0].value == (256, 2)


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


def test_below_the_floor_says_what_stopped_it_and_what_to_do(caplog):
    """Status and the warning name the cause of a recall below the floor and the setting that changes it."""
    fixed = RecallEstimate(0.9, 50, 10, "hnsw_ef", 256, None, "setting", 10**6, 1.2, time.time())
    assert "hnsw_ef is set (qdrant_hnsw_ef = 256): raise it, or unset it" in recall.describe(fixed, 0.97)
    off = RecallEstimate(0.9, 50, 10, "efSearch", 64, None, "default", 10**6, 0.4, time.time())
    assert "the tuning is off (recall_tuning = false): turn it on to raise efSearch" in recall.describe(off)
    # the climb went past the budget at nprobe 512 (7.9 ms) and kept the step before it
    trials = [[64, 1, 0.9, 0.8, 0.01], [256, 1, 0.95, 3.1, 0.01], [512, 1, 0.97, 7.9, 0.01]]
    spent = RecallEstimate(0.95, 50, 10, "nprobe", 256, 1, "tuned", 10**6, 3.1, time.time(), trials=trials)
    text = recall.describe(spent, 0.97, latency_budget_ms=5)
    assert "nprobe 512 took a median 7.90 ms > recall_latency_budget_ms = 5): raise the budget" in text
    assert "the widest nprobe tried does not reach it" in recall.describe(spent, 0.97, latency_budget_ms=10)
    assert "BELOW" not in recall.describe(spent, 0.95)  # at the floor: nothing to say
    watch = recall.RecallWatch(latency_budget_ms=5)
    with caplog.at_level(logging.WARNING, logger="indexer.search.recall"):
        assert watch.say("c", spent)
    assert "raise the budget to buy recall with time" in caplog.records[-1].getMessage()
    damaged = RecallEstimate.from_dict({**spent.to_dict(), "trials": [["x"], None, [512, 1, 0.97, None], 7]})
    assert damaged is not None and damaged.trials is None  # the steps dropped, the estimate kept
    assert "the widest nprobe tried" in recall.describe(damaged, 0.97)  # read, not fatal


def test_a_damaged_record_reads_as_unmeasured_not_a_failed_status(tmp_path):
    """A recall.json edited by hand or cut short: fields of the wrong type make it unreadable (measured again)."""
    good = _estimate(0.9).to_dict()
    for bad in ({"recall": "0.9"}, {"recall": True}, {"sample": None}, {"value": "64"}, {"graph": {"m": "x"}},
                {"graph": [16]}, {"trials": "x"}, {"param": 7}, {"latency_ms": [1]}):
        path = tmp_path / "recall.json"
        path.write_text(json.dumps({**good, **bad}))
        assert recall.read_estimate(path) is None, bad
        assert recall.describe(recall.read_estimate(path)).startswith("not measured yet")
    path.write_text(json.dumps(good))
    again = recall.read_estimate(path)
    assert again is not None and again.recall == 0.9 and again.param == "nprobe"


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


def test_a_collection_only_searched_is_measured_once_enough_new_searches_were_made(tmp_path: Path):
    store = _small_store(tmp_path)
    try:
        watch = recall.RecallWatch(sample=5, interval=600)
        watch.LOOK_S = 0.0
        t0 = time.time() + 10  # after the store's own clock: its estimate is recorded at time.time()
        assert not any(watch.after_search(store, "c", now=t0 + i) for i in range(4))  # 4 of 5
        assert watch.after_search(store, "c", now=t0 + 4)  # 5 since the estimate (none yet)
        watch.wait(30)
        assert store.recall_estimate("c") is not None
        assert not any(watch.after_search(store, "c", now=t0 + 10 + i) for i in range(5))  # within the interval
        assert watch.after_search(store, "c", now=t0 + 700)  # the interval passed, 5 searches since the estimate
        watch.wait(30)
        assert not any(watch.after_search(store, "c", now=t0 + 1400 + i) for i in range(4))  # 4 since this one
        assert watch.after_search(store, "c", now=t0 + 1404)
        watch.wait(30)
        # one measurement at a time in the process, whichever watch (a writer's, a reader's) wants one
        gate = threading.Event()
        busy = threading.Thread(target=gate.wait)
        busy.start()
        recall.RecallWatch._flight = busy
        other = recall.RecallWatch(interval=0)
        assert not other.after_write(store, "c")
        assert not any(watch.after_search(store, "c", now=t0 + 2000 + i) for i in range(5))
        gate.set()
        busy.join()
        assert other.after_write(store, "c")
        other.wait(30)
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
    assert "0.912 recall@10 on 50 chunks as queries" in rows["recall"] and "BELOW the floor 0.97" in rows["recall"]
    assert "nprobe 64, rescoring 2 x k (tuned)" in rows["recall"]
    assert "exact search" in recall.describe(RecallEstimate(1.0, 0, points=12), 0.97)
    metrics = Metrics(lambda: 0.0)
    metrics.observe_status(info)
    text = metrics.render().decode()
    assert 'indexer_recall_estimate{collection="c"} 0.912' in text
    assert 'indexer_recall_sample_queries{collection="c"} 50.0' in text
    assert 'indexer_recall_below_floor{collection="c"} 1.0' in text


def _searched(estimate_searches: int, sample: int = 50) -> RecallEstimate:
    kind = recall.sample_kind(estimate_searches, sample)
    return RecallEstimate(0.8, sample, 10, "hnsw_ef", 128, 2, "default", 1000, 0.5, time.time(), kind,
                          estimate_searches)


def test_the_estimate_says_what_it_sampled():
    assert recall.sample_kind(50, 50) == "searches" and recall.sample_kind(0, 50) == "chunks"
    assert recall.sample_kind(12, 50) == "searches+chunks"
    assert "on 50 recent searches against exact search" in recall.describe(_searched(50))
    assert "on 12 recent searches + 38 chunks as queries" in recall.describe(_searched(12))
    assert "on 50 chunks as queries" in recall.describe(_searched(0))
    # a record written before the kind existed reads as chunks
    old = {k: v for k, v in _estimate(0.9).to_dict().items() if k not in ("sample_kind", "searches")}
    read = RecallEstimate.from_dict(old)
    assert read is not None and read.sample_kind == "chunks" and read.searches == 0


def _vec(i: int, dim: int = 4) -> np.ndarray:
    v = np.zeros(dim, np.float32)
    v[i % dim] = 1.0 + i // dim
    return v


def test_the_ring_of_recent_queries_is_bounded_newest_first_and_moves_repeats(tmp_path: Path):
    ring = recall.RecentQueries(None, size=5)
    for i in range(8):
        ring.add(_vec(i))
    assert len(ring) == 5
    newest = ring.vectors(4, 10)
    assert [v.tolist() for v in newest] == [_vec(i).tolist() for i in (7, 6, 5, 4, 3)]
    ring.add(_vec(4))  # searched again: the newest, not a second copy
    assert len(ring) == 5 and ring.vectors(4, 2)[0].tolist() == _vec(4).tolist()
    assert ring.vectors(4, 2).shape == (2, 4)
    assert ring.vectors(8, 10).shape == (0, 8)  # another dimension (another model): none
    ring.clear()
    assert len(ring) == 0 and ring.vectors(4, 10).shape == (0, 4)
    assert not list(tmp_path.iterdir())  # no path: memory only (a read-only worker writes nothing)


def test_the_ring_is_persisted_merged_across_processes_and_holds_vectors_only(tmp_path: Path):
    path = tmp_path / "c.recent_queries.npz"
    server = recall.RecentQueries(path, size=6, persist_s=3600)
    for i in range(3):
        server.add(_vec(i))
    assert not path.exists()  # not due yet
    server.save()
    other = recall.RecentQueries(path, size=6, persist_s=0)  # another searching process: saves at each search
    assert len(other) == 3
    other.add(_vec(10))
    watcher = recall.RecentQueries(path, size=6)  # the measuring process opened before some searches were saved
    server.add(_vec(11))  # in the server's memory only
    seen = {tuple(v.tolist()) for v in watcher.vectors(4, 10)}
    assert tuple(_vec(10).tolist()) in seen and tuple(_vec(0).tolist()) in seen and len(seen) == 4
    server.save()  # merged with the file: the other process's search is kept
    with np.load(path, allow_pickle=False) as data:
        assert sorted(data.files) == ["times", "vectors"] and data["vectors"].shape == (5, 4)
    restarted = recall.RecentQueries(path, size=6)
    assert restarted.vectors(4, 1)[0].tolist() == _vec(11).tolist() and len(restarted) == 5
    path.write_bytes(b"not a ring")  # damaged: an empty ring, never an error
    assert len(recall.RecentQueries(path)) == 0


def test_the_ring_takes_searches_from_many_threads(tmp_path: Path):
    ring = recall.RecentQueries(tmp_path / "r.npz", size=100, persist_s=0.0)  # saves at every search: the worst

    def search(base: int) -> None:
        for i in range(60):
            ring.add(_vec(base + i, 16))

    threads = [threading.Thread(target=search, args=(t * 1000,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ring) == 100 and ring.vectors(16, 500).shape == (100, 16)
    assert recall.RecentQueries(tmp_path / "r.npz", size=100).vectors(16, 500).shape == (100, 16)
