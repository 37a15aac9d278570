"""The file-access rule: the text of an indexed file (the search page, ``GET /files``), only files the collection
indexed, only inside its roots. :meth:`Collection.indexed_file` is its front door.

The path is resolved (symlinks, ``..``) and must be a file the state store lists as indexed for the collection
and lie inside one of its roots after resolution; anything else is "not found" (the answer does not tell
whether such a file exists). The text is what the indexing reader extracted (so line numbers and PDF pages
match the hits), capped by ``max_file_size``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from indexer.core.paths import within
from indexer.errors import NotFoundError, SourceError
from indexer.types import SourceRef

if TYPE_CHECKING:
    from indexer.collection.parts import CollectionParts


def read_indexed_file(col: CollectionParts, path: str) -> dict[str, Any]:
    not_found = NotFoundError(f"{path!r} is not an indexed file of collection {col.name!r}")
    if not path or "\x00" in path or not os.path.isabs(path):
        raise NotFoundError(f"{path!r} is not an absolute path of an indexed file")
    real = os.path.realpath(path)
    roots = [os.path.realpath(r) for r in col.state.roots(col.name)]
    root = next((r for r in roots if within(real, r)), None)
    if root is None:
        raise not_found
    files = col.state.files(col.name)
    record = files.get(path) or files.get(real)
    if record is None or record.status != "indexed":
        raise not_found
    try:
        st = os.stat(real)
    except OSError as exc:
        raise NotFoundError(f"{path!r} was indexed but cannot be read now: {exc.strerror}") from exc
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
