"""A rebuilt model file with the same weights: whether it may keep a collection's vectors.

The model identity is a fingerprint of the GGUF file, so a file rebuilt from the same weights (a new converter
version, a copy elsewhere) gets a new id although it embeds exactly as before. :func:`same_vectors` re-embeds the
texts of a few stored points and compares them with their vectors; only a match lets the collection keep its
vectors (an upgraded 0.1 data directory then searches and syncs without re-embedding). Any other model, including
another quantization of the same one, fails the comparison.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from indexer.core.normalization import cache_tag
from indexer.state.database import CollectionRecord, StateStore
from indexer.state.transfer import cached_vectors

if TYPE_CHECKING:
    from indexer.ports import Embedder, VectorStore

logger = logging.getLogger(__name__)

SAME_VECTORS_TOLERANCE = 2e-4  # max |difference| per component; f16 vs q8_0 of one model differ by ~5e-3
SAME_VECTORS_SAMPLES = 4


def same_vectors(
    rec: CollectionRecord | None,
    state: StateStore,
    store: VectorStore,
    embedder: Embedder,
    samples: int = SAME_VECTORS_SAMPLES,
) -> bool:
    """True when ``embedder`` reproduces the stored vectors of collection ``rec`` (within float noise)."""
    if rec is None or embedder.dimensions != rec.dimensions:
        return False
    key = f"{rec.model_id}|norm={cache_tag(rec.normalization)}"
    rows = cached_vectors(state.path, rec.name, key, samples * 4)
    texts: list[str] = []
    stored: list[np.ndarray] = []
    for content_hash, blob in rows:
        vector = np.frombuffer(blob, dtype=np.float32)
        hits = store.search(rec.name, vector, 3)
        text = next((h.payload.get("text") for h in hits if h.payload.get("content_hash") == content_hash), None)
        if isinstance(text, str) and text.strip():
            texts.append(text)
            stored.append(vector)
        if len(texts) >= samples:
            break
    if not texts:
        return False  # nothing to compare with: keep refusing
    fresh = np.asarray(embedder.embed_batch(texts, rec.normalization), dtype=np.float32)
    worst = float(np.abs(fresh - np.stack(stored)).max())
    logger.info("model check for %s: %d texts re-embedded, max difference %.2e", rec.name, len(texts), worst)
    return worst <= SAME_VECTORS_TOLERANCE
