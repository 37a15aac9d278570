"""Thread rules of the core, in one place.

A server (and the watcher inside it) calls one :class:`~indexer.collection.facade.Collection` from several threads:

- **Model calls are serialized.** A llama.cpp context is not thread-safe, so the facade wraps its embedder and
  reranker in the proxies below: one lock per model, held for the length of one call (tokenizing included).
  A front end that must not wait behind a long indexing batch opens a second collection (its own model
  context) for queries; it never shares one context without the lock.
- **One writer.** Writes (index, sync, sync_paths, forget, drop) hold the collection's writer lock, a file lock
  that also excludes other processes; a second writer gets a clear error instead of waiting silently.
- **State.** :class:`~indexer.state.database.StateStore` shares one SQLite connection between threads; its write
  transactions are serialized by a lock, reads run concurrently (SQLite WAL lets other processes read too).
- **Stores** are safe for concurrent searches (FAISS behind a readers-writer discipline, Qdrant's client).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from indexer.ports import Embedder, Reranker


class SerialEmbedder:
    """An Embedder whose calls never overlap (see the module docstring)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.similarity = inner.similarity
        self.max_tokens = inner.max_tokens
        self.media_kinds: tuple[str, ...] = tuple(inner.media_kinds)
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return self.inner.count_tokens(text)

    def embed_batch(self, texts: Sequence[str], normalize: Any) -> np.ndarray:
        with self._lock:
            return self.inner.embed_batch(texts, normalize)

    def embed_images(self, images: Sequence[bytes], normalize: Any) -> np.ndarray:
        with self._lock:
            return self.inner.embed_images(images, normalize)

    def close(self) -> None:
        with self._lock:
            closer = getattr(self.inner, "close", None)
            if closer is not None:
                closer()


class SerialReranker:
    """A Reranker whose calls never overlap."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self._lock = threading.Lock()

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        with self._lock:
            return self.inner.rerank(query, texts)

    def close(self) -> None:
        with self._lock:
            closer = getattr(self.inner, "close", None)
            if closer is not None:
                closer()
