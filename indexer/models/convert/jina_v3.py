"""jina-embeddings-v3 checkpoints (XLM-RoBERTa with rotary positions and task LoRA): llama.cpp arch ``jina-bert-v3``.

Follows llama.cpp's converter (conversion/bert.py, ``XLMRobertaModel`` when config.json has
``lora_adaptations``): ``roberta.`` and the ``.parametrizations.weight.original`` wrapping of the LoRA'd
weights are dropped, ``emb_ln`` / ``mixer.Wqkv`` / ``mixer.out_proj`` / ``norm1`` / ``mlp.fc1`` / ``mlp.fc2`` /
``norm2`` map to llama.cpp's names, the context length is ``max_position_embeddings - (pad_token_id + 1)``,
``rope.freq_base`` is ``rotary_emb_base`` (the runtime rotates NeoX-style), and the vocabulary is
XLM-RoBERTa's unigram one (:mod:`.unigram`). The pooler and the masked-LM head are not converted.

The base GGUF holds the base weights. The task LoRA adapters (``lora_A`` / ``lora_B`` stacked over
``lora_adaptations``) become one GGUF LoRA adapter per task with :func:`write_task_adapters`, which
llama.cpp loads with ``llama_adapter_lora_init`` (``LlamaEmbedding(model, lora_path=...)``): general.type
``adapter``, ``adapter.lora.alpha``, ``adapter.lora.task_name`` and ``adapter.lora.prompt_prefix`` (the task
instruction to put before the text), tensors ``<name>.lora_a`` / ``<name>.lora_b`` as llama.cpp's converter
writes them. One difference, for exactness: llama.cpp's jina-bert-v3 graph adds token-type row 0 without
applying a LoRA to it, so the token-type embedding's adapter (which jina's model applies) would be lost;
it is folded into ``token_embd``'s adapter instead as one more rank (a column of ones in ``lora_a``, the
token-type delta in ``lora_b``), which adds the same vector to every token, exactly what the model does.

The base GGUF records the retrieval instructions as ``indexer.prompt.query`` / ``indexer.prompt.document``.
"""

from __future__ import annotations

import os
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
)
from indexer.models.convert.unigram import UnigramVocab, read_unigram_vocab, write_unigram_vocab
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"xlm-roberta"})
ARCHITECTURES = frozenset({"XLMRobertaModel"})
ARCH = gguf.MODEL_ARCH.JINA_BERT_V3
KEY_PROMPT_QUERY = "indexer.prompt.query"  # read by indexer.index.prompts
KEY_PROMPT_DOCUMENT = "indexer.prompt.document"
QUERY_TASK = "retrieval.query"
DOCUMENT_TASK = "retrieval.passage"

_PARAM = ".parametrizations.weight.original"
_LORA_A = ".parametrizations.weight.0.lora_A"
_LORA_B = ".parametrizations.weight.0.lora_B"
_EMBEDDINGS = ("embeddings.word_embeddings", "embeddings.token_type_embeddings")
_LAYER = ("mixer.Wqkv", "mixer.out_proj", "norm1", "mlp.fc1", "mlp.fc2", "norm2")


def accepts(config: dict[str, Any]) -> bool:
    """An XLM-RoBERTa config is jina-embeddings-v3's when it names LoRA adaptations (as llama.cpp decides)."""
    return bool(config.get("lora_adaptations"))


