"""LlamaEmbedding's reranking: query-document pairs built from the model's template (or its special tokens),
cut fairly to the limit in the document part, scored by a RANK-pooling model.

A mixin so that the engine module (:mod:`indexer.engine.llama_embedding`) keeps to contexts and batches.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from indexer.engine.arguments import LLAMA_POOLING_TYPE_RANK, pooling_name
from indexer.engine.plan import VocabSpecials, fair_split, rank_pair_within, rank_score, render_rerank_template
from indexer.engine.tokenization import Tokens

__all__ = ["RankingMixin"]


class RankingMixin:
    """``rank`` and ``rank_sequences`` for LlamaEmbedding (see the module docstring)."""

    pooling: int
    max_tokens: int
    _tokens: Tokens

    if TYPE_CHECKING:  # LlamaEmbedding's

        def _check_open(self) -> None: ...

        def vocab_specials(self) -> VocabSpecials: ...

        def rerank_template(self) -> str | None: ...

        def embed_tokens_raw(self, token_lists: Sequence[Sequence[int]]) -> list[npt.NDArray[np.float32] | None]: ...

    def rank_sequences(self, query: str, documents: Sequence[str], max_tokens: int | None = None) -> list[list[int]]:
        """Token sequences :meth:`rank` decodes, each cut to the limit (the model's, or ``max_tokens`` if
        smaller) in its document part."""
        self._check_open()
        limit = self.max_tokens if max_tokens is None else max(1, min(int(max_tokens), self.max_tokens))
        template = self.rerank_template()
        sequences: list[list[int]] = []
        if template:
            for doc in documents:
                sequences.append(self._templated_pair(template, query, doc, limit))
            return sequences
        specials = self.vocab_specials()
        q = self._tokens.encode(query, False, True)
        for d in self._tokens.encode_batch(list(documents), False):
            sequences.append(rank_pair_within(specials, q, d, limit))
        return sequences

    def _templated_pair(self, template: str, query: str, doc: str, limit: int) -> list[int]:
        tok, detok = functools.partial(self._tokens.encode, add_special=False, parse_special=True), self._tokens.decode
        toks = tok(render_rerank_template(template, query, doc))
        if len(toks) <= limit:
            return toks
        q_toks, doc_toks = tok(query), tok(doc)
        room = max(0, limit - len(tok(render_rerank_template(template, "", ""))))
        n_q, n_d = fair_split(len(q_toks), len(doc_toks), room)
        if n_q < len(q_toks):
            query = detok(q_toks[:n_q])
        doc_toks = doc_toks[:n_d]
        toks = tok(render_rerank_template(template, query, detok(doc_toks)))
        for _ in range(4):  # re-tokenizing a cut text can add a token or two: shorten the document further
            excess = len(toks) - limit
            if excess <= 0:
                return toks
            doc_toks = doc_toks[: max(0, len(doc_toks) - excess - 1)]
            toks = tok(render_rerank_template(template, query, detok(doc_toks)))
        return toks[:limit]

    def rank(self, query: str, documents: Sequence[str], *, max_tokens: int | None = None) -> list[float]:
        """One relevance score per document (higher is more relevant). Needs a RANK-pooling model.

        Pairs longer than the model's limit (or ``max_tokens``) are cut in the document part."""
        self._check_open()
        if self.pooling != LLAMA_POOLING_TYPE_RANK:
            raise ValueError(
                f"rank() needs a reranker with pooling type RANK; this model's pooling type is "
                f"{pooling_name(self.pooling)}. Create LlamaEmbedding(..., pooling_type=LLAMA_POOLING_TYPE_RANK)"
            )
        if isinstance(documents, str):
            raise TypeError("documents must be a list of strings, not a single string")
        if len(documents) == 0:
            return []
        sequences = self.rank_sequences(query, list(documents), max_tokens)
        raw = self.embed_tokens_raw(sequences)
        return [rank_score(r) for r in raw]
