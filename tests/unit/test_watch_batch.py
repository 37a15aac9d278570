"""The batching rules of the watcher (indexer.watch.batch) on a fake clock and fake stat data."""

from __future__ import annotations

import pytest

from indexer.watch.batch import Batch, BatchTiming, ChangeBatcher, What, drop_nested, is_transient

T = BatchTiming(gather=0.03, max_gather=0.15, settle=0.3, grace=0.25, max_paths=6, fresh_lane=2)


class FakeDisk:
    def __init__(self) -> None:
        self.stats: dict[str, tuple[int, int]] = {}

    def __call__(self, path: str) -> tuple[int, int] | None:
        return self.stats.get(path)


@pytest.fixture
def disk() -> FakeDisk:
    return FakeDisk()


@pytest.fixture
def batcher(disk: FakeDisk) -> ChangeBatcher:
    return ChangeBatcher(T, stat=disk)


def paths(batch: Batch | None) -> list[str]:
    assert batch is not None
    return list(batch.paths)


def test_a_closed_file_leaves_after_the_gather_pause_not_a_debounce(batcher):
    batcher.note("/r/a.md", What.WRITE, 10.0)
    batcher.note("/r/a.md", What.CLOSED, 10.001)
    assert batcher.take(10.01) is None  # events may still be coming (an editor's save is several)
    assert batcher.next_due(10.01) == pytest.approx(10.031)
    batch = batcher.take(10.031)
    assert paths(batch) == ["/r/a.md"] and batch.first_seen["/r/a.md"] == 10.0
    assert len(batcher) == 0 and batcher.take(20.0) is None and batcher.next_due(20.0) is None


def test_a_steady_stream_of_events_cannot_hold_a_ready_path_back(batcher):
    batcher.note("/r/a.md", What.CLOSED, 0.0)
    now = 0.0
    while batcher.take(now) is None:
        now += 0.01
        batcher.note(f"/r/other{int(now * 100)}.md", What.WRITE, now)  # never closed: not ready
        assert now < 1.0
    assert now == pytest.approx(T.max_gather, abs=0.011)


def test_an_unclosed_write_waits_until_size_and_mtime_hold_still(batcher, disk):
    disk.stats["/r/big.log"] = (100, 1)
    batcher.note("/r/big.log", What.WRITE, 0.0)
    assert batcher.take(0.29) is None
    disk.stats["/r/big.log"] = (200, 2)  # still growing at the settle check
    assert batcher.take(0.31) is None
    assert batcher.next_due(0.31) == pytest.approx(0.61)
    assert batcher.take(0.6) is None
    assert paths(batcher.take(0.62)) == ["/r/big.log"]  # unchanged for a whole settle period


def test_a_close_makes_a_settling_file_ready_at_once(batcher, disk):
    disk.stats["/r/f.md"] = (1, 1)
    batcher.note("/r/f.md", What.WRITE, 0.0)
    disk.stats["/r/f.md"] = (5, 2)
    batcher.note("/r/f.md", What.CLOSED, 0.01)
    assert paths(batcher.take(0.05)) == ["/r/f.md"]


def test_a_vanished_file_waits_the_grace_and_a_reappearance_cancels_the_delete(batcher):
    # vim: rename the original aside, write the new one, delete the backup
    batcher.note("/r/notes.md", What.GONE, 0.0)
    batcher.note("/r/notes.md~", What.CLOSED, 0.0)
    assert batcher.take(0.1) is None
    batcher.note("/r/notes.md", What.WRITE, 0.12)
    batcher.note("/r/notes.md", What.CLOSED, 0.13)
    batcher.note("/r/notes.md~", What.GONE, 0.14)
    batch = batcher.take(0.2)
    assert paths(batch) == ["/r/notes.md"]  # a change, never a delete; first seen at the rename
    assert batch.first_seen["/r/notes.md"] == 0.0
    assert batcher.take(0.38) is None
    assert paths(batcher.take(0.4)) == ["/r/notes.md~"]  # the backup's deletion is a no-op sync


def test_a_real_delete_goes_out_after_the_grace(batcher):
    batcher.note("/r/gone.md", What.GONE, 1.0)
    assert batcher.take(1.2) is None
    assert paths(batcher.take(1.26)) == ["/r/gone.md"]


@pytest.mark.parametrize("name", ["a.md~", ".a.md.swp", "4913", "#a.md#", ".#a.md", "a.tmp", "a.md___jb_tmp___"])
def test_editor_temp_names_are_transient(name):
    assert is_transient(name)


