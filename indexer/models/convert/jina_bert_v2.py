"""JinaBERT v2 checkpoints (jina-embeddings-v2-base-zh / -base-en / -small-en): llama.cpp arch ``jina-bert-v2``.

Follows llama.cpp's converter (conversion/bert.py, ``JinaBertV2Model``): BERT hparams and tensor names, no
position embeddings (the runtime applies symmetric ALiBi, max bias 8), the GEGLU feed-forward
``mlp.gated_layers`` kept whole as ``ffn_up`` (2 x n_ff rows: the runtime splits it, GELU on the first half)
with ``mlp.wo`` as ``ffn_down`` and ``mlp.layernorm`` as the layer's output norm. The vocabulary depends on
``tokenizer_config.json``'s ``tokenizer_class``:

* ``BertTokenizer`` (-en): WordPiece, as :mod:`.bert` writes it (pre-tokenizer name ``jina-v2-en``);
* ``RobertaTokenizer`` with a ``Whitespace`` pre-tokenizer (-zh): llama.cpp's ``whitespace`` tokenizer model
  and pre-tokenizer (base.py ``_set_vocab_whitespace``): raw-Unicode BPE tokens and merges, split on
  whitespace, lowercased when the tokenizer.json normalizer lowercases.

Refused: the byte-level BPE variants (-de, -es: llama.cpp detects their pre-tokenizer by hashing
transformers' output, which needs transformers), jina-embeddings-v2-base-code (``up_gated_layer`` / q-k
norms, the gate in the other half), ReGLU or plain feed-forwards, and sequence-classification heads.
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
from indexer.models.convert import bert
from indexer.models.convert.common import (
    KEY_LOWERCASE,
    KEY_MAX_SEQ,
    KEY_SIMILARITY,
    KEY_STRIP_ACCENTS,
    Prepared,
    add_special_token_ids,
    add_tensors,
    bert_special_ids,
    max_seq_length,
    pooling_type,
    read_json,
    similarity,
)
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"bert"})
ARCHITECTURES = frozenset({"JinaBertModel", "JinaBertForMaskedLM"})
ARCH = gguf.MODEL_ARCH.JINA_BERT_V2

# HF tensor name suffixes (after ``encoder.layer.N.``) the runtime's graph uses, and the embeddings'.
_LAYER_TENSORS = (
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "mlp.gated_layers", "mlp.wo", "mlp.layernorm",
)
_EMBEDDING_TENSORS = ("embeddings.word_embeddings", "embeddings.token_type_embeddings", "embeddings.LayerNorm")


@dataclass(frozen=True)
class _Vocab:
    model: str  # llama.cpp tokenizer model: "bert" (WordPiece) or "whitespace"
    pre: str
    tokens: list[str]
    types: list[gguf.TokenType]
    merges: list[str]
    special_ids: dict[str, int]  # WordPiece only (the whitespace vocabulary uses gguf.SpecialVocab)
    lowercase: bool
    strip_accents: bool | None
    token_type_count: int


@dataclass(frozen=True)
class _Checkpoint:
    config: dict[str, Any]
    pooling: gguf.PoolingType
    similarity: str
    max_seq_length: int
    vocab: _Vocab


def prepare(src_dir: Path, config: dict[str, Any]) -> Prepared:
    """Read and validate a JinaBERT v2 checkpoint (nothing is written)."""
    _check_config(src_dir, config)
    vocab = _vocab(src_dir, config)
    _check_tensors(src_dir, config)
    pooling = pooling_type(src_dir)
    if pooling not in (gguf.PoolingType.MEAN, gguf.PoolingType.CLS):
        raise ModelError(f"{src_dir}: pooling {pooling.name} is not supported for JinaBERT v2 (MEAN or CLS)")
    ckpt = _Checkpoint(config, pooling, similarity(src_dir), max_seq_length(src_dir, config, 8192), vocab)
    return Prepared("jina-bert-v2", ARCH, partial(_write, src_dir, ckpt))


def _check_config(src_dir: Path, config: dict[str, Any]) -> None:
    archs = set(config.get("architectures") or [])
    if not archs & ARCHITECTURES:
        raise ModelError(f"{src_dir}: architecture {sorted(archs)} is not supported; "
                         f"supported: {sorted(ARCHITECTURES)}")
    if config.get("position_embedding_type", "alibi") != "alibi":
        raise ModelError(f"{src_dir}: position_embedding_type {config['position_embedding_type']!r} is not "
                         "supported: llama.cpp's jina-bert-v2 uses ALiBi")
    ff = config.get("feed_forward_type", "geglu")
    if ff != "geglu":
        raise ModelError(f"{src_dir}: feed_forward_type {ff!r} is not supported: llama.cpp's jina-bert-v2 graph "
                         "runs GEGLU only (the supported models: jina-embeddings-v2 base/small en and base zh)")
    if str(config.get("hidden_act", "gelu")) not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelError(f"{src_dir}: hidden_act {config['hidden_act']!r} is not supported (GELU only)")
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            raise ModelError(f"{src_dir}: config.json lacks a positive integer {key!r}")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise ModelError(f"{src_dir}: hidden_size is not a multiple of num_attention_heads")


def _vocab(src_dir: Path, config: dict[str, Any]) -> _Vocab:
    tok_cfg = read_json(src_dir / "tokenizer_config.json")
    tokenizer_class = str(tok_cfg.get("tokenizer_class") or "BertTokenizer")
    vocab_size = int(config.get("vocab_size", 0))
    if tokenizer_class in ("BertTokenizer", "BertTokenizerFast"):
        tokens, types, special_ids = bert._vocab(src_dir, vocab_size)
        lowercase, strip_accents = bert._normalizer(src_dir)
        return _Vocab("bert", "jina-v2-en", tokens, types, [], special_ids, lowercase, strip_accents,
                      int(config.get("type_vocab_size", 2)))
    if tokenizer_class not in ("RobertaTokenizer", "RobertaTokenizerFast"):
        raise ModelError(f"{src_dir}: tokenizer_class {tokenizer_class!r} is not supported for JinaBERT v2 "
                         "(BertTokenizer or RobertaTokenizer)")
    return _whitespace_vocab(src_dir, vocab_size)


def _whitespace_vocab(src_dir: Path, vocab_size: int) -> _Vocab:
    """jina-embeddings-v2-base-zh's BPE: Whitespace pre-tokenizer, raw-Unicode tokens, Lowercase normalizer."""
    src = src_dir / "tokenizer.json"
    tok_json = read_json(src)
    model = tok_json.get("model") or {}
    pre = (tok_json.get("pre_tokenizer") or {}).get("type")
    if model.get("type") != "BPE" or pre not in ("Whitespace", "WhitespaceSplit"):
        raise ModelError(
            f"{src_dir}: a RobertaTokenizer JinaBERT v2 is supported with the Whitespace pre-tokenizer only "
            f"(jina-embeddings-v2-base-zh); found model {model.get('type')!r}, pre-tokenizer {pre!r}. The "
            "byte-level variants (-de, -es) need llama.cpp's own converter")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ModelError(f"{src}: BPE {key} is not supported by llama.cpp's whitespace tokenizer")
    lowercase = False
    norm = tok_json.get("normalizer") or {}
    for part in (norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm] if norm else []):
        kind = part.get("type")
        if kind == "Lowercase":
            lowercase = True
        elif kind not in ("NFC",):  # NFC: composed text is unchanged; llama.cpp does not compose
            raise ModelError(f"{src}: normalizer {kind!r} is not supported by llama.cpp's whitespace tokenizer "
                             "(Lowercase only)")

    ids: dict[str, int] = {str(k): int(v) for k, v in (model.get("vocab") or {}).items()}
    added = {str(t["content"]): (int(t["id"]), bool(t.get("special"))) for t in tok_json.get("added_tokens", [])}
    for content, (idx, _) in added.items():
        ids.setdefault(content, idx)
    if not ids:
        raise ModelError(f"{src}: the BPE model has an empty vocabulary")
    size = max(vocab_size, max(ids.values()) + 1)
    by_id = {v: k for k, v in ids.items()}
    tokens: list[str] = []
    types: list[gguf.TokenType] = []
    for i in range(size):
        token = by_id.get(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        if token in added:
            special = added[token][1] or (token.startswith("<") and token.endswith(">"))
            types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
        tokens.append(token)
    merges: list[str] = []
    for merge in model.get("merges") or []:
        pair = merge.split(" ") if isinstance(merge, str) else [str(p) for p in merge]
        if len(pair) != 2 or any(" " in p for p in pair):
            raise ModelError(f"{src}: malformed BPE merge {merge!r}")
        merges.append(" ".join(pair))
    if not merges:
        raise ModelError(f"{src}: the BPE model has no merges")
    return _Vocab("whitespace", "whitespace", tokens, types, merges, {}, lowercase, None, 2)


def _hf_names(src_dir: Path) -> Iterator[tuple[str, np.ndarray]]:
    for name, array in read_checkpoint_tensors(src_dir):
        if name.startswith("bert."):
            name = name[5:]
        if name.endswith(".gamma"):
            name = name[:-6] + ".weight"
        elif name.endswith(".beta"):
            name = name[:-5] + ".bias"
        yield name, array


def _skipped(name: str) -> bool:
    return name in ("embeddings.position_ids", "embeddings.token_type_ids") or name.startswith(
        ("pooler.", "cls.predictions", "cls.seq_relationship"))


def _check_tensors(src_dir: Path, config: dict[str, Any]) -> None:
    """Every tensor is one the runtime uses (or a skipped head), and the GEGLU has 2 x n_ff rows."""
    n_layers, n_ff = int(config["num_hidden_layers"]), int(config["intermediate_size"])
    n_embd = int(config["hidden_size"])
    allowed = {f"{t}.{s}" for t in _EMBEDDING_TENSORS for s in ("weight", "bias")}
    allowed |= {f"encoder.layer.{i}.{t}.{s}" for i in range(n_layers) for t in _LAYER_TENSORS
                for s in ("weight", "bias")}
    seen: set[str] = set()
    for name, array in _hf_names(src_dir):
        if _skipped(name):
            continue
        if name not in allowed:
            hint = (" (jina-embeddings-v2-base-code's layout; not supported)"
                    if "up_gated_layer" in name or "layer_norm_" in name else "")
            raise ModelError(f"{src_dir}: unexpected tensor {name!r} for JinaBERT v2{hint}")
        if name.endswith("mlp.gated_layers.weight") and tuple(array.shape) != (2 * n_ff, n_embd):
            raise ModelError(f"{src_dir}: {name} has shape {tuple(array.shape)}, expected {(2 * n_ff, n_embd)} "
                             "(GEGLU: up and gate stacked)")
        seen.add(name)
    missing = sorted(n for n in allowed if n.endswith(".weight") and n not in seen
                     and not n.endswith("token_type_embeddings.weight"))
    if missing:
        raise ModelError(f"{src_dir}: the checkpoint lacks {len(missing)} tensors the runtime needs, e.g. {missing[0]}")
    if "embeddings.token_type_embeddings.weight" not in seen:
        raise ModelError(f"{src_dir}: the checkpoint lacks embeddings.token_type_embeddings.weight")


def _mapped_tensors(src_dir: Path, n_layers: int) -> Iterator[tuple[str, np.ndarray]]:
    tmap = gguf.get_tensor_name_map(ARCH, n_layers)
    for name, array in _hf_names(src_dir):
        if _skipped(name):
            continue
        mapped = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ModelError(f"{src_dir}: cannot map tensor {name!r} to a llama.cpp jina-bert-v2 tensor")
        yield mapped, np.asarray(array, dtype=np.float32)


def _write(src_dir: Path, ckpt: _Checkpoint, writer: gguf.GGUFWriter, quant: str) -> None:
    cfg, vocab = ckpt.config, ckpt.vocab
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_context_length(int(cfg.get("max_position_embeddings", 8192)))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(ckpt.pooling)

    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    writer.add_token_type_count(vocab.token_type_count)
    if vocab.model == "bert":
        add_special_token_ids(writer, bert_special_ids(vocab.special_ids))
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(True)
        writer.add_add_sep_token(False)
        if vocab.strip_accents is not None:
            writer.add_bool(KEY_STRIP_ACCENTS, bool(vocab.strip_accents))
    else:
        writer.add_token_merges(vocab.merges)
        gguf.SpecialVocab(src_dir, load_merges=False, n_vocab=len(vocab.tokens)).add_to_gguf(writer, quiet=True)
    writer.add_bool(KEY_LOWERCASE, vocab.lowercase)
    writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    add_tensors(writer, _mapped_tensors(src_dir, int(cfg["num_hidden_layers"])), quant)
