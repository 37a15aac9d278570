"""Which LlamaEmbedding normalization makes a store compute the similarity the model was trained for.

qdrant-client embedded mode and FAISS do not normalize vectors, and a Qdrant server normalizes only for Cosine,
so the pipeline normalizes itself and applies the same rule to queries:

=================  ===========================  ============================================================
model similarity   store metric                 normalization written (LlamaEmbedding mode)
=================  ===========================  ============================================================
cosine             cosine, dot, euclid          L2 (2): on unit vectors dot = cosine and euclid ranks alike
cosine             manhattan                    refused: L1 distance of unit vectors is not cosine
dot                dot                          none (-1): magnitudes carry meaning
dot                cosine, euclid, manhattan    refused: the store would not compute a dot product
euclidean          euclid                       none (-1)
euclidean          cosine, dot, manhattan       refused
=================  ===========================  ============================================================
"""

from __future__ import annotations

from indexer.errors import ConfigError
from indexer.types import Metric, Similarity

NORM_NONE = -1
NORM_L2 = 2

_RULES: dict[tuple[Similarity, Metric], int] = {
    (Similarity.COSINE, Metric.COSINE): NORM_L2,
    (Similarity.COSINE, Metric.DOT): NORM_L2,
    (Similarity.COSINE, Metric.EUCLID): NORM_L2,
    (Similarity.DOT, Metric.DOT): NORM_NONE,
    (Similarity.EUCLIDEAN, Metric.EUCLID): NORM_NONE,
}


def choose_normalization(similarity: str, metric: str) -> int:
    """The normalization mode for documents and queries; ConfigError when the store cannot serve the model."""
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


def normalization_name(mode: int) -> str:
    return {NORM_NONE: "none", 0: "max_int16", 1: "l1", NORM_L2: "l2"}.get(mode, f"p{mode}")