@dataclass(frozen=True)
class _Checkpoint:
    config: dict[str, Any]
    tasks: list[str]
    instructions: dict[str, str]
    pooling: gguf.PoolingType
    similarity: str
    max_seq_length: int
    vocab: UnigramVocab


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate a jina-embeddings-v3 checkpoint (nothing is written)."""
    ckpt = _read_checkpoint(src_dir, config)
    _check_tensors(src_dir, ckpt)
    return Prepared("jina-embeddings-v3", ARCH, partial(_write, src_dir, ckpt))


def _read_checkpoint(src_dir: Path, config: dict[str, Any]) -> _Checkpoint:
    archs = set(config.get("architectures") or ["XLMRobertaModel"])
    if not archs & ARCHITECTURES:
        raise ModelError(f"{src_dir}: architecture {sorted(archs)} is not supported for jina-embeddings-v3; "
                         f"supported: {sorted(ARCHITECTURES)} with lora_adaptations")
    tasks = config.get("lora_adaptations")
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        raise ModelError(f"{src_dir}: lora_adaptations must be a non-empty list of task names")
    if config.get("position_embedding_type") != "rotary":
        raise ModelError(f"{src_dir}: position_embedding_type {config.get('position_embedding_type')!r} is not "
                         "supported: llama.cpp's jina-bert-v3 uses rotary positions")
    if str(config.get("hidden_act", "gelu")) not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported (GELU only)")
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            raise ModelError(f"{src_dir}: config.json lacks a positive integer {key!r}")
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    if hidden % heads or (hidden // heads) % 2:
        raise ModelError(f"{src_dir}: the attention head size must be an even divisor of hidden_size (rotary)")
    if int(config.get("lora_rank", 4)) < 1:
        raise ModelError(f"{src_dir}: lora_rank must be >= 1")
    instructions = config.get("task_instructions") or {}
    if not isinstance(instructions, dict) or not set(instructions) <= set(tasks):
        raise ModelError(f"{src_dir}: task_instructions must map task names of lora_adaptations to prefixes")
    pooling = pooling_type(src_dir)
    if pooling not in (gguf.PoolingType.MEAN, gguf.PoolingType.CLS):
        raise ModelError(f"{src_dir}: pooling {pooling.name} is not supported for jina-embeddings-v3 (MEAN or CLS)")
    vocab = read_unigram_vocab(src_dir, int(config["vocab_size"]))
    return _Checkpoint(config, list(tasks), {str(k): str(v) for k, v in instructions.items()}, pooling,
                       similarity(src_dir), max_seq_length(src_dir, config, 8194) - _position_offset(config),
                       vocab)


def _position_offset(config: dict[str, Any]) -> int:
    pad = config.get("pad_token_id")
    return 0 if pad is None else int(pad) + 1


def _base_name(name: str) -> str:
    """HF name without ``roberta.`` and the parametrization wrapping (``x.parametrizations.weight.original``
    -> ``x.weight``); LoRA tensors keep their ``.parametrizations.weight.0.lora_*`` suffix."""
    if name.startswith("roberta."):
        name = name[8:]
    if name.endswith(_PARAM):
        name = name[: -len(_PARAM)] + ".weight"
    return name


def _not_converted(name: str) -> bool:
    """The pooler, a masked-LM head and buffers: not used by the runtime."""
    return name.startswith(("pooler.", "lm_head.")) or name == "embeddings.position_ids"


def _expected(config: dict[str, Any]) -> set[str]:
    n_layers = int(config["num_hidden_layers"])
    names = {f"{e}.weight" for e in _EMBEDDINGS} | {"emb_ln.weight", "emb_ln.bias"}
    for i in range(n_layers):
        for part in _LAYER:
            names.add(f"encoder.layers.{i}.{part}.weight")
    return names


def _check_tensors(src_dir: Path, ckpt: _Checkpoint) -> None:
    """Tensor names and LoRA shapes, from the safetensors header (lazy arrays are not read)."""
    cfg = ckpt.config
    n_tasks, rank = len(ckpt.tasks), int(cfg.get("lora_rank", 4))
    seen: set[str] = set()
    loras = 0
    for raw, array in read_checkpoint_tensors(src_dir):
        name = _base_name(raw)
        if _not_converted(name):
            continue
        if name.endswith((_LORA_A, _LORA_B)):
            if array.ndim != 3 or array.shape[0] != n_tasks or rank not in array.shape[1:]:
                raise ModelError(f"{src_dir}: LoRA tensor {raw} has shape {tuple(array.shape)}; expected "
                                 f"{n_tasks} stacked adapters of rank {rank}")
            loras += 1
            continue
        if name.startswith("embeddings.position_embeddings"):
            raise ModelError(f"{src_dir}: absolute position embeddings found; jina-bert-v3 uses rotary positions")
        if name not in _expected(cfg) and not (name.endswith(".bias") and name[:-5] + ".weight" in _expected(cfg)):
            raise ModelError(f"{src_dir}: unexpected tensor {raw!r} for jina-embeddings-v3")
        seen.add(name)
    missing = sorted(_expected(cfg) - seen - {"embeddings.token_type_embeddings.weight"})
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks {len(missing)} tensors, e.g. {missing[0]}")
    if not loras:
        raise ModelError(f"{src_dir}: config.json names lora_adaptations but the checkpoint has no LoRA tensors")


def _mapped_tensors(src_dir: Path, n_layers: int) -> Iterator[tuple[str, np.ndarray]]:
    tmap = gguf.get_tensor_name_map(ARCH, n_layers)
    for raw, array in read_checkpoint_tensors(src_dir):
        name = _base_name(raw)
        if _not_converted(name) or ".parametrizations." in name:
            continue
        mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map tensor {raw!r} to a llama.cpp jina-bert-v3 tensor")
        yield mapped, np.asarray(array, dtype=np.float32)


def _write(src_dir: Path, ckpt: _Checkpoint, writer: gguf.GGUFWriter, quant: str) -> None:
    cfg = ckpt.config
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_context_length(int(cfg.get("max_position_embeddings", 8194)) - _position_offset(cfg))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_rope_freq_base(float(cfg.get("rotary_emb_base", 10000.0)))
    writer.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-5)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(ckpt.pooling)
    write_unigram_vocab(writer, ckpt.vocab, int(cfg.get("type_vocab_size", 1)))
    writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    if ckpt.instructions.get(QUERY_TASK):
        writer.add_string(KEY_PROMPT_QUERY, ckpt.instructions[QUERY_TASK])
    if ckpt.instructions.get(DOCUMENT_TASK):
        writer.add_string(KEY_PROMPT_DOCUMENT, ckpt.instructions[DOCUMENT_TASK])
    add_tensors(writer, _mapped_tensors(src_dir, int(cfg["num_hidden_layers"])), quant)


# ---------------------------------------------------------------------------------------------------------
# Task adapters
# ---------------------------------------------------------------------------------------------------------


def task_adapter_path(base_gguf: Path, task: str) -> Path:
    """Where :func:`write_task_adapters` puts ``task``'s adapter: beside the base, ``<stem>.lora-<task>.gguf``."""
    return base_gguf.with_name(f"{base_gguf.stem}.lora-{task}.gguf")


