"""BERT (WordPiece) checkpoints, embedding and sequence-classification forms.

Follows llama.cpp's own converter (conversion/bert.py, BertModel) for names, hparams, vocabulary and tensor
types, and fixes two things it gets wrong for ``BertForSequenceClassification`` cross-encoders: the pooler
(dense + tanh) is kept as the ``cls`` tensors, which llama.cpp's RANK head applies, and the pooling type is
written as RANK.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from indexer.errors import ModelError
from indexer.models.convert.common import (
    KEY_LOWERCASE,
    KEY_MAX_SEQ,
    KEY_SIMILARITY,
    KEY_STRIP_ACCENTS,
    Prepared,
    add_special_token_ids,
    add_tensors,
    bert_special_ids,
    configured_special_ids,
    max_seq_length,
    pooling_type,
    read_json,
    similarity,
)
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"bert"})
EMBEDDING_ARCHS = frozenset({"BertModel", "BertForMaskedLM", "BertForPreTraining"})
RANK_ARCHS = frozenset({"BertForSequenceClassification"})
ARCHITECTURES = EMBEDDING_ARCHS | RANK_ARCHS
_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass(frozen=True)
class _Checkpoint:
    """What the converter reads from a checkpoint folder besides the tensors."""

    config: dict[str, Any]
    rank: bool  # a cross-encoder (sequence classification head)
    pooling: gguf.PoolingType
    similarity: str | None
    max_seq_length: int
    tokens: list[str]
    token_types: list[gguf.TokenType]
    special_ids: dict[str, int]
    lowercase: bool
    strip_accents: bool | None


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate a BERT checkpoint (nothing is written)."""
    ckpt = _read_checkpoint(src_dir, config)
    return Prepared("bert", gguf.MODEL_ARCH.BERT, partial(_write, src_dir, ckpt))


def _read_checkpoint(src_dir: Path, config: dict[str, Any]) -> _Checkpoint:
    archs = set(config.get("architectures") or ["BertModel"])
    rank = bool(archs & RANK_ARCHS)
    if not rank and not archs & EMBEDDING_ARCHS:
        raise ModelError(f"{src_dir}: architecture {sorted(archs)} is not supported; "
                         f"supported: {sorted(EMBEDDING_ARCHS | RANK_ARCHS)}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{src_dir}: position_embedding_type {config['position_embedding_type']!r} "
                         "is not supported (absolute only)")

    if str(config.get("hidden_act", "gelu")) not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported: llama.cpp's BERT "
                         "graph uses GELU")

    pooling = gguf.PoolingType.RANK if rank else pooling_type(src_dir)
    trained_similarity = None if rank else similarity(src_dir)

    tokens, token_types, special_ids = _vocab(src_dir, int(config.get("vocab_size", 0)))
    lowercase, strip_accents = _normalizer(src_dir)
    return _Checkpoint(config, rank, pooling, trained_similarity, max_seq_length(src_dir, config), tokens, token_types,
                       special_ids, lowercase, strip_accents)


def _vocab(src_dir: Path, vocab_size: int) -> tuple[list[str], list[gguf.TokenType], dict[str, int]]:
    """WordPiece vocabulary in llama.cpp's "phantom space" form, token types and special token ids."""
    vocab_file = src_dir / "vocab.txt"
    tok_json = read_json(src_dir / "tokenizer.json")
    if vocab_file.is_file():
        words = vocab_file.read_text(encoding="utf-8").split("\n")
        if words and words[-1] == "":
            words.pop()
    elif tok_json.get("model", {}).get("type") == "WordPiece":
        ids = tok_json["model"]["vocab"]
        words = [""] * (max(ids.values()) + 1)
        for word, idx in ids.items():
            words[idx] = word
    else:
        raise ModelError(f"{src_dir}: no WordPiece vocabulary (vocab.txt or tokenizer.json) found")
    vocab_size = max(vocab_size, len(words))

    special_names = set(_SPECIALS)
    for added in tok_json.get("added_tokens", []):
        if added.get("special"):
            special_names.add(added["content"])
    tokens: list[str] = []
    types: list[gguf.TokenType] = []
    for i in range(vocab_size):
        word = words[i] if i < len(words) else ""
        if not word:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif word in special_names:
            tokens.append(word)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(word[2:] if word.startswith("##") else "\u2581" + word)
            types.append(gguf.TokenType.NORMAL)

    index = {w: i for i, w in enumerate(words) if w}
    ids = configured_special_ids(src_dir, index, (("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"),
                                                  ("pad", "[PAD]"), ("mask", "[MASK]")))
    if ids["cls"] is None or ids["sep"] is None:
        raise ModelError(f"{src_dir}: vocabulary lacks [CLS]/[SEP]; not a BERT WordPiece tokenizer")
    special_ids = {k: v for k, v in ids.items() if v is not None}
    return tokens, types, special_ids


