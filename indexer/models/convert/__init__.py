"""Convert a Hugging Face / sentence-transformers checkpoint folder to GGUF with numpy and ``gguf`` only.

One module per family, each following llama.cpp's own converter for that architecture (the
``conversion/`` package vendored with llama-cpp-python 0.3.36) for names, hparams, vocabulary and tensor
types. A family module exposes ``MODEL_TYPES`` (config.json ``model_type`` values), ``ARCHITECTURES``
(config.json ``architectures`` it accepts) and ``prepare(src_dir, config) -> Prepared``, which reads and
validates everything before a byte is written; optionally ``accepts(config) -> bool`` to claim only some
configs of a shared model type / architecture (jina-embeddings-v3 is an ``XLMRobertaModel`` with
``lora_adaptations``). Metadata for our pipeline goes under ``indexer.*``.

Families: :mod:`.bert` (WordPiece), :mod:`.qwen3` (byte-level BPE; Qwen3-Embedding and Qwen3-Reranker),
:mod:`.jina_bert_v2` (JinaBERT v2: ALiBi, GEGLU; WordPiece or the whitespace BPE), :mod:`.jina_v3`
(jina-embeddings-v3: rotary XLM-RoBERTa, unigram vocabulary via :mod:`.unigram`, task LoRA adapters as GGUF
adapters),
:mod:`.xlm_roberta` (SentencePiece unigram: bge-m3, bge-reranker-v2-m3), :mod:`.qwen3_vl` (Qwen3-VL embedding: a
``qwen3vl`` text GGUF plus its MTMD projector GGUF, written beside it as :func:`projector_path` names it).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

import gguf

from indexer.errors import ModelError
from indexer.models.convert import bert, jina_bert_v2, jina_v3, qwen3, qwen3_vl, xlm_roberta
from indexer.models.convert.common import (
    BUILD_QUANTS,
    CONVERTER_VERSION,
    KEY_CONVERTER_VERSION,
    KEY_LOWERCASE,
    KEY_MAX_SEQ,
    KEY_SIMILARITY,
    KEY_SOURCE,
    KEY_SOURCE_SHA256,
    KEY_STRIP_ACCENTS,
    KEY_TOKENIZER_JSON,
    QUANTS,
    Prepared,
    build_quant,
    read_json,
)
from indexer.models.quantize import FILE_TYPES, quantize_file

__all__ = [
    "CONVERTER_VERSION", "FAMILIES", "KEY_CONVERTER_VERSION", "KEY_LOWERCASE", "KEY_MAX_SEQ",
    "KEY_SIMILARITY", "KEY_SOURCE", "KEY_SOURCE_SHA256", "KEY_STRIP_ACCENTS", "KEY_TOKENIZER_JSON", "QUANTS",
    "BUILD_QUANTS", "build_quant", "convert_checkpoint", "prepare_checkpoint", "projector_path",
    "supported_architectures",
]

logger = logging.getLogger(__name__)

# Each family module, in the order they are tried (jina_v3 first: see accepts()).
FAMILIES: tuple[ModuleType, ...] = (jina_v3, bert, jina_bert_v2, qwen3, qwen3_vl, xlm_roberta)


def supported_architectures() -> list[str]:
    return sorted(a for family in FAMILIES for a in family.ARCHITECTURES)


def prepare_checkpoint(src_dir: Path) -> Prepared:
    """Read and validate the checkpoint in ``src_dir`` with its family's converter; nothing is written."""
    config = read_json(src_dir / "config.json")
    if not config:
        raise ModelError(f"{src_dir}: config.json is missing; point at a Hugging Face checkpoint folder")
    model_type = str(config.get("model_type", "bert"))
    archs = [str(a) for a in config.get("architectures") or []]
    for family in FAMILIES:
        accepts = getattr(family, "accepts", None)
        if model_type in family.MODEL_TYPES and (not archs or set(archs) & family.ARCHITECTURES) and (
                accepts is None or accepts(config)):
            prepared: Prepared = family.prepare(src_dir, config)
            return prepared
    raise ModelError(f"{src_dir}: architecture {archs or '(none named)'} (model_type {model_type!r}) is not "
                     f"supported; supported: {', '.join(supported_architectures())}. Convert it with llama.cpp's "
                     "convert_hf_to_gguf.py and pass the .gguf path")


