"""SentencePiece unigram vocabularies (XLM-RoBERTa's) read from a Hugging Face ``tokenizer.json``.

Follows llama.cpp's converter (conversion/bert.py, ``_xlmroberta_set_vocab``, the tokenizer.json branch that
jina-embeddings-v3 takes: its folder has no sentencepiece.bpe.model): the llama.cpp ``t5`` (UGM) tokenizer
with the pieces and scores of the Unigram model, token types (unknown, control for special tokens,
user-defined for other added tokens), the SentencePiece ``precompiled_charsmap`` of the ``Precompiled``
normalizer, ``add_space_prefix`` from the Metaspace pre-tokenizer, and ``[PAD<i>]`` rows up to the model's
vocab size. Shared by the families whose tokenizer is XLM-RoBERTa's (jina-embeddings-v3; XLM-RoBERTa's own
module can use it too).

``remove_extra_whitespaces``: llama.cpp's converter takes it from ``clean_up_tokenization_spaces``; here it
is what the tokenizer.json actually does, collapse runs of spaces (a ``Replace(" {2,}", " ")`` normalizer or
a ``WhitespaceSplit`` pre-tokenizer), falling back to ``clean_up_tokenization_spaces``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from indexer.errors import ModelError
from indexer.models.convert.common import read_json

# Normalizers and pre-tokenizers of a unigram tokenizer.json that llama.cpp's UGM tokenizer reproduces.
_SPACE_RUNS = (" {2,}", "  +")


@dataclass(frozen=True)
class UnigramVocab:
    tokens: list[str]
    scores: list[float]
    types: list[gguf.TokenType]
    add_space_prefix: bool
    remove_extra_whitespaces: bool
    precompiled_charsmap: bytes


def _flatten(node: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    """A normalizer / pre-tokenizer and the members of a ``Sequence`` of them, in order."""
    if not node:
        return []
    if node.get("type") == "Sequence":
        return [leaf for child in node.get(key, []) for leaf in _flatten(child, key)]
    return [node]


def _normalizer(src: Path, tok_json: dict[str, Any]) -> tuple[bytes, bool]:
    """(precompiled charsmap, collapses space runs) of the normalizer; refuses what UGM cannot do."""
    charsmap = b""
    collapses = False
    for norm in _flatten(tok_json.get("normalizer"), "normalizers"):
        kind = norm.get("type")
        if kind == "Precompiled":
            raw = norm.get("precompiled_charsmap") or ""
            try:
                charsmap = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
            except (binascii.Error, ValueError, TypeError) as exc:
                raise ModelError(f"{src}: the Precompiled normalizer's charsmap is not base64 ({exc})") from exc
        elif kind == "Replace" and norm.get("content") == " " and \
                (norm.get("pattern") or {}).get("Regex") in _SPACE_RUNS:
            collapses = True
        else:
            raise ModelError(f"{src}: normalizer {kind!r} is not supported for a unigram tokenizer (llama.cpp "
                             "applies the SentencePiece charsmap and collapses spaces only)")
    return charsmap, collapses


def _pre_tokenizer(src: Path, tok_json: dict[str, Any], tok_cfg: dict[str, Any]) -> tuple[bool, bool]:
    """(add a space prefix, collapses whitespace runs) from the Metaspace (+ WhitespaceSplit) pre-tokenizer."""
    add_prefix: bool | None = None
    splits = False
    for pre in _flatten(tok_json.get("pre_tokenizer"), "pretokenizers"):
        kind = pre.get("type")
        if kind == "Metaspace":
            if pre.get("replacement", "\u2581") != "\u2581":
                raise ModelError(f"{src}: Metaspace replacement {pre['replacement']!r} is not supported (\u2581 only)")
            scheme = pre.get("prepend_scheme")
            legacy = bool(pre.get("add_prefix_space", True))
            add_prefix = scheme in ("always", "first") if scheme is not None else legacy
        elif kind == "WhitespaceSplit":
            splits = True
        else:
            raise ModelError(f"{src}: pre-tokenizer {kind!r} is not supported for a unigram tokenizer "
                             "(Metaspace, optionally after WhitespaceSplit)")
    if add_prefix is None:
        add_prefix = bool(tok_cfg.get("add_prefix_space", True))
    return add_prefix, splits


def read_unigram_vocab(src_dir: Path, vocab_size: int) -> UnigramVocab:
    """The unigram vocabulary of ``src_dir/tokenizer.json``, padded to ``vocab_size`` rows."""
    src = src_dir / "tokenizer.json"
    tok_json = read_json(src)
    model = tok_json.get("model") or {}
    if model.get("type") != "Unigram":
        found = model.get("type") or "no tokenizer.json"
        raise ModelError(f"{src_dir}: expected a SentencePiece unigram tokenizer.json (model type Unigram), "
                         f"found {found}")
    if model.get("byte_fallback"):
        raise ModelError(f"{src}: byte_fallback unigram models are not supported (XLM-RoBERTa has none)")
    pieces = model.get("vocab") or []
    if not pieces:
        raise ModelError(f"{src}: the Unigram model has an empty vocabulary")
    tok_cfg = {**read_json(src_dir / "special_tokens_map.json"), **read_json(src_dir / "tokenizer_config.json")}
    charsmap, collapses = _normalizer(src, tok_json)
    add_prefix, splits = _pre_tokenizer(src, tok_json, tok_cfg)
    remove_ws = collapses or splits or bool(tok_cfg.get("clean_up_tokenization_spaces", False))

    def token_name(value: object) -> str | None:
        if isinstance(value, dict):
            value = value.get("content")
        return str(value) if value else None

    index = {str(p[0]): i for i, p in enumerate(pieces)}
    unk_name = token_name(tok_cfg.get("unk_token"))
    unk_id = index.get(unk_name, model.get("unk_id", 3)) if unk_name else model.get("unk_id", 3)
    special_names = {token_name(tok_cfg.get(f"{kind}_token"))
                     for kind in ("bos", "eos", "unk", "sep", "pad", "cls", "mask")}
    special_names |= {token_name(t) for t in tok_cfg.get("additional_special_tokens") or []}
    added = {str(t["content"]): bool(t.get("special")) for t in tok_json.get("added_tokens", [])}

    size = max(vocab_size, len(pieces))
    tokens = [f"[PAD{i}]" for i in range(size)]
    scores = [-10000.0] * size
    types = [gguf.TokenType.UNUSED] * size
    for i, entry in enumerate(pieces):
        piece, score = str(entry[0]), float(entry[1])
        if i == unk_id:
            kind = gguf.TokenType.UNKNOWN
        elif piece in special_names or added.get(piece):
            kind = gguf.TokenType.CONTROL
        elif piece in added:
            kind = gguf.TokenType.USER_DEFINED
        else:
            kind = gguf.TokenType.NORMAL
        tokens[i], scores[i], types[i] = piece, score, kind
    return UnigramVocab(tokens, scores, types, add_prefix, remove_ws, charsmap)


def write_unigram_vocab(writer: gguf.GGUFWriter, vocab: UnigramVocab, src_dir: Path, token_type_count: int) -> None:
    """The vocabulary keys as llama.cpp's converter writes them for a unigram (``t5``) tokenizer."""
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_add_space_prefix(vocab.add_space_prefix)
    writer.add_token_type_count(token_type_count)
    writer.add_remove_extra_whitespaces(vocab.remove_extra_whitespaces)
    if vocab.precompiled_charsmap:
        writer.add_precompiled_charsmap(vocab.precompiled_charsmap)
    gguf.SpecialVocab(src_dir, n_vocab=len(vocab.tokens)).add_to_gguf(writer, quiet=True)
