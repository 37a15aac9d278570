"""Pure logic of the pipeline with fakes (in-memory source, store and a hashing embedder).

The same behaviours are checked end to end with the real model, FAISS and Qdrant in tests/integration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from indexer.core.normalization import Normalization
from indexer.errors import SourceError, StoreUnavailableError
from indexer.index.pipeline import Pipeline, point_id
from indexer.state.database import CollectionRecord, StateStore
from indexer.types import ROOT_UNAVAILABLE, Chunk, Document, Point, ScanProblem, SourceRef


class HashEmbedder:
    model_id = "fake"
    dimensions = 8
    similarity = "cosine"
    max_tokens = 100
    media_kinds = ()  # text only

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        self.embedded.extend(texts)
        out = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:32], dtype=np.uint8)[:8] for t in texts]
        return np.asarray(out, dtype=np.float32)


class ParagraphChunker:
    def chunk(self, doc: Document) -> Iterator[Chunk]:
        for i, para in enumerate(p for p in doc.text.split("\n\n") if p.strip()):
            yield Chunk(doc.ref.path, i, para, 0, len(para), 1, 1, len(para.split()) + 2)


class MemorySource:
    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, tuple[str, int]] = {}  # path -> (text, mtime)
        self.broken: set[str] = set()
        self.problems: list[ScanProblem] = []
        self.unmounted = False

    def available(self) -> bool:
        return not self.unmounted

    def put(self, name: str, text: str, mtime: int = 1000) -> None:
        self.files[f"{self.root}/{name}"] = (text, mtime)

    def scan(self) -> Iterator[SourceRef]:
        for path, (text, mtime) in sorted(self.files.items()):
            yield SourceRef(self.root, path, len(text.encode()), mtime)

    def read(self, ref: SourceRef) -> Document:
        if ref.path in self.broken:
            raise SourceError(ref.path, "invalid UTF-8 at byte 3")
        text = self.files[ref.path][0]
        return Document(ref, text, "text", (), hashlib.sha256(text.encode()).hexdigest())


class MemoryStore:
    name = "memory"
    metric = "cosine"

    def __init__(self) -> None:
        self.points: dict[str, Point] = {}
        self.fail_upserts_after: int | None = None
        self.upserts = 0

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if self.fail_upserts_after is not None and self.upserts >= self.fail_upserts_after:
            raise StoreUnavailableError("server down")
        self.upserts += 1
        for p in points:
            self.points[p.id] = p

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        for i in ids:
            self.points.pop(i, None)


def _state(path):
    state = StateStore(path)
    state.create_collection(CollectionRecord("c", "memory", {}, "cosine", "fake", "/fake", Normalization.L2, 8))
    return state


@pytest.fixture
def env(tmp_path):
    state = _state(tmp_path / "state.sqlite")
    store, emb, src = MemoryStore(), HashEmbedder(), MemorySource("/root")
    pipe = Pipeline(
        collection="c",
        state=state,
        store=store,
        embedder=emb,
        chunker=ParagraphChunker(),  # type: ignore[arg-type]
        normalization=Normalization.L2,
        batch_chunks=2,
    )
    yield pipe, src, store, emb, state
    state.close()


def _texts(store: MemoryStore) -> list[str]:
    return sorted(str(p.payload["text"]) for p in store.points.values())


def test_second_run_does_no_work(env):
    pipe, src, store, emb, _ = env
    src.put("a.txt", "alpha one\n\nalpha two")
    src.put("b.txt", "beta")
    r1 = pipe.sync(src, "/root")
    assert r1.files_indexed == 2 and r1.chunks_embedded == 3 and len(store.points) == 3
    emb.embedded.clear()
    upserts = store.upserts
    r2 = pipe.sync(src, "/root")
    assert r2.files_unchanged == 2 and r2.files_indexed == 0 and emb.embedded == [] and store.upserts == upserts


def test_edit_embeds_only_new_chunk_texts_and_removes_stale_points(env):
    pipe, src, store, emb, _ = env
    src.put("a.txt", "keep me\n\nold words")
    pipe.sync(src, "/root")
    emb.embedded.clear()
    src.put("a.txt", "keep me\n\nnew words", mtime=2000)
    r = pipe.sync(src, "/root")
    assert emb.embedded == ["new words"] and r.chunks_reused == 1
    assert _texts(store) == ["keep me", "new words"]


def test_rename_reuses_vectors(env):
    pipe, src, store, emb, _ = env
    src.put("a.txt", "moving text")
    pipe.sync(src, "/root")
    emb.embedded.clear()
    src.files["/root/b.txt"] = src.files.pop("/root/a.txt")
    r = pipe.sync(src, "/root")
    assert emb.embedded == [] and r.files_removed == 1 and r.files_indexed == 1
    assert [p.payload["path"] for p in store.points.values()] == ["/root/b.txt"]


def test_touched_file_with_same_content_is_rehashed_not_reembedded(env):
    pipe, src, store, emb, _ = env
    src.put("a.txt", "same")
    pipe.sync(src, "/root")
    emb.embedded.clear()
    src.put("a.txt", "same", mtime=5000)
    r = pipe.sync(src, "/root")
    assert r.files_touched == 1 and emb.embedded == [] and len(store.points) == 1
    assert pipe.sync(src, "/root").files_unchanged == 1


def test_unreadable_file_is_reported_and_keeps_its_old_points(env):
    pipe, src, store, _, state = env
    src.put("a.txt", "good a")
    src.put("b.txt", "good b")
    pipe.sync(src, "/root")
    src.put("b.txt", "changed b", mtime=3000)
    src.broken.add("/root/b.txt")
    src.put("c.txt", "new c")
    r = pipe.sync(src, "/root")
    assert r.failed == [("/root/b.txt", "invalid UTF-8 at byte 3")]
    assert _texts(store) == ["good a", "good b", "new c"]
    src.broken.clear()
    r = pipe.sync(src, "/root")  # failed files are retried
    assert r.files_indexed == 1 and _texts(store) == ["changed b", "good a", "new c"]


def test_deleted_files_lose_their_points(env):
    pipe, src, store, _, _ = env
    src.put("a.txt", "a1\n\na2")
    src.put("b.txt", "b")
    pipe.sync(src, "/root")
    del src.files["/root/a.txt"]
    r = pipe.sync(src, "/root")
    assert r.files_removed == 1 and r.points_deleted == 2 and _texts(store) == ["b"]


def test_point_ids_are_deterministic():
    assert point_id("/a", 0, "h") == point_id("/a", 0, "h") != point_id("/a", 1, "h")


def _clean_build(tmp_path, files):
    state = _state(tmp_path / "clean.sqlite")
    store, src = MemoryStore(), MemorySource("/root")
    src.files = dict(files)
    Pipeline(
        collection="c",
        state=state,
        store=store,
        embedder=HashEmbedder(),
        chunker=ParagraphChunker(),  # type: ignore[arg-type]
        normalization=Normalization.L2,
        batch_chunks=2,
    ).sync(src, "/root")
    state.close()
    return {k: v.payload["text"] for k, v in store.points.items()}


@pytest.mark.parametrize("fail_after", [0, 1, 2, 3])
def test_interrupted_runs_converge_to_the_clean_index(env, tmp_path, fail_after):
    pipe, src, store, _, _ = env
    for i in range(6):
        src.put(f"f{i}.txt", f"file {i} part one\n\nfile {i} part two")
    pipe.sync(src, "/root")
    # edit everything, then die part-way through writing
    for i in range(6):
        src.put(f"f{i}.txt", f"file {i} edited\n\nfile {i} part two\n\nextra {i}", mtime=9000)
    store.fail_upserts_after = store.upserts + fail_after
    with pytest.raises(StoreUnavailableError):
        pipe.sync(src, "/root")
    # a second edit before the rerun: points written by the dead run must not survive
    src.put("f5.txt", "completely different", mtime=9500)
    store.fail_upserts_after = None
    pipe.sync(src, "/root")
    got = {k: v.payload["text"] for k, v in store.points.items()}
    assert got == _clean_build(tmp_path, src.files)


def test_orphans_of_an_interrupted_run_are_deleted_on_recover(env):
    pipe, src, store, _, state = env
    state.add_pending("c", [("orphan", "/root/x")])
    store.points["orphan"] = Point("orphan", np.zeros(8, np.float32), {"text": "x"})
    assert pipe.recover() == 1 and "orphan" not in store.points and state.pending_orphans("c") == []


def test_an_unavailable_root_does_not_empty_the_index(env):
    pipe, src, store, _, _ = env
    src.put("a.txt", "kept")
    pipe.sync(src, "/root")
    src.files.clear()  # an unmounted root scans as empty...
    src.unmounted = True  # ...and the source says so through the port, whatever its problem codes
    src.problems = [ScanProblem("/root", "root folder is missing", ROOT_UNAVAILABLE)]
    r = pipe.sync(src, "/root")
    assert r.files_removed == 0 and _texts(store) == ["kept"]
    assert r.skipped == [("/root", "root folder is missing")]


class CountingProgress:
    def __init__(self) -> None:
        self.total = 0
        self.done: list[str] = []

    def files_total(self, n: int) -> None:
        self.total += n

    def file_done(self, path: str) -> None:
        self.done.append(path)

    def embedded(self, chunks: int, tokens: int) -> None:
        pass


def test_a_listener_hears_of_every_file_a_re_run_finds_unchanged(env):
    """Unchanged files are reported one by one only when someone listens; the counts are the same either way."""
    pipe, src, store, _, state = env
    for name in ("a.txt", "b.txt", "c.txt"):
        src.put(name, f"text of {name}")
    pipe.sync(src, "/root")
    src.put("b.txt", "b edited", mtime=4000)
    quiet = pipe.sync(src, "/root")
    assert (quiet.files_unchanged, quiet.files_indexed) == (2, 1)
    progress = CountingProgress()
    listened = Pipeline(
        collection="c", state=state, store=store, embedder=HashEmbedder(), chunker=ParagraphChunker(),  # type: ignore[arg-type]
        normalization=Normalization.L2, progress=progress,
    )  # fmt: skip
    src.put("c.txt", "c edited", mtime=4000)
    loud = listened.sync(src, "/root")
    assert (loud.files_unchanged, loud.files_indexed) == (2, 1)
    assert progress.total == 3 and sorted(progress.done) == ["/root/a.txt", "/root/b.txt", "/root/c.txt"]


def test_scan_problems_keep_or_drop_indexed_files_by_code(env):
    """An indexed file the scan could not take keeps its points when the cause may pass (too large, no access)
    and leaves the index when it is no longer a document (binary now); problems outside the root are skipped."""
    pipe, src, store, _, state = env
    for name in ("big.txt", "bin.txt", "ok.txt"):
        src.put(name, f"text of {name}")
    pipe.sync(src, "/root")
    del src.files["/root/big.txt"], src.files["/root/bin.txt"]
    src.problems = [
        ScanProblem("/root/big.txt", "too large", "too_large"),
        ScanProblem("/root/bin.txt", "binary content", "binary"),
        ScanProblem("/rootless/x.txt", "permission denied", "permission"),
    ]
    r = pipe.sync(src, "/root")
    assert r.failed == [("/root/big.txt", "too large")] and r.files_removed == 1 and r.files_unchanged == 1
    assert r.skipped == [("/root/bin.txt", "binary content"), ("/rootless/x.txt", "permission denied")]
    assert _texts(store) == ["text of big.txt", "text of ok.txt"]
    failed = state.files("c")["/root/big.txt"]
    assert failed.status == "failed" and failed.content_hash != ""  # the last good hash is kept
