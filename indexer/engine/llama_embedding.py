"""LlamaEmbedding: embeddings and reranking on llama-cpp-python 0.3.36, safe and fast by default.

A subclass of :class:`llama_cpp.Llama` that

* forces embedding output and a unified KV cache, and builds its context with the requested ``n_seq_max``
  (0.3.36 silently overrides it in embedding mode);
* embeds ``str`` / ``list[str]`` / ``list[list[int]]`` inputs, never splitting an input across decode batches,
  returning results in input order, reading exactly the output width of each pooling type;
* validates everything before each native call: llama.cpp's ``GGML_ASSERT`` kills the Python process (for
  example a non-causal packed batch larger than ``n_ubatch``, or an unknown pooling type);
* is fast by default on CPUs: flash attention on (``AUTO``), inputs packed by length (sorted by token count,
  packed, results restored to input order), many sequences per decode, and one single-threaded context per
  core decoding whole batches side by side (no cross-core barriers: a busy core slows only its own share).

Pure logic (token budgets, packing plan, ordering, normalization, input parsing, rerank pair building) lives
in :mod:`indexer.engine.plan`, which imports no llama.cpp; its names are re-exported here.

Notes:
* Non-causal models decode a sequence in one micro-batch. With n_batch / n_ubatch left unset, contexts start
  at 512 tokens and the main one grows to the longest input the first time one needs it (bge-m3: up to 8,192).
  Its compute buffer at bge-m3's width (hidden 1,024, 16 heads, FFN 4,096; measured on CPU with flash
  attention, which AUTO enables there): 14.5 MiB at 512 tokens, 64 MiB at 2,048, 352 MiB at 8,192 (without
  flash attention 4.5 GiB at 8,192). The parallel contexts stay at 512, so a collection chunked at 512 never
  grows anything.
* Causal models with MEAN/CLS pooling: llama.cpp pools per micro-batch, so an input longer than ``n_ubatch``
  gets a wrong vector. Keep ``n_ubatch == n_batch`` (the default) for such models.
* Causal models (Qwen3-Embedding, Qwen3-Reranker): every input of a packed batch is its own sequence (its own
  seq_id, positions from 0), so none attends to another; the KV memory is cleared after each batch, and with
  ``n_ctx=0`` it holds one batch (``n_batch`` cells), not the training context. A LAST-pooled text cut to the
  limit keeps the EOS its vocab appends (the token it is pooled at), as Hugging Face tokenizers cut.
* Results accumulate as Python floats (about 32 bytes each); NONE pooling over many long inputs needs a lot
  of host memory: embed in chunks.
* Not thread-safe. An embedding call wipes KV memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import _internals as internals

from indexer.engine import tokenization
from indexer.engine.arguments import (
    LLAMA_POOLING_TYPE_CLS,
    LLAMA_POOLING_TYPE_LAST,
    LLAMA_POOLING_TYPE_MEAN,
    LLAMA_POOLING_TYPE_NONE,
    LLAMA_POOLING_TYPE_RANK,
    LLAMA_POOLING_TYPE_UNSPECIFIED,
    available_cpus,
    check_arguments,
    pooling_name,
)
from indexer.engine.cpu_idle import CoreGauge
from indexer.engine.multimodal import MTMDEmbeddingHandler
from indexer.engine.multimodal_model import MultimodalMixin
from indexer.engine.outputs import Input, OutputsMixin
from indexer.engine.plan import (
    DEFAULT_PACK_TOKENS,
    NORM_MODE_EUCLIDEAN,
    NORM_MODE_MAX_INT16,
    NORM_MODE_NONE,
    NORM_MODE_PNORM,
    NORM_MODE_TAXICAB,
    PACK_CANDIDATES,
    TOKEN_NULL,
    BatchPlan,
    Item,
    PackChooser,
    ThreadChooser,
    VocabSpecials,
    apply_token_limit,
    balanced_pack_tokens,
    build_rank_pair,
    choose_n_seq_max,
    normalize_array,
    packs_matter,
    parse_input,
    plan_batches,
    rank_score,
    render_rerank_template,
    resolve_norm_mode,
    validate_token_ids,
)
from indexer.engine.ranking import RankingMixin
from indexer.engine.token_batch import TokenBatch
from indexer.models import native

logger = logging.getLogger(__name__)

__all__ = [
    "LLAMA_POOLING_TYPE_CLS",
    "LLAMA_POOLING_TYPE_LAST",
    "LLAMA_POOLING_TYPE_MEAN",
    "LLAMA_POOLING_TYPE_NONE",
    "LLAMA_POOLING_TYPE_RANK",
    "LLAMA_POOLING_TYPE_UNSPECIFIED",
    "NORM_MODE_EUCLIDEAN",
    "NORM_MODE_MAX_INT16",
    "NORM_MODE_NONE",
    "NORM_MODE_PNORM",
    "NORM_MODE_TAXICAB",
    "BatchPlan",
    "LlamaEmbedding",
    "ThreadChooser",
    "TokenBatch",
    "VocabSpecials",
    "apply_token_limit",
    "build_rank_pair",
    "normalize_array",
    "parse_input",
    "plan_batches",
    "rank_score",
    "render_rerank_template",
    "resolve_norm_mode",
    "validate_token_ids",
]

# n_batch / n_ubatch a context starts with when the caller sets neither (a non-causal model's main context
# grows from there to its longest input: see LlamaEmbedding).
DEFAULT_BATCH_TOKENS = 512
# Contexts decoding side by side by default; more cores than this give each context a team of threads (each
# context holds its own compute buffers, so memory grows with their number).
MAX_DEFAULT_CONTEXTS = 8


def _wait_through_interrupts(finished: Sequence[threading.Event], errors: list[BaseException]) -> None:
    """Wait until every started decoding thread has set its event, even through Ctrl-C: a context cleared or freed
    under a thread still decoding on it crashes the process (SIGSEGV). An interrupt while waiting is kept in
    ``errors`` (the threads then take no new batch, only finish the one in flight) for the caller to raise.
    (Not ``Thread.join``: an interrupted join marks a running thread stopped, bpo-45274's handling in 3.11.)"""
    for event in finished:
        while not event.is_set():
            try:
                event.wait()
            except BaseException as exc:  # KeyboardInterrupt (or SystemExit) landed in the wait: keep waiting
                errors.insert(0, exc)


# ---------------------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------------------


class LlamaEmbedding(OutputsMixin, RankingMixin, MultimodalMixin, llama_cpp.Llama):  # type: ignore[misc]  # embed()
    """Embedding and reranking on a llama.cpp model (see the module docstring).

    Args beyond ``llama_cpp.Llama``'s:
        n_seq_max: sequences per decode batch (1..256, and it must divide ``n_ubatch``: llama.cpp aborts
            otherwise). ``None`` (default) picks the largest such value up to ``min(256, limit)`` so that
            short inputs pack densely.
        pack_tokens: target tokens per packed batch of several inputs (``None``: chosen by measurement on this
            CPU among ``PACK_CANDIDATES``, 128 first; see :class:`PackChooser`).
        sort_by_length: pack inputs shortest first (results are always in input order).
        flash_attn: ``None`` (default) lets llama.cpp enable flash attention where supported; True forces it,
            False disables it.
        n_threads / n_threads_batch: ``None`` (default) measures per batch which of all cores or half of them
            is faster right now (ggml threads spin at barriers, so a busy core stalls a full team); decodes of
            fewer than 32 tokens (a query) use one thread.
        parallel_contexts: contexts that decode whole batches at once, one thread each, in worker threads.
            ``None`` (default): one per core, at most 8 (then each gets ``cores // 8`` threads), unless
            n_threads/n_threads_batch is given (then 1). A call with a single batch (a query) uses the main
            context only.
        n_batch / n_ubatch: ``None`` (both, the default) sizes them to the inputs: contexts start at 512
            tokens and, for a non-causal model, the main context grows (to the next power of two, at most the
            model's positions) the first time an input longer than its micro-batch comes, since a non-causal
            sequence must fit one micro-batch; the parallel contexts stay at 512 and inputs that need the
            grown context decode there. ``max_tokens`` is then the model's limit (``n_ctx_train``, or
            ``n_ctx`` when smaller). Given values are fixed: ``max_tokens = min(n_batch, n_ubatch,
            n_ctx_train)`` for non-causal models, as llama.cpp needs.
        tokenizer: a mode of :mod:`indexer.engine.tokenization` (``None``, the default: the file's best).
        mmproj_path / embedding_handler: the MTMD projector for ``embed_multimodal`` (see
            :mod:`indexer.engine.multimodal_model`): a path loaded on first use, or a handler the model owns.
    """

    def __init__(
        self,
        model_path: str,
        n_ctx: int = 0,
        n_batch: int | None = None,
        n_ubatch: int | None = None,
        n_seq_max: int | None = None,
        pooling_type: int = LLAMA_POOLING_TYPE_UNSPECIFIED,
        n_gpu_layers: int = 0,
        verbose: bool = True,
        mmproj_path: str | None = None,
        embedding_handler: MTMDEmbeddingHandler | None = None,
        *,
        flash_attn: bool | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        pack_tokens: int | None = None,
        sort_by_length: bool = True,
        parallel_contexts: int | None = None,
        tokenizer: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._closed = True  # until validated; a failed __init__ closes itself (below)
        max_seq = int(llama_cpp.llama_max_parallel_sequences())
        # both unset: start at the default and grow a non-causal model's main context to its inputs
        self._grows = n_batch is None and n_ubatch is None
        n_batch = DEFAULT_BATCH_TOKENS if n_batch is None else n_batch
        n_ubatch = DEFAULT_BATCH_TOKENS if n_ubatch is None else n_ubatch
        check_arguments(
            mmproj_path=mmproj_path, embedding_handler=embedding_handler, pooling_type=pooling_type,
            n_seq_max=n_seq_max, max_seq=max_seq, n_batch=n_batch, n_ubatch=n_ubatch, n_ctx=n_ctx,
            pack_tokens=pack_tokens, parallel_contexts=parallel_contexts,
        )
        for forced in ("embedding", "embeddings", "kv_unified", "n_seq_max"):
            kwargs.pop(forced, None)
        # a weight type whose decode kills this machine's llama.cpp (or that the probe could not prove) is refused
        # before any native call: the model's, its projector's and its adapter's
        for checked in (model_path, mmproj_path, kwargs.get("lora_path")):
            if checked:
                native.check_model_file(checked)

        self._closed = False  # Llama.__init__ calls our guarded methods
        try:
            cpus = available_cpus()
            super().__init__(
                model_path,
                # n_ctx=0: not the training context here (a causal model's KV cache for it, 3.7 GB for
                # Qwen3-Embedding-0.6B, would be allocated and cleared only to be dropped): _embedding_context
                # sizes the context it builds
                n_ctx=n_ctx or n_batch,
                n_batch=n_batch,
                n_ubatch=n_ubatch,
                pooling_type=pooling_type,
                n_gpu_layers=n_gpu_layers,
                verbose=verbose,
                # embedding=False: in embedding mode 0.3.36 builds its context with n_seq_max=min(n_batch, 256),
                # which aborts the process when that does not divide n_ubatch (see _embedding_context). We
                # build the embedding context ourselves.
                embedding=False,
                flash_attn=bool(flash_attn),
                n_threads=n_threads or cpus,
                n_threads_batch=n_threads_batch or n_threads or cpus,
                **kwargs,
            )
            self._embedding_context(max_seq, n_seq_max, flash_attn, n_ctx, n_batch, n_ubatch)
            self._read_model_facts(pack_tokens, sort_by_length)
            self.use_tokenizer(tokenizer)
            self._init_multimodal(mmproj_path, embedding_handler)
            self._set_up_threads(cpus, n_threads, n_threads_batch, parallel_contexts)
        except BaseException:
            self.close()
            raise
        if self.verbose:
            print(
                f"LlamaEmbedding: pooling={pooling_name(self.pooling)} causal={self.causal} "
                f"n_seq_max={self.n_seq_max} n_batch={self.n_batch_eff} n_ubatch={self.n_ubatch_eff} "
                f"limit={self.max_tokens} batch_tokens={self.batch_tokens} pack_tokens={self.pack_tokens}",
                flush=True,
            )

    # -- construction steps --------------------------------------------------------------------------------

    def _embedding_context(self, max_seq: int, n_seq_max: int | None, flash_attn: bool | None, n_ctx: int,
                           n_batch: int, n_ubatch: int) -> None:
        """Rebuild the context with our settings: 0.3.36 forces n_seq_max = min(n_batch, 256) in embedding mode
        and has no AUTO flash attention.

        ``n_ctx=0`` (the model's): batch sizes capped by the training context as llama-cpp-python caps them; a
        non-causal model gets the training context, a causal one KV memory for one batch only (``n_batch``
        cells, shared by its sequences: each decode holds at most one batch and the memory is cleared after
        it), so its limit is unchanged and its KV cache no larger than a batch needs."""
        cp = self.context_params
        causal_guess = not self._is_non_causal_model()
        if n_ctx == 0:
            n_train = int(self._model.n_ctx_train())
            cp.n_batch = min(n_train, n_batch)
            cp.n_ubatch = min(int(cp.n_batch), n_ubatch)
            cp.n_ctx = cp.n_batch if causal_guess else n_train
            self.n_batch = int(cp.n_batch)
        n_batch_eff = int(cp.n_batch)
        n_ubatch_eff = int(cp.n_ubatch)
        limit_guess = n_batch_eff if causal_guess else min(n_batch_eff, n_ubatch_eff)
        # llama.cpp reserves its worst-case graph with n_ubatch rounded up to a multiple of n_seq_max but
        # only n_ubatch outputs; for pooled embeddings that trips GGML_ASSERT(ggml_can_mul_mat) and kills
        # the process (for example n_seq_max=7 with n_ubatch=512). So n_seq_max must divide n_ubatch.
        want_seq = choose_n_seq_max(n_ubatch_eff, min(max_seq, limit_guess), n_seq_max)
        cp.embeddings = True
        cp.kv_unified = True
        cp.n_seq_max = want_seq
        cp.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
            if flash_attn is None
            else (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        )
        self._ctx.close()
        self._ctx = self._stack.enter_context(
            contextlib.closing(internals.LlamaContext(model=self._model, params=cp, verbose=self.verbose))
        )
        if self._lora_adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(cast(Any, self._lora_adapter))
            scales = (ctypes.c_float * 1)(self.lora_scale)
            if llama_cpp.llama_set_adapters_lora(self._ctx.ctx, adapters, 1, scales):
                raise RuntimeError(f"Failed to set LoRA adapter from lora path: {self.lora_path}")
        self._n_ctx = int(llama_cpp.llama_n_ctx(self._ctx.ctx))  # Llama's generation state, sized for this context
        self.input_ids = np.ndarray((self._n_ctx,), dtype=np.intc)
        got_seq = int(llama_cpp.llama_n_seq_max(self._ctx.ctx))
        if got_seq != want_seq:
            raise RuntimeError(f"llama.cpp built the context with n_seq_max={got_seq}, expected {want_seq}")
        self.n_seq_max = got_seq

    def _read_model_facts(self, pack_tokens: int | None, sort_by_length: bool) -> None:
        """Limits, pooling and output sizes of the model in this context."""
        ctx = self._ctx.ctx
        self.n_batch_eff = int(llama_cpp.llama_n_batch(ctx))
        self.n_ubatch_eff = int(llama_cpp.llama_n_ubatch(ctx))
        self.causal = bool(llama_cpp.llama_get_causal_attn(ctx)) and not self._is_non_causal_model()
        # Per-input limit L: the whole sequence must fit one physical batch for non-causal attention.
        self.n_ctx_train = int(self._model.n_ctx_train())
        # Tokens per decode batch: the whole batch must fit one micro-batch for non-causal attention.
        self.batch_tokens = self.n_batch_eff if self.causal else min(self.n_batch_eff, self.n_ubatch_eff)
        if self.causal:
            self._grows = False  # causal models decode in micro-batches already
            self.max_tokens = min(self.n_batch_eff, int(llama_cpp.llama_n_ctx(ctx)))
        elif self._grows:
            # Non-causal (BERT-family) models mostly have learned absolute position embeddings with
            # n_ctx_train rows: a position beyond them trips GGML_ASSERT in get_rows and kills the process.
            self.max_tokens = min(self.n_ctx_train, int(llama_cpp.llama_n_ctx(ctx)))
        else:
            self.max_tokens = min(self.n_batch_eff, self.n_ubatch_eff, self.n_ctx_train)
        self.pooling = int(llama_cpp.llama_pooling_type(ctx))
        model = self._model.model
        self.n_embd_out = int(llama_cpp.llama_model_n_embd_out(model))
        self.n_cls_out = int(llama_cpp.llama_model_n_cls_out(model)) if self.pooling == LLAMA_POOLING_TYPE_RANK else 0
        self.n_vocab_tokens = int(llama_cpp.llama_vocab_n_tokens(self._model.vocab))
        # A LAST-pooled model whose vocab appends EOS (Qwen3-Embedding) reads its vector there: a cut text keeps it.
        specials = self.vocab_specials()
        self.truncate_keeps = (
            specials.eos if self.pooling == LLAMA_POOLING_TYPE_LAST and specials.add_eos else TOKEN_NULL
        )
        # Pack at most one micro-batch so pooled sequences never straddle micro-batches (causal models).
        default_pack = min(DEFAULT_PACK_TOKENS, self.n_ubatch_eff)
        self.pack_tokens = min(pack_tokens or default_pack, self.batch_tokens)
        self.sort_by_length = sort_by_length
        # No pack chosen by the caller: measured per CPU among PACK_CANDIDATES where it matters (PackChooser)
        packs = sorted({min(c, self.n_ubatch_eff, self.batch_tokens) for c in PACK_CANDIDATES})
        self._packs = PackChooser(packs) if pack_tokens is None and len(packs) > 1 else None

    def _set_up_threads(
        self, cpus: int, n_threads: int | None, n_threads_batch: int | None, parallel_contexts: int | None
    ) -> None:
        """Thread count: fixed if the caller chose one, else measured per batch (see ThreadChooser). Data-parallel
        decoding: one single-threaded context per core, each taking whole batches. No thread of one batch waits
        at a barrier for another, so a busy core slows only its own share (see docs/benchmarks.md). Default: one
        per core when the caller fixed no thread count."""
        cp = self.context_params
        self._threads: ThreadChooser | None = None
        self._current_threads = int(cp.n_threads_batch)
        if n_threads is None and n_threads_batch is None and cpus > 1:
            self._threads = ThreadChooser([cpus, max(1, cpus // 2)], gauge=CoreGauge())
        self.token_batch = TokenBatch(self.batch_tokens, self.n_seq_max)
        self._extra_tokens = self.batch_tokens  # the parallel contexts' batch size (the main one may grow)
        if parallel_contexts is None:
            fixed = n_threads is not None or n_threads_batch is not None
            parallel_contexts = 1 if fixed else min(cpus, MAX_DEFAULT_CONTEXTS)
        # each context's share of the cores (1 up to MAX_DEFAULT_CONTEXTS cores: no barriers at all)
        self._context_threads = max(1, cpus // parallel_contexts)
        self._extra: list[tuple[internals.LlamaContext, TokenBatch]] = []
        if self._lora_adapter is None:
            for _ in range(parallel_contexts - 1):
                extra = self._stack.enter_context(
                    contextlib.closing(internals.LlamaContext(model=self._model, params=cp, verbose=self.verbose))
                )
                llama_cpp.llama_set_n_threads(extra.ctx, self._context_threads, self._context_threads)
                self._extra.append((extra, TokenBatch(self.batch_tokens, self.n_seq_max)))
        self.parallel_contexts = 1 + len(self._extra)

    def _grow_main_context(self, need: int) -> None:
        """Rebuild the main context with a micro-batch of at least ``need`` tokens (a non-causal sequence is
        decoded in one micro-batch): the next power of two, at most the model's limit rounded up to a
        multiple of ``n_seq_max`` (which must divide it). The parallel contexts keep their size."""
        size = 1 << max(0, need - 1).bit_length()
        cap = -(-self.max_tokens // self.n_seq_max) * self.n_seq_max
        size = max(need, min(size, cap))
        params = type(self.context_params).from_buffer_copy(self.context_params)
        params.n_batch = params.n_ubatch = size
        # the new context first: on failure the old one stays in use
        grown = internals.LlamaContext(model=self._model, params=params, verbose=self.verbose)
        old, self._ctx = self._ctx, self._stack.enter_context(contextlib.closing(grown))
        old.close()
        if self._lora_adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(cast(Any, self._lora_adapter))
            scales = (ctypes.c_float * 1)(self.lora_scale)
            if llama_cpp.llama_set_adapters_lora(self._ctx.ctx, adapters, 1, scales):
                raise RuntimeError(f"Failed to set LoRA adapter from lora path: {self.lora_path}")
        ctx = self._ctx.ctx
        self.n_batch_eff = int(llama_cpp.llama_n_batch(ctx))
        self.n_ubatch_eff = int(llama_cpp.llama_n_ubatch(ctx))
        self.batch_tokens = min(self.n_batch_eff, self.n_ubatch_eff)
        if self.batch_tokens < need:
            raise RuntimeError(f"llama.cpp built a context of {self.batch_tokens} tokens, asked for {size}")
        self.token_batch = TokenBatch(self.batch_tokens, self.n_seq_max)
        self._current_threads = int(params.n_threads_batch)
        if self.verbose:
            print(f"LlamaEmbedding: main context grown to n_batch=n_ubatch={self.batch_tokens}", flush=True)

    # -- model facts ---------------------------------------------------------------------------------------

    def _is_non_causal_model(self) -> bool:
        """Metadata fallback for causal detection: ``<arch>.attention.causal == false`` or an encoder."""
        meta = getattr(self, "metadata", {}) or {}
        arch = meta.get("general.architecture", "")
        if str(meta.get(f"{arch}.attention.causal", "")).lower() == "false":
            return True
        if arch in ("bert", "nomic-bert", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "t5encoder"):
            return True
        return bool(llama_cpp.llama_model_has_encoder(self._model.model))

    def vocab_specials(self) -> VocabSpecials:
        self._check_open()
        vocab = self._model.vocab
        return VocabSpecials(
            bos=int(llama_cpp.llama_vocab_bos(vocab)),
            eos=int(llama_cpp.llama_vocab_eos(vocab)),
            sep=int(llama_cpp.llama_vocab_sep(vocab)),
            add_bos=bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
            add_eos=bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
            add_sep=bool(llama_cpp.llama_vocab_get_add_sep(vocab)),
        )

    def rerank_template(self) -> str | None:
        """The model's ``rerank`` chat template, or None."""
        self._check_open()
        raw = llama_cpp.llama_model_chat_template(self._model.model, b"rerank")
        if not raw:
            return None
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        return text or None

    # -- lifecycle -----------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if getattr(self, "_closed", True):
            raise RuntimeError("LlamaEmbedding is closed (or failed to initialise); create a new instance")

    def close(self) -> None:
        """Free the context, batches and model. Idempotent; afterwards every public method raises."""
        self._closed = True
        self._close_multimodal()  # the projector first: it is bound to the model
        stack = getattr(self, "_stack", None)
        if stack is not None:
            stack.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def use_tokenizer(self, mode: str | None) -> str:
        """Tokenize texts with ``mode`` from now on (None: the best this file allows); returns the mode."""
        self._check_open()
        self._tokens = tokenization.choose(self.metadata or {}, mode, super().tokenize, super().detokenize,
                                           self.n_vocab_tokens, self.model_path)
        self.tokenizer_mode: str = self._tokens.mode
        return self.tokenizer_mode

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        self._check_open()  # the tokenizer in use (use_tokenizer); llama.cpp's while Llama itself is built
        tokens = getattr(self, "_tokens", None)
        return (super().tokenize(text, add_bos, special) if tokens is None
                else tokens.encode(text.decode("utf-8", errors="replace"), add_bos, special))

    def detokenize(self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False) -> bytes:
        self._check_open()
        return super().detokenize(tokens, prev_tokens=prev_tokens, special=special)

    def reset(self) -> None:
        self._check_open()
        super().reset()

    def n_ctx(self) -> int:
        self._check_open()
        return super().n_ctx()

    def n_embd(self) -> int:
        self._check_open()
        return super().n_embd()

    def n_vocab(self) -> int:
        self._check_open()
        return super().n_vocab()

    def pooling_type(self) -> str:
        self._check_open()
        return super().pooling_type()

    def eval(self, tokens: Sequence[int]) -> None:
        self._check_open()
        super().eval(tokens)

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        self._check_open()
        return super().create_completion(*args, **kwargs)

    def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
        self._check_open()
        return super().create_chat_completion(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._check_open()
        return super().__call__(*args, **kwargs)

    # -- native work ---------------------------------------------------------------------------------------

    def _clear_state(self) -> None:
        for context, batch in [(self._ctx, self.token_batch), *getattr(self, "_extra", [])]:
            batch.reset()
            if context.ctx is not None:
                mem = llama_cpp.llama_get_memory(context.ctx)
                if mem:  # BERT-style models have no KV memory (NULL)
                    llama_cpp.llama_memory_clear(mem, True)
        super().reset()

    def _tokenize_items(self, items: Sequence[Item]) -> list[list[int]]:
        out: list[list[int]] = []
        encoded = iter(self._tokens.encode_batch([item for item in items if isinstance(item, str)], True))
        for item in items:
            if isinstance(item, str):
                out.append(next(encoded))
            else:
                validate_token_ids(item, self.n_vocab_tokens)
                out.append(list(item))
        return out

    def _read_floats(self, ptr: Any, width: int, what: str) -> npt.NDArray[np.float32]:
        if not ptr:
            raise RuntimeError(f"llama.cpp returned no output ({what} is NULL)")
        return np.ctypeslib.as_array(ptr, shape=(width,)).copy()

    def embed_tokens_raw(self, token_lists: Sequence[Sequence[int]]) -> list[npt.NDArray[np.float32] | None]:
        """Decode already checked token lists (each ``1..max_tokens`` long, ids valid); raw float32 outputs.

        Per input: a vector (pooled), a ``(n_tokens, width)`` matrix (NONE), a classifier vector (RANK), or
        None for an empty input. State is reset before decoding and in ``finally``. With several batches and
        ``parallel_contexts > 1`` the batches are shared out to single-threaded contexts in worker threads
        (llama_decode releases the GIL).
        """
        self._check_open()
        for toks in token_lists:
            if len(toks) > self.max_tokens:  # last line of defence before a GGML_ASSERT
                raise ValueError(f"Requested tokens ({len(toks)}) exceed batch size of {self.max_tokens}")
        lengths = [len(t) for t in token_lists]
        if self._grows and max(lengths, default=0) > self.batch_tokens:
            self._grow_main_context(max(lengths))
        chosen = (self._packs.choose(sum(lengths))
                  if self._packs is not None and packs_matter(lengths, self._packs.candidates) else None)
        pack = balanced_pack_tokens(sum(lengths), chosen or self.pack_tokens, 1 + len(self._extra))
        plans = plan_batches(lengths, self.batch_tokens, self.n_seq_max, pack, self.sort_by_length)
        t0 = time.perf_counter()
        results: list[npt.NDArray[np.float32] | None] = [None] * len(token_lists)
        ctx = self._ctx.ctx
        if self.verbose:
            llama_cpp.llama_perf_context_reset(ctx)
        self._clear_state()
        try:
            if self._extra and len(plans) > 1:
                self._decode_parallel(plans, token_lists, lengths, results)
            else:
                for plan in plans:
                    self._decode_plan(self._ctx, self.token_batch, plan, token_lists, lengths, results, None)
        finally:
            if not self._closed:
                self._clear_state()
        if chosen is not None and self._packs is not None:
            self._packs.record(chosen, sum(lengths), time.perf_counter() - t0)
        if self.verbose:
            llama_cpp.llama_perf_context_print(ctx)
        return results

    def _decode_parallel(self, plans: Sequence[BatchPlan], token_lists: Sequence[Sequence[int]],
                         lengths: Sequence[int], results: list[npt.NDArray[np.float32] | None]) -> None:
        """Decode ``plans`` on every context at once (one thread each, one batch at a time per context); plans
        too long for the parallel contexts go first, on the main context alone."""
        long = [p for p in plans if p.n_tokens > self._extra_tokens]
        for plan in long:
            self._decode_plan(self._ctx, self.token_batch, plan, token_lists, lengths, results, None)
        plans = [p for p in plans if p.n_tokens <= self._extra_tokens]
        if not plans:
            return
        per = self._context_threads
        if self._current_threads != per:
            llama_cpp.llama_set_n_threads(self._ctx.ctx, per, per)
            self._current_threads = per
        workers = [(self._ctx, self.token_batch), *self._extra][: len(plans)]
        pending = iter(plans)
        lock = threading.Lock()
        errors: list[BaseException] = []

        def work(context: internals.LlamaContext, batch: TokenBatch, finished: threading.Event | None = None) -> None:
            try:
                while not errors:
                    with lock:
                        plan = next(pending, None)
                    if plan is None:
                        return
                    self._decode_plan(context, batch, plan, token_lists, lengths, results, per)
            except BaseException as exc:  # re-raised in the caller below
                errors.append(exc)
            finally:
                batch.reset()
                if finished is not None:
                    finished.set()

        finished = [threading.Event() for _ in workers[1:]]
        threads = [threading.Thread(target=work, args=(*w, f), daemon=True)
                   for w, f in zip(workers[1:], finished, strict=True)]
        try:
            for t in threads:
                t.start()
            work(*workers[0])
        finally:  # a start cut short by Ctrl-C before the thread ran leaves no ident and sets no event: not waited
            _wait_through_interrupts([f for t, f in zip(threads, finished, strict=True) if t.ident is not None], errors)
        if errors:
            raise errors[0]

    def _decode_plan(self, context: internals.LlamaContext, batch: TokenBatch, plan: BatchPlan,
                     token_lists: Sequence[Sequence[int]], lengths: Sequence[int],
                     results: list[npt.NDArray[np.float32] | None], fixed_threads: int | None) -> None:
        """Fill ``batch`` with one plan, decode it on ``context`` and store each input's output."""
        pooling = self.pooling
        width = self.n_cls_out if pooling == LLAMA_POOLING_TYPE_RANK else self.n_embd_out
        ctx = context.ctx
        batch.reset()
        for seq_id, idx in enumerate(plan.indices):
            batch.add_sequence(token_lists[idx], seq_id, True)
        n_ubatch = int(llama_cpp.llama_n_ubatch(ctx))
        if batch.n_tokens > int(llama_cpp.llama_n_batch(ctx)) or (not self.causal and batch.n_tokens > n_ubatch):
            raise RuntimeError("internal error: packed batch exceeds the model's limit")
        chooser = self._threads if fixed_threads is None else None
        if fixed_threads is None:
            threads = chooser.choose(batch.n_tokens) if chooser is not None else self._current_threads
            if threads != self._current_threads:
                llama_cpp.llama_set_n_threads(ctx, threads, threads)
                self._current_threads = threads
        else:
            threads = fixed_threads
        t0 = time.perf_counter()
        context.decode(cast(Any, batch))  # duck-typed: LlamaContext.decode reads .batch
        if chooser is not None:
            chooser.record(threads, batch.n_tokens, time.perf_counter() - t0)
        if pooling == LLAMA_POOLING_TYPE_NONE:
            k = 0
            for idx in plan.indices:
                n = lengths[idx]
                rows = np.empty((n, width), dtype=np.float32)
                for j in range(n):
                    ptr = llama_cpp.llama_get_embeddings_ith(ctx, k + j)
                    rows[j] = self._read_floats(ptr, width, f"embeddings of token {k + j}")
                results[idx] = rows
                k += n
        else:
            for seq_id, idx in enumerate(plan.indices):
                ptr = llama_cpp.llama_get_embeddings_seq(ctx, seq_id)
                results[idx] = self._read_floats(ptr, width, f"embeddings of sequence {seq_id}")
        batch.reset()
        mem = llama_cpp.llama_get_memory(ctx)
        if mem:
            llama_cpp.llama_memory_clear(mem, True)

    def _prepare(self, input: Input, truncate: bool, separator: str | None) -> tuple[list[list[int]], bool]:
        items, batched = parse_input(input, separator)
        keep = self.truncate_keeps  # a token list is cut as given
        token_lists = [
            apply_token_limit(t, self.max_tokens, truncate, keep if isinstance(item, str) else TOKEN_NULL)
            for item, t in zip(items, self._tokenize_items(items), strict=True)
        ]
        return token_lists, batched