@pytest.mark.parametrize("name", ["a.md", "notes.txt", "tmp.md", "4914", "swap.py"])
def test_ordinary_names_are_not_transient(name):
    assert not is_transient(name)


def test_atomic_save_is_one_batch_with_only_the_target_ready(batcher):
    batcher.note("/r/doc.md.tmp", What.WRITE, 0.0)
    batcher.note("/r/doc.md.tmp", What.CLOSED, 0.001)
    batcher.note("/r/doc.md.tmp", What.GONE, 0.002)  # moved over the target
    batcher.note("/r/doc.md", What.CLOSED, 0.002)
    assert paths(batcher.take(0.05)) == ["/r/doc.md"]
    assert paths(batcher.take(0.3)) == ["/r/doc.md.tmp"]


def test_folders_cover_the_paths_under_them(batcher):
    batcher.note("/r/new", What.FOLDER, 0.0)
    batcher.note("/r/new/a.md", What.CLOSED, 0.0)
    batcher.note("/r/new/sub/b.md", What.CLOSED, 0.01)
    batcher.note("/r/newer.md", What.CLOSED, 0.01)  # a prefix of the name, not of the path
    assert paths(batcher.take(0.05)) == ["/r/new/a.md", "/r/new/sub/b.md", "/r/newer.md"]  # files first
    assert batcher.take(0.2) is None  # a new folder may still be filling
    assert paths(batcher.take(0.31)) == ["/r/new"]  # then the folder pass
    batcher.note("/r/new2", What.FOLDER, 1.0)
    batcher.note("/r/new2/c.md", What.WRITE, 1.0)  # settling: the folder waits for it
    batcher.note("/r/new2/d.md", What.WRITE, 1.0)
    assert paths(batcher.take(1.35)) == ["/r/new2/c.md", "/r/new2/d.md"]
    batch = batcher.take(1.35)
    assert paths(batch) == ["/r/new2"] and batch.first_seen == {"/r/new2": 1.0}


def test_a_folder_moved_out_is_one_prefix_delete(batcher):
    batcher.note("/r/tree", What.GONE, 0.0)
    batcher.note("/r/tree/x.md", What.GONE, 0.0)
    assert paths(batcher.take(0.3)) == ["/r/tree"]


def test_a_folder_moved_within_the_root_syncs_both_ends(batcher):
    batcher.note("/r/old", What.GONE, 0.0)
    batcher.note("/r/new", What.FOLDER, 0.0)
    batcher.note("/r/new/a.md", What.CLOSED, 0.0)  # watchdog's synthetic sub-move events
    batcher.note("/r/old/a.md", What.GONE, 0.0)
    assert paths(batcher.take(0.05)) == ["/r/new/a.md"]  # the new place first: vectors are reused from the old
    assert paths(batcher.take(0.26)) == ["/r/old"]
    assert paths(batcher.take(0.31)) == ["/r/new"]


def test_an_ignore_file_edit_syncs_its_folder(batcher):
    batcher.note("/r/docs/.gitignore", What.CLOSED, 0.0)
    batcher.note("/r/docs/a.md", What.CLOSED, 0.0)
    batcher.note("/r/.indexerignore", What.CLOSED, 0.0)
    assert paths(batcher.take(0.05)) == ["/r"]


def test_bursts_leave_in_capped_batches_with_a_fresh_lane(batcher):
    for i in range(20):
        batcher.note(f"/r/bulk{i:02d}.md", What.CLOSED, i * 0.001)
    batcher.note("/r/edit.md", What.CLOSED, 0.5)
    batch = batcher.take(0.6)
    assert len(batch) == T.max_paths
    assert "/r/edit.md" in batch.paths and "/r/bulk00.md" in batch.paths  # newest edit rides along
    assert "/r/bulk19.md" in batch.paths  # the lane holds the two newest
    assert len(batcher) == 21 - T.max_paths
    assert paths(batcher.take(0.6, max_paths=1)) == ["/r/bulk04.md"]  # narrowed: oldest first


def test_requeue_keeps_the_first_seen_time_and_is_ready_at_once(batcher):
    batcher.note("/r/a.md", What.CLOSED, 1.0)
    batch = batcher.take(1.1)
    batcher.note("/r/a.md", What.CLOSED, 2.0)  # changed again while the failed batch ran
    batcher.requeue(batch, 3.0)
    again = batcher.take(3.0)
    assert paths(again) == ["/r/a.md"] and again.first_seen["/r/a.md"] == 1.0


