"""Documented import path of the embedding engine (README); the code lives in :mod:`indexer.engine.llama_embedding`."""

from indexer.engine.llama_embedding import LlamaEmbedding

__all__ = ["LlamaEmbedding"]
