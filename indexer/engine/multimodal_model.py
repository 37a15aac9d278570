"""LlamaEmbedding's multimodal side: its projector (``mmproj_path``, loaded on first use, or an
``embedding_handler`` it owns), ``embed_multimodal`` and the pooled decode on its main context.

A mixin so that the engine module keeps to text; :class:`~indexer.engine.llama_embedding.LlamaEmbedding` calls
:meth:`_init_multimodal` in its constructor and :meth:`_close_multimodal` first in ``close()`` (the projector
goes before the model context it is bound to).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from indexer.engine import mtmd_decode
from indexer.engine.multimodal import MTMDEmbeddingHandler, MTMDEncodedChunk

__all__ = ["MultimodalMixin", "check_handler"]


def check_handler(mmproj_path: object, embedding_handler: object) -> None:
    """The constructor's projector arguments (ValueError for both, TypeError for a wrong type), no native call."""
    if mmproj_path is not None and embedding_handler is not None:
        raise ValueError("Pass either mmproj_path or embedding_handler, not both")
    if embedding_handler is not None and not isinstance(embedding_handler, MTMDEmbeddingHandler):
        raise TypeError(f"embedding_handler must be an MTMDEmbeddingHandler, got {type(embedding_handler).__name__}")
    if mmproj_path is not None and not isinstance(mmproj_path, str):
        raise TypeError(f"mmproj_path must be a str, got {type(mmproj_path).__name__}")


class MultimodalMixin:
    """``embed_multimodal`` and the projector's lifecycle for LlamaEmbedding (see the module docstring)."""

    _closed: bool
    _ctx: Any
    _model: Any
    pooling: int
    n_embd_out: int

    def _init_multimodal(self, mmproj_path: str | None, embedding_handler: MTMDEmbeddingHandler | None) -> None:
        self.mmproj_path = mmproj_path
        self.embedding_handler = embedding_handler
        self.n_embd_inp = int(llama_cpp.llama_model_n_embd_inp(self._model.model))

    def _close_multimodal(self) -> None:
        handler = getattr(self, "embedding_handler", None)
        if handler is not None:
            handler.close()

    if TYPE_CHECKING:  # LlamaEmbedding's

        def _check_open(self) -> None: ...

        def _clear_state(self) -> None: ...

    def _handler(self) -> MTMDEmbeddingHandler:
        self._check_open()
        if self.embedding_handler is None:
            if self.mmproj_path is None:
                raise ValueError("embed_multimodal needs a projector: create the model with mmproj_path=... (the "
                                 "model's MTMD projector GGUF) or embedding_handler=MTMDEmbeddingHandler(...)")
            self.embedding_handler = MTMDEmbeddingHandler(self.mmproj_path, verbose=bool(getattr(self, "verbose",
                                                                                                   False)))
        return self.embedding_handler

    def embed_multimodal(self, prompt: str | None = None, media: Sequence[bytes] = (), *,
                         parts: Sequence[str | bytes] | None = None, normalize: object = 2,
                         return_count: bool = False) -> Any:
        """One pooled vector (an owned ``List[float]`` of width ``n_embd_out``) for text plus images.

        ``prompt`` holds one media marker (``<__media__>``) per item of ``media`` (encoded image bytes, in marker
        order); or ``parts`` is an ordered list of str and bytes without markers. ``normalize`` as in ``embed``;
        ``return_count=True`` returns ``(vector, n_tokens)``, media rows included. The whole input must fit
        ``n_ctx``, ``n_batch`` and ``n_ubatch``: there is no truncation. Raises RuntimeError when closed,
        ValueError for no projector, unsupported pooling or media, TypeError for wrong argument types,
        NotImplementedError where the attention a chunk needs cannot be kept (see :mod:`.mtmd_decode`).
        """
        return self._handler().embed(self, prompt, media, parts=parts, normalize=normalize,
                                     return_count=return_count)

    def decode_multimodal(self, chunks: Sequence[MTMDEncodedChunk]) -> npt.NDArray[np.float64]:
        """The raw pooled vector of encoded chunks, decoded on the main context; state reset before and after."""
        self._check_open()
        self._clear_state()
        try:
            return mtmd_decode.decode_pooled(self._ctx.ctx, chunks, self.pooling, self.n_embd_out)
        finally:
            if not self._closed:
                self._clear_state()
