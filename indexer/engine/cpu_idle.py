"""How many of this process's cores other work leaves free right now: what the small-decode rule of
:class:`indexer.engine.plan.ThreadChooser` reads before it lets a search query use a full thread team.

ggml's threads meet at spinning barriers, so a team of as many threads as cores stalls as soon as something else
runs on one of them (an 8-token query on 2 busy cores: 2 threads p50 3.3 s, 1 thread 79 ms), while on idle cores
the team halves a query's time (AMD EPYC Zen 4, 2 vCPUs: 3.6 ms -> 2.1 ms, docs/benchmarks.md). The gauge
answers from two readings of ``/proc/stat``, both needed:

* the busy time of this process's CPUs (its affinity set, per-CPU lines) since the previous reading, less this
  process's own CPU time over the same interval (our decodes, and the OpenMP threads that spin a while after
  each): other processes' work that has run for a while. Work that started a moment ago is not seen yet: the
  chooser's stall rule (a team query far slower than usual keeps queries off teams for a while) covers it.

A cgroup CPU quota (``/sys/fs/cgroup/cpu.max``, a container's ``--cpus``) caps the answer: a team wider than the
quota is throttled at every barrier.

Where ``/proc/stat`` cannot be read (not Linux) the answer is ``None`` and the rule keeps queries on the fewest
threads, as before. Readings are at most every ``min_interval`` seconds (one read is ~20 µs); between them the
last answer stands.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["CoreGauge"]


def _read_stat(path: Path, cpus: frozenset[int]) -> tuple[float, float] | None:
    """(busy jiffies, all jiffies) over ``cpus``, or None where unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return None
    busy = total = 0.0
    seen = 0
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *fields = line.split()
            if int(name[3:]) not in cpus:
                continue
            values = [float(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            if len(values) < 5:
                return None
            idle = values[3] + values[4]
            total += sum(values)
            busy += sum(values) - idle
            seen += 1
    if not seen:
        return None
    return busy, total


def cgroup_cpus(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """The CPUs a cgroup v2 quota allows (``quota / period``), or None where there is none or it is unreadable."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(0.0, float(quota) / float(period))
    except (ValueError, ZeroDivisionError):
        return None


class CoreGauge:
    """Spare cores for a query's decode team: ``len(cpus)`` minus other processes' cores (see the module text)."""

    def __init__(self, cpus: Iterable[int] | None = None, path: str | Path = "/proc/stat",
                 min_interval: float = 0.05, clock: Callable[[], float] = time.monotonic,
                 own_cpu: Callable[[], float] = time.process_time,
                 quota: Callable[[], float | None] = cgroup_cpus) -> None:
        self.cpus = frozenset(os.sched_getaffinity(0) if cpus is None else cpus)
        self.quota = quota()
        self.path = Path(path)
        self.min_interval = min_interval
        self.clock = clock
        self.own_cpu = own_cpu
        self._lock = threading.Lock()
        self._last: tuple[float, float, float, float] | None = None  # (time, busy, all jiffies, own CPU s)
        self._answer: float | None = None
        self._at = float("-inf")

    def spare(self) -> float | None:
        """Cores free of other processes' work over the last interval (0 .. len(cpus)), or None where unknown
        (no earlier reading yet, or no /proc/stat)."""
        with self._lock:
            now = self.clock()
            if now - self._at < self.min_interval:
                return self._answer
            reading = _read_stat(self.path, self.cpus)
            own = self.own_cpu()
            self._at = now
            if reading is None:
                self._answer = None
                return None
            busy, total = reading
            last, self._last = self._last, (now, busy, total, own)
            if last is None or total <= last[2] or now <= last[0]:
                self._answer = None  # the first reading: no interval yet
                return None
            n = len(self.cpus)
            share = (busy - last[1]) / (total - last[2])  # jiffies are per CPU: busy share of the interval
            other = max(0.0, share * n - (own - last[3]) / (now - last[0]))
            self._answer = max(0.0, n - other)
            if self.quota is not None:
                self._answer = min(self._answer, self.quota)
            return self._answer
