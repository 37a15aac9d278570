"""Pooled decoding of encoded MTMD chunks on a LlamaEmbedding's context: one sequence, chunk after chunk.

A llama.cpp batch carries either token ids or embedding rows, never both, so a request of text and media
chunks is decoded chunk by chunk into one sequence's KV memory (positions continuing, M-RoPE positions for
media rows where the projector uses them), every row marked as an output. With causal attention each row sees
every row before it, so the pooled result is the one a single pass would give: LAST is read after the last
chunk, CLS after the first, MEAN is the row-weighted mean of the chunks' means (llama.cpp pools per decode).
A bidirectional model would need every row in one batch; that is refused (NotImplementedError) before any
native work, as is a media chunk that asks for bidirectional attention inside a causal model.

The batches are built from Python-owned ctypes arrays (nothing native to free); the caller resets the
context's state before and after.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

POOL_MEAN = int(llama_cpp.LLAMA_POOLING_TYPE_MEAN)
POOL_CLS = int(llama_cpp.LLAMA_POOLING_TYPE_CLS)
POOL_LAST = int(llama_cpp.LLAMA_POOLING_TYPE_LAST)
POOLED = {POOL_MEAN: "MEAN", POOL_CLS: "CLS", POOL_LAST: "LAST"}


class _Batch:
    """A ``llama_batch`` over arrays this object owns (kept alive while it is decoded)."""

    def __init__(self, n: int, positions: npt.NDArray[np.int32], tokens: Sequence[int] | None = None,
                 rows: npt.NDArray[np.float32] | None = None) -> None:
        self.keep: list[Any] = []
        b = llama_cpp.llama_batch()
        b.n_tokens = n
        if tokens is not None:
            b.token = self._own((llama_cpp.llama_token * n)(*tokens))
        if rows is not None:
            arr = self._own(np.ascontiguousarray(rows, dtype=np.float32))
            b.embd = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        # M-RoPE media rows: section-major, pos[j * n + i] (llama.cpp's layout for embedding batches)
        flat = np.ascontiguousarray(positions.T if positions.ndim == 2 else positions, dtype=np.int32).ravel()
        b.pos = self._own((llama_cpp.llama_pos * flat.size)(*flat.tolist()))
        b.n_seq_id = self._own((ctypes.c_int32 * n)(*([1] * n)))
        seq = self._own((llama_cpp.llama_seq_id * 1)(0))
        seq_ptr = ctypes.cast(seq, ctypes.POINTER(llama_cpp.llama_seq_id))
        b.seq_id = self._own((ctypes.POINTER(llama_cpp.llama_seq_id) * n)(*([seq_ptr] * n)))
        b.logits = self._own((ctypes.c_int8 * n)(*([1] * n)))
        self.batch = b

    def _own(self, obj: Any) -> Any:
        self.keep.append(obj)
        return obj


def check_decodable(chunks: Sequence[Any], *, causal: bool, limit: int, n_ctx: int) -> None:
    """Refuse, before encoding, what this path cannot decode exactly (see the module docstring)."""
    n_tokens = sum(c.n_tokens for c in chunks)
    n_pos = sum(c.n_pos for c in chunks)
    if n_tokens > limit or n_pos > n_ctx:
        raise ValueError(f"the multimodal input needs {n_tokens} tokens ({n_pos} positions), text and media "
                         f"together, but this model takes at most {limit} per request (n_batch / n_ubatch) and "
                         f"{n_ctx} positions (n_ctx); multimodal requests are never truncated or split: shorten "
                         "the text, use fewer or smaller images, or build the model with larger n_batch/n_ubatch")
    if any(c.use_non_causal for c in chunks) and causal:
        raise NotImplementedError("the projector asks for bidirectional attention inside a media chunk, which a "
                                  "pooled decode of a causal model cannot apply to one chunk only; this "
                                  "model/projector pair is not supported by embed_multimodal")
    if not causal and len(chunks) > 1:
        raise NotImplementedError("a bidirectional model must see text and media rows in one batch, and a "
                                  "llama.cpp batch carries either token ids or embedding rows, not both; "
                                  "embed_multimodal supports causal models (Qwen3-VL-Embedding style, LAST "
                                  "pooling) only")


def decode_pooled(ctx: Any, chunks: Sequence[Any], pooling: int, width: int) -> npt.NDArray[np.float64]:
    """Decode ``chunks`` (MTMDEncodedChunk) into sequence 0 of ``ctx`` and return the pooled vector."""
    total = sum(c.n_tokens for c in chunks)
    acc = np.zeros(width, dtype=np.float64)
    first: npt.NDArray[np.float64] | None = None
    for chunk in chunks:
        if chunk.n_tokens == 0:
            continue
        pooled = _decode_chunk(ctx, chunk, width)
        if first is None:
            first = pooled
        acc = acc + pooled * chunk.n_tokens if pooling == POOL_MEAN else pooled
    if first is None:
        raise ValueError("the multimodal input is empty (no text and no media tokens)")
    if pooling == POOL_MEAN:
        return acc / total
    return first if pooling == POOL_CLS else acc


def _decode_chunk(ctx: Any, chunk: Any, width: int) -> npt.NDArray[np.float64]:
    n = chunk.n_tokens
    if chunk.kind == "text":
        batch = _Batch(n, np.asarray(chunk.positions, dtype=np.int32), tokens=chunk.tokens)
    else:
        batch = _Batch(n, np.asarray(chunk.positions, dtype=np.int32), rows=chunk.embeddings)
    rc = int(llama_cpp.llama_decode(ctx, batch.batch))
    if rc != 0:
        raise RuntimeError(f"llama_decode returned {rc} on a {chunk.kind} chunk of {n} rows")
    ptr = llama_cpp.llama_get_embeddings_seq(ctx, 0)
    if not ptr:
        raise RuntimeError("llama.cpp returned no pooled output (llama_get_embeddings_seq is NULL)")
    return np.ctypeslib.as_array(ptr, shape=(width,)).astype(np.float64)
