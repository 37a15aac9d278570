"""Qwen3-VL embedding checkpoints: a text GGUF (llama.cpp architecture ``qwen3vl``) plus an MTMD projector GGUF.

Follows llama.cpp's own converter (conversion/qwen3vl.py: ``Qwen3VLTextModel`` and ``Qwen3VLVisionModel``;
conversion/base.py: ``MmprojModel``) for names, hparams and tensor types:

* text: the Qwen3 text model of ``text_config`` (hparams, byte-level BPE vocabulary and pooling as
  :mod:`.qwen3` writes them) under architecture ``qwen3vl``, with the M-RoPE sections (``mrope_section``
  padded to four) and the number of deepstack layers (the projector's output is ``n_embd * (1 + that)`` wide:
  the merged patch features, then one slice per deepstack layer, which the text model adds to its first layers'
  hidden states at the image's rows);
* projector (``general.type = mmproj``, architecture ``clip``, projector type ``qwen3vl_merger``): the vision
  tower's blocks (fused QKV), the Conv3D patch embedding split into two Conv2D kernels along its temporal axis,
  the learned position embeddings (the image size is ``sqrt(num_position_embeddings) * patch_size``), the
  merger (``v.post_ln`` then ``mm.0`` / ``mm.2``), the deepstack mergers (``v.deepstack.<layer>.*``), the
  spatial merge size, GELU, the layer-norm epsilon (the text config's RMS epsilon, as llama.cpp writes it),
  and the processor's mean and std (preprocessor_config.json).

Only the embedding form is converted (a sentence-transformers Pooling module, or a Qwen3-VL-Embedding name);
llama.cpp sizes images itself (8 to 4096 merged patches for this projector type).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from indexer.errors import ModelError
from indexer.models.convert import qwen3
from indexer.models.convert.common import QUANTS, Prepared, add_tensors, quantize, read_json
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"qwen3_vl"})
ARCHITECTURES = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLModel"})
PROJECTOR_TYPE = "qwen3vl_merger"

_TEXT_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")
_VISION_PREFIXES = ("model.visual.", "visual.")


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate a Qwen3-VL checkpoint (nothing is written)."""
    text_cfg, vision = _configs(src_dir, config)
    ckpt = qwen3.read_checkpoint(src_dir, text_cfg)
    if ckpt.rank:
        raise ModelError(f"{src_dir}: a Qwen3-VL reranker is not supported; only the embedding form")
    processor = _processor(src_dir)
    return Prepared("qwen3-vl-embedding", gguf.MODEL_ARCH.QWEN3VL, partial(_write_text, src_dir, ckpt, vision),
                    projector=partial(_write_projector, src_dir, text_cfg, vision, processor))


