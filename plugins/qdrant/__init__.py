"""Qdrant vector store plugin (entry point ``indexer.stores: qdrant``): server or embedded local mode."""

from plugins.qdrant.client_store import QdrantStore

__all__ = ["QdrantStore"]
