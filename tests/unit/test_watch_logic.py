"""The watcher's own logic with a fake collection (real folders, real watchdog): queue persistence, retries,
narrowing a failing batch down to the bad path, the inotify-limit fallback, the status file and the lock."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from indexer.errors import InputError, StoreUnavailableError
from indexer.index.pipeline import IndexReport
from indexer.state.watch_files import load_queue, queue_path, read_status
from indexer.watch.batch import BatchTiming, What
from indexer.watch.observers import translate
from indexer.watch.watcher import Watcher, WatchError, WatchOptions

FAST = WatchOptions(rescan_seconds=0, timing=BatchTiming(gather=0.01, max_gather=0.05, settle=0.1, grace=0.1))


@dataclass
class FakeSettings:
    data_dir: Path


@dataclass
class FakeState:
    root_list: list[str]

    def roots(self, name: str) -> list[str]:
        return list(self.root_list)


@dataclass
class FakeCollection:
    """Records sync_paths calls; raises what ``fail`` says for the paths it names."""

    data_dir: Path
    root: Path
    name: str = "fake"
    record: object = True
    down: bool = False
    bad: set[str] = field(default_factory=set)
    synced: list[list[str]] = field(default_factory=list)
    reconciles: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.settings = FakeSettings(self.data_dir)
        self.state = FakeState([str(self.root)])

    def sync(self, progress: Any = None) -> IndexReport:
        if self.down:
            raise StoreUnavailableError("cannot reach the store (test)")
        self.reconciles += 1
        return IndexReport()

    def follow_reads(self, listener: Any) -> None:
        pass

    def reading(self) -> list[dict[str, Any]]:
        return []

    def sync_paths(self, paths: list[str], progress: Any = None) -> IndexReport:
        if self.down:
            raise StoreUnavailableError("cannot reach the store (test)")
        if any(p in self.bad for p in paths):
            raise InputError("this path breaks the batch (test)")
        with self.lock:
            self.synced.append(list(paths))
        report = IndexReport()
        report.failed = [(p, "unreadable (test)") for p in paths if p.endswith(".bad")]
        return report

    def source_for(self, root: str) -> Any:
        """The filesystem source the watcher asks which paths are its own (hidden ones are not)."""
        from plugins.filesystem.source import FilesystemSource

        return FilesystemSource([root], readers=[])

    def all_synced(self) -> set[str]:
        with self.lock:
            return {p for batch in self.synced for p in batch}


def until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(0.01)


@pytest.fixture
def fake(tmp_path: Path) -> FakeCollection:
    root = tmp_path / "root"
    root.mkdir()
    return FakeCollection(tmp_path / "data", root)


def test_events_become_sync_paths_calls(fake):
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20) and fake.reconciles == 1
        (fake.root / "a.md").write_text("hello")
        (fake.root / "sub").mkdir()
        (fake.root / "sub" / "b.md").write_text("world")
        (fake.root / ".hidden.md").write_text("not watched")
        until(lambda: {str(fake.root / "a.md"), str(fake.root / "sub")} <= fake.all_synced())
    assert str(fake.root / ".hidden.md") not in fake.all_synced()
    status = read_status(fake.data_dir, "fake")
    assert status is not None and status["running"] is False and status["state"] == "stopped"
    assert status["batches"] >= 1 and status["freshness"]["samples"] >= 1


def test_an_unreachable_store_keeps_changes_queued_and_persisted_then_applies_them(fake):
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        fake.down = True
        (fake.root / "a.md").write_text("queued while the store is down")
        until(lambda: str(fake.root / "a.md") in load_queue(fake.data_dir, "fake"))
        until(lambda: (read_status(fake.data_dir, "fake") or {}).get("state") == "waiting to retry")
        assert "cannot reach the store" in (read_status(fake.data_dir, "fake") or {}).get("last_error", "")
        fake.down = False
        until(lambda: str(fake.root / "a.md") in fake.all_synced())
        until(lambda: load_queue(fake.data_dir, "fake") == [])


def test_a_restart_applies_the_queue_a_stopped_watcher_left(fake):
    fake.down = True
    watcher = Watcher(fake, options=FAST)
    watcher.start()
    until(lambda: (read_status(fake.data_dir, "fake") or {}).get("state") == "waiting to retry")
    (fake.root / "a.md").write_text("changed while down")
    until(lambda: str(fake.root / "a.md") in load_queue(fake.data_dir, "fake"))
    watcher.stop()
    assert load_queue(fake.data_dir, "fake") == [str(fake.root / "a.md")]
    status = read_status(fake.data_dir, "fake")
    assert status is not None and status["queued"] == 1 and not status["running"]

    fake.down = False
    with Watcher(fake, options=FAST) as again:
        until(lambda: str(fake.root / "a.md") in fake.all_synced())
        assert again.wait_idle(20)
    assert not queue_path(fake.data_dir, "fake").exists()


def test_a_path_that_breaks_its_batch_is_narrowed_down_reported_and_skipped(fake):
    fake.bad.add(str(fake.root / "poison.md"))
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        for name in ("one.md", "poison.md", "two.md"):
            (fake.root / name).write_text(name)
        until(lambda: {str(fake.root / "one.md"), str(fake.root / "two.md")} <= fake.all_synced(), timeout=30)
        until(lambda: str(fake.root / "poison.md") in watcher.errors, timeout=30)
        assert "breaks the batch" in watcher.errors[str(fake.root / "poison.md")]
        assert watcher.wait_idle(20)
    assert str(fake.root / "poison.md") not in fake.all_synced()


def test_failed_files_of_a_report_are_listed_until_they_index(fake):
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        (fake.root / "x.bad").write_text("?")
        until(lambda: str(fake.root / "x.bad") in watcher.errors)
        until(lambda: str(fake.root / "x.bad") in (read_status(fake.data_dir, "fake") or {}).get("errors", {}))


def test_inotify_limit_falls_back_to_polling_and_names_the_sysctl(fake, caplog):
    from watchdog.observers import Observer

    class LimitedObserver(Observer):  # type: ignore[misc,valid-type]
        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    options = WatchOptions(rescan_seconds=0, poll_seconds=0.1, timing=FAST.timing)
    with (
        caplog.at_level(logging.WARNING, logger="indexer.watch.watcher"),
        Watcher(fake, options=options, observer_factory=LimitedObserver) as watcher,
    ):
        assert watcher.polled_roots == [str(fake.root)]
        assert watcher.wait_idle(20)
        (fake.root / "polled.md").write_text("found by polling")
        until(lambda: str(fake.root / "polled.md") in fake.all_synced())
    assert "fs.inotify.max_user_watches" in caplog.text


def test_polling_mode_sees_changes(fake):
    options = WatchOptions(polling=True, poll_seconds=0.1, rescan_seconds=0, timing=FAST.timing)
    with Watcher(fake, options=options) as watcher:
        assert watcher.polled_roots == [str(fake.root)]
        assert watcher.wait_idle(20)
        (fake.root / "p.md").write_text("polled")
        until(lambda: str(fake.root / "p.md") in fake.all_synced())


def test_periodic_rescans_run(fake):
    options = WatchOptions(rescan_seconds=0.2, timing=FAST.timing)
    with Watcher(fake, options=options):
        until(lambda: fake.reconciles >= 3)


def test_one_watcher_per_collection(fake):
    with Watcher(fake, options=FAST), pytest.raises(WatchError, match="already runs"):
        Watcher(fake, options=FAST).start()


def test_the_data_dir_inside_a_root_is_not_watched(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    fake = FakeCollection(root / "indexer-data", root)
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        (root / "a.md").write_text("x")
        until(lambda: str(root / "a.md") in fake.all_synced())
        assert watcher.wait_idle(20)
    assert not any(p.startswith(str(root / "indexer-data")) for p in fake.all_synced())


def test_translate_watchdog_events():
    from watchdog import events as ev

    assert translate(ev.FileCreatedEvent("/r/a")) == [("/r/a", What.WRITE)]
    assert translate(ev.FileClosedEvent("/r/a")) == [("/r/a", What.CLOSED)]
    assert translate(ev.FileMovedEvent("/r/a.tmp", "/r/a")) == [("/r/a.tmp", What.GONE), ("/r/a", What.CLOSED)]
    assert translate(ev.DirMovedEvent("/r/d", "/r/e")) == [("/r/d", What.GONE), ("/r/e", What.FOLDER)]
    assert translate(ev.DirDeletedEvent("/r/d")) == [("/r/d", What.GONE)]
    assert translate(ev.DirModifiedEvent("/r")) == []
    assert translate(ev.FileOpenedEvent("/r/a")) == []


def test_stop_is_prompt_and_idempotent(fake):
    watcher = Watcher(fake, options=FAST)
    watcher.start()
    assert watcher.wait_idle(20)
    watcher.stop()
    watcher.stop()
    assert not watcher.running
    assert os.path.exists(fake.data_dir / "watch" / "fake.status.json")


def test_describe_status_for_the_cli():
    from indexer.state.watch_files import describe

    assert "never started" in describe(None)
    line = describe(
        {
            "running": True,
            "pid": 42,
            "state": "idle",
            "queued": 3,
            "errors": {"/r/x.pdf": "corrupt"},
            "freshness": {"samples": 5, "last_ms": 120.0, "p50_ms": 150.0, "p95_ms": 300.0},
            "polled_roots": ["/mnt/nfs"],
        }
    )
    assert line == (
        "running (pid 42), idle; 3 queued; 1 files with errors; change->searchable last 120.0 ms, p50 150.0 ms, "
        "p95 300.0 ms; polling /mnt/nfs"
    )
    busy = describe(
        {
            "running": True, "pid": 42, "state": "syncing", "queued": 0,
            "reading": [{"path": "/r/scan.pdf", "seconds": 41.6}],
            "writing": {"path": "/r/big.mbox", "chunks_written": 2560, "chunks_total": 20000},
        }
    )  # fmt: skip
    assert busy == (
        "running (pid 42), syncing; 0 queued; 0 files with errors; reading /r/scan.pdf (42s so far); "
        "writing /r/big.mbox: 2560 of 20000 chunks"
    )


class SlowTarget(FakeCollection):
    """A target whose syncs cost simulated time: ``per_path`` seconds a path, ``costly`` paths more, added to
    the watcher's clock (no sleeping), so batch sizes can be checked against what they cost."""

    def __init__(self, *args: Any, per_path: float = 0.05, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.per_path = per_path
        self.costly: dict[str, float] = {}
        self.offset = 0.0
        self.batch_seconds: list[float] = []

    def clock(self) -> float:
        return time.monotonic() + self.offset

    def sync_paths(self, paths: list[str], progress: Any = None) -> IndexReport:
        seconds = sum(self.costly.get(p, self.per_path) for p in paths)
        self.offset += seconds
        with self.lock:
            self.batch_seconds.append(seconds)
        return super().sync_paths(paths)


@pytest.fixture
def slow(tmp_path: Path) -> SlowTarget:
    root = tmp_path / "root"
    root.mkdir()
    return SlowTarget(tmp_path / "data", root)


def test_batches_are_sized_by_measured_cost_from_the_first_one(slow):
    with Watcher(slow, options=WatchOptions(rescan_seconds=0), clock=slow.clock) as watcher:
        assert watcher.wait_idle(20)
        for i in range(120):
            (slow.root / f"n{i:03d}.md").write_text("a small new note\n" * 100)  # 1.7 KB each
        until(lambda: len(slow.all_synced()) == 120, timeout=60)
        assert watcher.wait_idle(20)
    sizes = [len(b) for b in slow.synced]
    assert max(sizes) < 120 and sizes[0] <= 20  # the first batch after idle: by cost (was: up to 256 paths)
    assert max(slow.batch_seconds) <= 2.0  # none over 2 s
    assert sorted(slow.batch_seconds)[len(slow.batch_seconds) // 2] <= 0.75  # most about the 0.5 s target


def test_a_continuously_rewritten_file_does_not_hold_back_the_others(slow):
    hot = slow.root / "app.log"
    slow.costly[str(hot)] = 1.5  # each sync of the log costs 1.5 s
    with Watcher(slow, options=WatchOptions(rescan_seconds=0), clock=slow.clock) as watcher:
        assert watcher.wait_idle(20)
        stop = threading.Event()

        def logger() -> None:  # open, append, close every 100 ms
            while not stop.is_set():
                with open(hot, "a") as fh:
                    fh.write("a log line\n")
                stop.wait(0.1)

        thread = threading.Thread(target=logger, daemon=True)
        thread.start()
        try:
            until(lambda: str(hot) in slow.all_synced())
            log_syncs_before = sum(str(hot) in b for b in slow.synced)
            for i in range(5):
                note = slow.root / f"edit{i}.md"
                note.write_text(f"edit {i}")
                until(lambda note=note: str(note) in slow.all_synced(), timeout=30)
            log_syncs = sum(str(hot) in b for b in slow.synced) - log_syncs_before
            assert str(hot) in watcher.status()["queued_paths"] or log_syncs <= 2
        finally:
            stop.set()
            thread.join()
    # 1.5 s a sync, at most 10 % of the worker's time: the log is synced every ~15 s of watcher time at most
    assert sum(s for s in slow.batch_seconds if s >= 1.5) <= 0.2 * slow.offset + 1.5
    assert watcher.freshness_stats.summary()["samples"] >= 5


def test_status_shows_the_running_batch_and_the_queue_while_it_runs(fake):
    release, entered = threading.Event(), threading.Event()
    real = fake.sync_paths

    def slow_sync(paths: list[str], progress: Any = None) -> IndexReport:
        entered.set()
        assert release.wait(30)
        return real(paths)

    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        fake.sync_paths = slow_sync  # type: ignore[method-assign]
        for name in ("a.md", "b.md", "c.md"):
            (fake.root / name).write_text(name)
        assert entered.wait(20)
        status = read_status(fake.data_dir, "fake") or {}
        assert status["state"] == "syncing" and status["batch"]["paths"] >= 1
        assert status["queued"] >= status["batch"]["paths"]
        in_batch = status["batch"]["paths"]
        (fake.root / "later.md").write_text("changed while the batch runs")

        def later_queued() -> bool:
            current = read_status(fake.data_dir, "fake") or {}
            return str(fake.root / "later.md") in current.get("queued_paths", []) and current.get("batch")

        until(later_queued)  # the status file follows the queue while the worker is inside the batch
        current = read_status(fake.data_dir, "fake") or {}
        assert current["queued"] >= in_batch + 1 and current["batch"]["seconds"] >= 0
        from indexer.state.watch_files import describe

        assert f"a batch of {in_batch} paths running" in describe(current)
        release.set()
        assert watcher.wait_idle(20)
        done = read_status(fake.data_dir, "fake") or {}
        assert done["state"] == "idle" and done["queued"] == 0 and done["batch"] is None


def test_a_watcher_drives_any_watch_target(fake):
    """The Watcher asks only what the WatchTarget protocol names (the facade's Collection is one): a
    reconciliation scan at start, then one sync_paths call per batch; freshness and status for /status."""
    from indexer.watch import Watcher, WatchTarget

    target: WatchTarget = fake
    handle = Watcher(target, options=FAST)
    handle.start()
    try:
        until(lambda: fake.reconciles >= 1)
        (fake.root / "n.md").write_text("note")
        until(lambda: str(fake.root / "n.md") in fake.all_synced())
        summary = handle.freshness()
        assert summary["samples"] >= 1
        assert {"state", "queued", "p50_ms", "p95_ms", "last_ms"} <= set(summary)
    finally:
        handle.stop()
    assert (read_status(fake.data_dir, "fake") or {}).get("state") == "stopped"


def test_watching_a_collection_without_roots_says_what_to_do(tmp_path, monkeypatch):
    from indexer.cli.watch import watch_command

    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(InputError, match="indexer watch PATH"):
        watch_command(None, "nothing-here")
    with pytest.raises(InputError, match="not an existing folder"):
        watch_command([tmp_path / "missing"], "nothing-here")


def test_rescans_watch_new_roots_and_roots_that_came_back(fake, tmp_path):
    import shutil

    from indexer.watch.observers import watch_alive as _watch_alive

    options = WatchOptions(rescan_seconds=0.2, timing=FAST.timing)
    with Watcher(fake, options=options) as watcher:
        assert watcher.wait_idle(20)
        other = tmp_path / "other"
        other.mkdir()
        fake.state.root_list.append(str(other))  # `indexer index other` while the watcher runs
        until(lambda: str(other) in watcher.watches._watches)
        (other / "o.md").write_text("in the new root")
        until(lambda: str(other / "o.md") in fake.all_synced())

        def root_watched() -> bool:
            held = watcher.watches._watches.get(str(fake.root))
            return held is not None and _watch_alive(*held)

        shutil.rmtree(fake.root)  # the root goes away (unmounted, deleted) and comes back
        until(lambda: not root_watched())
        fake.root.mkdir()
        until(root_watched)
        (fake.root / "back.md").write_text("watched again")
        until(lambda: str(fake.root / "back.md") in fake.all_synced())


def test_a_collection_locked_by_another_writer_is_retried_not_skipped(fake):
    from indexer.errors import LockedError

    attempts: list[int] = []
    real = fake.sync_paths

    def busy_then_free(paths: list[str], progress: Any = None) -> IndexReport:
        if len(attempts) < 4:  # more failures than a bad path is allowed
            attempts.append(1)
            raise LockedError(f"collection {fake.name!r} is being written by another indexer process; wait for it")
        return real(paths)

    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        fake.sync_paths = busy_then_free  # type: ignore[method-assign]
        (fake.root / "a.md").write_text("waits for the lock")
        until(lambda: str(fake.root / "a.md") in fake.all_synced(), timeout=60)
    assert len(attempts) == 4 and not watcher.errors


@pytest.mark.skipif(not os.path.exists("/proc/sys/fs/inotify/max_queued_events"), reason="Linux inotify")
def test_an_inotify_queue_overflow_triggers_a_rescan(fake):
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with Watcher(fake, options=FAST) as watcher:  # periodic rescans off
        assert watcher.wait_idle(20) and fake.reconciles == 1
        inotify = watcher.watches._native._inotify_fd  # watchdog's reader of the inotify instance
        target = fake.root / "churn.md"
        with inotify._lock:  # the reader cannot read meanwhile: the kernel's queue fills and overflows for real
            for i in range(limit // 2 + 100):  # two events a write (modify, close)
                target.write_text(str(i))
        until(lambda: fake.reconciles == 2)
        assert watcher.wait_idle(20) and fake.reconciles == 2  # once, not in a loop


def _inotify_watches(watcher: Watcher) -> int:
    fd = watcher.watches._native._inotify_fd._inotify_fd  # the observer's inotify instance
    with open(f"/proc/self/fdinfo/{fd}") as fh:
        return sum(1 for line in fh if line.startswith("inotify wd:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/fdinfo"), reason="counts inotify watches through /proc (Linux)")
def test_hidden_folders_get_no_inotify_watch_and_a_clone_logs_no_watchdog_warning(fake):
    import warnings

    (fake.root / ".git" / "objects" / "ab").mkdir(parents=True)
    (fake.root / "docs" / "deep").mkdir(parents=True)
    with Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        assert _inotify_watches(watcher) == 3  # the root, docs, docs/deep: not .git, .git/objects, .../ab
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(30):  # what `git clone` does inside a root: folders made faster than watched
                (fake.root / "clone" / f"p{i}" / "q" / "r").mkdir(parents=True)
                (fake.root / "clone" / f"p{i}" / "q" / "r" / "f.md").write_text("x")
                (fake.root / "clone" / ".git" / "objects" / f"{i:02x}").mkdir(parents=True)
            last = str(fake.root / "clone" / "p29" / "q" / "r" / "f.md")
            until(lambda: any(last.startswith(p) for p in fake.all_synced()))
            until(lambda: _inotify_watches(watcher) == 3 + 1 + 30 * 3)  # clone, p*, q, r; no .git below
            assert watcher.wait_idle(20)
        noisy = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        assert noisy == [], str(noisy[0].message)[:200]
