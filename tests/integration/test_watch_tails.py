"""Freshness tails under a live watcher (issue 44), real folders, watchdog, the real model, FAISS and embedded Qdrant.
Assertions are on order and counts, never on latency (the figures are bench/freshness_tails.py's):

- a note saved while a large file is being written (one slice per batch here) is committed before the large file;
- beside a log appended every 100 ms, no batch that syncs an edited note holds a read of the log longer than
  ``HOT_READ_SECONDS`` (generous: the watcher leaves a read running half a second in the background);
- the per-file trace reaches the status (``last_batch.stages``/``slowest``, ``last_slow_batch``) and a slow file is
  named in the log once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import indexer
from indexer.index import large
from indexer.state.watch_files import read_status
from indexer.types import IndexReport
from indexer.watch.watcher import Watcher, WatchOptions
from tests.integration.waiting import until

pytestmark = pytest.mark.slow

OPTIONS = WatchOptions(rescan_seconds=0)
DEADLINE = 120.0
HOT_READ_SECONDS = 1.0


class _Recording:
    """A collection as the watcher's target, keeping each batch's paths and report (and, in ``spans``, when it
    started and ended: only compared with other moments, never asserted as a duration)."""

    def __init__(self, col: Any) -> None:
        self._col = col
        self.batches: list[tuple[list[str], IndexReport]] = []
        self.spans: list[tuple[float, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._col, name)

    def sync_paths(self, paths: Iterable[str | Path], progress: Any = None) -> IndexReport:
        asked = [str(p) for p in paths]
        started = time.monotonic()
        report = self._col.sync_paths(asked, progress)
        self.batches.append((asked, report))
        self.spans.append((started, time.monotonic()))
        return report


def _holds(paths: list[str], file: Path) -> bool:
    """Whether a batch of ``paths`` syncs ``file``: named, or under a folder it rescans."""
    return any(file.resolve().is_relative_to(p) for p in paths)


def _top_text(col: Any, query: str) -> str:
    hits = col.search(query, k=1).hits
    return hits[0].text if hits else ""


def _paragraphs(n: int, tag: str) -> str:
    return "\n\n".join(f"{tag} {i}: the harbour master logged ship {i * 37 % 101}, the tide and the fog at dawn."
                       for i in range(n))  # fmt: skip


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_a_note_saved_while_a_large_file_is_written_is_committed_before_it(tmp_path, store, embed_model_path,
                                                                           monkeypatch):  # fmt: skip
    monkeypatch.setattr(large, "LARGE_WRITE_SECONDS", 0.0)  # one slice per batch: the order is the point
    root = tmp_path / "root"
    root.mkdir()
    (root / "readme.md").write_text("A folder of harbour records.")
    col = indexer.open_collection(f"tails-{store}", store=store, chunk_tokens=24, embed_batch_chunks=4)
    target = _Recording(col)
    watcher = Watcher(target, [root], OPTIONS)  # type: ignore[arg-type]
    watcher.start()
    big, note = root / "archive.txt", root / "note.md"
    try:
        assert watcher.wait_idle(DEADLINE)
        big.write_text(_paragraphs(160, "Entry"))
        until(lambda: (watcher.status()["writing"] or {}).get("path") == str(big), DEADLINE, "the first slice")
        note.write_text("Buy rye bread and seven apples at the corner market.")
        assert watcher.wait_idle(DEADLINE)
        stats = col.state.file_stats(col.name, str(root.resolve()))
        note_at, big_at = stats[str(note.resolve())][3], stats[str(big.resolve())][3]
        assert note_at < big_at, "the note waited for the large file"
        sliced = [report for _, report in target.batches if report.unfinished == [str(big.resolve())]]
        assert len(sliced) >= 3  # the large file went on over several batches
        note_batch = next(i for i, (paths, _) in enumerate(target.batches) if str(note.resolve()) in paths)
        assert target.batches[note_batch][1].unfinished == [str(big.resolve())]  # written beside it, not after it
        chunks = col.state.chunk_ids(col.name, [str(big.resolve())])[str(big.resolve())]
        assert len(chunks) >= 40 and col.state.count_pending(col.name) == 0
        status = col.status()
        assert status["points"] == status["chunks"]
        assert col.search("rye bread apples market", k=1).hits[0].path == str(note.resolve())
    finally:
        watcher.stop()
        col.close()


LOG_BLOCK = "".join(f"2026-12-06 01:00:{i % 60:02} worker {i % 7} handled request {i} in {i * 3 % 97} ms\n"
                    for i in range(40))  # repeated: its chunks embed once; reading and chunking it stay per sync


def test_no_edit_waits_for_a_batch_holding_a_long_read_of_a_hot_log(tmp_path, embed_model_path):
    root = tmp_path / "root"
    root.mkdir()
    log = root / "app.log"
    log.write_text(LOG_BLOCK * 800)  # ~2.8 MB: seconds to chunk on a 2-core machine
    col = indexer.open_collection("tails-hot", store="faiss")
    target = _Recording(col)
    watcher = Watcher(target, [root], OPTIONS)  # type: ignore[arg-type]
    watcher.start()
    stop = threading.Event()

    def append() -> None:  # opens, appends and closes every 100 ms, as a logger does
        i = 0
        while not stop.wait(0.1):
            with log.open("a") as out:
                out.write(f"2026-12-06 02:00:00 worker 3 handled request x{i} in 5 ms\n")
            i += 1

    writer = threading.Thread(target=append, daemon=True)
    notes = [root / f"note-{i}.md" for i in range(10)]
    saved: list[float] = []
    try:
        assert watcher.wait_idle(DEADLINE)
        writer.start()
        for i, note in enumerate(notes):
            saved.append(time.monotonic())
            note.write_text(f"Note {i}: the kite number {i} flew over the hill at noon.")
            path = str(note.resolve())
            until(lambda path=path: path in col.state.files(col.name), DEADLINE, f"note {i} synced")
        # a note is committed before its batch ends (the log's read may go on in it): let the last batch end, or
        # stop() interrupts it and the batch that synced the last note is never recorded
        stop.set()
        writer.join(5)
        assert watcher.wait_idle(DEADLINE)
    finally:
        stop.set()
        writer.join(5)
        watcher.stop()
        col.close()
    hot = str(log.resolve())

    def log_read(report: IndexReport) -> float:  # under the watcher a file is chunked in its reader thread
        return sum(v for k, v in report.held.get(hot, {}).items() if k in ("read", "chunk"))

    for note, at in zip(notes, saved, strict=True):
        # the batches the note waited for: those running or started after its save, up to the one with the note
        own = next(i for i, (paths, _) in enumerate(target.batches)
                   if _holds(paths, note) and target.spans[i][0] >= at)  # fmt: skip
        waited = [i for i in range(own + 1) if target.spans[i][1] > at]
        held = [round(log_read(target.batches[i][1]), 2) for i in waited]
        assert max(held) <= HOT_READ_SECONDS, (note.name, held)
    # the premise: the log was synced meanwhile, and its read (with its chunking) was a slow one
    assert any(hot in paths for paths, _ in target.batches), "the log was never synced: the test shows nothing"
    assert any(hot in r.reading for _, r in target.batches), "the log's re-read was never slow: nothing shown"


def test_the_trace_reaches_the_status_and_a_slow_file_is_named_once(tmp_path, embed_model_path, caplog):
    root = tmp_path / "root"
    root.mkdir()
    col = indexer.open_collection("tails-trace", store="faiss")
    watcher = Watcher(col, [root], OPTIONS)
    watcher.ledger.slow_seconds = 0.0  # every file is "slow": which files are named, and how often
    watcher.start()
    note = root / "note.md"
    try:
        assert watcher.wait_idle(DEADLINE)
        with caplog.at_level(logging.WARNING, logger="indexer.watch"):
            for i in range(3):
                note.write_text(f"Edit {i} of a note about lighthouses and the keeper's log.")
                until(lambda i=i: _top_text(col, "lighthouse keeper").startswith(f"Edit {i}"), DEADLINE, f"edit {i}")
                assert watcher.wait_idle(DEADLINE)
        status = watcher.status()
        last = status["last_batch"]
        assert {"read", "chunk", "embed", "write", "commit"} <= set(last["stages"])
        assert last["slowest"][0]["path"] == str(note.resolve()) and last["slowest"][0]["stage"] in last["stages"]
        assert status["last_slow_batch"]["paths"][0]["path"] == str(note.resolve())
        on_disk = until(lambda: read_status(Path(col.settings.data_dir), col.name), 10, "status file")
        assert "last_slow_batch" in on_disk and "slowest" in on_disk["last_batch"]
    finally:
        watcher.stop()
        col.close()
    named = [r.getMessage() for r in caplog.records if "held batch" in r.getMessage()]
    assert len([m for m in named if str(note.resolve()) in m]) == 1, named
