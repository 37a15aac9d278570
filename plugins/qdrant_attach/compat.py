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

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "agreement": self.agreement, "compared": self.compared}


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
    if not texts:
        return ModelProbe("unknown", None, 0)
    ours = embedder.embed_batch(texts, choice.normalization)
    agreement = float(np.mean([_cosine(a, b) for a, b in zip(ours, theirs, strict=True)]))
    verdict = "same" if agreement >= SAME_MODEL else ("other" if agreement < OTHER_MODEL else "unclear")
    return ModelProbe(verdict, round(agreement, 4), len(texts))


def _vector_of(raw: Any, name: str) -> np.ndarray | None:
    if isinstance(raw, dict):
        raw = raw.get(name)
    if raw is None or not isinstance(raw, Sequence) or (raw and not isinstance(raw[0], (int, float))):
        return None
    return np.asarray(raw, dtype=np.float32)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(np.dot(a, b) / (na * nb)) if na > 0 and nb > 0 else 0.0
