"""Compatibility checks, run before anything else: which vector our model may use, with which normalization.

A vector fits when its size equals the model's dimensions, it is a plain (not multi-) vector of float32/float16,
and its distance can serve the model's similarity under the same rule as our own collections
(:func:`indexer.core.normalization.choose_normalization`).

Equal sizes do not prove equal models: :func:`probe_model` embeds the text of a few foreign points and compares
our vectors with theirs (cosine >= 0.95 on average: the same model; below 0.8: another model).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from qdrant_client import QdrantClient

from indexer.plugin_api import (
    CollectionMismatchError,
    ConfigError,
    Embedder,
    Normalization,
    choose_normalization,
    normalization_name,
)
from plugins.qdrant_attach.connect import call
from plugins.qdrant_attach.inspection import CollectionReport, DenseVector
from plugins.qdrant_attach.layout import Layout

logger = logging.getLogger(__name__)

SAME_MODEL = 0.95
OTHER_MODEL = 0.8
NORM_TOLERANCE = 0.02  # unit length, give or take float16 storage and rounding
_WRITABLE_TYPES = ("float32", "float16")


@dataclass(frozen=True)
class VectorChoice:
    """The vector slot we read (and may write): ``name`` "" is the unnamed vector."""

    name: str
    size: int
    metric: str
    normalization: Normalization

    @property
    def using(self) -> str | None:
        """The ``using`` argument of query_points."""
        return self.name or None

    @property
    def label(self) -> str:
        return self.name or "(unnamed)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "vector": self.name,
            "size": self.size,
            "distance": self.metric,
            "normalization": normalization_name(self.normalization),
        }


@dataclass(frozen=True)
class ModelProbe:
    """Whether the vectors already in the slot come from our model."""

    verdict: str  # "same", "other", "unclear" or "unknown" (nothing to compare)
    agreement: float | None  # mean cosine between our vectors and theirs for the same texts
    compared: int
    norm: float | None = None  # the mean length of their sampled vectors
    scale: str | None = None  # why their vectors' lengths make our scores incomparable with theirs, or None

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "agreement": self.agreement, "compared": self.compared, "norm": self.norm,
                "scale": self.scale}


def _fit_problem(v: DenseVector, dimensions: int, similarity: str) -> str | None:
    """Why ``v`` cannot hold our model's vectors, or None when it can."""
    if v.multivector is not None:
        return f"is a multivector ({v.multivector}); our model makes one vector per text"
    if v.size != dimensions:
        return f"holds {v.size} dimensions, the model makes {dimensions}"
    if v.datatype not in _WRITABLE_TYPES:
        return f"stores {v.datatype} vectors; our model makes float vectors"
    try:
        choose_normalization(similarity, v.distance)
    except ConfigError as exc:
        return str(exc)
    return None


def fitting(report: CollectionReport, dimensions: int, similarity: str) -> list[DenseVector]:
    return [v for v in report.dense if _fit_problem(v, dimensions, similarity) is None]


def choose_vector(
    report: CollectionReport, *, dimensions: int, similarity: str, model: str, requested: str | None = None
) -> VectorChoice:
    """The vector to use: ``requested`` (a name; "" for the unnamed vector) or the one that fits."""
    fits = fitting(report, dimensions, similarity)
    fit_names = ", ".join(repr(v.name) if v.name else "'' (unnamed)" for v in fits) or "none"
    if requested is not None:
        vec = report.vector(requested)
        if vec is None:
            known = ", ".join(v.label for v in report.dense) or "none"
            raise ConfigError(
                f"collection {report.name!r} has no dense vector named {requested!r} (its dense vectors: {known}); "
                f"vectors that fit model {model}: {fit_names}"
            )
        problem = _fit_problem(vec, dimensions, similarity)
        if problem is not None:
            raise CollectionMismatchError(
                f"vector {vec.label} of collection {report.name!r} cannot serve model {model} "
                f"({dimensions} dimensions, {similarity} similarity): it {problem}. Vectors that fit: {fit_names}"
            )
        return _choice(vec, similarity)
    if len(fits) == 1:
        return _choice(fits[0], similarity)
    if len(fits) > 1:
        unnamed = next((v for v in fits if v.name == ""), None)
        if unnamed is not None:
            return _choice(unnamed, similarity)
        raise ConfigError(
            f"several vectors of collection {report.name!r} fit model {model} ({fit_names}); choose one with --vector"
        )
    shapes = "; ".join(f"{v.label}: {_fit_problem(v, dimensions, similarity)}" for v in report.dense) or "none"
    hint = (
        " Add a named vector for our model with --add-vector NAME (Qdrant >= 1.18), or use a model of that size."
        if report.named_vectors
        else " Use an embedding model of that size (--model), or index into a collection of our own."
    )
    raise CollectionMismatchError(
        f"no vector of collection {report.name!r} fits model {model} ({dimensions} dimensions, {similarity} "
        f"similarity): {shapes}.{hint}"
    )


