"""The collection's models: one handle per model (issue 43), instead of a chain of wrappers.

:class:`ModelHandle` is the one object the collection path (reader, writer, pipeline, chunker) and the server's
``/v1`` routes embed with. It implements the Embedder port (indexer.ports) over the engine underneath, the
llama.cpp adapter :class:`~indexer.engine.adapters.LlamaEmbedder`, and owns the policies around it:

- **lazy load**: the engine loads on the first call that needs it, through the loader its owner gives
  (:class:`~indexer.collection.parts.CollectionParts`: the identity check against the collection's record, the
  recorded tokenizer). Identity, width and media abilities are answered from the record without loading.
- **prompts**: a handle puts its prefix (the collection's document or query prompt) before every text it counts
  or embeds; :meth:`ModelHandle.with_prompt` gives the same model (same engine, same lock) with another prefix,
  and its ``model_id`` carries a digest of the prefix (indexer.index.prompts.prompted_model_id), so vectors
  cached for one prompt are never reused for another. Images go as they are.
- **threads** (the core's thread rules, in one place): a llama.cpp context is not thread-safe, so every call of a
  model holds that model's lock for its length (tokenizing included); prompt views share it. A front end that
  must not wait behind a long indexing batch opens a second collection (its own model context) for queries; it
  never shares a context without the lock. Writes (index, sync, sync_paths, forget, drop) hold the collection's
  writer lock, a file lock that also excludes other processes. :class:`~indexer.state.database.StateStore`
  shares one SQLite connection between threads, its write transactions serialized by a lock (WAL lets readers
  run). Stores are safe for concurrent searches (FAISS behind a readers-writer discipline, Qdrant's client).

:class:`RerankerHandle` is the reranker's, serialized the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from indexer.errors import ModelError
from indexer.index.prompts import prompted_model_id
from indexer.types import Normalization

if TYPE_CHECKING:
    from indexer.engine.adapters import LlamaEmbedder, LlamaReranker
    from indexer.state.database import CollectionRecord


class _Slot:
    """The engine a handle and its prompt views share: loaded once, called under one lock."""

    def __init__(self, load: Callable[[], LlamaEmbedder], recorded: Callable[[], CollectionRecord | None],
                 media: Callable[[str], bool]) -> None:
        self.load = load
        self.recorded = recorded
        self.media = media
        self.engine: LlamaEmbedder | None = None
        self.lock = threading.RLock()
        self.closed = False  # closed for good: a late call (a read still chunking at shutdown) must not load it again


def _never(path: str) -> bool:
    return False


class ModelHandle:
    """One embedding model as the collection uses it (see the module docstring). Thread-safe."""

    def __init__(self, load: Callable[[], LlamaEmbedder], *,
                 recorded: Callable[[], CollectionRecord | None] = lambda: None,
                 media: Callable[[str], bool] = _never, prefix: str = "", _slot: _Slot | None = None) -> None:
        """``load`` builds the engine (raising the collection's errors); ``recorded`` gives the record that
        answers identity and width before loading; ``media(model_path)`` whether a recorded model embeds images
        without loading it (a projector beside the file)."""
        self._slot = _slot if _slot is not None else _Slot(load, recorded, media)
        self.prefix = prefix

    @classmethod
    def over(cls, engine: LlamaEmbedder) -> ModelHandle:
        """A handle over an engine already loaded (the server's own /v1 model, tests)."""
        handle = cls(lambda: engine)
        handle._slot.engine = engine
        return handle

    def with_prompt(self, prefix: str) -> ModelHandle:
        """The same model (engine and lock shared) putting ``prefix`` before each text."""
        return ModelHandle(self._slot.load, prefix=prefix, _slot=self._slot)

    # -- the engine underneath ---------------------------------------------------------------------------------
    @property
    def engine(self) -> LlamaEmbedder:
        """The llama.cpp adapter, loaded on first use (its errors are the loader's)."""
        slot = self._slot
        engine = slot.engine
        if engine is None:
            with slot.lock:
                if slot.closed:
                    raise ModelError("the collection's model was closed with the collection; open it again")
                if slot.engine is None:
                    slot.engine = slot.load()
                engine = slot.engine
        return engine

    @property
    def loaded(self) -> bool:
        return self._slot.engine is not None

    def unload(self) -> None:
        """Forget the engine (a reindex switched the model): the next call loads the new one. Not closed: another
        thread may still be embedding with it (it is freed with its last reference)."""
        self._slot.engine = None

    def close(self) -> None:
        """Free the engine for good (every prompt view's too): a later call raises instead of loading it again."""
        slot = self._slot
        with slot.lock:
            slot.closed = True
            engine, slot.engine = slot.engine, None
            if engine is not None:
                engine.close()

    # -- the Embedder port ---------------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        rec = self._slot.recorded()
        base = rec.model_id if rec is not None and not self.loaded else self.engine.model_id
        return prompted_model_id(base, self.prefix)

    @property
    def dimensions(self) -> int:
        rec = self._slot.recorded()
        return rec.dimensions if rec is not None and not self.loaded else self.engine.dimensions

    @property
    def similarity(self) -> str:
        return self.engine.similarity

    @property
    def max_tokens(self) -> int:
        return self.engine.max_tokens

    @property
    def media_kinds(self) -> tuple[str, ...]:
        rec = self._slot.recorded()
        if rec is not None and not self.loaded:  # asked without loading the model
            return ("image",) if self._slot.media(rec.model_path) else ()
        return tuple(self.engine.media_kinds)

    @property
    def model_path(self) -> str:
        return self.engine.model_path

    @property
    def vocab_size(self) -> int:
        return self.engine.vocab_size

    def count_tokens(self, text: str) -> int:
        engine = self.engine
        with self._slot.lock:
            return engine.count_tokens(self.prefix + text)

    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        engine = self.engine
        with self._slot.lock:
            return engine.embed_batch([self.prefix + t for t in texts], normalize)

    def embed_images(self, images: Sequence[bytes], normalize: Normalization) -> np.ndarray:
        """Images as they are: a text prompt is for text."""
        engine = self.engine
        with self._slot.lock:
            return engine.embed_images(images, normalize)

    def embed_inputs(self, items: Sequence[str | Sequence[int]], normalize: Normalization) -> np.ndarray:
        """Texts (prefixed) and token id lists (as given) in one call: the /v1 routes."""
        engine = self.engine
        with self._slot.lock:
            return engine.embed_inputs([self.prefix + i if isinstance(i, str) else i for i in items], normalize)


class RerankerHandle:
    """The collection's reranker, its calls serialized (the thread rules above)."""

    def __init__(self, engine: LlamaReranker) -> None:
        self.engine = engine
        self.model_id = engine.model_id
        self._lock = threading.Lock()

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        with self._lock:
            return self.engine.rerank(query, texts)

    def close(self) -> None:
        with self._lock:
            self.engine.close()
