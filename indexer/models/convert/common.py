"""What every family's converter shares: weight types, metadata keys, JSON reading, tensor typing and the
sentence-transformers configuration (pooling, similarity, sequence length)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from indexer.errors import ModelError
from indexer.models.quantize import FILE_TYPES, canonical

logger = logging.getLogger(__name__)

QUANTS: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

#: every weight type a model can be built at: ours (QUANTS) and llama.cpp's quantizer's file types (k-quants)
BUILD_QUANTS: tuple[str, ...] = (*QUANTS, *FILE_TYPES)


def build_quant(name: str) -> str:
    """``name`` spelled as ggml spells it (``Q4_K_M`` -> ``q4_K_M``); ModelError naming the choices when it is
    not a weight type a model can be built at."""
    quant = canonical(name)
    if quant not in BUILD_QUANTS:
        raise ModelError(f"unknown weight type {name!r}; use one of {', '.join(BUILD_QUANTS)}")
    return quant


# Metadata keys (the lowercase/strip-accents keys are newer than gguf 0.19.0's constants).
KEY_LOWERCASE = "tokenizer.ggml.normalizer.lowercase"
KEY_STRIP_ACCENTS = "tokenizer.ggml.normalizer.strip_accents"
KEY_SIMILARITY = "indexer.similarity"
KEY_MAX_SEQ = "indexer.max_seq_length"
KEY_SOURCE = "indexer.source"
KEY_SOURCE_SHA256 = "indexer.source_sha256"
KEY_CONVERTER_VERSION = "indexer.converter_version"
# The checkpoint's tokenizer.json, compacted (the engine tokenizes with it: indexer.engine.tokenization)
KEY_TOKENIZER_JSON = "indexer.tokenizer.json"

# Bump whenever the converter's output changes (tensors, metadata, vocabulary): the model cache rebuilds
# files written by another version, and the tests keep their models in a folder keyed by it.
CONVERTER_VERSION = 3  # 3: the tokenizer definition (indexer.tokenizer.json)


@dataclass(frozen=True)
class Prepared:
    """A checkpoint a family has read and validated, ready to write: nothing is written before this exists.

    ``arch`` is the llama.cpp architecture; ``write`` adds the family's metadata, vocabulary and tensors to
    a writer that already holds the general keys (name, file type, converter version, source); ``projector``,
    when the checkpoint has a vision tower, writes its MTMD projector to a second writer."""

    family: str
    arch: gguf.MODEL_ARCH
    write: Callable[[gguf.GGUFWriter, str], None]
    # a vision/audio checkpoint's MTMD projector (a second GGUF, architecture ``clip``), written the same way
    projector: Callable[[gguf.GGUFWriter, str], None] | None = None


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file as a dict (a top-level list comes back as ``{"__list__": [...]}``); {} when absent."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelError(f"{path}: invalid JSON ({exc})") from exc
    return data if isinstance(data, dict) else {"__list__": data}


def st_modules(src_dir: Path) -> list[dict[str, Any]]:
    """The sentence-transformers modules.json entries (empty when the folder has none)."""
    return list(read_json(src_dir / "modules.json").get("__list__", []))


def pooling_type(src_dir: Path, default: gguf.PoolingType = gguf.PoolingType.MEAN) -> gguf.PoolingType:
    """The sentence-transformers Pooling module's mode as a llama.cpp pooling type (``default`` without one)."""
    modules = st_modules(src_dir)
    path = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), None)
    if path is None:
        logger.warning("%s: no sentence-transformers Pooling module; using %s pooling", src_dir, default.name)
        return default
    pooling = read_json(src_dir / path / "config.json")
    mode = pooling.get("pooling_mode")
    if pooling.get("pooling_mode_mean_tokens") or mode == "mean":
        return gguf.PoolingType.MEAN
    if pooling.get("pooling_mode_cls_token") or mode == "cls":
        return gguf.PoolingType.CLS
    if pooling.get("pooling_mode_lasttoken") or mode == "lasttoken":
        return gguf.PoolingType.LAST
    raise ModelError(f"{src_dir / path}: pooling mode not supported by llama.cpp (MEAN, CLS or LAST only)")


