"""FAISS vector store plugin (entry point ``indexer.stores: faiss``)."""

from plugins.faiss.store import FaissStore

__all__ = ["FaissStore"]
