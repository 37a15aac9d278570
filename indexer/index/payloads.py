"""A point's payload, and the keys a payload-filtering store (Qdrant) keeps current for the filter language.

:func:`point_payload` is what every store gets (path, root, type, text, lines, heading, metadata, ...);
:func:`fingerprint` what of it beside the path, chunk index and text a point id covers. With a store that has the
:class:`~indexer.ports.PayloadFields` port, :class:`PayloadKeeper` adds ``filter``, ``stat`` and the
``uncommitted`` marker (:mod:`indexer.state.payload_fields`) and keeps them current: a touch, or a changed
file's unchanged points (not re-written), get their new ``stat`` by ``set_payload`` before the state commits (a
crash in between repeats it); the marker is removed after the commit (a crash in between: the next run's
recovery removes every marker left). None of these keys is in the fingerprint: adding them re-writes no point.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from indexer.core.languages import detect as detect_language
from indexer.ports import PayloadFields, VectorStore, payload_fields
from indexer.state.field_values import chunk_values
from indexer.state.payload_fields import (
    FILTER,
    KEYS,
    NUMBER,
    STAT,
    UNCOMMITTED,
    field_index_keys,
    filter_payload,
    stat_payload,
)
from indexer.types import Chunk, Document, SourceRef

logger = logging.getLogger(__name__)


class Prepared(Protocol):
    ref: SourceRef
    doc: Document


def fingerprint(payload: dict[str, object]) -> str:
    """What a point's payload holds beside its path, chunk index and text (lines, bytes, heading, page, ...)."""
    skip = ("path", "chunk_index", "text", "content_hash", *KEYS)
    return json.dumps({k: v for k, v in payload.items() if k not in skip}, sort_keys=True, default=str)


def point_payload(prepared: Prepared, chunk: Chunk) -> dict[str, object]:
    path = prepared.ref.path
    suffix = Path(path).suffix.lower().lstrip(".")
    payload = _text_payload(prepared, chunk, path, suffix)
    if chunk.media is not None:  # an image point: no text (no lexical side, nothing for a cross-encoder)
        payload |= {"media": chunk.media.kind, "width": chunk.media.width, "height": chunk.media.height}
    return payload


def _text_payload(prepared: Prepared, chunk: Chunk, path: str, suffix: str) -> dict[str, object]:
    return {
        "path": path,
        "root": prepared.ref.root,
        "rel_path": prepared.ref.rel_path,
        "file_type": suffix or prepared.doc.kind,
        "kind": prepared.doc.kind,
        "chunk_index": chunk.index,
        "text": chunk.text,
        "lang": detect_language(chunk.text),  # its language: the stems its words get (indexer.search.languages)
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


class PayloadKeeper:
    """The filter language's payload keys of one collection's points, kept current (a no-op for a store without
    the PayloadFields port: FAISS keeps the state route)."""

    def __init__(self, store: VectorStore, collection: str) -> None:
        self.port: PayloadFields | None = payload_fields(store)
        self.collection = collection
        self._names: set[str] = set()  # metadata fields met (their payload indexes ensured)
        self._new: set[str] = set()  # met since the last ensure

    def add(self, payload: dict[str, object], prepared: Prepared, chunk: Chunk) -> dict[str, object]:
        """``payload`` with ``filter``, ``stat`` and the ``uncommitted`` marker (for a point about to be written)."""
        if self.port is None:
            return payload
        ref = prepared.ref
        fields = filter_payload(ref.path, ref.root, (*chunk.metadata, *chunk.location))
        # the fields met: the store indexes the first MAX_FIELD_INDEXES of them (payload_fields.capped)
        self._new.update(n for n in fields["names"] if n not in self._names and not n.startswith(NUMBER))
        payload[FILTER] = fields
        payload[STAT] = stat_payload(ref.mtime_ns, ref.size)
        payload[UNCOMMITTED] = True
        return payload

    def restat(self, groups: Iterable[tuple[SourceRef, Sequence[str]]]) -> None:
        """The new ``stat`` of each file's points that were not re-written (a touch, a changed file's unchanged
        chunks): before the state commits the file."""
        if self.port is None:
            return
        updates = [(list(ids), {STAT: stat_payload(ref.mtime_ns, ref.size)}) for ref, ids in groups if ids]
        if updates:
            self.port.set_payloads(self.collection, updates)

    def committed(self, ids: Sequence[str]) -> None:
        """The points of committed files: their marker removed (workers see them from now on); the payload indexes
        of metadata fields met for the first time made."""
        if self.port is not None and ids:
            self.port.unmark(self.collection, list(ids))
        if self.port is not None and self._new:
            self.port.ensure_field_indexes(self.collection, index_keys(self._new))
            self._names |= self._new
            self._new = set()

    def recover(self) -> None:
        """After an interrupted run's uncommitted points were deleted, every marker left is a committed point's."""
        if self.port is not None:
            self.port.unmark(self.collection, None)


def index_keys(names: Iterable[str]) -> dict[str, str]:
    """The payload indexes of metadata fields ``names`` (key -> schema)."""
    return {k: schema for name in sorted(names) for k, schema in field_index_keys(name).items()}


def backfill(store: VectorStore, collection: str, files: Any) -> int:
    """Give points written before these keys their ``filter`` and ``stat`` (from the stored payload and the state's
    file records: ``files(paths)`` -> {path: FileRecord}), page by page, without re-embedding; resumable (each
    run lists only the points still without them). Returns how many points it filled."""
    port = payload_fields(store)
    if port is None or port.filled(collection):
        return 0
    port.ensure_field_indexes(collection)
    filled = 0
    names: set[str] = set()
    for page in port.unfilled(collection):
        records = files({str(p.get("path")) for _, p in page})
        updates = []
        for pid, payload in page:
            rec = records.get(str(payload.get("path")))
            if rec is None:  # no file owns it: the sync's orphan removal deletes it
                continue
            values = {FILTER: filter_payload(rec.path, rec.root, chunk_values(payload)),
                      STAT: stat_payload(rec.mtime_ns, rec.size)}
            names.update(n for n in values[FILTER]["names"] if not n.startswith(NUMBER))
            updates.append(([pid], values))
        port.set_payloads(collection, updates)
        filled += len(updates)
    port.ensure_field_indexes(collection, index_keys(sorted(names)))
    if filled:
        logger.info("gave %d points of collection %r the payload keys filters read (no re-embedding)", filled,
                    collection)
    return filled
