"""LlamaEmbedding's output formats: plain Python data (``embed``), numpy arrays (``embed_arrays``) and the
OpenAI-style response (``create_embedding``), all over the engine's :meth:`embed_tokens_raw`.

A mixin so that the engine module (:mod:`indexer.engine.llama_embedding`) keeps to contexts and batches
(issue 43 split it: engine setup, batching, output formats, reranking).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from indexer.engine.arguments import LLAMA_POOLING_TYPE_RANK
from indexer.engine.plan import NORM_MODE_EUCLIDEAN, cosine_matrix, normalize_array, resolve_norm_mode

__all__ = ["Input", "OutputsMixin"]

logger = logging.getLogger("indexer.engine.llama_embedding")

Input = str | Sequence[str] | Sequence[Sequence[int]]


class OutputsMixin:
    """``embed``, ``embed_arrays`` and ``create_embedding`` for LlamaEmbedding (see the module docstring)."""

    pooling: int
    n_cls_out: int
    model_path: str
    verbose: bool

    if TYPE_CHECKING:  # LlamaEmbedding's

        def _check_open(self) -> None: ...

        def _prepare(self, input: Input, truncate: bool, separator: str | None) -> tuple[list[list[int]], bool]: ...

        def embed_tokens_raw(self, token_lists: Sequence[Sequence[int]]) -> list[npt.NDArray[np.float32] | None]: ...

    def embed_arrays(
        self, input: Input, normalize: object = NORM_MODE_EUCLIDEAN, truncate: bool = True
    ) -> tuple[list[npt.NDArray[np.float64] | float], int]:
        """Like :meth:`embed` with a list input, but results are numpy arrays (float64) or floats (RANK)."""
        self._check_open()
        mode = resolve_norm_mode(normalize)
        token_lists, _ = self._prepare(input, truncate, None)
        raw = self.embed_tokens_raw(token_lists)
        return self._finish(raw, mode), sum(len(t) for t in token_lists)

    def _finish(
        self, raw: Sequence[npt.NDArray[np.float32] | None], mode: int
    ) -> list[npt.NDArray[np.float64] | float]:
        out: list[npt.NDArray[np.float64] | float] = []
        for r in raw:
            if self.pooling == LLAMA_POOLING_TYPE_RANK:
                if r is None:
                    out.append(0.0)
                elif self.n_cls_out == 1:
                    out.append(float(r[0]))
                else:
                    out.append(r.astype(np.float64))
            elif r is None:
                out.append(np.zeros((0,), dtype=np.float64))
            else:
                out.append(normalize_array(r, mode))
        return out

    def embed(
        self,
        input: Input,
        normalize: object = NORM_MODE_EUCLIDEAN,
        truncate: bool = True,
        separator: str | None = None,
        return_count: bool = False,
    ) -> Any:
        """Embed text or token lists; see the module docstring for shapes. Results are plain Python data."""
        self._check_open()
        mode = resolve_norm_mode(normalize)
        token_lists, batched = self._prepare(input, truncate, separator)
        raw = self.embed_tokens_raw(token_lists)
        finished = self._finish(raw, mode)
        data: list[Any] = [r if isinstance(r, float) else r.tolist() for r in finished]
        result: Any = data if batched else data[0]
        if return_count:
            return result, sum(len(t) for t in token_lists)
        return result

    def create_embedding(
        self,
        input: str | Sequence[str],
        model: str | None = None,
        normalize: object = NORM_MODE_EUCLIDEAN,
        output_format: str = "json",
    ) -> Any:
        """OpenAI-style embeddings: ``output_format`` is ``"json"``, ``"json+"`` (plus ``cosineSimilarity``)
        or ``"array"``."""
        self._check_open()
        if output_format not in ("json", "json+", "array"):
            raise ValueError(f"output_format must be 'json', 'json+' or 'array', got {output_format!r}")
        inputs = [input] if isinstance(input, str) else list(input)
        data, n_tokens = self.embed(inputs, normalize=normalize, return_count=True)
        if output_format == "array":
            return data
        response: dict[str, Any] = {
            "object": "list",
            "data": [{"object": "embedding", "embedding": e, "index": i} for i, e in enumerate(data)],
            "model": model if model is not None else self.model_path,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }
        if output_format == "json+":
            sim = cosine_matrix(data)
            if sim is not None:
                response["cosineSimilarity"] = sim
            elif self.verbose and len(data) >= 2:
                logger.warning("cosineSimilarity omitted: the outputs are not flat vectors of equal length")
        return response
