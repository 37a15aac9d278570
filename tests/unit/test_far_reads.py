"""The read-ahead's far lane (indexer.index.reads; the Ray cluster's nodes in production) without Ray: a call
with enough heavy reads sends them there and takes their chunks; a read lost there is read here; the file's own
error stays the file's; a call with few heavy reads never uses it. The remote job of the filesystem source reads,
sniffs and hashes like a read here, and says when a shared path is not the writer's file."""

from __future__ import annotations

import hashlib
import pickle
from concurrent.futures import Future
from pathlib import Path

import pytest

from indexer.errors import SourceError
from indexer.index.reads import FAR_MIN_FILES, ReadAhead
from indexer.ports import Source
from indexer.types import Chunk, Document, SourceRef


class _Docs(Source):
    """``*.pdf`` files are heavy; every read here is counted."""

    parallel_reads = 2

    def __init__(self) -> None:
        self.here: list[str] = []

    def heavy_read(self, ref: SourceRef) -> bool:
        return ref.path.endswith(".pdf")

    def read(self, ref: SourceRef) -> Document:
        self.here.append(ref.path)
        return Document(ref=ref, text=f"read here: {ref.path}", kind="text", content_hash="h")


class _Far:
    def __init__(self, outcome: str) -> None:
        self.outcome, self.started = outcome, []

    def capacity(self) -> int:
        return 4

    def start(self, source: Source, ref: SourceRef) -> Future[tuple[Document, list[Chunk]]]:
        self.started.append(ref.path)
        out: Future[tuple[Document, list[Chunk]]] = Future()
        if self.outcome == "ok":
            chunk = Chunk(ref.path, 0, "far", 0, 3, 1, 1, 2)
            out.set_result((Document(ref=ref, text="", kind="pdf", content_hash="far"), [chunk]))
        elif self.outcome == "lost":
            out.set_exception(RuntimeError("ActorDiedError: the node died"))
        else:
            out.set_exception(SourceError(ref.path, "a hostile file", "error"))
        return out


def _refs(n: int, ext: str = ".pdf") -> list[SourceRef]:
    return [SourceRef("/r", f"/r/{i}{ext}", 10 + i, 1) for i in range(n)]


def _read_all(reads: ReadAhead, source: Source, refs: list[SourceRef]) -> dict[str, object]:
    reads.plan(source, refs)
    futures = {ref.path: reads.submit(source, ref) for ref in refs}
    out: dict[str, object] = {}
    for path, future in futures.items():
        try:
            out[path] = (future.result(timeout=10).content_hash, reads.prepared(path))
        except SourceError as exc:
            out[path] = exc.reason
        reads.taken(path)
    return out


def test_enough_heavy_reads_go_far_and_bring_their_chunks():
    reads, source, far = ReadAhead(2), _Docs(), _Far("ok")
    reads.far = far
    refs = _refs(FAR_MIN_FILES) + _refs(2, ".md")
    assert reads.plan(source, refs) == 2 + far.capacity()  # as many more in flight as the lane takes
    got = _read_all(reads, source, refs)
    assert sorted(far.started) == sorted(r.path for r in refs if r.path.endswith(".pdf"))
    assert source.here == ["/r/0.md", "/r/1.md"]  # light reads stay here
    assert all(got[r.path][0] == "far" and got[r.path][1][0].text == "far" for r in refs if r.path.endswith(".pdf"))
    reads.close()


def test_a_read_lost_far_is_read_here():
    reads, source = ReadAhead(2), _Docs()
    reads.far = _Far("lost")
    refs = _refs(FAR_MIN_FILES)
    got = _read_all(reads, source, refs)
    assert sorted(source.here) == sorted(r.path for r in refs)
    assert all(value == ("h", None) for value in got.values())
    reads.close()


def test_the_files_own_error_is_not_read_again():
    reads, source = ReadAhead(2), _Docs()
    reads.far = _Far("broken")
    got = _read_all(reads, source, _refs(FAR_MIN_FILES))
    assert set(got.values()) == {"a hostile file"} and source.here == []
    reads.close()


def test_a_few_heavy_reads_stay_here():
    reads, source, far = ReadAhead(2), _Docs(), _Far("ok")
    reads.far = far
    refs = _refs(FAR_MIN_FILES - 1)
    assert reads.plan(source, refs) == 2
    _read_all(reads, source, refs)
    assert far.started == [] and len(source.here) == FAR_MIN_FILES - 1
    reads.close()


def test_the_filesystem_job_reads_like_a_read_here(tmp_path: Path):
    from plugins.filesystem.remote import NOT_SHARED
    from plugins.filesystem.source import FilesystemSource
    from tests.documents import make_docx

    path = make_docx(tmp_path / "report.docx")
    source = FilesystemSource([tmp_path])
    ref = source.ref_for(path)
    assert ref is not None
    here = source.read(ref)
    for shared in (False, True):
        job = pickle.loads(pickle.dumps(source.parse_job(ref, shared=shared)))  # it travels pickled
        doc = job()
        assert doc.text == here.text and doc.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert source.parse_job(SourceRef(str(tmp_path), str(tmp_path / "a.md"), 1, 1)) is None  # not heavy
    job = source.parse_job(ref, shared=True)
    path.write_bytes(path.read_bytes() + b"\0")  # not the file the writer scanned
    with pytest.raises(SourceError) as err:
        job()
    assert err.value.code == NOT_SHARED
    source.close()
