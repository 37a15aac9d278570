"""The file-access rule: the text of an indexed file (the search page, ``GET /files``), only files the collection
indexed, only inside its roots. :meth:`Collection.indexed_file` is its front door.

The path is resolved (symlinks, ``..``) and the resolved path must itself be a file the state store lists as
indexed for the collection, inside one of its roots; anything else is "not found" (the answer does not tell
whether such a file exists). The text is what the indexing reader extracted (so line numbers and PDF pages
match the hits), capped by ``max_file_size``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from indexer.core.images import IMAGE_EXTENSIONS, MAX_IMAGE_BYTES, ImageError, thumbnail
from indexer.core.paths import within
from indexer.errors import InputError, NotFoundError, SourceError
from indexer.types import SourceRef

MAX_THUMBNAIL = 512  # pixels a side

if TYPE_CHECKING:
    from indexer.collection.parts import CollectionParts
    from indexer.state.database import FileRecord


def _indexed(col: CollectionParts, path: str) -> tuple[str, str, FileRecord, os.stat_result]:
    """(resolved path, root, record, stat) of an indexed file inside a root; NotFoundError for anything else."""
    not_found = NotFoundError(f"{path!r} is not an indexed file of collection {col.name!r}")
    if not path or "\x00" in path or not os.path.isabs(path):
        raise NotFoundError(f"{path!r} is not an absolute path of an indexed file")
    real = os.path.realpath(path)
    roots = [os.path.realpath(r) for r in col.state.roots(col.name)]
    root = next((r for r in roots if within(real, r)), None)
    if root is None:
        raise not_found
    # the resolved path must itself be an indexed record: an indexed `a.md` later replaced by a link to a file
    # the collection did not index is not served (the record under the given name says nothing of the target)
    record = col.state.files_at(col.name, [real]).get(real)  # one indexed lookup, not the whole list
    if record is None or record.status != "indexed":
        raise not_found
    try:
        st = os.stat(real)
    except OSError as exc:
        raise NotFoundError(f"{path!r} was indexed but cannot be read now: {exc.strerror}") from exc
    return real, root, record, st


def read_indexed_bytes(col: CollectionParts, path: str, limit: int) -> bytes:
    """The bytes of an indexed file inside a root (an image query by path, a thumbnail), at most ``limit``."""
    real, _root, _record, st = _indexed(col, path)
    if st.st_size > limit:
        raise InputError(f"{path!r} has {st.st_size:,} bytes; the limit is {limit:,}")
    try:
        with open(real, "rb") as handle:
            return handle.read(limit + 1)[:limit]
    except OSError as exc:
        raise NotFoundError(f"{path!r} was indexed but cannot be read now: {exc.strerror}") from exc


class Thumbnails:
    """Thumbnails of indexed images, made on first ask and kept (LRU, by path, size, modification time and
    pixel size): the search page shows one per image hit."""

    def __init__(self, entries: int = 512) -> None:
        self.entries = entries
        self._cache: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, col: CollectionParts, path: str, size: int) -> bytes:
        if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= MAX_THUMBNAIL:
            raise InputError(f"size={size!r} is out of range; use 16..{MAX_THUMBNAIL} pixels")
        real, _root, _record, st = _indexed(col, path)
        if os.path.splitext(real)[1].lower() not in IMAGE_EXTENSIONS:
            raise InputError(f"{path!r} is not an image file ({', '.join(IMAGE_EXTENSIONS)})")
        key = (real, st.st_size, st.st_mtime_ns, size)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        cap = max(MAX_IMAGE_BYTES, col.settings.max_image_file_size)  # an indexed picture is shown whatever its size
        data = read_indexed_bytes(col, path, cap)
        try:
            thumb = thumbnail(data, size, max_bytes=cap)
        except ImageError as exc:
            raise InputError(f"{path!r}: {exc.reason}") from None
        with self._lock:
            self._cache[key] = thumb
            while len(self._cache) > self.entries:
                self._cache.popitem(last=False)
        return thumb


def read_indexed_file(col: CollectionParts, path: str) -> dict[str, Any]:
    real, root, record, st = _indexed(col, path)
    source = col.source_for(root)  # the readers the index used: same lines and pages
    try:
        doc = source.read(SourceRef(root=root, path=real, size=st.st_size, mtime_ns=st.st_mtime_ns))
    except SourceError as exc:
        raise NotFoundError(f"{path!r} cannot be read now: {exc.reason}") from exc
    starts = list(doc.page_starts)
    return {
        "collection": col.name,
        "path": record.path,
        "kind": doc.kind,
        "text": doc.text,
        "page_lines": [doc.text.count("\n", 0, s) + 1 for s in starts],
        "changed_since_indexed": doc.content_hash != record.content_hash if doc.content_hash else None,
    }
