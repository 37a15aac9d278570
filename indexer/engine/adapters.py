"""Adapters from LlamaEmbedding to the Embedder and Reranker ports (indexer.ports).

Both load a GGUF with llama.cpp through :class:`indexer.engine.llama_embedding.LlamaEmbedding` (verbose off by
default) and translate its errors into indexer.errors.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexer.core.normalization import Normalization
from indexer.engine import tokenization
from indexer.engine.llama_embedding import (
    LLAMA_POOLING_TYPE_NONE,
    LLAMA_POOLING_TYPE_RANK,
    NORM_MODE_EUCLIDEAN,
    NORM_MODE_NONE,
    LlamaEmbedding,
)
from indexer.engine.multimodal import MTMDEmbeddingHandler
from indexer.errors import InputError, ModelError
from indexer.types import Similarity

logger = logging.getLogger(__name__)

META_SIMILARITY = "indexer.similarity"
META_MAX_SEQ_LENGTH = "indexer.max_seq_length"
_FINGERPRINT_SPAN = 1 << 20  # bytes read from each end of the file
IMAGE_TEXT_MARGIN = 32  # tokens of a request left for the text and special tokens around an image


def model_fingerprint(path: str | os.PathLike[str]) -> str:
    """A short, cheap content fingerprint: sha256 of the size plus the first and last MiB of the file."""
    p = Path(path)
    size = p.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with p.open("rb") as f:
        h.update(f.read(_FINGERPRINT_SPAN))
        if size > _FINGERPRINT_SPAN:
            f.seek(max(_FINGERPRINT_SPAN, size - _FINGERPRINT_SPAN))
            h.update(f.read(_FINGERPRINT_SPAN))
    return h.hexdigest()[:12]


def model_identity(path: str | os.PathLike[str], metadata: dict[str, str]) -> str:
    """``<GGUF general.name or file stem>-<fingerprint>``: changes whenever the weights file changes."""
    name = (metadata.get("general.name") or "").strip() or Path(path).stem
    return f"{name.replace(' ', '_')}-{model_fingerprint(path)}"


_IDENTITY_TAIL = re.compile(r"-[0-9a-f]{12}(\+.*)?$")


def model_name(model_id: str | None) -> str | None:
    """A model's name for a person: its identity (:func:`model_identity`, :func:`tokenized_identity`) without the
    weights fingerprint and tags (``all-MiniLM-L6-v2-0a1b2c3d4e5f+tok-reference`` -> ``all-MiniLM-L6-v2``); a
    path gives its file stem."""
    if not model_id:
        return None
    name = _IDENTITY_TAIL.sub("", model_id)
    return Path(name).stem if name.endswith(".gguf") else name


def tokenized_identity(file_id: str, tokenizer: str, projector: str | None = None) -> str:
    """A model's identity with the tokenizer behaviour it embeds with: llama.cpp's as it is (what every
    collection made before the behaviour was recorded used) adds nothing; and the fingerprint of its MTMD
    projector when it embeds images (image vectors come from the projector too)."""
    out = file_id if tokenizer == tokenization.RUNTIME else f"{file_id}+tok-{tokenizer}"
    return out if projector is None else f"{out}+mmproj-{projector}"


def projector_beside(model_path: str | os.PathLike[str]) -> Path | None:
    """The model's MTMD projector, ``<stem>.mmproj.gguf`` beside it (the converter's name), when there is one."""
    path = Path(model_path)
    projector = path.with_name(path.stem + ".mmproj.gguf")
    return projector if projector.is_file() else None


# The project's normalization values in LlamaEmbedding's integer modes: the only place that translates them.
_ENGINE_MODES = {Normalization.NONE: NORM_MODE_NONE, Normalization.L2: NORM_MODE_EUCLIDEAN}


def _engine_mode(normalize: Normalization) -> int:
    try:
        return _ENGINE_MODES[Normalization(normalize)]
    except ValueError as exc:
        raise InputError(
            f"normalize must be one of {', '.join(repr(n.value) for n in Normalization)} (indexer.core.normalization."
            f"Normalization), got {normalize!r}"
        ) from exc


def _load(model_path: str | os.PathLike[str], role: str, **opts: Any) -> LlamaEmbedding:
    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"{role} model not found: {path}; check the path or run `indexer models build`")
    opts.setdefault("verbose", False)
    try:
        return LlamaEmbedding(str(path), **opts)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelError(f"cannot load {role} model {path}: {exc}; is it a llama.cpp GGUF {role} model?") from exc


class LlamaEmbedder:
    """Embedder port on a llama.cpp GGUF sentence-embedding model (MEAN, CLS or LAST pooling)."""

    def __init__(self, model_path: str | os.PathLike[str], *, mmproj_path: str | os.PathLike[str] | None = None,
                 **opts: Any) -> None:
        self.model_path = str(model_path)
        # with a projector the model embeds images too (embed_images); its fingerprint joins the identity
        self.projector_id: str | None = model_fingerprint(mmproj_path) if mmproj_path is not None else None
        self.media_kinds: tuple[str, ...] = ("image",) if mmproj_path is not None else ()
        self._engine: LlamaEmbedding | None = _load(model_path, "embedding", **opts)
        engine = self._engine
        if mmproj_path is not None:
            # an image is never cut: its tokens are capped (llama.cpp shrinks it) so that it fits one request
            limit = min(engine.n_batch_eff, engine.n_ubatch_eff, int(engine.n_ctx()))
            engine.embedding_handler = MTMDEmbeddingHandler(
                str(mmproj_path), n_threads=opts.get("n_threads"), image_max_tokens=max(8, limit - IMAGE_TEXT_MARGIN),
                verbose=bool(opts.get("verbose", False)))
        if engine.pooling in (LLAMA_POOLING_TYPE_NONE, LLAMA_POOLING_TYPE_RANK):
            pooling = "NONE" if engine.pooling == LLAMA_POOLING_TYPE_NONE else "RANK"
            engine.close()
            raise ModelError(
                f"{model_path} has pooling type {pooling}, not a sentence-embedding model; use a model with "
                "MEAN, CLS or LAST pooling (or pass pooling_type=1 for MEAN)"
            )
        meta = dict(engine.metadata or {})
        self._file_id = model_identity(model_path, meta)
        self.best_tokenizer: str = engine.tokenizer_mode
        self.model_id: str = tokenized_identity(self._file_id, self.best_tokenizer, self.projector_id)
        self.dimensions: int = engine.n_embd_out
        self.similarity: str = self._similarity(meta)
        limit = engine.max_tokens
        declared = meta.get(META_MAX_SEQ_LENGTH)
        if declared is not None:
            try:
                limit = min(limit, int(declared))
            except ValueError:
                logger.warning("ignoring non-integer %s=%r in %s", META_MAX_SEQ_LENGTH, declared, model_path)
        self.max_tokens: int = limit

    def _similarity(self, meta: dict[str, str]) -> str:
        raw = meta.get(META_SIMILARITY)
        if raw is None:
            logger.warning(
                "%s has no %s metadata; assuming cosine similarity (convert it with indexer's converter to record it)",
                self.model_path,
                META_SIMILARITY,
            )
            return Similarity.COSINE.value
        try:
            return Similarity(raw.strip().lower()).value
        except ValueError as exc:
            raise ModelError(
                f"{self.model_path}: unknown {META_SIMILARITY}={raw!r}; expected one of "
                + ", ".join(s.value for s in Similarity)
            ) from exc

    @property
    def engine(self) -> LlamaEmbedding:
        if self._engine is None:
            raise ModelError("the embedder is closed; create a new LlamaEmbedder")
        return self._engine

    @property
    def tokenizer_mode(self) -> str:
        return self.engine.tokenizer_mode

    def use_tokenizer(self, mode: str | None) -> str:
        """Tokenize with ``mode`` (indexer.engine.tokenization) from now on; the identity follows (it keys the
        vector cache)."""
        try:
            got = self.engine.use_tokenizer(mode)
        except ValueError as exc:
            raise ModelError(f"{self.model_path}: {exc}") from exc
        self.model_id = tokenized_identity(self._file_id, got, self.projector_id)
        return got

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for ``text``, special tokens included (the tokenization embed uses)."""
        return len(self.engine.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        """float32 array (len(texts), dimensions); texts longer than ``max_tokens`` raise InputError."""
        engine = self.engine
        if isinstance(texts, str):
            raise InputError("embed_batch takes a list of texts, not a single string")
        mode = _engine_mode(normalize)
        if len(texts) == 0:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        limit = self.max_tokens
        if limit < engine.max_tokens:
            for i, text in enumerate(texts):
                n = self.count_tokens(text)
                if n > limit:
                    raise InputError(
                        f"text {i} has {n} tokens, more than the model's limit of {limit}; chunk it smaller"
                    )
        try:
            results, _ = engine.embed_arrays(list(texts), normalize=mode, truncate=False)
        except ValueError as exc:
            raise InputError(f"{exc}; the model's limit is {limit} tokens per text: chunk it smaller") from exc
        except RuntimeError as exc:
            raise ModelError(f"embedding failed: {exc}") from exc
        out = np.zeros((len(results), self.dimensions), dtype=np.float32)
        for i, r in enumerate(results):
            arr = np.asarray(r)
            if arr.size:  # an empty token list (possible only for models without BOS/EOS) stays zero
                out[i] = arr
        return out

    def embed_images(self, images: Sequence[bytes], normalize: Normalization) -> np.ndarray:
        """float32 array (len(images), dimensions): each image (encoded bytes, indexer.core.images.prepare_image's
        PNG) embedded alone through the projector; ModelError when the model has no projector."""
        if not self.media_kinds:
            raise ModelError(f"{self.model_path} embeds text only: it has no MTMD projector beside it "
                             "(<stem>.mmproj.gguf); use a multimodal model such as a Qwen3-VL embedding model")
        mode = _engine_mode(normalize)
        out = np.zeros((len(images), self.dimensions), dtype=np.float32)
        for i, data in enumerate(images):
            try:
                out[i] = self.engine.embed_multimodal(parts=[bytes(data)], normalize=mode)
            except (ValueError, TypeError) as exc:
                raise InputError(f"image {i} cannot be embedded: {exc}") from exc
            except (RuntimeError, NotImplementedError) as exc:
                raise ModelError(f"embedding image {i} failed: {exc}") from exc
        return out

    @property
    def vocab_size(self) -> int:
        return int(self.engine.n_vocab())

    def embed_inputs(self, items: Sequence[str | Sequence[int]], normalize: Normalization) -> np.ndarray:
        """Texts or token-id lists, already checked against ``max_tokens`` and ``vocab_size`` by the caller, in one
        engine call (the engine packs short inputs into shared decodes)."""
        try:
            inputs: Any = list(items)  # texts and token lists may be mixed: the engine takes either per input
            results, _ = self.engine.embed_arrays(inputs, normalize=_engine_mode(normalize), truncate=False)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise ModelError(f"embedding failed: {exc}") from exc
        return np.asarray([np.asarray(x, dtype=np.float32) for x in results], dtype=np.float32)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


class LlamaReranker:
    """Reranker port on a llama.cpp GGUF cross-encoder (RANK pooling).

    ``max_tokens`` caps query + document tokens per pair (default: the model's limit); longer pairs are cut in
    the document part.
    """

    def __init__(self, model_path: str | os.PathLike[str], max_tokens: int | None = None, **opts: Any) -> None:
        self.model_path = str(model_path)
        opts["pooling_type"] = LLAMA_POOLING_TYPE_RANK
        self._engine: LlamaEmbedding | None = _load(model_path, "reranker", **opts)
        engine = self._engine
        self.model_id: str = model_identity(model_path, dict(engine.metadata or {}))
        self.max_tokens: int = engine.max_tokens if max_tokens is None else max(8, min(max_tokens, engine.max_tokens))

    @property
    def engine(self) -> LlamaEmbedding:
        if self._engine is None:
            raise ModelError("the reranker is closed; create a new LlamaReranker")
        return self._engine

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, higher is more relevant."""
        engine = self.engine
        if len(texts) == 0:
            return []
        try:
            return engine.rank(query, list(texts), max_tokens=self.max_tokens)
        except RuntimeError as exc:
            raise ModelError(f"reranking failed: {exc}") from exc

    def count_pair_tokens(self, query: str, texts: Sequence[str]) -> int:
        """Tokens of every (query, text) pair as :meth:`rerank` feeds them (long texts cut to ``max_tokens``)."""
        return sum(len(s) for s in self.engine.rank_sequences(query, list(texts), max_tokens=self.max_tokens))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
