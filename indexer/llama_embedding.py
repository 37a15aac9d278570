"""Documented import path of the embedding engine (README, docs/api.md); the code lives in
:mod:`indexer.engine.llama_embedding`.

Everything the user's reference document (the seed, ``LlamaEmbedding.md``) imports or names from its module
is here with the seed's value: the class, the normalization modes, the pooling types (re-exported from
``llama_cpp``) and the multimodal embedding handler (also in :mod:`indexer.llama_multimodal`, where the seed's
``llama_cpp.llama_multimodal`` keeps it with the shared MTMD interfaces).
``tests/integration/test_seed_examples.py`` runs the seed's examples against this module and fails when one of
these names goes.
"""

from indexer.engine.llama_embedding import (
    LLAMA_POOLING_TYPE_CLS,
    LLAMA_POOLING_TYPE_LAST,
    LLAMA_POOLING_TYPE_MEAN,
    LLAMA_POOLING_TYPE_NONE,
    LLAMA_POOLING_TYPE_RANK,
    LLAMA_POOLING_TYPE_UNSPECIFIED,
    NORM_MODE_EUCLIDEAN,
    NORM_MODE_MAX_INT16,
    NORM_MODE_NONE,
    NORM_MODE_PNORM,
    NORM_MODE_TAXICAB,
    LlamaEmbedding,
)
from indexer.engine.multimodal import MTMDEmbeddingHandler

__all__ = [
    "LLAMA_POOLING_TYPE_CLS",
    "LLAMA_POOLING_TYPE_LAST",
    "LLAMA_POOLING_TYPE_MEAN",
    "LLAMA_POOLING_TYPE_NONE",
    "LLAMA_POOLING_TYPE_RANK",
    "LLAMA_POOLING_TYPE_UNSPECIFIED",
    "NORM_MODE_EUCLIDEAN",
    "NORM_MODE_MAX_INT16",
    "NORM_MODE_NONE",
    "NORM_MODE_PNORM",
    "NORM_MODE_TAXICAB",
    "LlamaEmbedding",
    "MTMDEmbeddingHandler",
]
