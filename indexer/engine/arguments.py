"""What :class:`~indexer.engine.llama_embedding.LlamaEmbedding` checks of its arguments before any native call
(llama.cpp aborts the process on an unknown pooling type or a sequence count past its limit), and the pooling
type constants it exports."""

from __future__ import annotations

import os

import llama_cpp

from indexer.engine.multimodal_model import check_handler

LLAMA_POOLING_TYPE_UNSPECIFIED: int = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED
LLAMA_POOLING_TYPE_NONE: int = llama_cpp.LLAMA_POOLING_TYPE_NONE
LLAMA_POOLING_TYPE_MEAN: int = llama_cpp.LLAMA_POOLING_TYPE_MEAN
LLAMA_POOLING_TYPE_CLS: int = llama_cpp.LLAMA_POOLING_TYPE_CLS
LLAMA_POOLING_TYPE_LAST: int = llama_cpp.LLAMA_POOLING_TYPE_LAST
LLAMA_POOLING_TYPE_RANK: int = llama_cpp.LLAMA_POOLING_TYPE_RANK

POOLING_NAMES = {
    LLAMA_POOLING_TYPE_UNSPECIFIED: "UNSPECIFIED",
    LLAMA_POOLING_TYPE_NONE: "NONE",
    LLAMA_POOLING_TYPE_MEAN: "MEAN",
    LLAMA_POOLING_TYPE_CLS: "CLS",
    LLAMA_POOLING_TYPE_LAST: "LAST",
    LLAMA_POOLING_TYPE_RANK: "RANK",
}


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def pooling_name(p: int) -> str:
    return POOLING_NAMES.get(p, str(p))


def int_at_least(value: object, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def check_arguments(
    *,
    mmproj_path: str | None,
    embedding_handler: object | None,
    pooling_type: int,
    n_seq_max: int | None,
    max_seq: int,
    n_batch: int,
    n_ubatch: int,
    n_ctx: int,
    pack_tokens: int | None,
    parallel_contexts: int | None,
) -> None:
    """Refuse what llama.cpp would abort the process on, before any native call (ValueError/TypeError)."""
    check_handler(mmproj_path, embedding_handler)
    if pooling_type not in POOLING_NAMES or isinstance(pooling_type, bool):
        raise ValueError(
            f"pooling_type={pooling_type!r} is not a llama.cpp pooling type; use one of "
            + ", ".join(f"{v} ({k})" for k, v in POOLING_NAMES.items())
        )
    if n_seq_max is not None and not (int_at_least(n_seq_max, 1) and n_seq_max <= max_seq):
        raise ValueError(f"n_seq_max must be an int with 1 <= n_seq_max <= {max_seq}, got {n_seq_max!r}")
    for name, value in (("n_batch", n_batch), ("n_ubatch", n_ubatch)):
        if not int_at_least(value, 1):
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if not int_at_least(n_ctx, 0):
        raise ValueError(f"n_ctx must be an int >= 0 (0 = the model's training context), got {n_ctx!r}")
    if pack_tokens is not None and (not isinstance(pack_tokens, int) or pack_tokens < 1):
        raise ValueError(f"pack_tokens must be an int >= 1 or None, got {pack_tokens!r}")
    if parallel_contexts is not None and not int_at_least(parallel_contexts, 1):
        raise ValueError(f"parallel_contexts must be an int >= 1 or None, got {parallel_contexts!r}")