def convert_checkpoint(src_dir: Path, out: Path, quant: str, source: str = "", source_sha256: str = "",
                       name: str = "") -> Path:
    """Convert the checkpoint in ``src_dir`` to a GGUF file at ``out`` (written atomically) and return ``out``.

    ``quant`` is one of f32, f16, bf16, q8_0 (written here), or a file type of llama.cpp's quantizer (q4_K_M,
    q5_K_M, q6_K, ... :data:`~indexer.models.quantize.FILE_TYPES`): the checkpoint is then written at f16 and
    quantized by llama.cpp in a child; a projector stays f16 (vision towers are not quantized by it).
    ``source`` / ``source_sha256`` are recorded as ``indexer.source`` /
    ``indexer.source_sha256`` (where the weights came from); ``name`` as ``general.name`` (default: the
    folder's name); :data:`CONVERTER_VERSION` as ``indexer.converter_version``.
    """
    quant = build_quant(quant)
    if quant in FILE_TYPES:
        return _convert_quantized(src_dir, Path(out), quant, source, source_sha256, name)
    src_dir = Path(src_dir)
    prepared = prepare_checkpoint(src_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if prepared.projector is not None:  # first, so that a model file never stands without its projector
        _write_atomically(projector_path(out), partial(
            _write_gguf, src_dir, prepared.projector, gguf.MODEL_ARCH.MMPROJ, quant=quant, source=source,
            source_sha256=source_sha256, name=name or src_dir.name))
    _write_atomically(out, partial(_write_gguf, src_dir, prepared.write, prepared.arch, quant=quant, source=source,
                                   source_sha256=source_sha256, name=name or src_dir.name))
    logger.info("wrote %s (%s, %s, %.1f MB)", out, prepared.family, quant, out.stat().st_size / 1e6)
    return out


def _convert_quantized(src_dir: Path, out: Path, quant: str, source: str, source_sha256: str, name: str) -> Path:
    base = out.with_name(f".{out.stem}.{os.getpid()}.f16.gguf")
    try:
        convert_checkpoint(src_dir, base, "f16", source, source_sha256, name or Path(src_dir).name)
        if projector_path(base).is_file():
            os.replace(projector_path(base), projector_path(out))
        quantize_file(base, out, quant)
    finally:
        base.unlink(missing_ok=True)
        projector_path(base).unlink(missing_ok=True)
    logger.info("wrote %s (%s, %.1f MB)", out, quant, out.stat().st_size / 1e6)
    return out


def projector_path(model: Path) -> Path:
    """Where the MTMD projector of the model file ``model`` is written: ``<stem>.mmproj.gguf`` beside it."""
    return Path(model).with_name(Path(model).stem + ".mmproj.gguf")


def _write_atomically(out: Path, write: Callable[[Path], None]) -> None:
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def _write_gguf(src_dir: Path, write: Callable[[gguf.GGUFWriter, str], None], arch: gguf.MODEL_ARCH, out: Path, *,
                quant: str, source: str, source_sha256: str, name: str) -> None:
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[arch])
    try:
        writer.add_name(name)
        writer.add_uint32(KEY_CONVERTER_VERSION, CONVERTER_VERSION)
        writer.add_file_type(QUANTS[quant][1])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        if source:
            writer.add_string(KEY_SOURCE, source)
        if source_sha256:
            writer.add_string(KEY_SOURCE_SHA256, source_sha256)
        write(writer, quant)
        definition = tokenizer_definition(src_dir) if arch != gguf.MODEL_ARCH.MMPROJ else None
        if definition:  # the model's own tokenizer travels in its file (not in a projector's)
            writer.add_string(KEY_TOKENIZER_JSON, definition)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{src_dir}: cannot convert checkpoint ({type(exc).__name__}: {exc})") from exc
    finally:
        writer.close()


def tokenizer_definition(src_dir: Path) -> str:
    """The checkpoint's tokenizer.json, compacted, for the engine's reference tokenization (empty when the
    checkpoint has none: the engine then uses llama.cpp's tokenizer). It must load in the tokenizers library."""
    path = src_dir / "tokenizer.json"
    if not path.is_file():
        return ""
    from tokenizers import Tokenizer

    data = read_json(path)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    try:
        Tokenizer.from_str(text)
    except Exception as exc:  # the library raises plain Exception subclasses from Rust
        raise ModelError(f"{path}: the tokenizers library cannot read it ({exc}); fix or remove the file") from exc
    return text
