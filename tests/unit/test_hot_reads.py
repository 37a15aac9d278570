"""A file slow to read or to chunk under the watcher (issue 44: a hot log re-read and re-chunked on every sync),
with the fakes of test_pipeline_logic: it is chunked in its reader thread, so the call leaves it in the background
and writes the other changes; one read per file at a time: a file changed while its read runs is not read by a
second thread, its older version is indexed under the size and time it was read with and reported stale (the
watcher syncs it again), and the next call reads the new version."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from indexer.core.normalization import Normalization
from indexer.index.pipeline import Pipeline
from indexer.index.reads import ReadAhead
from indexer.types import IndexReport
from tests.unit.test_large_slices import _PathSource
from tests.unit.test_pipeline_logic import HashEmbedder, ParagraphChunker, _state
from tests.unit.test_write_batches import RecordingStore


class _SlowChunker(ParagraphChunker):
    """Chunks ``app.log`` only once ``gate`` opens (a 5 MB log takes seconds); records the chunking threads."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.threads: dict[str, str] = {}

    def chunk(self, doc):  # type: ignore[no-untyped-def]
        self.threads[doc.ref.path] = threading.current_thread().name
        if doc.ref.path.endswith("app.log"):
            assert self.gate.wait(30), "the test never let the log be chunked"
        return super().chunk(doc)


def _pipeline(tmp_path: Path, chunker: _SlowChunker, reads: ReadAhead):  # type: ignore[no-untyped-def]
    state = _state(tmp_path / "state.sqlite")
    store = RecordingStore()
    pipe = Pipeline(collection="c", state=state, store=store, embedder=HashEmbedder(), chunker=chunker,  # type: ignore[arg-type]
                    normalization=Normalization.L2, batch_chunks=50, batch_seconds=0.2, reads=reads,
                    detach_after=0.3)  # fmt: skip
    return pipe, store, state


def test_a_file_slow_to_chunk_is_left_in_the_background_and_read_once_at_a_time(tmp_path):
    root = str(tmp_path)
    chunker, reads = _SlowChunker(), ReadAhead(2)
    ended: list[str] = []
    reads.listener = ended.append
    pipe, store, state = _pipeline(tmp_path, chunker, reads)
    src = _PathSource(root)
    log, note = f"{root}/app.log", f"{root}/note.md"
    src.put("app.log", "line one\n\nline two")
    src.put("note.md", "a note saved beside the log")
    try:
        first = pipe.sync_paths(src, root, [log, note], IndexReport())
        assert first.reading == [log] and first.files_indexed == 1  # the note went on; the log is still chunking
        assert chunker.threads[log] != threading.current_thread().name  # chunked in its reader thread
        assert {str(p.payload["path"]) for p in store.points.values()} == {note}
        src.put("app.log", "line one\n\nline two\n\nline three", mtime=2000)  # appended while it is chunked
        started = time.monotonic()
        second = pipe.sync_paths(src, root, [log], IndexReport())
        assert second.reading == [log] and time.monotonic() - started < 0.25  # left at once: it runs already
        assert src.reads[log] == 1  # not a second read of the same file
        chunker.gate.set()
        deadline = time.monotonic() + 10
        while log not in ended and time.monotonic() < deadline:  # the watcher syncs it again when it ends
            time.sleep(0.01)
        third = pipe.sync_paths(src, root, [log], IndexReport())
        # the version read is indexed under its own size and time, and the file is said to be synced again
        assert third.stale == [log] and third.files_indexed == 1
        assert state.files_at("c", [log])[log].mtime_ns == 1000
        assert third.read_before[log] >= 0.2  # what its sync cost in the background (the watcher rate-limits it)
        chunker.gate.clear()
        started = time.monotonic()
        fourth = pipe.sync_paths(src, root, [log], IndexReport())
        # a new read of a file whose last read was slow is not waited for at all
        assert fourth.reading == [log] and time.monotonic() - started < 0.25
        ended.clear()
        chunker.gate.set()
        deadline = time.monotonic() + 10
        while log not in ended and time.monotonic() < deadline:
            time.sleep(0.01)
        fifth = pipe.sync_paths(src, root, [log], IndexReport())
        assert fifth.stale == [] and fifth.files_indexed == 1 and src.reads[log] == 2
        assert sorted(str(p.payload["text"]) for p in store.points.values() if p.payload["path"] == log) == [
            "line one", "line three", "line two"]
    finally:
        chunker.gate.set()
        reads.close()
        state.close()