def similarity(src_dir: Path) -> str:
    """The similarity the model was trained for: cosine with a Normalize module, else the configured one."""
    if any(str(m.get("type", "")).endswith("Normalize") for m in st_modules(src_dir)):
        return "cosine"
    st = read_json(src_dir / "config_sentence_transformers.json")
    name = str(st.get("similarity_fn_name") or "").lower()
    if name in ("cosine", "dot", "euclidean"):
        return name
    return "dot"


def max_seq_length(src_dir: Path, config: dict[str, Any], default_positions: int = 512) -> int:
    """sentence-transformers' max_seq_length, capped by the model's positions."""
    max_pos = int(config.get("max_position_embeddings", default_positions))
    st_config = read_json(src_dir / "sentence_bert_config.json")
    return min(int(st_config.get("max_seq_length") or max_pos), max_pos)


def tensor_type(name: str, array: np.ndarray, quant: str) -> gguf.GGMLQuantizationType:
    """llama.cpp's rules: 1-D tensors, norms, position and token-type embeddings stay F32."""
    if array.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    if name.startswith(("position_embd.", "token_types.")):
        return gguf.GGMLQuantizationType.F32
    return QUANTS[quant][0]


def quantize(array: np.ndarray, qtype: gguf.GGMLQuantizationType) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    try:
        return gguf.quants.quantize(array, qtype), qtype
    except gguf.QuantError:
        # rows not a multiple of the block size: fall back to F16 like llama.cpp's converter
        return gguf.quants.quantize(array, gguf.GGMLQuantizationType.F16), gguf.GGMLQuantizationType.F16


def add_tensors(writer: gguf.GGUFWriter, tensors: Iterable[tuple[str, np.ndarray]], quant: str) -> None:
    """Add (gguf name, float array) pairs with llama.cpp's weight-type rules."""
    for name, array in tensors:
        array = np.asarray(array, dtype=np.float32)
        data, qtype = quantize(array, tensor_type(name, array, quant))
        writer.add_tensor(name, data, raw_dtype=qtype)


def configured_special_ids(src_dir: Path, index: Mapping[str, int], defaults: Iterable[tuple[str, str]]
                           ) -> dict[str, int | None]:
    """The vocabulary id of each ``(kind, default token)``: the ``<kind>_token`` that special_tokens_map.json or
    tokenizer_config.json names (a string or an AddedToken dict), else the default; None when not in ``index``."""
    cfg = {**read_json(src_dir / "special_tokens_map.json"), **read_json(src_dir / "tokenizer_config.json")}

    def special(kind: str, default: str) -> int | None:
        value = cfg.get(f"{kind}_token", default)
        if isinstance(value, dict):
            value = value.get("content", default)
        return index.get(str(value))

    return {kind: special(kind, default) for kind, default in defaults}


def add_special_token_ids(writer: gguf.GGUFWriter, ids: Mapping[str, int]) -> None:
    """The special token ids ``ids`` names (bos, eos, sep, unk, pad, mask: gguf's names), in that order."""
    adders = {"bos": writer.add_bos_token_id, "eos": writer.add_eos_token_id, "sep": writer.add_sep_token_id,
              "unk": writer.add_unk_token_id, "pad": writer.add_pad_token_id, "mask": writer.add_mask_token_id}
    for kind, add in adders.items():
        if kind in ids:
            add(int(ids[kind]))


def bert_special_ids(ids: Mapping[str, int]) -> dict[str, int]:
    """A WordPiece vocabulary's [CLS]/[SEP]/... ids as gguf's special ids: [CLS] begins, [SEP] ends and separates."""
    return {"bos": ids["cls"], "eos": ids["sep"], "sep": ids["sep"],
            **{k: ids[k] for k in ("unk", "pad", "mask") if k in ids}}
