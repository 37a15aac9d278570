"""A one-shot ``index`` of a folder holding one large file beside small ones (issue 44): every small file is
committed before the large file's first slice is written, and the large file is committed last with all its
chunks. Real model, FAISS and embedded Qdrant; the order comes from a progress listener (no timing).

The large file is the smallest on disk (the small ones are padded with blank lines), so it is read first: the
order is the pipeline's deferral of large files, not the reads' smallest-first order."""

from __future__ import annotations

from pathlib import Path

import pytest

import indexer

pytestmark = pytest.mark.slow

SMALL = 12


class _Order:
    """Progress listener: the sequence of small files done and large-file slices written."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def files_total(self, n: int) -> None:
        pass

    def embedded(self, chunks: int, tokens: int) -> None:
        pass

    def file_done(self, path: str) -> None:
        self.events.append(("done", path))

    def file_part(self, path: str, done: int, total: int) -> None:
        self.events.append(("part", path))


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_small_files_are_committed_before_the_large_files_first_slice(tmp_path: Path, store: str, embed_model_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    big = folder / "archive.txt"
    big.write_text("\n\n".join(f"Message {i}: the harbour master reported ship {i * 37 % 101} late by the fog."
                               for i in range(40)))  # fmt: skip
    for i in range(SMALL):
        note = f"Note {i}: buy {i} apples and a loaf of rye bread at the corner market." + "\n" * 6000
        (folder / f"note-{i:02}.md").write_text(note)
    assert all(big.stat().st_size < p.stat().st_size for p in folder.glob("note-*.md"))  # the big one is read first
    order = _Order()
    with indexer.open_collection(f"small-first-{store}", store=store, chunk_tokens=24, embed_batch_chunks=4) as col:
        report = col.index([folder], progress=order)
        assert report.files_indexed == SMALL + 1 and report.unfinished == []
        first_slice = next(i for i, (kind, path) in enumerate(order.events) if kind == "part" and path == str(big))
        small_done = [i for i, (kind, path) in enumerate(order.events) if kind == "done" and path != str(big)]
        assert len(small_done) == SMALL and max(small_done) < first_slice
        parts = [e for e in order.events if e == ("part", str(big))]
        assert len(parts) >= 5  # written in slices of 4 chunks
        assert order.events[-1] == ("done", str(big))  # committed last
        chunks = col.state.chunk_ids(col.name, [str(big)])[str(big)]
        assert len(chunks) >= 20 and col.state.count_pending(col.name) == 0
        assert col.search("harbour master ship late fog", k=1).hits[0].path == str(big)
