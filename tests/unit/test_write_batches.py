"""Writes bounded by count and by time (indexer.index.batching and the pipeline's write path), with the fakes of
test_pipeline_logic: a file larger than a batch is written in slices after the small files, a crash mid-file
loses at most the slice in flight (the re-run embeds only that slice again and duplicates nothing), and a batch
open too long is written before the next read."""

from __future__ import annotations

import threading
import time

import pytest

from indexer.core.normalization import Normalization
from indexer.errors import StoreUnavailableError
from indexer.index.batching import Batch, Deferred
from indexer.index.pipeline import Pipeline
from indexer.index.reads import ReadAhead
from tests.unit.test_pipeline_logic import HashEmbedder, MemorySource, MemoryStore, ParagraphChunker, _state


class RecordingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []  # the paths of each upsert, in order

    def upsert(self, collection, points) -> None:  # type: ignore[no-untyped-def]
        super().upsert(collection, points)
        self.batches.append([str(p.payload["path"]) for p in points])


@pytest.fixture
def env(tmp_path):
    state = _state(tmp_path / "state.sqlite")
    store, emb, src = RecordingStore(), HashEmbedder(), MemorySource("/root")
    pipe = Pipeline(collection="c", state=state, store=store, embedder=emb,
                    chunker=ParagraphChunker(),  # type: ignore[arg-type]
                    normalization=Normalization.L2, batch_chunks=10)  # fmt: skip
    yield pipe, src, store, emb, state
    state.close()


def _big(n: int, tag: str = "part") -> str:
    return "\n\n".join(f"{tag} {i} of the long file" for i in range(n))


def test_a_big_file_is_written_in_slices_after_its_small_neighbours(env):
    pipe, src, store, _, _ = env
    src.put("a-big.txt", _big(95))  # read first (sorted), written last
    for i in range(5):
        src.put(f"b{i}.txt", f"small file {i}")
    report = pipe.sync(src, "/root")
    assert report.files_indexed == 6 and len(store.points) == 100
    assert all(len(batch) <= 10 for batch in store.batches)
    assert set(store.batches[0]) == {f"/root/b{i}.txt" for i in range(5)}  # the neighbours went first
    assert [len(b) for b in store.batches[1:]] == [10] * 9 + [5]


def test_a_crash_mid_file_loses_one_slice_and_the_rerun_duplicates_nothing(env):
    pipe, src, store, emb, state = env
    src.put("big.txt", _big(95))
    store.fail_upserts_after = 4  # the 5th slice fails: the process "dies" there
    with pytest.raises(StoreUnavailableError):
        pipe.sync(src, "/root")
    assert len(store.points) == 40 and not state.files("c")  # 4 slices written, the file not committed
    store.fail_upserts_after = None
    emb.embedded.clear()
    report = pipe.sync(src, "/root")
    assert len(emb.embedded) == 95 - 50  # the 4 written slices and the failed one came from the vector cache
    assert report.chunks_reused == 50
    assert len(store.points) == 95 and sorted(state.chunk_ids("c", ["/root/big.txt"])["/root/big.txt"]) == sorted(
        store.points)
    assert sorted(str(p.payload["text"]) for p in store.points.values()) == sorted(_big(95).split("\n\n"))


def test_an_edited_big_file_keeps_unchanged_points_and_drops_stale_ones(env):
    pipe, src, store, emb, _ = env
    src.put("big.txt", _big(30))
    pipe.sync(src, "/root")
    emb.embedded.clear()
    src.put("big.txt", _big(25) + "\n\nan appended paragraph", mtime=2000)
    report = pipe.sync(src, "/root")
    assert emb.embedded == ["an appended paragraph"] and len(store.points) == 26
    assert report.points_deleted == 5 and report.points_upserted == 1


def test_a_batch_is_written_once_it_holds_enough_chunks_or_has_waited_long_enough():
    now = [0.0]

    class Item:
        def __init__(self, size: int) -> None:
            self.size = size

    batch: Batch[Item] = Batch(limit_chunks=10, limit_seconds=2.0, clock=lambda: now[0])
    assert not batch.due()
    batch.add(Item(3))
    now[0] = 1.9
    assert not batch.due()
    now[0] = 2.0
    assert batch.due()  # open 2 s: written before the next (maybe slow) read
    assert len(batch.take()) == 1 and not batch.due()
    batch.add(Item(10))
    assert batch.due()  # full
    deferred: Deferred[Item] = Deferred(limit_chunks=100)
    assert deferred.offer(Item(60)) and not deferred.offer(Item(50)) and deferred.chunks == 60


def test_the_time_bound_writes_small_files_before_a_slow_read(tmp_path):
    state = _state(tmp_path / "state.sqlite")
    store, src = RecordingStore(), MemorySource("/root")
    clock = [0.0]

    class SlowSource(MemorySource):
        def read(self, ref):  # type: ignore[no-untyped-def]
            clock[0] += 1.5  # every read takes 1.5 s
            return src.read(ref)

    slow = SlowSource("/root")
    for i in range(4):
        src.put(f"f{i}.txt", f"file {i}")
    slow.files = src.files
    pipe = Pipeline(collection="c", state=state, store=store, embedder=HashEmbedder(),
                    chunker=ParagraphChunker(), normalization=Normalization.L2,  # type: ignore[arg-type]
                    batch_chunks=100, batch_seconds=2.0)  # fmt: skip
    import indexer.index.batching as batching

    original = batching.time.monotonic
    batching.time.monotonic = lambda: clock[0]  # type: ignore[assignment]
    try:
        pipe.sync(slow, "/root")
    finally:
        batching.time.monotonic = original  # type: ignore[assignment]
        state.close()
    # f0 read at 1.5 s, f1 at 3.0, f2 at 4.5: the batch open 3 s is written then, not one batch of 4 at 6 s
    assert [len(b) for b in store.batches] == [3, 1]


