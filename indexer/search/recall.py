"""Recall that holds (docs/stores.md#recall-that-holds): how an approximate index's recall@k is estimated against exact
search, how its search-time parameter is tuned from the estimate, and when it is measured.

Pure parts (the stores call them through :mod:`indexer.plugin_api`): :func:`recall_at_k` (ties with the k-th exact score
count as found), :func:`steps` (the values tried), :func:`tune` (raise the parameter until the floor or the latency
budget), :func:`climb` (several levers, the cheapest per recall gained first), :func:`sample_rows`.
:class:`RecentQueries`: the bounded ring of a collection's recent search vectors (never their text) the stores sample
first, persisted beside the recorded estimate. The scheduling part, :class:`RecallWatch`, runs a store's
``measure_recall`` (:class:`indexer.ports.RecallCheck`) in a background thread after a write batch, or once ``sample``
searches were made since the last estimate (a collection only searched), at most every ``interval`` seconds per
collection and one at a time per process, and says a drop below the floor once (a log warning; status shows it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexer.errors import StoreError
from indexer.ports import VectorStore, recall_check
from indexer.types import RecallEstimate

logger = logging.getLogger(__name__)

FLOOR = 0.97  # recall@10 an approximate index must keep (issue 50's goal)
K = 10
# Queries per measurement: the ring's recent searches (all of them), chunks where there are fewer. The newest 100
# alone were the easier half of 200 real queries on the boilerplate million (docs/benchmarks.md#recall-session-16:
# 0.979 against 0.939 for the 100 before them): searches come in topics, not as independent draws, so one
# standard error understated what the sample missed; the whole ring matched 400 other queries within 0.011.
SAMPLE = 200
INTERVAL_S = 600.0  # at most one measurement per collection in this time (after writes or searches)
LATENCY_BUDGET_MS = 5.0  # median time of one approximate query the tuning may spend
# Recall gains below this are a sample's noise, not worth a slower search: with 200 queries one neighbour in two
# thousand is 0.0005 and the standard error near the floor 0.003-0.01 (0.004-0.015 with 100). Measured (versions
# at 1M, FAISS, AMD EPYC Zen 3, 100 queries): 0.970 at nprobe 64 / rescoring 2 (1.69 ms) rose to 0.974 at
# 128 / 4 (2.99 ms) and the climb kept the slower one; the measured recall there was 0.990.
RECALL_NOISE = 0.005
RECENT = 200  # query vectors a collection's ring keeps (300 KB at 384 dimensions)
WAIT_S = 300.0  # the longest a closing writer or reader waits for a measurement in flight
PERSIST_S = 30.0  # a searching process writes its ring to disk at most this often (and when it closes)


Ranked = Sequence[tuple[str, float]]  # (id, score) best first; scores higher-is-better and exact


def recall_at_k(approx: Sequence[Ranked], exact: Sequence[Ranked], k: int = K, tolerance: float = 1e-5) -> float:
    """Mean recall@k of ``approx`` against ``exact`` (one list per query, each query's own point left out by the
    caller). A hit counts as found when exact search returned it, or when its exact score ties the k-th exact
    score (near-duplicates: either of two equal points is a right answer). Queries with no exact neighbour are
    skipped; none at all: 1.0."""
    each = per_query(approx, exact, k, tolerance)
    return sum(each) / len(each) if each else 1.0


def per_query(approx: Sequence[Ranked], exact: Sequence[Ranked], k: int = K, tolerance: float = 1e-5) -> list[float]:
    """Each query's recall@k as :func:`recall_at_k` counts it (queries with no exact neighbour left out)."""
    out = []
    for got, truth in zip(approx, exact, strict=True):
        truth = list(truth)[:k]
        if not truth:
            continue
        ids = {i for i, _ in truth}
        kth = truth[-1][1]
        hits = sum(1 for i, score in list(got)[:k] if i in ids or score >= kth - tolerance * max(1.0, abs(kth)))
        out.append(min(hits, len(truth)) / len(truth))
    return out


