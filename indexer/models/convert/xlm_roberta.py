"""XLM-RoBERTa checkpoints (SentencePiece unigram), embedding and sequence-classification forms: bge-m3 and
bge-reranker-v2-m3.

Follows llama.cpp's own converter (conversion/bert.py, ``XLMRobertaModel`` with
``_xlmroberta_tokenizer_init`` / ``_xlmroberta_set_vocab``): architecture BERT, tokenizer model ``t5``
(llama.cpp's UGM tokenizer) with the pieces' scores and token types, the SentencePiece normalizer's
precompiled charsmap, ``add_space_prefix`` and ``remove_extra_whitespaces``, one token type, and the position
embeddings cut by ``pad_token_id + 1`` rows (XLM-R's positions start after the padding index; llama.cpp's
start at 0), the context length shortened likewise. The classification head (``classifier.dense`` + tanh +
``classifier.out_proj``) becomes llama.cpp's RANK head, and the pooling type is written as RANK.

The vocabulary is read from ``tokenizer.json`` (a Unigram model with scores, as transformers writes XLM-R
tokenizers), never from ``sentencepiece.bpe.model``: the product has no sentencepiece dependency. Normalizer
and pre-tokenizer steps llama.cpp's UGM tokenizer cannot reproduce are refused rather than silently changing
the token ids. jina-embeddings-v3 (XLM-R with rotary positions and LoRA adapters) is its own architecture.
"""

from __future__ import annotations

import base64
import binascii
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
from indexer.models.safetensors import read_checkpoint_tensors

MODEL_TYPES = frozenset({"xlm-roberta"})
EMBEDDING_ARCHS = frozenset({"XLMRobertaModel"})
RANK_ARCHS = frozenset({"XLMRobertaForSequenceClassification"})
ARCHITECTURES = EMBEDDING_ARCHS | RANK_ARCHS

# tokenizers' normalizers and pre-tokenizers llama.cpp's UGM tokenizer does itself (charsmap, whitespace
# rules, the "▁" prefix); anything else would change the token ids.
_NORMALIZERS = frozenset({"Precompiled", "Replace", "Strip"})
_PRE_TOKENIZERS = frozenset({"Metaspace", "WhitespaceSplit"})
_SPACE = "\u2581"


@dataclass(frozen=True)
class _Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[gguf.TokenType]
    special_ids: dict[str, int]
    add_space_prefix: bool
    remove_extra_whitespaces: bool
    charsmap: bytes


@dataclass(frozen=True)
class _Checkpoint:
    config: dict[str, Any]
    rank: bool
    pooling: gguf.PoolingType
    similarity: str | None
    max_seq_length: int
    position_offset: int
    context_length: int
    vocab: _Vocab


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
    vocab = _vocab(src_dir, int(config.get("vocab_size", 0)))
    _check_tensors(src_dir, config, rank)
    return _Checkpoint(config, rank, pooling, trained_similarity, seq, offset, context_length, vocab)


