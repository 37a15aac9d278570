"""Documented import path of the shared MTMD interfaces (the seed's ``llama_cpp.llama_multimodal``); the code
lives in :mod:`indexer.engine.multimodal`.

``MTMDBaseHandler`` prepares media for custom consumers (``tokenize`` / ``tokenize_parts`` context managers whose
request ``encode()`` returns owned ``MTMDEncodedChunk`` results); ``MTMDEmbeddingHandler`` pools them into one
vector (``LlamaEmbedding.embed_multimodal``).
"""

from indexer.engine.multimodal import MTMDBaseHandler, MTMDEmbeddingHandler, MTMDEncodedChunk, MTMDRequest

__all__ = ["MTMDBaseHandler", "MTMDEmbeddingHandler", "MTMDEncodedChunk", "MTMDRequest"]