def _normalizer(src_dir: Path) -> tuple[bool, bool | None]:
    """(lowercase, strip_accents) of the BERT normalizer; strip_accents None means "same as lowercase"."""
    normalizer = read_json(src_dir / "tokenizer.json").get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
        return bool(normalizer.get("lowercase", True)), normalizer.get("strip_accents")
    tok_cfg = read_json(src_dir / "tokenizer_config.json")
    return bool(tok_cfg.get("do_lower_case", True)), tok_cfg.get("strip_accents")


def _mapped_tensors(src_dir: Path, ckpt: _Checkpoint) -> Iterator[tuple[str, np.ndarray]]:
    """(gguf name, float array) for each tensor llama.cpp's BERT graph uses."""
    n_layers = int(ckpt.config["num_hidden_layers"])
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    seen: set[str] = set()
    for name, array in read_checkpoint_tensors(src_dir):
        if name.startswith("bert."):
            name = name[5:]
        if name.endswith(".gamma"):
            name = name[:-6] + ".weight"
        elif name.endswith(".beta"):
            name = name[:-5] + ".bias"
        if name == "embeddings.position_ids" or name.startswith(("cls.predictions", "cls.seq_relationship")):
            continue
        if name.startswith("pooler."):
            if not ckpt.rank:
                continue  # embeddings come from the pooling layer, not BERT's pooler
            new_name = "cls" + name[len("pooler.dense"):]
        elif name.startswith("classifier."):
            if not ckpt.rank:
                continue
            new_name = "cls.output" + name[len("classifier"):]
        else:
            mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
            if mapped is None:
                raise ModelError(f"{src_dir}: cannot map tensor {name!r} to a llama.cpp BERT tensor")
            new_name = mapped
        seen.add(new_name)
        yield new_name, np.asarray(array, dtype=np.float32)
    if ckpt.rank and not {"cls.weight", "cls.output.weight"} <= seen:
        raise ModelError(f"{src_dir}: a sequence-classification checkpoint needs pooler.dense and classifier "
                         "weights; found neither or only one")


def _write(src_dir: Path, ckpt: _Checkpoint, writer: gguf.GGUFWriter, quant: str) -> None:
    cfg = ckpt.config
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_context_length(int(cfg.get("max_position_embeddings", 512)))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(ckpt.pooling)
    if ckpt.rank:
        labels = cfg.get("id2label") or {}
        n_labels = int(cfg.get("num_labels", len(labels) or 1))
        names = [str(labels.get(str(i), labels.get(i, f"LABEL_{i}"))) for i in range(n_labels)]
        writer.add_classifier_output_labels(names)

    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(ckpt.tokens)
    writer.add_token_types(ckpt.token_types)
    writer.add_token_type_count(int(cfg.get("type_vocab_size", 2)))
    add_special_token_ids(writer, bert_special_ids(ckpt.special_ids))
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(False)  # pairs become [CLS] q [SEP] d [SEP]
    writer.add_bool(KEY_LOWERCASE, ckpt.lowercase)
    if ckpt.strip_accents is not None:
        writer.add_bool(KEY_STRIP_ACCENTS, bool(ckpt.strip_accents))
    if ckpt.similarity is not None:
        writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    add_tensors(writer, _mapped_tensors(src_dir, ckpt), quant)
