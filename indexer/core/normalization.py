"""Normalization: the one place that decides how vectors are normalised, in the project's own values.

qdrant-client embedded mode and FAISS do not normalize vectors, and a Qdrant server normalizes only for Cosine,
so the pipeline normalizes itself (through the embedder) and applies the same rule to queries. Stores never
normalise again; a COSINE store only checks that what it is given is unit length (:func:`check_unit_length`).

=================  ===========================  ============================================================
model similarity   store metric                 normalization written
=================  ===========================  ============================================================
cosine             cosine, dot, euclid          L2: on unit vectors dot = cosine and euclid ranks alike
cosine             manhattan                    refused: L1 distance of unit vectors is not cosine
dot                dot                          NONE: magnitudes carry meaning
dot                cosine, euclid, manhattan    refused: the store would not compute a dot product
euclidean          euclid                       NONE
euclidean          cosine, dot, manhattan       refused
=================  ===========================  ============================================================

The engine adapter (:mod:`indexer.engine.adapters`) translates :class:`Normalization` into llama.cpp's integer modes;
nothing else speaks those integers.
"""

from __future__ import annotations

import numpy as np

from indexer.errors import ConfigError, InputError
from indexer.types import _LEGACY_CODES, Metric, Normalization, Similarity

__all__ = ["Normalization", "check_unit_length", "choose_normalization", "normalization_name", "normalize"]

UNIT_TOLERANCE = 1e-3  # |norm - 1| a COSINE store accepts (float32 rounding of an L2-normalised vector)


_RULES: dict[tuple[Similarity, Metric], Normalization] = {
    (Similarity.COSINE, Metric.COSINE): Normalization.L2,
    (Similarity.COSINE, Metric.DOT): Normalization.L2,
    (Similarity.COSINE, Metric.EUCLID): Normalization.L2,
    (Similarity.DOT, Metric.DOT): Normalization.NONE,
    (Similarity.EUCLIDEAN, Metric.EUCLID): Normalization.NONE,
}


def choose_normalization(similarity: str, metric: str) -> Normalization:
    """The normalization for documents and queries; ConfigError when the store cannot serve the model."""
    try:
        sim, met = Similarity(similarity), Metric(metric)
    except ValueError as exc:
        raise ConfigError(f"unknown similarity {similarity!r} or metric {metric!r}") from exc
    if (sim, met) not in _RULES:
        fits = sorted(m.value for (s, m) in _RULES if s is sim)
        raise ConfigError(
            f"a model trained for {sim.value} similarity cannot be served by a {met.value} index; "
            f"use --metric {' or '.join(fits)}"
        )
    return _RULES[(sim, met)]


def normalization_name(normalization: Normalization | str | int) -> str:
    return Normalization.parse(normalization).value


def cache_tag(normalization: Normalization) -> str:
    """The normalization part of a vector-cache key (kept as version 0.1 wrote it, so cached vectors stay valid)."""
    return str(_LEGACY_CODES[Normalization.parse(normalization)])


def normalize(vectors: np.ndarray, normalization: Normalization) -> np.ndarray:
    """float32 copy of ``vectors`` (one per row, or a single vector) normalised as asked; zero rows stay zero."""
    arr = np.asarray(vectors, dtype=np.float32)
    if Normalization.parse(normalization) is Normalization.NONE:
        return arr.copy()
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0).astype(np.float32)


def check_unit_length(vector: np.ndarray, what: str, where: str) -> None:
    """Raise InputError unless ``vector`` is L2-normalised (or all zeros): what a COSINE store requires."""
    norm = float(np.linalg.norm(vector))
    if norm != 0.0 and abs(norm - 1.0) > UNIT_TOLERANCE:
        raise InputError(
            f"{what} has length {norm:.4g} but {where} uses the cosine metric and takes unit-length vectors; "
            "normalise it with indexer.core.normalization.normalize(vectors, Normalization.L2)"
        )
