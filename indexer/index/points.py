"""A file read and chunked (:class:`Prepared`) and what its points are made of: ids, payloads, the state's rows.

Point ids are deterministic (path, chunk index, chunk text, the rest of the payload), so replaying a write is
idempotent (see :mod:`indexer.index.pipeline`)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

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


def fingerprint(payload: dict[str, object]) -> str:
    """What a point's payload holds beside its path, chunk index and text (lines, bytes, heading, page, ...)."""
    skip = ("path", "chunk_index", "text", "content_hash")
    return json.dumps({k: v for k, v in payload.items() if k not in skip}, sort_keys=True, default=str)


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


def payload_of(prepared: Prepared, chunk: Chunk) -> dict[str, object]:
    path = prepared.ref.path
    suffix = Path(path).suffix.lower().lstrip(".")
    out = text_payload(prepared, chunk, path, suffix)
    if chunk.media is not None:  # an image point: no text (no lexical side, nothing for a cross-encoder)
        out |= {"media": chunk.media.kind, "width": chunk.media.width, "height": chunk.media.height}
    return out


def text_payload(prepared: Prepared, chunk: Chunk, path: str, suffix: str) -> dict[str, object]:
    return {
        "path": path,
        "root": prepared.ref.root,
        "rel_path": prepared.ref.rel_path,
        "file_type": suffix or prepared.doc.kind,
        "kind": prepared.doc.kind,
        "chunk_index": chunk.index,
        "text": chunk.text,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "start_byte": chunk.start_byte,
        "end_byte": chunk.end_byte,
        "page": chunk.page,
        "heading": list(chunk.heading),
        "locator": chunk.locator,
        "location": dict(chunk.location),
        "metadata": dict(chunk.metadata),
        "content_hash": chunk.content_hash,
        "n_tokens": chunk.n_tokens,
    }
