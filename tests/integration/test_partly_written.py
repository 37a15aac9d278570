"""A file being re-indexed is seen as its previous version until its new one is complete: the slices of the new
version already written are hidden inside the store's search (an id selection: Filter.hidden), filtered or not,
on FAISS (flat and HNSW) and embedded Qdrant; and the progress of a large file is reported as its slices land."""

from __future__ import annotations

from pathlib import Path

import pytest

import indexer

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "faiss", "faiss_index": "hnsw"}, {"store": "qdrant"}]
PARAGRAPHS = 24


def _version(tag: str) -> str:
    return "\n\n".join(
        f"{tag} paragraph {i}: the lighthouse keeper logged the storm, the tide and ship number {i * 37 % 101}."
        for i in range(PARAGRAPHS)
    )


class _MidWrite:
    """Progress that searches after each slice of the big file (while the new version is partly written)."""

    def __init__(self, col: indexer.Collection, path: str) -> None:
        self.col, self.path = col, path
        self.seen: list[tuple[int, int, dict[str, set[str]]]] = []
        self.writing: list[tuple[int, list[dict[str, object]]]] = []

    def files_total(self, n: int) -> None:
        pass

    def file_done(self, path: str) -> None:
        pass

    def embedded(self, chunks: int, tokens: int) -> None:
        pass

    def file_part(self, path: str, done: int, total: int) -> None:
        if path != self.path or done >= total:
            return
        versions: dict[str, set[str]] = {}
        for mode in ("dense", "lexical", "hybrid"):
            hits = self.col.search("lighthouse keeper storm tide paragraph", k=200, candidates=200, mode=mode,
                                   rerank=False).hits  # fmt: skip
            versions[mode] = {h.text.split(" ", 1)[0] for h in hits if h.path == self.path}
        filtered = self.col.search("lighthouse storm", k=200, candidates=200, mode="dense", rerank=False,
                                   where=["type=txt"]).hits  # fmt: skip
        versions["filtered"] = {h.text.split(" ", 1)[0] for h in filtered if h.path == self.path}
        self.seen.append((done, total, versions))
        self.writing.append((done, self.col.status()["writing"]))


@pytest.mark.parametrize("options", STORES, ids=lambda o: "-".join(map(str, o.values())))
def test_a_partly_reindexed_file_is_seen_as_its_previous_version_until_complete(
    tmp_path: Path, options, embed_model_path
):
    folder = tmp_path / "docs"
    folder.mkdir()
    big = folder / "log.txt"
    big.write_text(_version("old"))
    (folder / "other.txt").write_text("An unrelated note about bread and butter.")
    name = "partly-" + "-".join(map(str, options.values()))
    with indexer.open_collection(name, chunk_tokens=24, embed_batch_chunks=4, max_top_k=200, max_candidates=200,
                                 **options) as col:  # fmt: skip
        col.index([folder])
        before = col.search("lighthouse keeper storm", k=200, candidates=200, mode="dense", rerank=False).hits
        old_chunks = {h.chunk_id for h in before if h.path == str(big)}
        assert len(old_chunks) > 8  # more than two slices of 4
        assert col.status()["writing"] == []

        big.write_text(_version("new"))
        watch = _MidWrite(col, str(big))
        col.index([folder], progress=watch)
        assert len(watch.seen) >= 2, "the new version was written in slices"
        for done, total, versions in watch.seen:  # mid-write: the old version only, in every mode, filtered or not
            assert all(v == {"old"} for v in versions.values()), (done, total, versions)
        # status shows the large file's progress: its chunks written so far (hidden until it commits)
        assert [w for _, w in watch.writing] == [[{"path": str(big), "chunks_written": done}] for done, _ in
                                                 watch.writing]  # fmt: skip
        assert col.status()["writing"] == []
        after = col.search("lighthouse keeper storm", k=200, candidates=200, mode="dense", rerank=False).hits
        assert {h.text.split(" ", 1)[0] for h in after if h.path == str(big)} == {"new"}
        assert not {h.chunk_id for h in after} & old_chunks