def _lora_tensors(src_dir: Path, config: dict[str, Any], task_index: int) -> list[tuple[str, np.ndarray]]:
    """(gguf name, float32 array) of one task's adapter, in llama.cpp's layout (see the module docstring)."""
    n_layers, n_embd = int(config["num_hidden_layers"]), int(config["hidden_size"])
    rank = int(config.get("lora_rank", 4))
    alpha = float(config.get("lora_alpha", 1.0))
    tmap = gguf.get_tensor_name_map(ARCH, n_layers)
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for raw, array in read_checkpoint_tensors(src_dir):
        name = _base_name(raw)
        if not name.endswith((_LORA_A, _LORA_B)) or name.startswith("pooler."):
            continue
        base = name[: -len(_LORA_A)]  # both suffixes have the same length
        pairs.setdefault(base, {})["a" if name.endswith(_LORA_A) else "b"] = np.asarray(
            array[task_index], dtype=np.float32)
    out: list[tuple[str, np.ndarray]] = []
    type_delta: np.ndarray | None = None
    for base, ab in sorted(pairs.items()):
        if set(ab) != {"a", "b"}:
            raise ModelError(f"{src_dir}: LoRA of {base} lacks lora_A or lora_B")
        a, b = ab["a"], ab["b"]
        if base == "embeddings.token_type_embeddings":
            # (types, rank) @ (rank, n_embd): the delta the model adds to token-type row 0
            type_delta = (a @ b)[0] * (alpha / rank)
            continue
        mapped = tmap.get_name(base + ".weight", try_suffixes=(".weight",))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map LoRA tensor {base!r} to a llama.cpp jina-bert-v3 tensor")
        if mapped == "token_embd.weight":
            # embedding LoRA: delta = A @ B, A (vocab, rank), B (rank, n_embd); llama.cpp gathers rows of lora_a
            # and multiplies by lora_b stored (n_embd, rank)
            out.append(("token_embd.weight.lora_a", a))
            out.append(("token_embd.weight.lora_b", np.ascontiguousarray(b.T)))
        else:
            # linear LoRA: delta = B @ A, A (rank, fan_in), B (fan_out, rank): the same layout in ggml
            out.append((mapped + ".lora_a", a))
            out.append((mapped + ".lora_b", b))
    if type_delta is not None:
        out = _fold_type_delta(src_dir, out, type_delta, rank, alpha, n_embd)
    return out


