"""Probe a GGUF model with llama.cpp: pooled outputs of exact token sequences (used to verify conversions).

``Llama.embed`` tokenizes text itself and cannot return rank scores, so this decodes token ids one sequence
per batch and reads ``llama_get_embeddings_seq`` directly (a vector for MEAN/CLS pooling, the classifier
outputs for RANK).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np

from indexer.errors import ModelError


def load_llama(path: Path, pooling_type: int, n_ctx: int = 512) -> llama_cpp.Llama:
    """Open ``path`` for pooled outputs; one sequence of up to ``n_ctx`` tokens per decode. A weight type this
    machine's llama.cpp cannot run is refused first (the native probe), as the product refuses it."""
    from indexer.models import native

    native.check_model_file(path)
    return llama_cpp.Llama(
        model_path=str(path), embedding=True, pooling_type=int(pooling_type), n_ctx=n_ctx, n_batch=n_ctx,
        n_ubatch=n_ctx, n_threads=2, verbose=False,
    )


def pooled_outputs(llm: llama_cpp.Llama, sequences: Sequence[Sequence[int]], width: int) -> np.ndarray:
    """Decode each token sequence alone and return its pooled output (``width`` floats) as a row."""
    ctx = llm._ctx.ctx
    rows = []
    batch = llama_cpp.llama_batch_init(llm.n_ctx(), 0, 1)
    try:
        for tokens in sequences:
            if not 0 < len(tokens) <= llm.n_ctx():
                raise ModelError(f"sequence of {len(tokens)} tokens does not fit n_ctx={llm.n_ctx()}")
            batch.n_tokens = len(tokens)
            for i, tok in enumerate(tokens):
                batch.token[i] = tok
                batch.pos[i] = i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = True
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                raise ModelError(f"llama_decode returned {rc}")
            ptr = llama_cpp.llama_get_embeddings_seq(ctx, 0)
            if not ptr:
                raise ModelError("no pooled output: the context's pooling type is NONE")
            rows.append(np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), (width,)).copy())
    finally:
        llama_cpp.llama_batch_free(batch)
    return np.array(rows, dtype=np.float64)
