"""Documented import path of the port adapters (docs/qdrant-plugin.md); the code: :mod:`indexer.engine.adapters`."""

from indexer.engine.adapters import LlamaEmbedder, LlamaReranker

__all__ = ["LlamaEmbedder", "LlamaReranker"]
