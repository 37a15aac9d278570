"""A large file written over several calls (indexer.index.large), with the fakes of test_pipeline_logic: under the
watcher a call writes a large file's slices for a bounded time, keeps its progress and returns it unfinished;
the next call writes the small files it is given first, then the next slices, without reading the file again.
A change or deletion of the file drops the progress (its slices deleted), ``recover`` keeps the kept slices and
a pipeline without the kept progress (a full sync) deletes them and writes the file whole. Order and counts only."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.core.normalization import Normalization
from indexer.index.large import KeptWrites, SliceBudget
from indexer.index.pipeline import Pipeline
from indexer.types import IndexReport, SourceRef
from tests.unit.test_pipeline_logic import HashEmbedder, MemorySource, ParagraphChunker, _state
from tests.unit.test_write_batches import RecordingStore

SLICE = 10


class _PathSource(MemorySource):
    """A memory source that answers per-path lookups (the watcher's sync_paths) and counts reads."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reads: dict[str, int] = {}

    def ref_for(self, path: str) -> SourceRef | None:
        if path not in self.files:
            return None
        text, mtime = self.files[path]
        return SourceRef(self.root, path, len(text.encode()), mtime)

    def read(self, ref):  # type: ignore[no-untyped-def]
        self.reads[ref.path] = self.reads.get(ref.path, 0) + 1
        return super().read(ref)


def _big(n: int, tag: str = "part") -> str:
    return "\n\n".join(f"{tag} {i} of the mailbox" for i in range(n))


@pytest.fixture
def env(tmp_path: Path):
    root = str(tmp_path)
    state = _state(tmp_path / "state.sqlite")
    store, src, kept = RecordingStore(), _PathSource(root), KeptWrites()

    def pipeline(keep: bool = True) -> Pipeline:  # a new one per call, as the collection's writer makes them
        return Pipeline(collection="c", state=state, store=store, embedder=HashEmbedder(),
                        chunker=ParagraphChunker(), normalization=Normalization.L2,  # type: ignore[arg-type]
                        batch_chunks=SLICE, kept=kept if keep else None, slice_seconds=0.0)  # fmt: skip

    yield pipeline, src, store, state, kept, root
    state.close()


def _call(pipeline, src, root, paths):  # type: ignore[no-untyped-def]
    pipe = pipeline()
    pipe.recover()  # what every call of the writer does first
    return pipe.sync_paths(src, root, [f"{root}/{p}" for p in paths], IndexReport())


def test_one_slice_per_call_and_the_notes_saved_meanwhile_go_first(env):
    pipeline, src, store, state, kept, root = env
    src.put("big.mbox", _big(45))
    report = _call(pipeline, src, root, ["big.mbox"])
    assert report.unfinished == [f"{root}/big.mbox"] and report.files_indexed == 0
    assert len(store.points) == SLICE and f"{root}/big.mbox" not in state.files("c")
    assert state.pending_by_path("c") == {f"{root}/big.mbox": SLICE}  # pending: hidden from search, recoverable
    calls = 1
    while report.unfinished:
        src.put(f"note{calls}.md", f"a note saved while slice {calls} was written")
        store.batches.clear()
        report = _call(pipeline, src, root, [f"note{calls}.md", "big.mbox"])
        calls += 1
        # the note is written and committed before the big file's next slice
        assert store.batches[0] == [f"{root}/note{calls - 1}.md"]
        assert all(set(b) == {f"{root}/big.mbox"} for b in store.batches[1:])
    assert calls == 5  # 45 chunks in slices of 10: one per call
    assert src.reads[f"{root}/big.mbox"] == 1  # read once: the next calls went on with the kept chunks
    assert len(kept) == 0 and report.files_indexed == 2  # the last note and the big file
    ids = state.chunk_ids("c", [f"{root}/big.mbox"])[f"{root}/big.mbox"]
    in_store = [pid for pid, point in store.points.items() if str(point.payload["path"]).endswith("mbox")]
    assert len(ids) == 45 and sorted(ids) == sorted(in_store)
    assert state.pending_orphans("c") == [] and len(store.points) == 45 + 4


def test_recover_keeps_the_kept_slices_and_a_call_without_them_deletes_them(env):
    pipeline, src, store, state, kept, root = env
    src.put("big.mbox", _big(25))
    _call(pipeline, src, root, ["big.mbox"])
    _call(pipeline, src, root, [])  # another call (no change of the big file): its slices stay
    assert len(store.points) == SLICE and len(kept) == 1
    full = pipeline(keep=False)  # a full sync, forget: the writer gives no kept progress
    assert full.recover() == SLICE and not store.points
    report = full.sync(src, root)
    assert report.files_indexed == 1 and report.unfinished == [] and len(store.points) == 25  # whole, one call


def test_a_changed_file_drops_its_progress_and_is_read_again(env):
    pipeline, src, store, state, kept, root = env
    src.put("big.mbox", _big(25, "old"))
    _call(pipeline, src, root, ["big.mbox"])
    src.put("big.mbox", _big(22, "new"), mtime=2000)
    report = _call(pipeline, src, root, ["big.mbox"])
    assert src.reads[f"{root}/big.mbox"] == 2 and report.unfinished == [f"{root}/big.mbox"]
    assert {str(p.payload["text"]).split()[0] for p in store.points.values()} == {"new"}  # old slices deleted
    while report.unfinished:
        report = _call(pipeline, src, root, ["big.mbox"])
    assert sorted(str(p.payload["text"]) for p in store.points.values()) == sorted(_big(22, "new").split("\n\n"))


def test_a_deleted_file_drops_its_progress_and_its_slices(env):
    pipeline, src, store, state, kept, root = env
    src.put("big.mbox", _big(25))
    _call(pipeline, src, root, ["big.mbox"])
    del src.files[f"{root}/big.mbox"]
    report = _call(pipeline, src, root, ["big.mbox"])
    assert report.unfinished == [] and not store.points and len(kept) == 0 and not state.files("c")


def test_a_one_shot_run_writes_a_large_file_whole():
    budget = SliceBudget(None)
    assert not any(budget.spent() for _ in range(100))
    once = SliceBudget(0.0)
    assert not once.spent() and once.spent()  # at least one slice per call
