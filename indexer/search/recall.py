"""Recall that holds (docs/stores.md#recall-that-holds): how an approximate index's recall@k is estimated against
exact search, how its search-time parameter is tuned from the estimate, and when it is measured.

Pure parts (the stores call them through :mod:`indexer.plugin_api`): :func:`recall_at_k` (ties with the k-th
exact score count as found), :func:`steps` (the values tried), :func:`tune` (raise the parameter until the floor
or the latency budget), :func:`sample_rows`. The scheduling part, :class:`RecallWatch`, runs a store's
``measure_recall`` (:class:`indexer.ports.RecallCheck`) in a background thread after a write batch, at most every
``interval`` seconds per collection, and says a drop below the floor once (a log warning; status shows it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
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
SAMPLE = 50  # queries per measurement: at recall 0.97 one query more or less found moves it 0.002
INTERVAL_S = 600.0  # at most one measurement per collection in this time (after a write batch)
LATENCY_BUDGET_MS = 5.0  # mean time of one approximate query the tuning may spend


Ranked = Sequence[tuple[str, float]]  # (id, score) best first; scores higher-is-better and exact


def recall_at_k(approx: Sequence[Ranked], exact: Sequence[Ranked], k: int = K, tolerance: float = 1e-5) -> float:
    """Mean recall@k of ``approx`` against ``exact`` (one list per query, each query's own point left out by the
    caller). A hit counts as found when exact search returned it, or when its exact score ties the k-th exact
    score (near-duplicates: either of two equal points is a right answer). Queries with no exact neighbour are
    skipped; none at all: 1.0."""
    total, found = 0, 0.0
    for got, truth in zip(approx, exact, strict=True):
        truth = list(truth)[:k]
        if not truth:
            continue
        ids = {i for i, _ in truth}
        kth = truth[-1][1]
        hits = sum(1 for i, score in list(got)[:k] if i in ids or score >= kth - tolerance * max(1.0, abs(kth)))
        found += min(hits, len(truth)) / len(truth)
        total += 1
    return found / total if total else 1.0


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
    value: Any  # a parameter value, or a (parameter, rescoring depth) pair of :func:`ladder`
    recall: float
    latency_ms: float


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


def sample_rows(n: int, size: int, seed: int = 50) -> np.ndarray:
    """``size`` distinct row numbers of ``n`` (all of them when fewer), sorted; the same for the same arguments."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed + n).choice(n, size=size, replace=False))


def read_estimate(path: Path) -> RecallEstimate | None:
    """A store's recorded estimate (None: none recorded, or unreadable: measured again)."""
    try:
        return RecallEstimate.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, AttributeError):
        return None


def write_estimate(path: Path, estimate: RecallEstimate, what: str) -> None:
    """Record ``estimate`` at ``path`` atomically; a StoreError naming ``what`` (the store's collection) if it fails."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(estimate.to_dict(), sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot record the recall estimate of {what} in {path}: {exc}") from exc


def below(estimate: RecallEstimate | None, floor: float = FLOOR) -> bool:
    return estimate is not None and not estimate.exact and estimate.sample > 0 and estimate.recall < floor


def describe(estimate: RecallEstimate | None, floor: float = FLOOR) -> str:
    """One line for ``indexer status``."""
    if estimate is None:
        return "not measured yet (measured in the background after writes)"
    if estimate.exact:
        return f"1.000 (exact search over {estimate.points:,} points: nothing to sample)"
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(estimate.measured_at))
    rescore = f", rescoring {estimate.rescore} x k" if estimate.rescore else ""
    text = (f"{estimate.recall:.3f} recall@{estimate.k} on {estimate.sample} sampled queries against exact search, "
            f"{estimate.param} {estimate.value}{rescore} ({estimate.source}), {estimate.points:,} points, {when} UTC")
    if below(estimate, floor):
        text += f"; BELOW the floor {floor:.2f}"
    return text


class RecallWatch:
    """Measures (and tunes) collections' recall in the background after writes: at most one measurement at a time
    in this process, and at most every ``interval`` seconds per collection. A store without the ability is left
    alone. A drop below the floor is said once (until the recall is back above it)."""

    def __init__(self, *, tune: bool = True, floor: float = FLOOR, sample: int = SAMPLE,
                 interval: float = INTERVAL_S, latency_budget_ms: float = LATENCY_BUDGET_MS) -> None:
        self.tune, self.floor, self.sample = tune, floor, sample
        self.interval, self.latency_budget_ms = interval, latency_budget_ms
        self._last: dict[str, float] = {}
        self._below: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def after_write(self, store: VectorStore, collection: str, now: float | None = None) -> bool:
        """Start a measurement of ``collection`` when one is due; True when one started."""
        check = recall_check(store)
        if check is None:
            return False
        now = time.time() if now is None else now
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            last = self._last.get(collection)
            if last is None:  # this process has not measured it: the recorded estimate's time (another run's)
                recorded = check.recall_estimate(collection)
                last = recorded.measured_at if recorded is not None and not recorded.exact else float("-inf")
            if now - last < self.interval:
                return False
            self._last[collection] = now
            self._thread = threading.Thread(target=self.measure, args=(store, collection), daemon=True,
                                            name=f"recall-{collection}")
            self._thread.start()
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
                       "finds (%d sampled queries, %s %s), below the floor %.2f", collection, estimate.recall,
                       estimate.sample, estimate.param, estimate.value, self.floor)
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the measurement in flight (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