def test_take_all_returns_everything_ready_or_not(batcher, disk):
    disk.stats["/r/w.md"] = (1, 1)
    batcher.note("/r/w.md", What.WRITE, 0.0)
    batcher.note("/r/g.md", What.GONE, 0.0)
    assert paths(batcher.take_all()) == ["/r/g.md", "/r/w.md"] and len(batcher) == 0


def test_drop_nested():
    assert drop_nested(["/a", "/a/b", "/ab", "/c/d", "/c"]) == {"/a", "/ab", "/c"}


# -- batches sized by cost, rate limit (fake clock, fake stat data) -------------------------------------------
def test_the_first_batch_after_idle_is_sized_by_cost_not_a_fixed_count(disk):
    batcher = ChangeBatcher(BatchTiming(), stat=disk)  # the default timing: 0.5 s, up to 256 paths
    for i in range(300):
        disk.stats[f"/r/new{i:03d}.md"] = (2_000, 1)  # 2 KB of new text each
        batcher.note(f"/r/new{i:03d}.md", What.CLOSED, 0.0)
    batch = batcher.take(1.0)
    assert batch is not None and 1 <= len(batch) < 10  # was 256 whatever their cost
    assert batch.estimate <= BatchTiming().target_seconds
    assert batch.costs.keys() == set(batch.paths) and batch.sizes == dict.fromkeys(batch.paths, 2_000)


def test_measured_batches_correct_the_estimates(disk):
    batcher = ChangeBatcher(BatchTiming(), stat=disk)
    for i in range(300):
        disk.stats[f"/r/new{i:03d}.md"] = (2_000, 1)
        batcher.note(f"/r/new{i:03d}.md", What.CLOSED, 0.0)
    first = batcher.take(1.0)
    batcher.learn(first, elapsed=first.estimate * 0.5, now=1.1)  # twice as fast as guessed
    faster = batcher.take(1.2)
    assert len(faster) > len(first)
    batcher.learn(faster, elapsed=faster.estimate * 8, now=2.0)  # much slower than guessed
    slower = batcher.take(2.1)
    assert len(slower) < len(faster)


def test_a_path_that_alone_costs_more_than_a_batch_goes_alone(disk):
    batcher = ChangeBatcher(BatchTiming(), stat=disk)
    disk.stats["/r/huge.log"] = (5_000_000, 1)
    batcher.note("/r/huge.log", What.CLOSED, 0.0)
    for i in range(5):
        disk.stats[f"/r/s{i}.md"] = (100, 1)
        batcher.note(f"/r/s{i}.md", What.CLOSED, 0.01)
    first = batcher.take(1.0)
    assert paths(first) == ["/r/huge.log"]  # the oldest always goes, alone when it alone exceeds the target
    assert set(paths(batcher.take(1.0))) == {f"/r/s{i}.md" for i in range(5)}


