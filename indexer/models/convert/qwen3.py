"""Qwen3 checkpoints (byte-level BPE) in their two retrieval forms: Qwen3-Embedding and Qwen3-Reranker.

Follows llama.cpp's own converter (conversion/qwen.py, ``Qwen3Model``; conversion/base.py, ``TextModel``
hparams and ``_set_vocab_gpt2``) for names, hparams, vocabulary and tensor types:

* architecture ``qwen3``: block count, context length (``max_position_embeddings``), embedding and feed-forward
  lengths, heads and KV heads, RoPE base, RMS-norm epsilon, ``head_dim`` as key and value length;
* vocabulary: tokenizer model ``gpt2``, pre-tokenizer ``qwen2`` (recognised from tokenizer.json's split regex
  rather than llama.cpp's hash of a transformers tokenization: the product has no transformers), the tokens
  with added tokens as CONTROL (special, or looking like ``<|...|>``) or USER_DEFINED, ``[PAD<i>]`` UNUSED
  rows up to config.json's ``vocab_size``, merges, special ids and add-BOS/EOS flags as gguf's ``SpecialVocab``
  reads them (Qwen3-Embedding's tokenizer appends ``<|endoftext|>``: add-EOS true);
* the embedding form: the pooling type of the sentence-transformers Pooling module (Qwen3-Embedding: LAST);
* the reranker form, recognised as llama.cpp recognises it (a README titled ``# Qwen3-Reranker`` or
  ``qwen3-reranker`` in the folder's name or ``_name_or_path``): pooling RANK, classifier labels
  ``["yes", "no"]``, ``cls.output.weight`` made of the "yes" and "no" rows of ``lm_head`` (of
  ``embed_tokens`` when the embeddings are tied; llama.cpp's qwen3 graph applies a softmax over the two outputs,
  so output 0 is P(yes)), the ``rerank`` chat template llama.cpp writes; an untied ``lm_head`` is not kept.

A plain Qwen3 language model (no Pooling module, no reranker signal) is refused: llama.cpp would write it
without a pooling type and it embeds nothing meaningful. Our own keys: ``indexer.similarity``,
``indexer.max_seq_length`` and the sentence-transformers prompts as ``indexer.prompt.query`` /
``indexer.prompt.document`` (Qwen3-Embedding's query instruction).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from indexer.errors import ModelError
from indexer.models.convert.common import (
    KEY_MAX_SEQ,
    KEY_SIMILARITY,
    Prepared,
    add_tensors,
    max_seq_length,
    pooling_type,
    read_json,
    similarity,
    st_modules,
)
from indexer.models.safetensors import read_checkpoint_tensors

logger = logging.getLogger(__name__)

MODEL_TYPES = frozenset({"qwen3"})
ARCHITECTURES = frozenset({"Qwen3ForCausalLM", "Qwen3Model"})

# GGUF keys of the prompts (read by indexer.index.prompts as GGUF_QUERY / GGUF_DOCUMENT)
KEY_PROMPT_QUERY = "indexer.prompt.query"
KEY_PROMPT_DOCUMENT = "indexer.prompt.document"

# Qwen2/Qwen3's pre-tokenizer split (transformers' PRETOKENIZE_REGEX); llama.cpp's "qwen2" pre-tokenizer
QWEN2_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# As llama.cpp's converter writes it (conversion/qwen.py, Qwen3Model.set_gguf_parameters).
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
    "<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
RERANK_LABELS = ("yes", "no")

_LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                  "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")


@dataclass(frozen=True)
class _Checkpoint:
    """What the converter reads from a checkpoint folder besides the tensors."""

    config: dict[str, Any]
    rank: bool  # the Qwen3-Reranker form
    pooling: gguf.PoolingType
    similarity: str | None
    max_seq_length: int
    rope_theta: float | None
    tokens: list[str]
    token_types: list[gguf.TokenType]
    special: gguf.SpecialVocab
    yes_no: tuple[int, int]  # token ids of "yes" and "no" (reranker form)
    prompts: tuple[str, str] | None  # (query, document) from config_sentence_transformers.json


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate a Qwen3 checkpoint (nothing is written)."""
    ckpt = _read_checkpoint(src_dir, config)
    return Prepared("qwen3-reranker" if ckpt.rank else "qwen3-embedding", gguf.MODEL_ARCH.QWEN3,
                    partial(_write, src_dir, ckpt))


