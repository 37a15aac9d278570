"""Which FAISS ids a search may return: point ids as FAISS ids, a filter as an id selection, exact search over it.

A :class:`~indexer.plugin_api.Filter`'s path and type come from the sidecar's indexed columns; its ``ids`` (the
exact selection the state database computed for the request's other clauses) are hashed to FAISS ids the same way
points were; the two are intersected. Its ``hidden`` ids (points written but not yet committed) are taken out.
A selective filter is searched exactly over its matching vectors.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from indexer.plugin_api import Filter, canonical_id

if TYPE_CHECKING:
    from plugins.faiss.sidecar import Sidecar


def point_iid(point_id: str) -> int:
    """The FAISS id of a UUID: 63 bits of its blake2b digest (deterministic, never negative)."""
    digest = hashlib.blake2b(point_id.encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF


_HASHED: OrderedDict[frozenset[str], np.ndarray] = OrderedDict()  # the last few id sets, hashed
_HASHED_SETS = 8
_hashing = threading.Lock()


def iids(ids: frozenset[str]) -> np.ndarray:
    """The FAISS ids of point ids. A filter's selection is the same set object until the state changes
    (indexer.state.columns), so the last few sets are kept hashed (hashing is ~2.5 us an id)."""
    with _hashing:
        found = _HASHED.get(ids)
        if found is not None:
            _HASHED.move_to_end(ids)
            return found
    found = np.fromiter((point_iid(canonical_id(i)) for i in ids), dtype=np.int64, count=len(ids))
    found.setflags(write=False)
    with _hashing:
        _HASHED[ids] = found
        while len(_HASHED) > _HASHED_SETS:
            _HASHED.popitem(last=False)
    return found


def allowed(sidecar: Sidecar, where: Filter | None) -> np.ndarray | None:
    """The FAISS ids a filter allows (None: all): the path and type match from the sidecar, intersected with the
    exact id selection of the other clauses."""
    if where is None:
        return None
    found = None
    if where.path_prefix is not None or where.file_types:
        found = sidecar.matching(where.path_prefix, where.file_types)
    if where.ids is not None:
        chosen = iids(where.ids)
        found = chosen if found is None else np.intersect1d(found, chosen, assume_unique=True)
    return found


def selection(sidecar: Sidecar, where: Filter | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(allowed, excluded) FAISS ids of a vector search: points written but not committed (``Filter.hidden``: a
    large file mid-write) are taken out of the selection, or excluded when there is none."""
    found = allowed(sidecar, where)
    excluded = iids(where.hidden) if where is not None and where.hidden else None
    if excluded is not None and found is not None:
        return np.setdiff1d(found, excluded, assume_unique=True), None
    return found, excluded


def lexical_ids(where: Filter | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(chosen, hidden) FAISS ids of a lexical search: ``Filter.ids`` and ``Filter.hidden`` hashed, or None."""
    chosen = None if where is None or where.ids is None else iids(where.ids)
    hidden = None if where is None or not where.hidden else iids(where.hidden)
    return chosen, hidden


def exact(found: tuple[np.ndarray, np.ndarray], query: np.ndarray, k: int, ip: bool) -> tuple[np.ndarray, np.ndarray]:
    """Brute force over a few exact vectors (a selective filter): raw scores, ids, best first."""
    ids, vectors = found
    if len(ids) == 0:
        return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
    raw = vectors @ query if ip else ((vectors - query) ** 2).sum(axis=1)
    order = np.argsort(-raw if ip else raw, kind="stable")[:k]
    return raw[order].astype(np.float32), ids[order]
