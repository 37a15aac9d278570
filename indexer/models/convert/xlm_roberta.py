"""XLM-RoBERTa checkpoints (SentencePiece unigram), embedding and sequence-classification forms: bge-m3 and
bge-reranker-v2-m3.

Follows llama.cpp's own converter (conversion/bert.py, ``XLMRobertaModel`` with
``_xlmroberta_tokenizer_init`` / ``_xlmroberta_set_vocab``): architecture BERT, tokenizer model ``t5``
(llama.cpp's UGM tokenizer) with the pieces' scores and token types, the SentencePiece normalizer's
precompiled charsmap, ``add_space_prefix`` and ``remove_extra_whitespaces``, one token type, and the position
embeddings cut by ``pad_token_id + 1`` rows (XLM-R's positions start after the padding index; llama.cpp's
start at 0), the context length shortened likewise. The classification head (``classifier.dense`` + tanh +
``classifier.out_proj``) becomes llama.cpp's RANK head, and the pooling type is written as RANK.

The vocabulary is XLM-R's SentencePiece unigram one, read from ``tokenizer.json`` by :mod:`.unigram` (shared
with jina-embeddings-v3, which is its own architecture: XLM-R with rotary positions and LoRA adapters).
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
    KEY_MAX_SEQ,
    KEY_SIMILARITY,
    Prepared,
    add_tensors,
    max_seq_length,
    pooling_type,
    similarity,
)
from indexer.models.convert.unigram import UnigramVocab, read_unigram_vocab, write_unigram_vocab
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"xlm-roberta"})
EMBEDDING_ARCHS = frozenset({"XLMRobertaModel"})
RANK_ARCHS = frozenset({"XLMRobertaForSequenceClassification"})
ARCHITECTURES = EMBEDDING_ARCHS | RANK_ARCHS



@dataclass(frozen=True)
class _Checkpoint:
    config: dict[str, Any]
    rank: bool
    pooling: gguf.PoolingType
    similarity: str | None
    max_seq_length: int
    position_offset: int
    context_length: int
    vocab: UnigramVocab


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate an XLM-RoBERTa checkpoint (nothing is written)."""
    ckpt = _read_checkpoint(src_dir, config)
    return Prepared("xlm-roberta", gguf.MODEL_ARCH.BERT, partial(_write, src_dir, ckpt))


def _read_checkpoint(src_dir: Path, config: dict[str, Any]) -> _Checkpoint:
    archs = set(config.get("architectures") or ["XLMRobertaModel"])
    rank = bool(archs & RANK_ARCHS)
    if not rank and not archs & EMBEDDING_ARCHS:
        raise ModelError(f"{src_dir}: architecture {sorted(archs)} is not supported by the XLM-RoBERTa converter; "
                         f"supported: {sorted(ARCHITECTURES)}")
    if config.get("lora_adaptations") or config.get("position_embedding_type") == "rotary":
        raise ModelError(f"{src_dir}: rotary positions / LoRA task adapters are jina-embeddings-v3 "
                         "(architecture XLMRobertaLoRA), not plain XLM-RoBERTa; the XLM-RoBERTa converter "
                         "supports absolute positions only")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{src_dir}: position_embedding_type {config['position_embedding_type']!r} "
                         "is not supported (absolute only)")
    if str(config.get("hidden_act", "gelu")) not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported: llama.cpp's BERT "
                         "graph uses GELU")
    if rank:
        n_labels = int(config.get("num_labels", len(config.get("id2label") or {}) or 1))
        if n_labels != 1:
            raise ModelError(f"{src_dir}: a sequence-classification head with {n_labels} labels is not a "
                             "reranker; only one-output heads (bge-reranker-v2-m3) are supported")
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                "max_position_embeddings"):
        if not isinstance(config.get(key), int):
            raise ModelError(f"{src_dir}: config.json lacks an integer {key!r}")

    # XLM-R numbers positions from pad_token_id + 1 (padding_idx); llama.cpp from 0: drop those rows.
    pad = config.get("pad_token_id", 1)
    if not isinstance(pad, int) or pad < 0:
        raise ModelError(f"{src_dir}: config.json pad_token_id {pad!r} is not a token id")
    offset = pad + 1
    context_length = int(config["max_position_embeddings"]) - offset
    if context_length < 1:
        raise ModelError(f"{src_dir}: max_position_embeddings {config['max_position_embeddings']} leaves no "
                         f"positions after the padding offset of {offset}")
    pooling = gguf.PoolingType.RANK if rank else pooling_type(src_dir)
    trained_similarity = None if rank else similarity(src_dir)
    seq = max_seq_length(src_dir, {**config, "max_position_embeddings": context_length})
    vocab = read_unigram_vocab(src_dir, int(config.get("vocab_size", 0)))
    _check_tensors(src_dir, config, rank)
    return _Checkpoint(config, rank, pooling, trained_similarity, seq, offset, context_length, vocab)


def _check_tensors(src_dir: Path, config: dict[str, Any], rank: bool) -> None:
    """The tensors llama.cpp needs are there, the position table as long as config.json says (headers only:
    the arrays are memory-mapped, not read)."""
    shapes = {name.removeprefix("roberta."): array.shape for name, array in read_checkpoint_tensors(src_dir)}
    need = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.LayerNorm.weight"]
    if rank:
        need += ["classifier.dense.weight", "classifier.out_proj.weight"]
    missing = [n for n in need if n not in shapes]
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks {missing}"
                         + (" (a reranker needs classifier.dense and classifier.out_proj)" if rank else ""))
    rows = shapes["embeddings.position_embeddings.weight"][0]
    if rows != config["max_position_embeddings"]:
        raise ModelError(f"{src_dir}: position embeddings have {rows} rows, config.json says "
                         f"max_position_embeddings {config['max_position_embeddings']}")


def _mapped_tensors(src_dir: Path, ckpt: _Checkpoint) -> Iterator[tuple[str, np.ndarray]]:
    """(gguf name, float array) for each tensor llama.cpp's BERT graph uses."""
    n_layers = int(ckpt.config["num_hidden_layers"])
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    for name, array in read_checkpoint_tensors(src_dir):
        if name.startswith("roberta."):
            name = name[len("roberta."):]
        if name == "embeddings.position_ids" or name.startswith(("pooler.", "lm_head.")):
            continue  # embeddings come from the pooling layer, not the pooler; no masked-LM head
        if name.startswith("classifier.") and not ckpt.rank:
            continue
        if name == "embeddings.position_embeddings.weight":
            array = array[ckpt.position_offset:]
        mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map tensor {name!r} to a llama.cpp BERT tensor")
        yield mapped, np.asarray(array, dtype=np.float32)


def _write(src_dir: Path, ckpt: _Checkpoint, writer: gguf.GGUFWriter, quant: str) -> None:
    cfg = ckpt.config
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_context_length(ckpt.context_length)
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-5)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(ckpt.pooling)
    if ckpt.rank:
        labels = cfg.get("id2label") or {}
        writer.add_classifier_output_labels([str(labels.get("0", labels.get(0, "LABEL_0")))])

    write_unigram_vocab(writer, ckpt.vocab, int(cfg.get("type_vocab_size", 1)))
    if ckpt.similarity is not None:
        writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    add_tensors(writer, _mapped_tensors(src_dir, ckpt), quant)