def is_reranker(src_dir: Path, config: dict[str, Any]) -> bool:
    """llama.cpp's rule (Qwen3Model._is_qwen3_reranker): the README's title, or a name hint."""
    readme = src_dir / "README.md"
    text = readme.read_text(encoding="utf-8", errors="replace").lower() if readme.is_file() else ""
    if "# qwen3-reranker" in text:
        return True
    hints = [src_dir.resolve().name, str(config.get("_name_or_path", ""))]
    return any("qwen3-reranker" in h.lower() for h in hints if h)


def _is_embedding(src_dir: Path, config: dict[str, Any]) -> bool:
    if any(str(m.get("type", "")).endswith("Pooling") for m in st_modules(src_dir)):
        return True
    readme = src_dir / "README.md"
    text = readme.read_text(encoding="utf-8", errors="replace").lower() if readme.is_file() else ""
    hints = [src_dir.resolve().name, str(config.get("_name_or_path", ""))]
    if "# qwen3-embedding" in text or any("qwen3-embedding" in h.lower() for h in hints if h):
        logger.warning("%s: a Qwen3-Embedding checkpoint without a sentence-transformers Pooling module; using "
                       "LAST pooling, as Qwen3-Embedding does", src_dir)
        return True
    return False


def _check_config(src_dir: Path, config: dict[str, Any]) -> float | None:
    """Refuse Qwen3 variants llama.cpp's qwen3 graph does not compute; returns the RoPE base (None: absent)."""
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            raise ModelError(f"{src_dir}: config.json lacks a positive integer {key!r}")
    if str(config.get("hidden_act", "silu")) != "silu":
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported: llama.cpp's qwen3 "
                         "graph uses SiLU")
    if config.get("attention_bias"):
        raise ModelError(f"{src_dir}: attention_bias is not supported: llama.cpp's qwen3 graph has no QKV biases")
    if config.get("use_sliding_window"):
        raise ModelError(f"{src_dir}: use_sliding_window is not supported: llama.cpp's qwen3 graph attends to the "
                         "full context")
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = str(rope.get("rope_type", rope.get("type", "default")) or "default")
    if rope_type != "default":
        raise ModelError(f"{src_dir}: RoPE scaling {rope_type!r} is not supported by this converter (default RoPE "
                         "only); convert it with llama.cpp's convert_hf_to_gguf.py")
    theta = rope.get("rope_theta", config.get("rope_theta"))
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    if heads % kv_heads:
        raise ModelError(f"{src_dir}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    return None if theta is None else float(theta)


def _read_checkpoint(src_dir: Path, config: dict[str, Any]) -> _Checkpoint:
    rope_theta = _check_config(src_dir, config)
    # a sentence-transformers Pooling module is the embedding form whatever the README says
    has_pooling = any(str(m.get("type", "")).endswith("Pooling") for m in st_modules(src_dir))
    rank = not has_pooling and is_reranker(src_dir, config)
    if not rank and not _is_embedding(src_dir, config):
        raise ModelError(
            f"{src_dir}: a Qwen3 language model without an embedding or reranker form; supported: Qwen3-Embedding "
            "(a sentence-transformers folder with a Pooling module: LAST pooling) and Qwen3-Reranker (recognised "
            "as llama.cpp does: a README titled '# Qwen3-Reranker' or 'qwen3-reranker' in the folder's name)")
    pooling = gguf.PoolingType.RANK if rank else pooling_type(src_dir, gguf.PoolingType.LAST)
    tokens, token_types, vocab = _vocab(src_dir, int(config["vocab_size"]))
    special = gguf.SpecialVocab(src_dir, load_merges=True, n_vocab=len(tokens))
    if not special.merges:
        raise ModelError(f"{src_dir}: tokenizer.json has no BPE merges")
    if _post_processors(src_dir) & {"ByteLevel"}:  # as the vendored gguf-py reads a ByteLevel post-processor
        special.add_special_token.setdefault("bos", False)
        special.add_special_token.setdefault("eos", False)
    yes_no = (-1, -1)
    if rank:
        missing = [w for w in RERANK_LABELS if w not in vocab]
        if missing:
            raise ModelError(f"{src_dir}: the vocabulary has no single token for {missing}: not a Qwen3-Reranker "
                             "tokenizer (its head is made of the 'yes' and 'no' rows)")
        yes_no = (vocab["yes"], vocab["no"])
    return _Checkpoint(
        config=config, rank=rank, pooling=pooling, similarity=None if rank else similarity(src_dir),
        max_seq_length=max_seq_length(src_dir, config, 32768), rope_theta=rope_theta, tokens=tokens,
        token_types=token_types, special=special, yes_no=yes_no, prompts=None if rank else _prompts(src_dir))


def _prompts(src_dir: Path) -> tuple[str, str] | None:
    """(query, document) prompts of config_sentence_transformers.json, or None when it names none."""
    prompts = read_json(src_dir / "config_sentence_transformers.json").get("prompts") or {}
    if not isinstance(prompts, dict) or not prompts:
        return None
    return str(prompts.get("query") or ""), str(prompts.get("document") or prompts.get("passage") or "")


def _post_processors(src_dir: Path) -> set[str]:
    post = read_json(src_dir / "tokenizer.json").get("post_processor") or {}
    return {str(p.get("type")) for p in post.get("processors", [post])}


def _check_pre_tokenizer(src_dir: Path, tok: dict[str, Any]) -> None:
    """The pre-tokenizer must be Qwen2's (llama.cpp ``qwen2``): Split(regex, isolated) then ByteLevel."""
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps]
    ok = (kinds == ["Split", "ByteLevel"] and steps[0].get("pattern", {}).get("Regex") == QWEN2_SPLIT_REGEX
          and str(steps[0].get("behavior", "")).lower() == "isolated" and not steps[0].get("invert")
          and not steps[1].get("use_regex", True) and not steps[1].get("add_prefix_space", False))
    if not ok:
        raise ModelError(f"{src_dir}: tokenizer.json's pre-tokenizer is not Qwen2/Qwen3's (Split with the Qwen2 "
                         "regex, then ByteLevel without its own regex); only llama.cpp's 'qwen2' pre-tokenizer is "
                         "supported for Qwen3")
    normalizer = tok.get("normalizer") or {}
    if normalizer and normalizer.get("type") != "NFC":
        raise ModelError(f"{src_dir}: tokenizer.json's normalizer {normalizer.get('type')!r} is not supported "
                         "(Qwen3's is NFC)")


