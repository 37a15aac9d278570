"""TokenBatch: a ``llama_batch`` backed by numpy arrays, validated before anything reaches llama.cpp (a bad
sequence id or a full batch is a ValueError here, not a ``GGML_ASSERT`` that kills the process)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llama_cpp
import numpy as np


class TokenBatch:
    """A ``llama_batch`` backed by numpy arrays (one sequence id per token), filled with slice assignments.

    Owns its memory (never passed to ``llama_batch_free``). Validates before anything reaches llama.cpp.
    """

    def __init__(self, n_tokens_max: int, n_seq_max: int) -> None:
        if n_tokens_max < 1 or n_seq_max < 1:
            raise ValueError(f"TokenBatch needs n_tokens_max >= 1 and n_seq_max >= 1 ({n_tokens_max}, {n_seq_max})")
        self.capacity = n_tokens_max
        self.n_seq_max = n_seq_max
        self._token = np.zeros(n_tokens_max, dtype=np.int32)
        self._pos = np.zeros(n_tokens_max, dtype=np.int32)
        self._n_seq_id = np.ones(n_tokens_max, dtype=np.int32)
        self._seq = np.zeros(n_tokens_max, dtype=np.int32)
        self._logits = np.ones(n_tokens_max, dtype=np.int8)
        int_p = ctypes.POINTER(ctypes.c_int32)
        base = self._seq.ctypes.data
        self._seq_ptrs = (int_p * n_tokens_max)(*(ctypes.cast(base + 4 * i, int_p) for i in range(n_tokens_max)))
        self.batch = llama_cpp.llama_batch(
            n_tokens=0,
            token=self._token.ctypes.data_as(int_p),
            embd=None,
            pos=self._pos.ctypes.data_as(int_p),
            n_seq_id=self._n_seq_id.ctypes.data_as(int_p),
            seq_id=ctypes.cast(self._seq_ptrs, ctypes.POINTER(int_p)),
            logits=self._logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )
        self.n_tokens = 0

    def reset(self) -> None:
        self.n_tokens = 0
        self.batch.n_tokens = 0

    def _check_seq_id(self, seq_id: object) -> int:
        if isinstance(seq_id, bool) or not isinstance(seq_id, (int, np.integer)):
            raise ValueError(f"LlamaBatch.add_sequence: seq_id must be an int, got {type(seq_id).__name__}")
        sid = int(seq_id)
        if sid < 0:
            raise ValueError(f"LlamaBatch.add_sequence: seq_id={sid} is negative; sequence ids start at 0")
        if sid >= self.n_seq_max:
            n = self.n_seq_max
            raise ValueError(
                f"LlamaBatch.add_sequence: seq_id={sid} exceeds the configured sequence capacity "
                f"(n_seq_max={n}; valid IDs are 0 through {n - 1}). For parallel batching, initialize "
                f"Llama or LlamaEmbedding with n_seq_max>={sid + 1}; for a single sequence use seq_id=0."
            )
        return sid

    def _check_room(self, n: int) -> None:
        if self.n_tokens + n > self.capacity:
            raise ValueError(
                f"LlamaBatch.add_sequence: adding {n} tokens to {self.n_tokens} overflows the batch capacity "
                f"of {self.capacity} tokens; flush the batch first or raise n_batch"
            )

    def add_sequence(self, tokens: Sequence[int], seq_id: int, logits_all: bool = True) -> None:
        """Append one sequence with positions ``0..n-1``; every token is an output unless ``logits_all`` is
        False (then only the last)."""
        sid = self._check_seq_id(seq_id)
        n = len(tokens)
        if n == 0:
            raise ValueError("LlamaBatch.add_sequence: empty token list (an empty input needs no decode)")
        self._check_room(n)
        a, b = self.n_tokens, self.n_tokens + n
        self._token[a:b] = tokens
        self._pos[a:b] = np.arange(n, dtype=np.int32)
        self._seq[a:b] = sid
        self._n_seq_id[a:b] = 1
        self._logits[a:b] = 1 if logits_all else 0
        self._logits[b - 1] = 1
        self.n_tokens = b
        self.batch.n_tokens = b

    def add(
        self, tokens: Sequence[int], positions: Sequence[int], seq_ids: Sequence[int], logits: Sequence[bool]
    ) -> None:
        """Append tokens with explicit per-token positions, sequence ids and output flags."""
        n = len(tokens)
        if n == 0 or len(seq_ids) == 0:
            raise ValueError("LlamaBatch.add: empty tokens or seq_ids")
        if not len(positions) == len(seq_ids) == len(logits) == n:
            raise ValueError(
                f"LlamaBatch.add: array lengths differ (tokens={n}, positions={len(positions)}, "
                f"seq_ids={len(seq_ids)}, logits={len(logits)})"
            )
        sids = [self._check_seq_id(s) for s in seq_ids]
        self._check_room(n)
        a, b = self.n_tokens, self.n_tokens + n
        self._token[a:b] = tokens
        self._pos[a:b] = positions
        self._seq[a:b] = sids
        self._n_seq_id[a:b] = 1
        self._logits[a:b] = [1 if x else 0 for x in logits]
        self.n_tokens = b
        self.batch.n_tokens = b