def _steps(node: Any, key: str) -> list[dict[str, Any]]:
    """A tokenizers normalizer / pre-tokenizer as the list of its steps (a Sequence flattened)."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [step for child in node.get(key) or [] for step in _steps(child, key)]
    return [node]


def _read_tokenizer_json(src_dir: Path) -> dict[str, Any]:
    path = src_dir / "tokenizer.json"
    if not path.is_file():
        if (src_dir / "sentencepiece.bpe.model").is_file():
            raise ModelError(
                f"{src_dir}: only sentencepiece.bpe.model is there; the converter reads the vocabulary from "
                "tokenizer.json (it has no sentencepiece dependency). Write it once with transformers: "
                f"python -c \"from transformers import AutoTokenizer as T; T.from_pretrained('{src_dir}')"
                f".save_pretrained('{src_dir}')\", or convert with llama.cpp's convert_hf_to_gguf.py")
        raise ModelError(f"{src_dir}: no tokenizer.json found; an XLM-RoBERTa checkpoint needs its "
                         "SentencePiece (Unigram) tokenizer.json")
    tok = read_json(path)
    model = tok.get("model") or {}
    if model.get("type") != "Unigram":
        raise ModelError(f"{path}: tokenizer model {model.get('type')!r} is not a SentencePiece Unigram model; "
                         "XLM-RoBERTa checkpoints (bge-m3, bge-reranker-v2-m3) have a Unigram tokenizer")
    if model.get("byte_fallback"):
        raise ModelError(f"{path}: a Unigram model with byte_fallback is not supported (llama.cpp's UGM "
                         "tokenizer has no byte fallback; XLM-R tokenizers have none)")
    return tok


def _normalizer_rules(src_dir: Path, tok: dict[str, Any]) -> tuple[bytes, bool, bool]:
    """(precompiled charsmap, add_space_prefix, remove_extra_whitespaces) of the tokenizer's pipeline."""
    path = src_dir / "tokenizer.json"
    charsmap = b""
    collapses_spaces = False
    for step in _steps(tok.get("normalizer"), "normalizers"):
        kind = step.get("type")
        if kind not in _NORMALIZERS:
            raise ModelError(f"{path}: normalizer {kind!r} cannot be reproduced by llama.cpp's UGM tokenizer "
                             f"(supported: {', '.join(sorted(_NORMALIZERS))} as XLM-R tokenizers use them)")
        if kind == "Precompiled":
            try:
                charsmap = base64.b64decode(step.get("precompiled_charsmap") or "", validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ModelError(f"{path}: the Precompiled normalizer's charsmap is not base64 ({exc})") from exc
        elif kind == "Replace":
            pattern = step.get("pattern") or {}
            target = pattern.get("Regex", pattern.get("String"))
            if target not in (" {2,}", r"\A +| +\z", " ") or step.get("content") not in (" ", "", _SPACE):
                raise ModelError(f"{path}: normalizer Replace {target!r} -> {step.get('content')!r} is not one of "
                                 "SentencePiece's whitespace rules; llama.cpp cannot reproduce it")
            collapses_spaces = collapses_spaces or target == " {2,}"
    prefix: bool | None = None
    for step in _steps(tok.get("pre_tokenizer"), "pretokenizers"):
        kind = step.get("type")
        if kind not in _PRE_TOKENIZERS:
            raise ModelError(f"{path}: pre-tokenizer {kind!r} cannot be reproduced by llama.cpp's UGM tokenizer "
                             f"(supported: {', '.join(sorted(_PRE_TOKENIZERS))})")
        if kind == "WhitespaceSplit":
            collapses_spaces = True
        elif kind == "Metaspace":
            if step.get("replacement", _SPACE) != _SPACE:
                raise ModelError(f"{path}: Metaspace replacement {step.get('replacement')!r} is not '\u2581'")
            scheme = step.get("prepend_scheme")
            prefix = scheme in ("always", "first") if scheme is not None else bool(step.get("add_prefix_space", True))
    tok_cfg = read_json(src_dir / "tokenizer_config.json")
    if prefix is None:
        prefix = bool(tok_cfg.get("add_prefix_space", True))
    # llama.cpp's converter takes clean_up_tokenization_spaces; the pipeline's own space rule says it too
    clean_up = tok_cfg.get("clean_up_tokenization_spaces")
    remove_extra = collapses_spaces or (clean_up if isinstance(clean_up, bool) else True)
    return charsmap, prefix, remove_extra


def _vocab(src_dir: Path, config_vocab_size: int) -> _Vocab:
    """Pieces, scores and token types (llama.cpp's tokenizer.json path of ``_xlmroberta_set_vocab``)."""
    tok = _read_tokenizer_json(src_dir)
    path = src_dir / "tokenizer.json"
    model = tok["model"]
    entries = model.get("vocab") or []
    if not entries or not all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in entries):
        raise ModelError(f"{path}: the Unigram vocabulary is not a list of [piece, score] pairs")
    added = {int(a["id"]): a for a in tok.get("added_tokens") or [] if isinstance(a.get("id"), int)}
    size = max(config_vocab_size, len(entries), max(added, default=-1) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    scores = [-10000.0] * size
    types = [gguf.TokenType.UNUSED] * size
    for i, (piece, score) in enumerate(entries):
        tokens[i], scores[i], types[i] = piece, float(score), gguf.TokenType.NORMAL
    for i, a in added.items():
        tokens[i] = str(a["content"])
        if i >= len(entries):
            scores[i] = 0.0
        types[i] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    unk = model.get("unk_id")
    if isinstance(unk, int) and 0 <= unk < size:
        types[unk] = gguf.TokenType.UNKNOWN

    index = {t: i for i, t in reversed(list(enumerate(tokens)))}
    cfg = {**read_json(src_dir / "special_tokens_map.json"), **read_json(src_dir / "tokenizer_config.json")}

    def special(kind: str, default: str) -> int | None:
        value = cfg.get(f"{kind}_token", default)
        if isinstance(value, dict):
            value = value.get("content", default)
        return index.get(str(value))

    ids = {k: special(k, d) for k, d in (("bos", "<s>"), ("eos", "</s>"), ("sep", "</s>"), ("pad", "<pad>"),
                                        ("mask", "<mask>"))}
    if isinstance(unk, int) and 0 <= unk < size:
        ids["unk"] = unk
    if ids["bos"] is None or ids["eos"] is None:
        raise ModelError(f"{path}: vocabulary lacks <s> / </s>; not an XLM-RoBERTa tokenizer")
    if ids.get("unk") is None:
        raise ModelError(f"{path}: the Unigram model names no unk_id; llama.cpp's UGM tokenizer needs one")
    _check_template(path, tok.get("post_processor"), tokens, int(ids["bos"]), int(ids["eos"]))
    charsmap, prefix, remove_extra = _normalizer_rules(src_dir, tok)
    special_ids = {k: v for k, v in ids.items() if v is not None}
    return _Vocab(tokens, scores, types, special_ids, prefix, remove_extra, charsmap)


def _check_template(path: Path, post: Any, tokens: list[str], bos: int, eos: int) -> None:
    """The post-processor must add ``<s> A </s>`` and ``<s> A </s></s> B </s>``: what llama.cpp adds."""
    if not isinstance(post, dict) or post.get("type") in (None, "RobertaProcessing"):
        return
    if post.get("type") != "TemplateProcessing":
        raise ModelError(f"{path}: post-processor {post.get('type')!r} is not XLM-R's template")

    def layout(items: list[dict[str, Any]]) -> list[str]:
        return [f"<{i['Sequence']['id']}>" if "Sequence" in i else str(i.get("SpecialToken", {}).get("id"))
                for i in items]

    b, e = tokens[bos], tokens[eos]
    want_single, want_pair = [b, "<A>", e], [b, "<A>", e, e, "<B>", e]
    single, pair = layout(post.get("single") or []), layout(post.get("pair") or [])
    if single != want_single or (pair and pair != want_pair):
        raise ModelError(f"{path}: the tokenizer adds {single} / {pair}, not XLM-R's {want_single} / {want_pair}; "
                         "llama.cpp would encode texts and pairs differently")


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

    v = ckpt.vocab
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(v.tokens)
    writer.add_token_scores(v.scores)
    writer.add_token_types(v.types)
    writer.add_add_space_prefix(v.add_space_prefix)
    writer.add_token_type_count(int(cfg.get("type_vocab_size", 1)))
    writer.add_remove_extra_whitespaces(v.remove_extra_whitespaces)
    if v.charsmap:
        writer.add_precompiled_charsmap(v.charsmap)
    ids = v.special_ids
    writer.add_bos_token_id(ids["bos"])
    writer.add_eos_token_id(ids["eos"])
    writer.add_unk_token_id(ids["unk"])
    if "sep" in ids:
        writer.add_sep_token_id(ids["sep"])
    if "pad" in ids:
        writer.add_pad_token_id(ids["pad"])
    if "mask" in ids:
        writer.add_mask_token_id(ids["mask"])
    # gguf's SpecialVocab on XLM-R's template: <s> A </s> and <s> A </s></s> B </s>
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(True)
    if ckpt.similarity is not None:
        writer.add_string(KEY_SIMILARITY, ckpt.similarity)
    writer.add_uint32(KEY_MAX_SEQ, ckpt.max_seq_length)
    add_tensors(writer, _mapped_tensors(src_dir, ckpt), quant)
