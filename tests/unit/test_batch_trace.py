"""The per-file batch trace (issue 44): which file held a batch, how long and in which stage. Pure logic with the
fakes of test_pipeline_logic (a source whose reads take as long as the test says), the watcher's ledger (a slow file
named once, the last slow batch kept) and the change batcher's lane for large files part-written."""

from __future__ import annotations

import logging
import time

import pytest

from indexer.core.normalization import Normalization
from indexer.index.pipeline import Pipeline
from indexer.index.reads import ReadAhead
from indexer.types import IndexReport
from indexer.watch.batch import Batch, ChangeBatcher, What
from indexer.watch.ledger import SLOW_PATH_SECONDS, Ledger
from tests.unit.test_pipeline_logic import HashEmbedder, MemorySource, MemoryStore, ParagraphChunker, _state


def test_slowest_ranks_files_by_their_seconds_and_names_the_stage_most_went_to():
    report = IndexReport()
    report.charge("/a", "read", 0.2)
    report.charge("/a", "embed", 0.5)
    report.charge("/b", "read", 2.0)
    report.charge("/c", "write", 0.1)
    report.charge("/d", "commit", 0.05)
    report.charge("/a", "embed", 0.5)
    assert report.slowest(3) == [{"path": "/b", "seconds": 2.0, "stage": "read"},
                                 {"path": "/a", "seconds": 1.2, "stage": "embed"},
                                 {"path": "/c", "seconds": 0.1, "stage": "write"}]  # fmt: skip
    out = report.to_dict()
    assert "held" not in out and [row["path"] for row in out["slowest"]] == ["/b", "/a", "/c"]
    assert out["unfinished"] == []


class _SlowSource(MemorySource):
    """Reads ``slow.txt`` in ``seconds``; the others at once."""

    def __init__(self, root: str, seconds: float) -> None:
        super().__init__(root)
        self.seconds = seconds

    def read(self, ref):  # type: ignore[no-untyped-def]
        if ref.path.endswith("slow.txt"):
            time.sleep(self.seconds)
        return super().read(ref)


@pytest.fixture
def traced(tmp_path):
    state = _state(tmp_path / "state.sqlite")
    src = _SlowSource("/root", 0.3)
    pipe = Pipeline(collection="c", state=state, store=MemoryStore(), embedder=HashEmbedder(),
                    chunker=ParagraphChunker(), normalization=Normalization.L2,  # type: ignore[arg-type]
                    batch_chunks=4, reads=ReadAhead(2))  # fmt: skip
    yield pipe, src
    pipe.reads.close()  # type: ignore[union-attr]
    state.close()


def test_each_file_is_charged_its_own_read_its_embedding_share_and_its_share_of_write_and_commit(traced):
    pipe, src = traced
    src.put("slow.txt", "one paragraph")
    src.put("a.txt", "alpha\n\nbeta\n\ngamma")  # 3 chunks
    src.put("b.txt", "delta")
    src.put("big.txt", "\n\n".join(f"part {i}" for i in range(10)))  # 10 chunks: written alone, in slices
    report = pipe.sync(src, "/root")
    held = report.held
    assert set(held) == {"/root/slow.txt", "/root/a.txt", "/root/b.txt", "/root/big.txt"}
    assert held["/root/slow.txt"]["read"] >= 0.25  # its own read, not the others' (they were read meanwhile)
    assert held["/root/a.txt"]["read"] < 0.25 and held["/root/b.txt"]["read"] < 0.25
    assert report.slowest(1)[0]["path"] == "/root/slow.txt" and report.slowest(1)[0]["stage"] == "read"
    for path in held:  # every written file has each stage charged
        assert {"read", "chunk", "embed", "write", "commit"} <= set(held[path]), path
    # the embedding steps and the writes are split among their files, never counted twice
    for stage in ("embed", "write", "commit", "chunk"):
        charged = sum(stages.get(stage, 0.0) for stages in held.values())
        assert charged == pytest.approx(report.stages[stage], rel=1e-6, abs=1e-9), stage
    assert report.stages["commit"] > 0 and report.stages["write"] > 0  # the commit is timed apart from the write


def _report(path: str, seconds: float, stage: str = "read") -> IndexReport:
    report = IndexReport(files_indexed=1, seconds=seconds + 0.1)
    report.timed(stage, seconds)
    report.charge(path, stage, seconds)
    report.charge("/root/quick.md", "embed", 0.01)
    return report


def test_a_file_holding_a_batch_past_the_threshold_is_named_once_and_kept_as_the_last_slow_batch(caplog):
    ledger = Ledger()
    slow = SLOW_PATH_SECONDS + 0.5
    with caplog.at_level(logging.WARNING, logger="indexer.watch"):
        for _ in range(3):
            ledger.finished(Batch(("/root/scan.pdf", "/root/quick.md")), _report("/root/scan.pdf", slow), 10.0)
        ledger.finished(Batch(("/root/quick.md",)), _report("/root/quick.md", 0.2, "embed"), 11.0)
    named = [r.getMessage() for r in caplog.records if "held batch" in r.getMessage()]
    assert len(named) == 1, named
    assert "/root/scan.pdf" in named[0] and f"{slow:.1f} s" in named[0] and "mostly read" in named[0]
    last = ledger.last_batch
    assert last is not None and last["stages"] == {"embed": 0.2}  # the last batch's own stages
    assert last["slowest"][0]["path"] == "/root/quick.md"
    kept = ledger.last_slow_batch
    assert kept is not None and kept["batch"] == 3 and kept["paths"][0]["path"] == "/root/scan.pdf"
    assert kept["paths"][0]["stage"] == "read" and kept["paths"][0]["seconds"] == pytest.approx(slow)


