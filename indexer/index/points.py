"""A file read and chunked (:class:`Prepared`), its points' ids and the state's rows (payloads: indexer.index.payloads).

Point ids are deterministic (path, chunk index, chunk text, the rest of the payload), so replaying a write is
idempotent (see :mod:`indexer.index.pipeline`)."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from indexer.state.database import ChunkRecord, FileRecord
from indexer.types import Chunk, Document, SourceRef

POINT_NAMESPACE = uuid.UUID("7f1d5a52-3c1e-4f0e-9a57-5f3f2b8d4c10")


def point_id(path: str, chunk_index: int, content_hash: str, fingerprint: str = "") -> str:
    """Deterministic UUID of a chunk: the same file content always maps to the same ids. With ``fingerprint``
    (what else the point's payload holds: lines, bytes, heading, page, ...) an unchanged id means an unchanged
    point, so a re-synced file re-writes only the points that changed."""
    key = f"{path}\n{chunk_index}\n{content_hash}" + (f"\n{fingerprint}" if fingerprint else "")
    name = key.encode("utf-8", "surrogateescape")  # any name the OS allows
    return str(uuid.UUID(bytes=hashlib.sha1(POINT_NAMESPACE.bytes + name).digest()[:16], version=5))


@dataclass
class Prepared:
    """A file read and chunked, ready to be written."""

    ref: SourceRef
    doc: Document
    chunks: list[Chunk]
    previous: FileRecord | None = None  # the file's record before this sync

    @property
    def size(self) -> int:
        return len(self.chunks)


def committed(rec: FileRecord | None) -> bool:
    """A file whose points are all in the store: indexed, and not marked for re-writing (lost points)."""
    return rec is not None and rec.status == "indexed" and bool(rec.content_hash)


def file_record(prepared: Prepared) -> FileRecord:
    ref = prepared.ref
    return FileRecord(ref.path, ref.root, ref.size, ref.mtime_ns, prepared.doc.content_hash, "indexed", None,
                      prepared.doc.kind)  # fmt: skip


def chunk_record(pid: str, chunk: Chunk) -> ChunkRecord:
    """The state's row of a written chunk, with its filterable metadata and location values."""
    return ChunkRecord(pid, chunk.path, chunk.index, chunk.content_hash, chunk.n_tokens,
                       (*chunk.metadata, *chunk.location))