def _vocab(src_dir: Path, vocab_size: int) -> tuple[list[str], list[gguf.TokenType], dict[str, int]]:
    """Tokens and token types as llama.cpp's get_vocab_base writes them, and the token -> id map."""
    tok = read_json(src_dir / "tokenizer.json")
    model = tok.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ModelError(f"{src_dir}: no byte-level BPE tokenizer.json found (Qwen3 needs tokenizer.json)")
    if model.get("byte_fallback"):
        raise ModelError(f"{src_dir}: a BPE with byte_fallback is not Qwen3's byte-level BPE")
    _check_pre_tokenizer(src_dir, tok)
    vocab: dict[str, int] = {str(k): int(v) for k, v in model["vocab"].items()}
    added = {int(a["id"]): a for a in tok.get("added_tokens", [])}
    for idx, entry in added.items():
        vocab[str(entry["content"])] = idx
    top = max(vocab.values()) + 1
    if top > vocab_size:
        raise ModelError(f"{src_dir}: the tokenizer has ids up to {top - 1} but config.json's vocab_size is "
                         f"{vocab_size}")
    reverse = {i: t for t, i in vocab.items()}
    tokens: list[str] = []
    types: list[gguf.TokenType] = []
    for i in range(vocab_size):
        token = reverse.get(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            special = bool(added[i].get("special")) or (token.startswith("<|") and token.endswith("|>"))
            tokens.append(token)
            types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(token)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types, vocab


def _mapped_tensors(src_dir: Path, ckpt: _Checkpoint) -> Iterator[tuple[str, np.ndarray]]:
    """(gguf name, float array) for each tensor llama.cpp's qwen3 graph uses; the reranker's head from the
    yes/no rows of the output matrix."""
    n_layers = int(ckpt.config["num_hidden_layers"])
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, n_layers)
    tensors = dict(read_checkpoint_tensors(src_dir))
    has_lm_head = "lm_head.weight" in tensors
    tied = bool(ckpt.config.get("tie_word_embeddings", not has_lm_head)) or not has_lm_head
    cls_out = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.CLS_OUT] + ".weight"
    seen: set[str] = set()
    for name, array in tensors.items():
        if name.endswith("rotary_emb.inv_freq"):
            continue
        if name == "lm_head.weight" and (ckpt.rank or tied):
            if ckpt.rank and not tied:  # llama.cpp keeps only the head's two rows of an untied lm_head
                seen.add(cls_out)
                yield cls_out, _yes_no_rows(src_dir, array, ckpt.yes_no)
            continue  # a tied lm_head duplicates embed_tokens (llama.cpp reuses token_embd as output)
        mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map tensor {name!r} to a llama.cpp qwen3 tensor")
        if mapped == "token_embd.weight" and ckpt.rank and tied:
            seen.add(cls_out)
            yield cls_out, _yes_no_rows(src_dir, array, ckpt.yes_no)
        seen.add(mapped)
        yield mapped, np.asarray(array, dtype=np.float32)
    need = {"token_embd.weight", "output_norm.weight"} | {
        f"blk.{i}.{t}.weight" for i in range(n_layers) for t in _LAYER_TENSORS}
    if ckpt.rank:
        need.add(cls_out)
    missing = sorted(need - seen)
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks tensors llama.cpp's qwen3 graph needs: "
                         f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")


