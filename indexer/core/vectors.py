"""Helpers every VectorStore adapter shares: point-id and vector validation, and the ``dirs`` payload field.

Adapters never import each other; what they have in common lives here.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from indexer.core.normalization import check_unit_length
from indexer.errors import CollectionMismatchError, InputError
from indexer.types import Metric


def canonical_id(point_id: str) -> str:
    """The canonical form of a UUID point id; anything else is an InputError."""
    try:
        return str(uuid.UUID(str(point_id)))
    except ValueError:
        raise InputError(f"point id {point_id!r} is not a UUID string; use str(uuid.uuid5(...))") from None


def ancestor_dirs(path: str) -> list[str]:
    """Every directory above ``path``: '/a/b/c.txt' -> ['/', '/a', '/a/b'].

    Stores add it to payloads as ``dirs`` so a path-prefix filter is an exact membership test (no prefix
    collisions such as '/a/b' matching '/a/bc')."""
    parts = [p for p in path.split("/") if p]
    absolute = path.startswith("/")
    dirs = ["/"] if absolute else []
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        dirs.append("/" + prefix if absolute else prefix)
    return dirs


def prepare_vector(vector: Any, dims: int, metric: Metric, what: str, where: str) -> np.ndarray:
    """A float32 vector checked against the collection: size, finite values and, for COSINE, unit length.

    Stores never normalise: the caller did (:mod:`indexer.core.normalization` decides how, the embedder applies it).

    ``where`` names the collection in messages, e.g. "FAISS collection 'notes'"."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if vec.shape[0] != dims:
        raise CollectionMismatchError(
            f"{what} has {vec.shape[0]} dimensions but {where} holds {dims}: "
            "the embedding model differs from the one the collection was made with; "
            "use the original model or another collection"
        )
    if not np.all(np.isfinite(vec)):
        raise InputError(f"{what} contains NaN or infinite values")
    if metric is Metric.COSINE:
        check_unit_length(vec, what, where)
    return vec
