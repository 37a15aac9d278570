"""The small-decode rule of ThreadChooser (a search query's thread team) and CoreGauge's reading of /proc/stat:
pure logic, a fake clock and a fake /proc/stat in a real temp file."""

from __future__ import annotations

from pathlib import Path

from indexer.engine.cpu_idle import CoreGauge, cgroup_cpus
from indexer.engine.plan import ThreadChooser


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Gauge:
    def __init__(self, spare: float | None) -> None:
        self.value = spare

    def spare(self) -> float | None:
        return self.value


def _chooser(spare: float | None = 2.0) -> tuple[ThreadChooser, Clock, Gauge]:
    clock, gauge = Clock(), Gauge(spare)
    return ThreadChooser([2, 1], gauge=gauge, clock=clock, warm_gap=0.01, backoff=5.0), clock, gauge


def test_a_query_uses_the_team_only_on_warm_spare_cores() -> None:
    c, clock, gauge = _chooser()
    assert c.choose(8) == 1  # nothing decoded yet: the cores may be asleep
    c.record(1, 8, 0.004)
    clock.t += 0.001
    assert c.choose(8) == 2  # right after a decode, both cores free
    c.record(2, 8, 0.002)
    clock.t += 0.2
    assert c.choose(8) == 1  # 0.2 s later: a sleeping vCPU would stall the team
    c.record(1, 8, 0.004)
    gauge.value = 1.0
    assert c.choose(8) == 1  # another process holds a core
    gauge.value = None
    assert c.choose(8) == 1  # unknown (no /proc/stat)
    gauge.value = 1.6
    assert c.choose(8) == 2  # within half a core of the team
    assert c.choose(512) == 1  # large batches keep their own measured rule (fewest first)
    assert ThreadChooser([2, 1]).choose(8) == 1  # no gauge: the old rule


def test_a_stalled_team_query_keeps_queries_off_teams_for_a_while() -> None:
    c, clock, _ = _chooser()
    c.record(1, 8, 0.004)
    for _ in range(5):
        assert c.choose(8) == 2
        c.record(2, 8, 0.002)
    assert c.choose(8) == 2
    c.record(2, 8, 0.050)  # 25x the usual: another process took a core
    assert c.choose(8) == 1
    clock.t += 4.0
    c.record(1, 8, 0.004)
    assert c.choose(8) == 1
    clock.t += 1.5
    c.record(1, 8, 0.004)
    assert c.choose(8) == 2  # the backoff is over
    assert c.rates == {}  # small decodes never enter the large-batch rates
    # stalls in a row: 10 s, then 20 s; a team query at its usual speed resets the period to 5 s
    c.record(2, 8, 0.050)
    clock.t += 9.0
    c.record(1, 8, 0.004)
    assert c.choose(8) == 1
    clock.t += 1.5
    c.record(1, 8, 0.004)
    assert c.choose(8) == 2
    c.record(2, 8, 0.050)
    clock.t += 19.0
    c.record(1, 8, 0.004)
    assert c.choose(8) == 1
    clock.t += 1.5
    c.record(1, 8, 0.004)
    assert c.choose(8) == 2
    c.record(2, 8, 0.002)  # usual speed
    c.record(2, 8, 0.050)
    clock.t += 5.5
    c.record(1, 8, 0.004)
    assert c.choose(8) == 2


def _stat(path: Path, cpus: dict[int, tuple[int, int]]) -> None:
    """cpuN lines with (busy, idle) jiffies; the aggregate line and others as the kernel writes them."""
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
    for n, (busy, idle) in cpus.items():
        lines.append(f"cpu{n} {busy} 0 0 {idle} 0 0 0 0 0 0")
    lines += ["intr 12345", "ctxt 999", "procs_running 3", "procs_blocked 0"]
    path.write_text("\n".join(lines) + "\n")


def test_core_gauge_counts_other_processes_not_ours(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    clock = Clock()
    own = [0.0]
    g = CoreGauge(cpus={0, 1}, path=stat, min_interval=0.05, clock=clock, own_cpu=lambda: own[0],
                  quota=lambda: None)
    _stat(stat, {0: (1000, 5000), 1: (1000, 5000), 2: (0, 9000)})
    assert g.spare() is None  # one reading: no interval yet
    # 1 s later (100 jiffies per CPU): cpu0 fully busy, cpu1 idle; cpu2 is outside our affinity
    clock.t += 1.0
    _stat(stat, {0: (1100, 5000), 1: (1000, 5100), 2: (100, 9000)})
    assert g.spare() == 1.0
    # the next second cpu0's work was our own (1 CPU-second of this process): both cores spare
    clock.t += 1.0
    own[0] = 1.0
    _stat(stat, {0: (1200, 5000), 1: (1000, 5200), 2: (200, 9000)})
    assert g.spare() == 2.0
    # within min_interval the last answer stands, whatever the file says
    clock.t += 0.01
    _stat(stat, {0: (1300, 5000), 1: (1300, 5200), 2: (200, 9000)})
    assert g.spare() == 2.0
    stat.unlink()
    clock.t += 1.0
    assert g.spare() is None  # unreadable: unknown


def test_core_gauge_reads_this_machine() -> None:
    if not Path("/proc/stat").exists():
        return
    g = CoreGauge(min_interval=0.0)
    g.spare()
    sum(i * i for i in range(200_000))  # a little time between the readings
    value = g.spare()
    assert value is not None and 0.0 <= value <= len(g.cpus)


def test_a_cgroup_quota_caps_the_spare_cores(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("100000 100000\n")  # docker --cpus=1
    assert cgroup_cpus(cpu_max) == 1.0
    cpu_max.write_text("max 100000\n")
    assert cgroup_cpus(cpu_max) is None
    assert cgroup_cpus(tmp_path / "absent") is None
    cpu_max.write_text("garbage")
    assert cgroup_cpus(cpu_max) is None
    stat, clock = tmp_path / "stat", Clock()
    g = CoreGauge(cpus={0, 1}, path=stat, clock=clock, own_cpu=lambda: 0.0, quota=lambda: 1.0)
    _stat(stat, {0: (1000, 5000), 1: (1000, 5000)})
    g.spare()
    clock.t += 1.0
    _stat(stat, {0: (1000, 5100), 1: (1000, 5100)})  # both idle, but the quota is one CPU
    assert g.spare() == 1.0
