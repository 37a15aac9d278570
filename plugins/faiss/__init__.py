"""FAISS vector store plugin (entry point ``indexer.stores: faiss``)."""

from plugins.faiss.threads import load_faiss

load_faiss()  # first: FAISS's OpenMP threads wait passively (plugins/faiss/threads.py)

from plugins.faiss.faiss_store import FaissStore  # noqa: E402

__all__ = ["FaissStore"]