def _configs(src_dir: Path, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    text = config.get("text_config")
    vision = config.get("vision_config")
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ModelError(f"{src_dir}: config.json lacks text_config / vision_config (not a Qwen3-VL checkpoint)")
    text = {**text, "_name_or_path": config.get("_name_or_path", ""),
            "tie_word_embeddings": config.get("tie_word_embeddings", text.get("tie_word_embeddings"))}
    sections = (text.get("rope_parameters") or {}).get("mrope_section")
    head_dim = int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"])
    if not isinstance(sections, list) or not 1 <= len(sections) <= 4 or sum(sections) * 2 != head_dim:
        raise ModelError(f"{src_dir}: text_config.rope_parameters.mrope_section {sections!r} must count rotary "
                         f"pairs summing to head_dim / 2 = {head_dim // 2}")
    if int(vision.get("temporal_patch_size", 2)) != 2:
        raise ModelError(f"{src_dir}: temporal_patch_size {vision.get('temporal_patch_size')} is not supported "
                         "(llama.cpp splits the Conv3D patch embedding into two Conv2D kernels)")
    for key in ("depth", "hidden_size", "intermediate_size", "num_heads", "patch_size", "out_hidden_size"):
        if not isinstance(vision.get(key), int) or vision[key] < 1:
            raise ModelError(f"{src_dir}: vision_config lacks a positive integer {key!r}")
    if int(vision["out_hidden_size"]) != int(text["hidden_size"]):
        raise ModelError(f"{src_dir}: vision_config.out_hidden_size {vision['out_hidden_size']} is not the text "
                         f"model's hidden_size {text['hidden_size']}")
    return text, vision


def _processor(src_dir: Path) -> dict[str, Any]:
    cfg = {**read_json(src_dir / "preprocessor_config.json")}
    proc = read_json(src_dir / "processor_config.json")
    cfg.update(proc.get("image_processor") or {})
    for key in ("image_mean", "image_std"):
        value = cfg.get(key)
        if not (isinstance(value, list) and len(value) == 3):
            raise ModelError(f"{src_dir}: preprocessor_config.json lacks {key} (three floats)")
    return cfg


# -- the text model -------------------------------------------------------------------------------------------


def _write_text(src_dir: Path, ckpt: Any, vision: dict[str, Any], writer: gguf.GGUFWriter, quant: str) -> None:
    qwen3.write_metadata(ckpt, writer)
    sections = list(ckpt.config["rope_parameters"]["mrope_section"])
    writer.add_rope_dimension_sections((sections + [0, 0, 0, 0])[:4])
    writer.add_num_deepstack_layers(len(vision.get("deepstack_visual_indexes") or []))
    add_tensors(writer, _text_tensors(src_dir, int(ckpt.config["num_hidden_layers"])), quant)


def _text_tensors(src_dir: Path, n_layers: int) -> Iterator[tuple[str, np.ndarray]]:
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3VL, n_layers)
    seen: set[str] = set()
    for name, array in read_checkpoint_tensors(src_dir):
        if name.startswith(_VISION_PREFIXES) or name.startswith("lm_head.") or name.endswith("inv_freq"):
            continue  # the vision tower goes to the projector; a tied lm_head duplicates token_embd
        plain = next(("model." + name[len(p):] for p in _TEXT_PREFIXES if name.startswith(p)), name)
        mapped = tmap.get_name(plain, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map tensor {name!r} to a llama.cpp qwen3vl tensor")
        seen.add(mapped)
        yield mapped, np.asarray(array, dtype=np.float32)
    need = {"token_embd.weight", "output_norm.weight"} | {f"blk.{i}.attn_q.weight" for i in range(n_layers)}
    missing = sorted(need - seen)
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks text tensors: {', '.join(missing[:6])}")


# -- the projector --------------------------------------------------------------------------------------------


def _write_projector(src_dir: Path, text: dict[str, Any], vision: dict[str, Any], processor: dict[str, Any],
                     writer: gguf.GGUFWriter, quant: str) -> None:
    patch = int(vision["patch_size"])
    image_size = vision.get("image_size") or int(math.isqrt(int(vision.get("num_position_embeddings", 2304)))
                                                 * patch)
    depth = int(vision["depth"])
    deepstack = [False] * depth
    for idx in vision.get("deepstack_visual_indexes") or []:
        deepstack[int(idx)] = True
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type(PROJECTOR_TYPE)
    writer.add_vision_projection_dim(int(text["hidden_size"]))
    writer.add_vision_image_size(int(image_size))
    writer.add_vision_patch_size(patch)
    writer.add_vision_embedding_length(int(vision["hidden_size"]))
    writer.add_vision_feed_forward_length(int(vision["intermediate_size"]))
    writer.add_vision_block_count(depth)
    writer.add_vision_head_count(int(vision["num_heads"]))
    writer.add_vision_image_mean([float(x) for x in processor["image_mean"]])
    writer.add_vision_image_std([float(x) for x in processor["image_std"]])
    writer.add_vision_use_gelu(True)
    writer.add_vision_spatial_merge_size(int(vision.get("spatial_merge_size", 2)))
    writer.add_vision_attention_layernorm_eps(float(text.get("rms_norm_eps", 1e-6)))
    if any(deepstack):
        writer.add_vision_is_deepstack_layers(deepstack)
    for name, array in _vision_tensors(src_dir, vision, depth):
        data, qtype = quantize(array, _projector_type(name, array, quant))
        writer.add_tensor(name, data, raw_dtype=qtype)


def _projector_type(name: str, array: np.ndarray, quant: str) -> gguf.GGMLQuantizationType:
    """llama.cpp's MmprojModel rules: 1-D tensors, norms and the position embeddings F32 (the projector
    interpolates them, which ggml does in F32 only: any other type aborts the process); the patch embedding F16
    in an f16 file, else F32; other matrices the file's type."""
    if array.ndim <= 1 or not name.endswith(".weight") or ".ln" in name or ".norm" in name:
        return gguf.GGMLQuantizationType.F32
    if name.startswith("v.position_embd."):
        return gguf.GGMLQuantizationType.F32
    if name.startswith("v.patch_embd."):
        return gguf.GGMLQuantizationType.F16 if quant == "f16" else gguf.GGMLQuantizationType.F32
    return QUANTS[quant][0]


def _vision_tensors(src_dir: Path, vision: dict[str, Any], depth: int) -> Iterator[tuple[str, np.ndarray]]:
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, depth)
    indexes = [int(i) for i in vision.get("deepstack_visual_indexes") or []]
    seen: set[str] = set()
    for name, array in read_checkpoint_tensors(src_dir):
        prefix = next((p for p in _VISION_PREFIXES if name.startswith(p)), None)
        if prefix is None:
            continue
        for out, data in _vision_tensor("visual." + name[len(prefix):], np.asarray(array, dtype=np.float32),
                                        tmap, indexes):
            seen.add(out)
            yield out, data
    need = {"v.patch_embd.weight", "v.patch_embd.weight.1", "v.position_embd.weight", "mm.0.weight",
            "mm.2.weight", "v.post_ln.weight"} | {f"v.blk.{i}.attn_qkv.weight" for i in range(depth)}
    missing = sorted(need - seen)
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks vision tensors: {', '.join(missing[:6])}")


