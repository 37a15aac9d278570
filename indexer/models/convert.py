"""Convert a BERT-family Hugging Face / sentence-transformers checkpoint to GGUF with numpy and ``gguf`` only.

Follows llama.cpp's own converter (convert_hf_to_gguf.py, BertModel) for names, hparams, vocabulary and tensor
types, and fixes two things it gets wrong for ``BertForSequenceClassification`` cross-encoders: the pooler
(dense + tanh) is kept as the ``cls`` tensors, which llama.cpp's RANK head applies, and the pooling type is
written as RANK. Metadata for our pipeline goes under ``indexer.*``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from indexer.errors import ModelError
from indexer.models.safetensors import read_checkpoint_tensors

logger = logging.getLogger(__name__)

QUANTS: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

# Metadata keys (the lowercase/strip-accents keys are newer than gguf 0.19.0's constants).
KEY_LOWERCASE = "tokenizer.ggml.normalizer.lowercase"
KEY_STRIP_ACCENTS = "tokenizer.ggml.normalizer.strip_accents"
KEY_SIMILARITY = "indexer.similarity"
KEY_MAX_SEQ = "indexer.max_seq_length"
KEY_SOURCE = "indexer.source"
KEY_SOURCE_SHA256 = "indexer.source_sha256"
KEY_CONVERTER_VERSION = "indexer.converter_version"

# Bump whenever the converter's output changes (tensors, metadata, vocabulary): the model cache rebuilds
# files written by another version, and the tests keep their models in a folder keyed by it.
CONVERTER_VERSION = 2

_EMBEDDING_ARCHS = {"BertModel", "BertForMaskedLM", "BertForPreTraining"}
_RANK_ARCHS = {"BertForSequenceClassification"}
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


def convert_checkpoint(src_dir: Path, out: Path, quant: str, source: str = "", source_sha256: str = "",
                       name: str = "") -> Path:
    """Convert the checkpoint in ``src_dir`` to a GGUF file at ``out`` (written atomically) and return ``out``.

    ``quant`` is one of f32, f16, bf16, q8_0. ``source`` / ``source_sha256`` are recorded as ``indexer.source`` /
    ``indexer.source_sha256`` (where the weights came from); ``name`` as ``general.name`` (default: the
    folder's name); :data:`CONVERTER_VERSION` as ``indexer.converter_version``.
    """
    if quant not in QUANTS:
        raise ModelError(f"unknown quantization {quant!r}; use one of {', '.join(QUANTS)}")
    src_dir = Path(src_dir)
    ckpt = _read_checkpoint(src_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        _write_gguf(src_dir, ckpt, tmp, quant, source, source_sha256, name or src_dir.name)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("wrote %s (%s, %.1f MB)", out, quant, out.stat().st_size / 1e6)
    return out


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelError(f"{path}: invalid JSON ({exc})") from exc
    return data if isinstance(data, dict) else {"__list__": data}


def _read_checkpoint(src_dir: Path) -> _Checkpoint:
    config = _read_json(src_dir / "config.json")
    if not config:
        raise ModelError(f"{src_dir}: config.json is missing; point at a Hugging Face checkpoint folder")
    if config.get("model_type", "bert") != "bert":
        raise ModelError(f"{src_dir}: model_type {config.get('model_type')!r} is not supported (BERT only); "
                         "convert it with llama.cpp's convert_hf_to_gguf.py and pass the .gguf path")
    archs = set(config.get("architectures") or ["BertModel"])
    rank = bool(archs & _RANK_ARCHS)
    if not rank and not archs & _EMBEDDING_ARCHS:
        raise ModelError(f"{src_dir}: architecture {sorted(archs)} is not supported; "
                         f"supported: {sorted(_EMBEDDING_ARCHS | _RANK_ARCHS)}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{src_dir}: position_embedding_type {config['position_embedding_type']!r} "
                         "is not supported (absolute only)")

    if str(config.get("hidden_act", "gelu")) not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported: llama.cpp's BERT "
                         "graph uses GELU")

    modules = _read_json(src_dir / "modules.json").get("__list__", [])
    pooling = gguf.PoolingType.RANK if rank else _pooling_type(src_dir, modules)
    similarity = None if rank else _similarity(src_dir, modules)
    st_config = _read_json(src_dir / "sentence_bert_config.json")
    max_pos = int(config.get("max_position_embeddings", 512))
    max_seq_length = int(st_config.get("max_seq_length") or max_pos)

    tokens, token_types, special_ids = _vocab(src_dir, int(config.get("vocab_size", 0)))
    lowercase, strip_accents = _normalizer(src_dir)
    return _Checkpoint(config, rank, pooling, similarity, min(max_seq_length, max_pos), tokens, token_types,
                       special_ids, lowercase, strip_accents)


def _pooling_type(src_dir: Path, modules: list[dict[str, Any]]) -> gguf.PoolingType:
    path = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), None)
    if path is None:
        logger.warning("%s: no sentence-transformers Pooling module; using MEAN pooling", src_dir)
        return gguf.PoolingType.MEAN
    pooling = _read_json(src_dir / path / "config.json")
    mode = pooling.get("pooling_mode")
    if pooling.get("pooling_mode_mean_tokens") or mode == "mean":
        return gguf.PoolingType.MEAN
    if pooling.get("pooling_mode_cls_token") or mode == "cls":
        return gguf.PoolingType.CLS
    if pooling.get("pooling_mode_lasttoken") or mode == "lasttoken":
        return gguf.PoolingType.LAST
    raise ModelError(f"{src_dir / path}: pooling mode not supported by llama.cpp (MEAN, CLS or LAST only)")


def _similarity(src_dir: Path, modules: list[dict[str, Any]]) -> str:
    if any(str(m.get("type", "")).endswith("Normalize") for m in modules):
        return "cosine"
    st = _read_json(src_dir / "config_sentence_transformers.json")
    name = str(st.get("similarity_fn_name") or "").lower()
    if name in ("cosine", "dot", "euclidean"):
        return name
    if name == "dot_product":
        return "dot"
    return "dot"


def _vocab(src_dir: Path, vocab_size: int) -> tuple[list[str], list[gguf.TokenType], dict[str, int]]:
    """WordPiece vocabulary in llama.cpp's "phantom space" form, token types and special token ids."""
    vocab_file = src_dir / "vocab.txt"
    tok_json = _read_json(src_dir / "tokenizer.json")
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
    cfg = {**_read_json(src_dir / "special_tokens_map.json"), **_read_json(src_dir / "tokenizer_config.json")}

    def special(kind: str, default: str) -> int | None:
        value = cfg.get(f"{kind}_token", default)
        if isinstance(value, dict):
            value = value.get("content", default)
        return index.get(str(value))

    ids = {k: special(k, d) for k, d in
           (("cls", "[CLS]"), ("sep", "[SEP]"), ("unk", "[UNK]"), ("pad", "[PAD]"), ("mask", "[MASK]"))}
    if ids["cls"] is None or ids["sep"] is None:
        raise ModelError(f"{src_dir}: vocabulary lacks [CLS]/[SEP]; not a BERT WordPiece tokenizer")
    special_ids = {k: v for k, v in ids.items() if v is not None}
    return tokens, types, special_ids


def _normalizer(src_dir: Path) -> tuple[bool, bool | None]:
    """(lowercase, strip_accents) of the BERT normalizer; strip_accents None means "same as lowercase"."""
    normalizer = _read_json(src_dir / "tokenizer.json").get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
        return bool(normalizer.get("lowercase", True)), normalizer.get("strip_accents")
    tok_cfg = _read_json(src_dir / "tokenizer_config.json")
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


def _tensor_type(name: str, array: np.ndarray, quant: str) -> gguf.GGMLQuantizationType:
    """llama.cpp's rules: 1-D tensors, norms, position and token-type embeddings stay F32."""
    if array.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    if name.startswith(("position_embd.", "token_types.")):
        return gguf.GGMLQuantizationType.F32
    return QUANTS[quant][0]


def _quantize(array: np.ndarray, qtype: gguf.GGMLQuantizationType) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    try:
        return gguf.quants.quantize(array, qtype), qtype
    except gguf.QuantError:
        # rows not a multiple of the block size: fall back to F16 like llama.cpp's converter
        return gguf.quants.quantize(array, gguf.GGMLQuantizationType.F16), gguf.GGMLQuantizationType.F16


def _write_gguf(src_dir: Path, ckpt: _Checkpoint, out: Path, quant: str, source: str, source_sha256: str,
                name: str) -> None:
    cfg = ckpt.config
    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT]
    writer = gguf.GGUFWriter(str(out), arch)
    try:
        writer.add_name(name)
        writer.add_uint32(KEY_CONVERTER_VERSION, CONVERTER_VERSION)
        writer.add_file_type(QUANTS[quant][1])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
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
        ids = ckpt.special_ids
        writer.add_bos_token_id(ids["cls"])
        writer.add_eos_token_id(ids["sep"])
        writer.add_sep_token_id(ids["sep"])
        if "unk" in ids:
            writer.add_unk_token_id(ids["unk"])
        if "pad" in ids:
            writer.add_pad_token_id(ids["pad"])
        if "mask" in ids:
            writer.add_mask_token_id(ids["mask"])
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(True)
        writer.add_add_sep_token(False)  # pairs become [CLS] q [SEP] d [SEP]
        writer.add_bool(KEY_LOWERCASE, ckpt.lowercase)
        if ckpt.strip_accents is not None:
            writer.add_bool(KEY_STRIP_ACCENTS, bool(ckpt.strip_accents))

        if ckpt.similarity is not None:
            writer.add_string(KEY_SIMILARITY, ckpt.similarity)
        writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
        if source:
            writer.add_string(KEY_SOURCE, source)
        if source_sha256:
            writer.add_string(KEY_SOURCE_SHA256, source_sha256)

        for name, array in _mapped_tensors(src_dir, ckpt):
            data, qtype = _quantize(array, _tensor_type(name, array, quant))
            writer.add_tensor(name, data, raw_dtype=qtype)

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{src_dir}: cannot convert checkpoint ({type(exc).__name__}: {exc})") from exc
    finally:
        writer.close()