def test_a_part_written_file_is_not_counted_fresh_until_its_last_slice():
    ledger = Ledger()
    report = IndexReport(files_indexed=1)
    report.unfinished.append("/root/big.mbox")
    ages = ledger.finished(Batch(("/root/big.mbox", "/root/note.md"), {"/root/big.mbox": 0.0, "/root/note.md": 9.0}),
                           report, 10.0)  # fmt: skip
    assert ages == [pytest.approx(1.0)] and ledger.last_batch["unfinished"] == 1  # type: ignore[index]


def _stat(sizes: dict[str, int]):  # type: ignore[no-untyped-def]
    return lambda path: (sizes[path], 1) if path in sizes else None


def test_a_large_file_going_on_joins_the_next_batch_at_no_cost_beside_the_edits_queued_meanwhile():
    sizes = {"/r/big.mbox": 50_000_000, **{f"/r/n{i}.md": 400 for i in range(3)}}
    batcher = ChangeBatcher(stat=_stat(sizes))
    batcher.go_on("/r/big.mbox", 0.0, first_seen=-30.0)
    for i in range(3):
        batcher.note(f"/r/n{i}.md", What.CLOSED, 0.0)
    batch = batcher.take(1.0)
    assert batch is not None and set(batch.paths) == set(sizes)  # the 50 MB file does not go alone
    assert batch.going_on == ("/r/big.mbox",) and batch.costs["/r/big.mbox"] == 0.0
    assert batch.first_seen["/r/big.mbox"] == -30.0  # its freshness counts from its change
    # a change of the file makes it a read again, estimated at its size: it goes alone
    batcher.go_on("/r/big.mbox", 2.0)
    batcher.note("/r/big.mbox", What.CLOSED, 2.0)
    batcher.note("/r/n0.md", What.CLOSED, 2.0)
    again = batcher.take(3.0)
    assert again is not None and again.going_on == () and len(again) == 1


def test_a_read_that_ran_in_the_background_rate_limits_its_file_like_a_costly_sync():
    batcher = ChangeBatcher(stat=_stat({"/r/app.log": 5_000_000, "/r/note.md": 300}))
    batcher.hold_back("/r/app.log", 8.0, 0.0)  # its read and chunking took 8 s in a reader thread
    batcher.hold_back("/r/note.md", 0.1, 0.0)  # cheap: never held back
    batcher.note("/r/app.log", What.CLOSED, 1.0)
    batcher.note("/r/note.md", What.CLOSED, 1.0)
    batch = batcher.take(2.0)
    assert batch is not None and batch.paths == ("/r/note.md",) and batcher.held_back(2.0) == ["/r/app.log"]
    share = batcher.timing.hot_share
    assert batcher.take(8.0 / share - 8.0 - 0.1) is None  # at most hot_share of the time
    assert batcher.take(8.0 / share) is not None


def test_indexer_status_names_the_last_slow_batch():
    from indexer.state.watch_files import describe

    slow = {"batch": 12, "seconds": 3.5, "paths": [{"path": "/r/app.log", "seconds": 3.4, "stage": "chunk"}]}
    line = describe({"running": True, "pid": 7, "state": "idle", "queued": 0, "last_slow_batch": slow})
    assert "last slow batch (12): /r/app.log held it 3.4s, mostly chunk" in line


def test_the_rate_limit_goes_by_a_files_own_charge_not_by_its_batchs_time():
    batcher = ChangeBatcher(stat=_stat({"/r/note.md": 300, "/r/app.log": 5_000_000}))
    batcher.note("/r/note.md", What.CLOSED, 0.0)
    batch = batcher.take(0.1)
    assert batch is not None
    # the batch took 3 s (it waited for a read it then left, CPU taken by a log chunked in a reader thread), but
    # the note itself was charged 0.2 s: it is not held back for 3 s / hot_share
    batcher.learn(batch, 3.0, 3.1, charged={"/r/note.md": 0.2})
    batcher.note("/r/note.md", What.CLOSED, 3.2)
    assert batcher.held_back(3.3) == [] and batcher.take(3.3) is not None
    batcher.learn(batch, 0.5, 4.0, charged={"/r/note.md": 1.5})  # a file that did cost that much is held back
    batcher.note("/r/note.md", What.CLOSED, 4.1)
    assert batcher.held_back(4.2) == ["/r/note.md"]


def test_the_rate_limit_counts_a_files_own_work_not_the_stores_write():
    from indexer.watch.ledger import own_work

    # a note written when the store loaded its index (2.3 s of write): its own work is 0.12 s
    assert own_work({"read": 0.11, "embed": 0.01, "write": 2.26, "commit": 0.09}) == pytest.approx(0.12)
    assert own_work({"read": 0.2, "chunk": 7.9, "write": 0.01}) == pytest.approx(8.1)  # a hot log re-chunked