def _fold_type_delta(src_dir: Path, tensors: list[tuple[str, np.ndarray]], delta: np.ndarray, rank: int,
                     alpha: float, n_embd: int) -> list[tuple[str, np.ndarray]]:
    """Add ``delta`` to every token's embedding through token_embd's adapter: one more rank, a column of ones
    in lora_a and ``delta`` in lora_b, every column rescaled for llama.cpp's scale ``alpha / (rank + 1)``."""
    by_name = dict(tensors)
    a, b = by_name.get("token_embd.weight.lora_a"), by_name.get("token_embd.weight.lora_b")
    if a is None or b is None:
        raise ModelError(f"{src_dir}: a token-type LoRA without a word-embedding LoRA is not supported")
    if alpha == 0:
        raise ModelError(f"{src_dir}: lora_alpha 0 is not supported")
    new_rank = a.shape[1] + 1
    a2 = np.concatenate([a, np.ones((a.shape[0], 1), dtype=np.float32)], axis=1)
    # wanted: scale' * B2 @ A2[t] = (alpha / rank) * B @ A[t] + delta, with scale' = alpha / new_rank
    b2 = np.concatenate([b * (new_rank / rank), (delta * (new_rank / alpha)).reshape(n_embd, 1)], axis=1)
    by_name["token_embd.weight.lora_a"] = a2.astype(np.float32)
    by_name["token_embd.weight.lora_b"] = b2.astype(np.float32)
    return list(by_name.items())


def write_task_adapters(src_dir: Path, base_gguf: Path, tasks: list[str] | None = None,
                        name: str = "") -> dict[str, Path]:
    """Write one GGUF LoRA adapter per task (all of ``lora_adaptations`` by default) beside ``base_gguf``
    (see :func:`task_adapter_path`), atomically; returns task -> path. Adapters are float32."""
    src_dir = Path(src_dir)
    config = read_json(src_dir / "config.json")
    ckpt = _read_checkpoint(src_dir, config)
    _check_tensors(src_dir, ckpt)
    chosen = list(tasks) if tasks is not None else ckpt.tasks
    unknown = [t for t in chosen if t not in ckpt.tasks]
    if unknown:
        raise ModelError(f"{src_dir}: unknown task {unknown[0]!r}; the adapters are: {', '.join(ckpt.tasks)}")
    written: dict[str, Path] = {}
    for task in chosen:
        out = task_adapter_path(Path(base_gguf), task)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        writer = gguf.GGUFWriter(str(tmp), gguf.MODEL_ARCH_NAMES[ARCH])
        try:
            writer.add_type(gguf.GGUFType.ADAPTER)
            writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
            writer.add_name(f"{name or src_dir.name} {task}")
            writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config.get("lora_alpha", 1.0)))
            writer.add_string(gguf.Keys.Adapter.LORA_TASK_NAME, task)
            if task in ckpt.instructions:
                writer.add_string(gguf.Keys.Adapter.LORA_PROMPT_PREFIX, ckpt.instructions[task])
            for tensor_name, array in _lora_tensors(src_dir, config, ckpt.tasks.index(task)):
                writer.add_tensor(tensor_name, array, raw_dtype=gguf.GGMLQuantizationType.F32)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()
        try:
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        written[task] = out
    return written