def _vision_tensor(name: str, array: np.ndarray, tmap: gguf.TensorNameMap,
                   indexes: list[int]) -> Iterator[tuple[str, np.ndarray]]:
    """One checkpoint tensor of the vision tower as llama.cpp's Qwen3VLVisionModel.modify_tensors names it."""
    suffix = name.rsplit(".", 1)[1]
    if name == "visual.patch_embed.proj.weight":
        if array.ndim != 5 or array.shape[2] != 2:
            raise ModelError(f"patch embedding {tuple(array.shape)} is not a Conv3D with a temporal size of 2")
        yield "v.patch_embd.weight", array[:, :, 0]
        yield "v.patch_embd.weight.1", array[:, :, 1]
    elif name == "visual.patch_embed.proj.bias":
        yield "v.patch_embd.bias", array
    elif name.startswith("visual.deepstack_merger_list."):
        _, _, pos, part, rest = name.split(".", 4)
        kind = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}.get(part)
        if kind is None or int(pos) >= len(indexes):
            raise ModelError(f"unexpected deepstack tensor {name!r}")
        yield f"v.deepstack.{indexes[int(pos)]}.{kind}.{rest}", array
    elif name.startswith("visual.merger."):
        part = name.split(".")[2]
        out = {"norm": "v.post_ln", "linear_fc1": "mm.0", "linear_fc2": "mm.2"}.get(part)
        if out is None:
            raise ModelError(f"unexpected merger tensor {name!r}")
        yield f"{out}.{suffix}", array
    else:
        mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"cannot map vision tensor {name!r} to a llama.cpp projector tensor")
        yield mapped, array