def _choice(vec: DenseVector, similarity: str) -> VectorChoice:
    return VectorChoice(vec.name, vec.size, vec.distance, choose_normalization(similarity, vec.distance))


def probe_model(
    client: QdrantClient,
    where: str,
    report: CollectionReport,
    layout: Layout,
    choice: VectorChoice,
    embedder: Embedder,
    limit: int = 8,
) -> ModelProbe:
    """Embed the text of up to ``limit`` foreign points and compare with their stored vectors."""
    records, _ = call(
        where,
        "sample vectors",
        lambda: client.scroll(report.name, limit=limit * 4, with_payload=True, with_vectors=[choice.name or ""]),
    )
    texts: list[str] = []
    theirs: list[np.ndarray] = []
    for r in records:
        payload = dict(r.payload or {})
        if layout.is_ours(payload):
            continue
        vector = _vector_of(r.vector, choice.name)
        text = layout.text(payload).strip()
        if vector is None or not text or embedder.count_tokens(text) > embedder.max_tokens:
            continue
        texts.append(text)
        theirs.append(vector)
        if len(texts) == limit:
            break
    norm, scale = _scale(records, choice)
    if not texts:
        return ModelProbe("unknown", None, 0, norm, scale)
    ours = embedder.embed_batch(texts, choice.normalization)
    agreement = float(np.mean([_cosine(a, b) for a, b in zip(ours, theirs, strict=True)]))
    verdict = "same" if agreement >= SAME_MODEL else ("other" if agreement < OTHER_MODEL else "unclear")
    return ModelProbe(verdict, round(agreement, 4), len(texts), norm, scale)


def _scale(records: Sequence[Any], choice: VectorChoice) -> tuple[float | None, str | None]:
    """The normalization rule (docs/normalization.md) writes and queries unit vectors in this slot when it
    chose L2: Cosine distance normalizes by itself, but Dot and Euclid compare lengths too, so foreign vectors of
    another length score on another scale than ours (a dot product of 3 for theirs, at most 1 for ours)."""
    norms = [float(np.linalg.norm(v)) for r in records if (v := _vector_of(r.vector, choice.name)) is not None]
    norms = [n for n in norms if n > 0]
    if not norms:
        return None, None
    mean = round(float(np.mean(norms)), 4)
    off = max(abs(n - 1.0) for n in norms)
    compares_lengths = choice.metric.lower() in ("dot", "euclid")
    if choice.normalization != Normalization.L2 or not compares_lengths or off <= NORM_TOLERANCE:
        return mean, None
    return mean, (
        f"their vectors in {choice.label} have length {mean} on average (from {min(norms):.3g} to {max(norms):.3g}), "
        f"ours are unit length: with {choice.metric} distance their scores and ours are on different scales, so a "
        "query ranks their points and ours unevenly. Normalize their vectors to unit length, or index into a "
        "vector of our own (--add-vector)"
    )


def _vector_of(raw: Any, name: str) -> np.ndarray | None:
    if isinstance(raw, dict):
        raw = raw.get(name)
    if raw is None or not isinstance(raw, Sequence) or (raw and not isinstance(raw[0], (int, float))):
        return None
    return np.asarray(raw, dtype=np.float32)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(np.dot(a, b) / (na * nb)) if na > 0 and nb > 0 else 0.0
