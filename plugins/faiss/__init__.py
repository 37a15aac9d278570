"""FAISS vector store plugin (entry point ``indexer.stores: faiss``)."""

from plugins.faiss.faiss_store import FaissStore

__all__ = ["FaissStore"]