class _GatedSource(MemorySource):
    """A source whose read of ``slow.txt`` waits for ``gate`` (a parse that takes as long as the test wants),
    read ``parallel_reads`` files at a time; counts the reads of each path."""

    parallel_reads = 2

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.reads: dict[str, int] = {}

    def read(self, ref):  # type: ignore[no-untyped-def]
        self.reads[ref.path] = self.reads.get(ref.path, 0) + 1
        if ref.path.endswith("slow.txt"):
            assert self.gate.wait(30), "the test never released the slow read"
        return super().read(ref)


def _gated(tmp_path, reads: ReadAhead | None = None, detach_after: float | None = None):  # type: ignore[no-untyped-def]
    state = _state(tmp_path / "state.sqlite")
    store, src = RecordingStore(), _GatedSource("/root")
    src.put("slow.txt", "a file whose parse takes long")  # the smallest: read first
    for i in range(20):
        src.put(f"note-{i:02}.txt", f"a small note number {i} with some words")
    pipe = Pipeline(collection="c", state=state, store=store, embedder=HashEmbedder(),
                    chunker=ParagraphChunker(), normalization=Normalization.L2,  # type: ignore[arg-type]
                    batch_chunks=8, batch_seconds=0.2, reads=reads, detach_after=detach_after)  # fmt: skip
    return pipe, src, store, state


def test_a_slow_read_holds_one_reader_while_the_other_files_are_read_and_written(tmp_path):
    pipe, src, store, state = _gated(tmp_path, ReadAhead(2))
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(pipe.sync(src, "/root")))
    runner.start()
    try:
        deadline = time.monotonic() + 20
        while len(store.points) < 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        # every small file is written (and committed) while the slow one is still being read
        assert len(store.points) == 20 and runner.is_alive()
        assert len(state.files("c")) == 20 and "/root/slow.txt" not in state.files("c")
    finally:
        src.gate.set()
        runner.join(30)
        pipe.reads.close()  # type: ignore[union-attr]
    assert len(store.points) == 21 and result[0].files_indexed == 21  # type: ignore[attr-defined]
    state.close()


def test_the_watcher_leaves_a_slow_read_in_the_background_and_takes_its_document_later(tmp_path):
    reads = ReadAhead(2)
    ended: list[str] = []
    reads.listener = ended.append
    pipe, src, store, state = _gated(tmp_path, reads, detach_after=0.3)
    try:
        report = pipe.sync(src, "/root")
        # returned with the slow file still being read: the others written, the slow one said
        assert report.reading == ["/root/slow.txt"] and report.files_indexed == 20 and len(store.points) == 20
        assert reads.reading()[0]["path"] == "/root/slow.txt"
        src.gate.set()
        deadline = time.monotonic() + 10
        while not ended and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ended == ["/root/slow.txt"]  # the listener heard the end (the watcher queues the path again)
        again = pipe.sync(src, "/root")
        assert again.files_indexed == 1 and again.files_unchanged == 20 and again.reading == []
        assert len(store.points) == 21
        assert src.reads["/root/slow.txt"] == 1  # the finished document was taken, not read again
    finally:
        src.gate.set()
        reads.close()
        state.close()


class _LanedSource(_GatedSource):
    """Its ``*slow.txt`` files take a parse worker (``heavy_read``); the notes are read in-process."""

    def heavy_read(self, ref):  # type: ignore[no-untyped-def]
        return ref.path.endswith("slow.txt")


def test_a_text_file_never_waits_behind_documents_queued_for_a_parse_worker(tmp_path):
    reads = ReadAhead(1)  # one parse worker: a second slow document queues behind the first
    state = _state(tmp_path / "state.sqlite")
    store, src = RecordingStore(), _LanedSource("/root")
    src.put("slow.txt", "a document whose parse takes long")
    pipe = Pipeline(collection="c", state=state, store=store, embedder=HashEmbedder(),
                    chunker=ParagraphChunker(), normalization=Normalization.L2,  # type: ignore[arg-type]
                    batch_chunks=8, batch_seconds=0.2, reads=reads, detach_after=2.0)  # fmt: skip
    try:
        assert pipe.sync(src, "/root").reading == ["/root/slow.txt"]  # left in the background after 2 s
        src.put("2-slow.txt", "a second such document")  # queued: the parse lane's one thread is busy
        src.put("note.txt", "a note saved meanwhile")
        started = time.monotonic()
        report = pipe.sync(src, "/root")
        # the note was read at once (its own lane) and the queued document was left at once (not after 2 s)
        assert time.monotonic() - started < 1.5
        assert report.files_indexed == 1 and sorted(report.reading) == ["/root/2-slow.txt", "/root/slow.txt"]
        assert sorted(str(p.payload["text"]) for p in store.points.values()) == ["a note saved meanwhile"]
    finally:
        src.gate.set()
        reads.close()
        state.close()
