"""The models served on their own (``/v1/embeddings``, ``/v1/rerank``): the facade's rules for them.

The HTTP service only queues and answers requests; which model names are accepted, what an input may hold, the
caps on a request and the normalization of the vectors (unit length, as OpenAI's are) are decided here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from indexer.collection.model import ModelHandle
from indexer.core.images import ImageError, PreparedImage, prepare_image
from indexer.engine import loader
from indexer.errors import InputError, NotFoundError
from indexer.ports import embeds_images
from indexer.search.query import check_query_length, check_text
from indexer.types import Normalization

if TYPE_CHECKING:
    from indexer.engine.adapters import LlamaReranker
    from indexer.settings import Settings

EmbedInput = str | Sequence[int] | bytes | PreparedImage  # bytes: an encoded image (a /v1 image item)


class ServedModels:
    """The embedding model (the ``embed_model`` setting) and the reranker (``rerank_model``) served directly.

    ``share(path)`` may return a collection's model handle of that model file (collection/model.py), so one
    llama.cpp context serves both, under its one lock. Not thread-safe: the HTTP service calls it from its model
    worker thread only."""

    def __init__(self, settings: Settings, share: Callable[[str], ModelHandle | None] | None = None) -> None:
        self.settings = settings
        self._share = share
        self._embedder: ModelHandle | None = None
        self._owns_embedder = False  # a shared embedder is closed by the collection that loaded it
        self._reranker: LlamaReranker | None = None

    def close(self) -> None:
        if self._embedder is not None and self._owns_embedder:
            self._embedder.close()
        if self._reranker is not None:
            self._reranker.close()
        self._embedder = self._reranker = None

    # -- names ---------------------------------------------------------------------------------------------------
    def embed_names(self) -> list[str]:
        return [self.settings.embed_model]

    def rerank_name(self) -> str | None:
        return self.settings.rerank_model and Path(self.settings.rerank_model).stem

    # -- request caps (checked before a request waits for the model) ------------------------------------------
    def check_embed_count(self, n: int) -> None:
        if n > self.settings.max_inputs:
            raise InputError(
                f"{n} inputs in one request; the limit is {self.settings.max_inputs} (max_inputs): split the batch"
            )

    def check_rerank(self, query: str, documents: Sequence[str]) -> None:
        if not documents:
            raise InputError("documents is empty; send at least one document")
        if len(documents) > self.settings.max_inputs:
            raise InputError(
                f"{len(documents)} documents in one request; the limit is {self.settings.max_inputs} (max_inputs)"
            )
        check_query_length(query)
        for i, doc in enumerate(documents):
            check_text(doc, f"documents[{i}]")

    # -- embeddings ----------------------------------------------------------------------------------------------
    @property
    def embedder(self) -> ModelHandle:
        if self._embedder is None:
            path = str(Path(loader.resolve(self.settings.embed_model)).resolve())
            shared = self._share(path) if self._share is not None else None
            self._owns_embedder = shared is None
            if shared is None:
                shared = ModelHandle.over(loader.load_embedder(self.settings, path))
            self._embedder = shared
        return self._embedder

    def check_embed(self, items: Sequence[EmbedInput], model: str | None, dimensions: int | None = None) -> int:
        """The tokens of one request; an InputError (or NotFoundError for the model) naming the problem and fix.
        An image item (encoded bytes) is decoded here, under the pixel cap, and replaced in ``items`` (a list) by
        the projector's PNG, so a bad image fails its own request only; images count no tokens."""
        emb = self.embedder
        self._check_model(model, emb)
        if dimensions is not None and dimensions != emb.dimensions:
            raise InputError(
                f"dimensions={dimensions} is not supported: this model's embeddings have {emb.dimensions} "
                "dimensions and are never shortened; leave 'dimensions' out"
            )
        vocab = emb.vocab_size
        total = 0
        for i, item in enumerate(items):
            if isinstance(item, (bytes, PreparedImage)):
                prepared = self._image(item, i, emb)
                if isinstance(items, list):
                    items[i] = prepared
                continue
            if isinstance(item, str):
                check_text(item, f"input[{i}]")
                n = emb.count_tokens(item)
            else:
                n = len(item)
                if n == 0:
                    raise InputError(f"input[{i}] is an empty token list; send at least one token id")
                bad = next((t for t in item if not 0 <= t < vocab), None)
                if bad is not None:
                    raise InputError(f"input[{i}] has token id {bad}; token ids must be between 0 and {vocab - 1}")
            if n > emb.max_tokens:
                raise InputError(
                    f"input[{i}] has {n} tokens; the model takes at most {emb.max_tokens} per input: split it"
                )
            total += n
            if total > self.settings.max_request_tokens:
                raise InputError(
                    f"the request has more than {self.settings.max_request_tokens} tokens (max_request_tokens); "
                    "send fewer or shorter inputs per request"
                )
        return total

    @staticmethod
    def _image(item: bytes | PreparedImage, i: int, emb: ModelHandle) -> PreparedImage:
        if not embeds_images(emb):
            raise InputError(f"input[{i}] is an image, but the served model {emb.model_path} embeds text only (no "
                             "MTMD projector beside it); serve a multimodal model to embed images")
        if isinstance(item, PreparedImage):
            return item
        try:
            return prepare_image(item)
        except ImageError as exc:
            raise InputError(f"input[{i}]: {exc.reason}") from None

    def embed(self, items: Sequence[EmbedInput]) -> np.ndarray:
        """Unit-length vectors of inputs that passed :meth:`check_embed` (several requests' at once)."""
        words: list[str | Sequence[int]] = []
        at_words: list[int] = []
        images: list[bytes] = []
        at_images: list[int] = []
        for i, item in enumerate(items):
            if isinstance(item, PreparedImage):
                images.append(item.data)
                at_images.append(i)
            elif isinstance(item, bytes):  # check_embed prepares every image first
                raise InputError(f"input[{i}] is an image that was not checked; call check_embed first")
            else:
                words.append(item)
                at_words.append(i)
        if not images:
            return self.embedder.embed_inputs(words, Normalization.L2)
        out = np.zeros((len(items), self.embedder.dimensions), dtype=np.float32)
        if words:
            out[at_words] = self.embedder.embed_inputs(words, Normalization.L2)
        out[at_images] = self.embedder.embed_images(images, Normalization.L2)
        return out

    def _check_model(self, model: str | None, emb: ModelHandle) -> None:
        if not model:
            return
        spec = self.settings.embed_model
        known = {spec, Path(spec).name, Path(spec).stem, emb.model_id, Path(emb.model_path).name,
                 Path(emb.model_path).stem, *self.settings.embed_model_aliases}
        if model not in known:
            aliases = ", ".join(repr(a) for a in self.settings.embed_model_aliases) or "none"
            raise NotFoundError(
                f"model {model!r} is not served here; this server embeds with {spec!r} (GET /v1/models), also "
                f"called {aliases}. Leave 'model' out, send one of those, or add the name your client sends to "
                "the embed_model_aliases setting. Vectors of different models cannot be compared, so no other "
                "model is served under another name"
            )

    # -- rerank --------------------------------------------------------------------------------------------------
    def rerank(self, query: str, documents: Sequence[str], model: str | None) -> tuple[list[float], int, str]:
        """Scores (higher is more relevant), the pairs' tokens and the model's name."""
        self.check_rerank(query, documents)
        name = self.rerank_name()
        spec = self.settings.rerank_model
        if not name or not spec:
            raise NotFoundError("no reranker model is configured on this server; set rerank_model and restart")
        if model and model not in {spec, name, Path(spec).name}:
            raise NotFoundError(f"rerank model {model!r} is not served here; this server reranks with {name!r}")
        if self._reranker is None:
            self._reranker = loader.load_reranker(self.settings)
        assert self._reranker is not None
        tokens = self._reranker.count_pair_tokens(query, documents)
        return self._reranker.rerank(query, list(documents)), tokens, name