def test_a_file_changing_continuously_is_rate_limited_and_cannot_starve_the_others(disk):
    t = BatchTiming(hot_share=0.1)
    batcher = ChangeBatcher(t, stat=disk)
    disk.stats["/r/app.log"] = (5_000_000, 1)
    now, synced_log, synced_other = 0.0, [], []
    while now < 60.0:  # the log is rewritten every 100 ms; another file is edited every 0.5 s
        batcher.note("/r/app.log", What.CLOSED, now)
        if int(now * 10) % 5 == 0:
            disk.stats["/r/note.md"] = (500, int(now * 10))
            batcher.note("/r/note.md", What.CLOSED, now)
        batch = batcher.take(now)
        if batch is not None:
            seconds = 2.0 if "/r/app.log" in batch.paths else 0.02 * len(batch)  # the log costs 2 s a sync
            (synced_log if "/r/app.log" in batch.paths else synced_other).append(now)
            now += seconds
            batcher.learn(batch, seconds, now)
        now = round(now + 0.1, 3)
    assert 2 <= len(synced_log) <= 5  # every 2 s / hot_share = 20 s: 10 % of the time, not every batch
    gaps = [b - a for a, b in zip(synced_other, synced_other[1:], strict=False)]
    assert len(synced_other) > 50 and max(gaps) <= 3.0  # the note never waits for more than one log sync
    assert sorted(gaps)[len(gaps) // 2] <= 0.6  # and mostly for none
    assert batcher.held_back(now) in ([], ["/r/app.log"])


def test_a_cheap_file_is_never_held_back(batcher):
    batcher.note("/r/a.md", What.CLOSED, 0.0)
    batch = batcher.take(0.05)
    batcher.learn(batch, 0.01, 0.06)
    batcher.note("/r/a.md", What.CLOSED, 0.07)
    assert paths(batcher.take(0.11)) == ["/r/a.md"] and batcher.held_back(0.11) == []


def test_an_edit_made_during_a_folder_burst_goes_in_the_next_batch(disk):
    batcher = ChangeBatcher(BatchTiming(), stat=disk)
    batcher.note("/r/burst", What.FOLDER, 0.0)  # a folder copied in: its files are reported one by one
    for i in range(400):
        disk.stats[f"/r/burst/b{i:03d}.md"] = (150, 1)
        batcher.note(f"/r/burst/b{i:03d}.md", What.CLOSED, 0.001 * i)
    disk.stats["/r/notes/edit.md"] = (150, 1)
    batcher.note("/r/notes/edit.md", What.CLOSED, 0.2)  # older than half of the burst's files
    for i in range(400, 800):
        disk.stats[f"/r/burst/b{i:03d}.md"] = (150, 1)
        batcher.note(f"/r/burst/b{i:03d}.md", What.CLOSED, 0.001 * i)
    first = batcher.take(1.0)
    assert "/r/notes/edit.md" in first.paths and len(first) < 100  # not after the 200 burst files before it
    assert "/r/burst/b000.md" in first.paths  # the burst goes on, oldest first


def test_a_file_edited_again_and_again_by_hand_is_not_held_back(disk):
    batcher = ChangeBatcher(BatchTiming(), stat=disk)
    disk.stats["/r/draft.md"] = (2_000, 1)
    now = 0.0
    for _ in range(5):  # saved every 0.2 s, each sync 0.1 s (a busy machine): never a batch's worth
        batcher.note("/r/draft.md", What.CLOSED, now)
        batch = batcher.take(now + 0.05)
        assert batch is not None and batch.paths == ("/r/draft.md",)
        batcher.learn(batch, 0.1, now + 0.15)
        now += 0.2
    assert batcher.held_back(now) == []


def test_a_large_file_s_slices_go_on_at_once_and_its_next_change_waits_for_its_read(disk):
    """A large file read in the background (4 s) and written slice by slice: its slices are not held back by the
    read's rate limit (they used to wait 4 s x (1 / hot_share - 1) = 129 s after the first slice); once its last
    slice is written the read's cost holds its next change back, as for any costly path."""
    batcher = ChangeBatcher(T, stat=disk)
    log = "/r/big.log"
    batcher.note(log, What.CLOSED, 0.0)
    first = batcher.take(0.05)
    assert paths(first) == [log]
    batcher.learn(first, 0.2, 5.0)  # the watcher leaves a part-written file's slices out of the cost model
    batcher.go_on(log, 5.0)  # part-written: the watcher queues its next slices
    batcher.charge_reads({log: 4.0}, {log}, 5.0)
    for now in (5.05, 6.05):  # its slices go on in the next batches (after the gather pause), not 129 s later
        batch = batcher.take(now)
        assert paths(batch) == [log] and batcher.held_back(now) == []
        batcher.learn(batch, 0.2, now + 0.5)
        if now < 6:
            batcher.go_on(log, now + 0.5)
            batcher.charge_reads({}, {log}, now + 0.5)
    batcher.charge_reads({}, set(), 7.0)  # its last slice written: the read's cost is charged now
    batcher.note(log, What.CLOSED, 7.5)  # appended again
    assert batcher.take(8.0) is None and batcher.held_back(8.0) == [log]
    assert paths(batcher.take(7.0 + 4.0 * (1 / T.hot_share - 1) + 0.1)) == [log]


def test_a_large_file_changed_while_its_slices_go_on_is_rate_limited_at_the_change(disk):
    """A large log appended while its slices are written: the change charges the read's cost at once (its next
    version waits, as a file that keeps changing must), instead of the file being read again every batch."""
    batcher = ChangeBatcher(T, stat=disk)
    log = "/r/big.log"
    batcher.note(log, What.CLOSED, 0.0)
    batcher.learn(batcher.take(0.05), 0.2, 5.0)
    batcher.go_on(log, 5.0)
    batcher.charge_reads({log: 4.0}, {log}, 5.0)
    assert batcher.held_back(5.05) == []  # the slices of the version read go on
    batcher.note(log, What.CLOSED, 5.2)  # appended: a new version
    assert batcher.take(5.3) is None and batcher.held_back(5.3) == [log]
    assert paths(batcher.take(5.2 + 4.0 * (1 / T.hot_share - 1) + 0.1)) == [log]