def _yes_no_rows(src_dir: Path, matrix: np.ndarray, yes_no: tuple[int, int]) -> np.ndarray:
    if matrix.ndim != 2 or max(yes_no) >= matrix.shape[0]:
        raise ModelError(f"{src_dir}: the output matrix {tuple(matrix.shape)} has no rows for the yes/no tokens "
                         f"{yes_no}")
    return np.stack([np.asarray(matrix[i], dtype=np.float32) for i in yes_no])  # [yes, no]: output 0 is "yes"


def _write(src_dir: Path, ckpt: _Checkpoint, writer: gguf.GGUFWriter, quant: str) -> None:
    write_metadata(ckpt, writer)
    add_tensors(writer, _mapped_tensors(src_dir, ckpt), quant)


def read_checkpoint(src_dir: Path, config: dict[str, Any]) -> _Checkpoint:
    """Read and validate a Qwen3 text model's configuration and vocabulary (the Qwen3-VL converter's text half)."""
    return _read_checkpoint(src_dir, config)


def write_metadata(ckpt: _Checkpoint, writer: gguf.GGUFWriter) -> None:
    """Hparams, pooling, vocabulary and our keys of a Qwen3 text model (tensors are the caller's)."""
    cfg = ckpt.config
    heads = int(cfg["num_attention_heads"])
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_context_length(int(cfg.get("max_position_embeddings", 32768)))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(int(cfg.get("num_key_value_heads") or heads))
    if ckpt.rope_theta is not None:
        writer.add_rope_freq_base(ckpt.rope_theta)
    writer.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    if cfg.get("head_dim") is not None:
        writer.add_key_length(int(cfg["head_dim"]))
        writer.add_value_length(int(cfg["head_dim"]))
    writer.add_pooling_type(ckpt.pooling)
    if ckpt.rank:
        writer.add_classifier_output_labels(list(RERANK_LABELS))
        writer.add_chat_template([{"name": "rerank", "template": RERANK_TEMPLATE}])

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(ckpt.tokens)
    writer.add_token_types(ckpt.token_types)
    ckpt.special.add_to_gguf(writer, quiet=True)

    if ckpt.similarity is not None:
        writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    if ckpt.prompts is not None:
        writer.add_string(KEY_PROMPT_QUERY, ckpt.prompts[0])
        writer.add_string(KEY_PROMPT_DOCUMENT, ckpt.prompts[1])
