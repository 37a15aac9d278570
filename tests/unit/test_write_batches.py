"""Writes bounded by count and by time (indexer.index.batching and the pipeline's write path), with the fakes of
test_pipeline_logic: a file larger than a batch is written in slices after the small files, a crash mid-file
loses at most the slice in flight (the re-run embeds only that slice again and duplicates nothing), and a batch
open too long is written before the next read."""

from __future__ import annotations

import pytest

from indexer.core.normalization import Normalization
from indexer.errors import StoreUnavailableError
from indexer.index.batching import Batch, Deferred
from indexer.index.pipeline import Pipeline
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