def estimate(approx: Sequence[Ranked], exact: Sequence[Ranked], k: int = K) -> tuple[float, float]:
    """(mean recall@k, its standard error over the queries: 0 with fewer than two)."""
    each = np.asarray(per_query(approx, exact, k), dtype=np.float64)
    if len(each) < 2:
        return (float(each.mean()) if len(each) else 1.0), 0.0
    return float(each.mean()), float(each.std(ddof=1) / np.sqrt(len(each)))


def steps(start: int, cap: int) -> list[int]:
    """The values tuning tries: ``start``, then doubling, up to ``cap`` (included)."""
    out = [max(1, int(start))]
    while out[-1] * 2 <= cap:
        out.append(out[-1] * 2)
    if out[-1] < cap:
        out.append(int(cap))
    return out


def ladder(start: int, cap: int, rescore: int = 1, rescore_cap: int = 1) -> list[tuple[int, int]]:
    """The (parameter, rescoring depth) pairs tuning tries, cheapest first: the parameter and the depth doubled in
    turn (the depth first: on near-duplicates the codes, not the beam, lose the neighbours), each up to its cap."""
    out = [(max(1, int(start)), max(1, int(rescore)))]
    while True:
        value, depth = out[-1]
        if depth * 2 <= rescore_cap and (depth // max(rescore, 1) <= value // max(start, 1) or value * 2 > cap):
            out.append((value, depth * 2))
        elif value * 2 <= cap:
            out.append((value * 2, depth))
        else:
            return out


@dataclass(frozen=True)
class Trial:
    value: Any  # a parameter value, or a (parameter, rescoring depth) pair of :func:`ladder` / :func:`climb`
    recall: float
    latency_ms: float
    error: float = 0.0  # the standard error of ``recall`` (:func:`climb` asks ``recall - error`` to meet the floor)


def tune(
    measure: Callable[[Any], tuple[float, float]], values: Sequence[Any], floor: float = FLOOR,
    latency_budget_ms: float = LATENCY_BUDGET_MS,
) -> tuple[Trial, list[Trial]]:
    """Try ``values`` in order (``measure(value)`` -> (recall, mean latency in ms)) and pick the first whose recall
    meets ``floor``. A value over the latency budget is not taken (the last one within it is, or the first value
    when even that is over); when none meets the floor, the last one within the budget. Returns the choice and
    every trial."""
    trials: list[Trial] = []
    for value in values:
        recall, latency = measure(value)
        trial = Trial(value, float(recall), float(latency))
        if trials and trial.latency_ms > latency_budget_ms:
            trials.append(trial)
            return trials[-2], trials
        trials.append(trial)
        if trial.recall >= floor or trial.latency_ms > latency_budget_ms:
            return trial, trials
    if not trials:
        raise ValueError("no value to try")
    return trials[-1], trials


def climb(
    measure: Callable[[tuple[int, ...]], tuple[float, ...]], start: Sequence[int], caps: Sequence[int],
    floor: float = FLOOR, latency_budget_ms: float = LATENCY_BUDGET_MS,
) -> tuple[Trial, list[Trial]]:
    """Tune several levers together (``measure(values)`` -> (recall, latency in ms[, the recall's standard error]); each
    lever is doubled, up to its cap), following whichever is cheapest per recall gained: from ``start``, each lever
    raised alone is measured; a value that meets ``floor`` within the latency budget ends the climb (the fastest such
    one, or a value between it and the one below it that meets it sooner: a doubling overshoots by up to its whole step,
    so the values between are bisected; it meets it when its recall less one standard error does: a sample of 200
    queries errs by 0.003-0.01 near 0.97, and stopping at an estimate just over the floor leaves the real recall below
    it half the time); else a step that gains recall at no more time (within 5 %) is taken first (the most recall of
    those), else the step that gains the most recall per millisecond it adds is taken (when none gains, the first
    lever's: the wider search; when that one is over the budget, the climb stops: a lever that gains nothing is never
    followed), and the climb goes on from there. It stops at the caps or when every next step passes the budget; then it
    keeps the fastest value measured within the budget whose recall is within ``RECALL_NOISE`` of the best so measured
    (the last value taken when it is as fast: a step that gained only noise is not paid for), or the start when nothing
    was within the budget (a default is never lowered). On near-duplicates the lever that pays differs by set and store
    (measured: FAISS boilerplate gains only from ``nprobe``; the mailbox set from rescoring), so a fixed order wastes
    the budget on the lever that does not. Returns the choice and every trial, in the order measured."""
    trials: list[Trial] = []
    seen: dict[tuple[int, ...], Trial] = {}

    def trial(values: tuple[int, ...]) -> Trial:
        if values not in seen:
            recall, latency, *error = measure(values)
            seen[values] = Trial(values, float(recall), float(latency), float(error[0]) if error else 0.0)
            trials.append(seen[values])
        return seen[values]

    def meets(t: Trial) -> bool:
        return t.recall - t.error >= floor

    def settle(last: Trial) -> tuple[Trial, list[Trial]]:
        pool = [t for t in trials if t.latency_ms <= latency_budget_ms] or [last]
        top = max(t.recall for t in pool)
        near = [t for t in pool if t.recall >= top - RECALL_NOISE]
        fastest = min(near, key=lambda t: t.latency_ms)
        if last in near and last.latency_ms <= 1.05 * fastest.latency_ms:
            return last, trials  # as fast (latency differences below 5 % are noise)
        return fastest, trials

    def halfway(below: Trial, met: Trial) -> Trial:
        """A doubling overshoots by up to its whole step: the values between are bisected (nprobe 96 between 64 and
        128, then 80 or 112) while the gap is more than an eighth of the value that meets; one meeting the floor
        sooner is kept, one below it becomes the lower bound; one that meets it no faster ends the search."""
        while True:
            mid = tuple((a + b) // 2 for a, b in zip(below.value, met.value, strict=True))
            if mid in (below.value, met.value):
                return met  # a step of 1 (a depth of 1 -> 2) has no value between
            if all(abs(b - a) <= max(1, m // 8) for a, b, m in zip(below.value, met.value, met.value, strict=True)):
                return met  # close enough: the next trial would cost more than it could save
            t = trial(mid)
            if not meets(t):
                below = t
            elif t.latency_ms < met.latency_ms:
                met = t
            else:
                return met

    now = trial(tuple(max(1, int(v)) for v in start))
    if meets(now) or now.latency_ms > latency_budget_ms:
        return now, trials
    while True:
        raised = [tuple(min(int(cap), v * 2) if j == i else v for j, v in enumerate(now.value))
                  for i, cap in enumerate(caps) if now.value[i] < cap]
        within = [t for t in (trial(values) for values in raised) if t.latency_ms <= latency_budget_ms]
        if not within:
            return settle(now)
        meeting = [t for t in within if meets(t)]
        if meeting:
            return halfway(now, min(meeting, key=lambda t: t.latency_ms)), trials
        cost = max(0.05 * now.latency_ms, 1e-3)  # latency differences below 5 % are noise, not a price

        def worth(t: Trial, base: Trial = now, floor_cost: float = cost) -> float:
            return (t.recall - base.recall) / max(t.latency_ms - base.latency_ms, floor_cost)

        # a step that gains recall at no more time (within the noise) is taken first, whatever the others gain per
        # millisecond: free (measured: the grouped list order of FAISS's pq lists, plugins/faiss/routing.py)
        free = [t for t in within if t.recall > now.recall and t.latency_ms <= now.latency_ms + cost]
        best = max(free, key=lambda t: (t.recall, -t.latency_ms)) if free else max(within, key=worth)
        if best.recall > now.recall:
            now = best
        elif within[0].value[0] > now.value[0]:
            now = within[0]  # nothing gains: the wider search (its recall may rise at the next step)
        else:
            return settle(now)  # only a lever that gains nothing is within the budget: never followed


def sample_rows(n: int, size: int, seed: int = 50) -> np.ndarray:
    """``size`` distinct row numbers of ``n`` (all of them when fewer), sorted; the same for the same arguments."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed + n).choice(n, size=size, replace=False))


class RecentQueries:
    """A bounded ring of the query vectors of a collection's recent searches (vectors only: never the text), newest
    last, thread-safe. Repeats (the same vector searched again: paging, a hybrid search's two legs) move to the
    newest place rather than filling the ring. With a ``path`` (beside the recorded estimate) a searching process
    writes its ring there at most every ``persist_s`` seconds and when it closes, merged with what the file holds
    (another process's searches), so a restart and the process that measures (the watcher's) sample them too.
    Without one (a read-only worker) the ring lives in memory only."""

    def __init__(self, path: Path | None, size: int = RECENT, persist_s: float = PERSIST_S) -> None:
        self.path, self.size, self.persist_s = path, int(size), float(persist_s)
        self._ring: dict[bytes, tuple[float, np.ndarray]] = {}  # vector bytes -> (unix time, vector); dict order
        self._lock = threading.Lock()
        self._saving = threading.Lock()  # one save at a time: a save from an older snapshot never lands last
        self._saved_at = time.monotonic()
        self._changed = False
        for _key, (when, vector) in sorted(self._read(), key=lambda pair: pair[1][0]):
            self._keep(vector, when)

    def add(self, vector: np.ndarray) -> None:
        """Remember one search's query vector (a copy, float32); writes the ring when it is due."""
        v = np.array(vector, dtype=np.float32).ravel()
        with self._lock:
            self._keep(v, time.time())
            self._changed = True
            due = self.path is not None and time.monotonic() - self._saved_at >= self.persist_s
        if due:
            self.save()

    def _keep(self, vector: np.ndarray, when: float) -> None:
        key = vector.tobytes()
        if key in self._ring:
            when = max(when, self._ring.pop(key)[0])
        self._ring[key] = (when, vector)
        while len(self._ring) > self.size:
            del self._ring[next(iter(self._ring))]

    def vectors(self, dim: int, limit: int) -> np.ndarray:
        """The newest ``limit`` distinct query vectors of ``dim`` dimensions (this process's and the file's),
        newest first."""
        found = dict(self._read())
        with self._lock:
            for key, (when, vector) in self._ring.items():
                if key not in found or found[key][0] < when:
                    found[key] = (when, vector)
        newest = sorted((pair for pair in found.values() if pair[1].shape == (dim,)), key=lambda p: -p[0])[:limit]
        return np.stack([v for _, v in newest]) if newest else np.zeros((0, dim), np.float32)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ring)

    def clear(self) -> None:
        """Forget every query (this process's; the file is rewritten at the next save)."""
        with self._lock:
            self._ring.clear()
            self._changed = True
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def save(self) -> None:
        """Write the ring (merged with the file's, the newest ``size`` kept) atomically; a failure is logged (only
        the next estimate's sample is at stake)."""
        if self.path is None:
            return
        with self._saving:
            self._save(self.path)

    def _save(self, path: Path) -> None:
        with self._lock:
            self._saved_at = time.monotonic()
            if not self._changed:
                return
            self._changed = False
            mine = list(self._ring.values())
        merged: dict[bytes, tuple[float, np.ndarray]] = dict(self._read())
        for when, vector in mine:
            key = vector.tobytes()
            if key not in merged or merged[key][0] < when:
                merged[key] = (when, vector)
        newest = sorted(merged.values(), key=lambda p: -p[0])[: self.size]
        dims = {v.shape for _, v in newest}
        if len(dims) > 1:  # another model's queries (a re-created collection): the newest dimension wins
            newest = [(w, v) for w, v in newest if v.shape == newest[0][1].shape]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with tmp.open("wb") as out:
                np.savez(out, times=np.asarray([w for w, _ in newest], np.float64),
                         vectors=np.stack([v for _, v in newest]) if newest else np.zeros((0, 0), np.float32))
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            logger.warning("could not record the recent query vectors in %s: %s", path, exc)

    def _read(self) -> list[tuple[bytes, tuple[float, np.ndarray]]]:
        """The file's (key, (time, vector)) pairs; none when it is missing or unreadable."""
        if self.path is None:
            return []
        try:
            with np.load(self.path, allow_pickle=False) as data:
                times, vectors = data["times"], data["vectors"].astype(np.float32)
        except (OSError, ValueError, KeyError, EOFError):
            return []
        if vectors.ndim != 2 or len(times) != len(vectors):
            return []
        return [(v.tobytes(), (float(w), v.copy())) for w, v in zip(times.tolist(), vectors, strict=True)]


def read_estimate(path: Path) -> RecallEstimate | None:
    """A store's recorded estimate (None: none recorded, or unreadable: measured again)."""
    try:
        return RecallEstimate.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, AttributeError):
        return None


def write_estimate(path: Path, estimate: RecallEstimate, what: str) -> None:
    """Record ``estimate`` at ``path`` atomically; a StoreError naming ``what`` (the store's collection) if it fails."""
    write_estimate_json(path, estimate.to_dict(), what)


def write_estimate_json(path: Path, data: dict[str, Any], what: str) -> None:
    """Record ``data`` (an estimate, a choice made from one) at ``path`` atomically, as JSON; a StoreError naming
    ``what`` if it fails."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot record the recall estimate of {what} in {path}: {exc}") from exc  # or a choice


def sample_kind(searches: int, total: int) -> str:
    """What a sample of ``total`` queries, ``searches`` of them recent searches, is called in the record."""
    return "searches" if searches >= total else "chunks" if searches == 0 else "searches+chunks"


def sample_text(estimate: RecallEstimate) -> str:
    """How status names an estimate's sample: "50 recent searches", "12 recent searches + 38 chunks"."""
    chunks = estimate.sample - estimate.searches
    if estimate.searches and chunks > 0:
        return f"{estimate.searches} recent searches + {chunks} chunks as queries"
    return f"{estimate.sample} recent searches" if estimate.searches else f"{estimate.sample} chunks as queries"


def below(estimate: RecallEstimate | None, floor: float = FLOOR) -> bool:
    return estimate is not None and not estimate.exact and estimate.sample > 0 and estimate.recall < floor


# The setting that fixes each search-time parameter (indexer.settings): an explicit value is never tuned.
PARAM_SETTINGS = {"hnsw_ef": "qdrant_hnsw_ef", "nprobe": "faiss_nprobe", "efSearch": "faiss_ef_search"}
DENSER = ("the store's next build is chosen for recall (a denser graph, fewer IVF lists) unless qdrant_hnsw_m / "
          "faiss_ivf_lists are set")


def remedy(estimate: RecallEstimate, latency_budget_ms: float = LATENCY_BUDGET_MS) -> str:
    """What stopped the recall below the floor, and what the user can do about it (one clause for status and the
    warning): an explicit parameter, the tuning turned off, the latency budget spent, or the widest search tried."""
    param = estimate.param or "the search-time parameter"
    if estimate.source == "setting":
        setting = PARAM_SETTINGS.get(param, param)
        return f"{param} is set ({setting} = {estimate.value}): raise it, or unset it to let the tuning choose"
    if estimate.source != "tuned":
        return f"the tuning is off (recall_tuning = false): turn it on to raise {param}"
    spent = [t for t in estimate.trials or [] if t[-2] > latency_budget_ms]  # [*levers, recall, ms, error]
    if spent:
        return (f"the tuning spent its latency budget ({param} {spent[0][0]:g} took a median {spent[0][-2]:.2f} ms "
                f"> recall_latency_budget_ms = {latency_budget_ms:g}): raise the budget to buy recall with time; "
                f"{DENSER}")
    return f"the widest {param} tried does not reach it; {DENSER}"


def describe(estimate: RecallEstimate | None, floor: float = FLOOR,
             latency_budget_ms: float = LATENCY_BUDGET_MS) -> str:
    """One line for ``indexer status``; below the floor, what stopped it and what to do (:func:`remedy`)."""
    if estimate is None:
        return "not measured yet (measured in the background after writes)"
    if estimate.exact:
        return f"1.000 (exact search over {estimate.points:,} points: nothing to sample)"
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(estimate.measured_at))
    rescore = f", rescoring {estimate.rescore} x k" if estimate.rescore else ""
    rescore += "".join(f", {key} {value}" for key, value in (estimate.graph or {}).items())
    text = (f"{estimate.recall:.3f} recall@{estimate.k} on {sample_text(estimate)} against exact search, "
            f"{estimate.param} {estimate.value}{rescore} ({estimate.source}), {estimate.points:,} points, {when} UTC")
    if below(estimate, floor):
        text += f"; BELOW the floor {floor:.2f}: {remedy(estimate, latency_budget_ms)}"
    return text


class RecallWatch:
    """Measures (and tunes) collections' recall in the background: after writes, and for a collection that is only
    searched once ``sample`` searches were made since its last estimate. At most one measurement at a time in this
    process (every watch of the process shares the turn: a writer's and a reader's), and at most every ``interval``
    seconds per collection (the recorded estimate's time counts, whichever process measured). A store without the
    ability is left alone. A drop below the floor is said once (until the recall is back above it)."""

    _turn = threading.Lock()  # guards _flight, shared by every watch of the process
    _flight: threading.Thread | None = None  # the measurement in flight in this process
    LOOK_S = 30.0  # a searched collection's recorded estimate is read at most this often (not at every search)

    def __init__(self, *, tune: bool = True, floor: float = FLOOR, sample: int = SAMPLE,
                 interval: float = INTERVAL_S, latency_budget_ms: float = LATENCY_BUDGET_MS) -> None:
        self.tune, self.floor, self.sample = tune, floor, sample
        self.interval, self.latency_budget_ms = interval, latency_budget_ms
        self._last: dict[str, float] = {}
        self._below: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._searched: dict[str, deque[float]] = {}  # per collection: the times of its last ``sample`` searches
        self._looked: dict[str, float] = {}

    def after_write(self, store: VectorStore, collection: str, now: float | None = None) -> bool:
        """Start a measurement of ``collection`` when one is due; True when one started."""
        check = recall_check(store)
        if check is None:
            return False
        now = time.time() if now is None else now
        with self._lock:
            last = self._last.get(collection)
        if last is None:  # this process has not measured it: the recorded estimate's time (another run's)
            recorded = check.recall_estimate(collection)
            last = recorded.measured_at if recorded is not None and not recorded.exact else float("-inf")
        return now - last >= self.interval and self._start(store, collection, now)

    def after_search(self, store: VectorStore, collection: str, now: float | None = None) -> bool:
        """Count one search of ``collection``; start a measurement when ``sample`` searches were made since its
        estimate (so a collection that is only searched is measured again on what users now search), and the
        interval has passed. Cheap: a time appended; the recorded estimate is read at most every ``LOOK_S``."""
        if recall_check(store) is None:
            return False
        now = time.time() if now is None else now
        with self._lock:
            times = self._searched.setdefault(collection, deque(maxlen=self.sample))
            times.append(now)
            if len(times) < self.sample or now - self._looked.get(collection, float("-inf")) < self.LOOK_S:
                return False
            self._looked[collection] = now
            oldest, last = times[0], self._last.get(collection, float("-inf"))
        check = recall_check(store)
        recorded = check.recall_estimate(collection) if check is not None else None
        since = max(last, recorded.measured_at if recorded is not None else float("-inf"))
        return oldest > since and now - since >= self.interval and self._start(store, collection, now)

    def _start(self, store: VectorStore, collection: str, now: float) -> bool:
        """Start the measurement in a daemon thread unless one is in flight in this process."""
        with RecallWatch._turn:
            if RecallWatch._flight is not None and RecallWatch._flight.is_alive():
                return False
            with self._lock:
                self._last[collection] = now
                self._searched.pop(collection, None)
            thread = threading.Thread(target=self.measure, args=(store, collection), daemon=True,
                                      name=f"recall-{collection}")
            RecallWatch._flight = self._thread = thread
            thread.start()
        return True

    def measure(self, store: VectorStore, collection: str) -> RecallEstimate | None:
        """Measure now (in this thread); a failure is logged, never raised (only the estimate is at stake)."""
        check = recall_check(store)
        if check is None:
            return None
        try:
            estimate = check.measure_recall(collection, self.sample, self.tune, self.floor, self.latency_budget_ms)
        except Exception as exc:
            logger.warning("could not measure the recall of collection %s: %s", collection, exc)
            return None
        self.say(collection, estimate)
        return estimate

    def say(self, collection: str, estimate: RecallEstimate) -> bool:
        """Log a drop below the floor once; True when it was said now."""
        if not below(estimate, self.floor):
            self._below.discard(collection)
            return False
        if collection in self._below:
            return False
        self._below.add(collection)
        logger.warning("collection %s: the approximate index finds %.3f of the 10 nearest chunks exact search "
                       "finds (%d sampled queries, %s %s), below the floor %.2f: %s", collection, estimate.recall,
                       estimate.sample, estimate.param, estimate.value, self.floor,
                       remedy(estimate, self.latency_budget_ms))
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the measurement in flight (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
