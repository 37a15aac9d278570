"""SentencePiece unigram vocabularies (XLM-RoBERTa's, and jina-embeddings-v3's, which is the same tokenizer)
read from a Hugging Face ``tokenizer.json``.

Follows llama.cpp's converter (conversion/bert.py, ``_xlmroberta_tokenizer_init`` / ``_xlmroberta_set_vocab``,
its tokenizer.json branch): the ``t5`` (UGM) tokenizer with the pieces' scores and token types (unknown,
control for special tokens, user-defined for other added tokens, ``[PAD<i>]`` rows up to the model's vocab
size), the SentencePiece normalizer's ``precompiled_charsmap``, ``add_space_prefix`` from the Metaspace
pre-tokenizer, and ``remove_extra_whitespaces`` from what the pipeline does (a ``Replace(" {2,}")`` normalizer or
a ``WhitespaceSplit`` pre-tokenizer), else ``clean_up_tokenization_spaces`` as llama.cpp's converter takes it.
Never from ``sentencepiece.bpe.model``: the product has no sentencepiece dependency. Normalizer and
pre-tokenizer steps llama.cpp's UGM tokenizer cannot reproduce, and a post-processor other than XLM-R's
``<s> A </s></s> B </s>``, are refused rather than silently changing the token ids.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from indexer.errors import ModelError
from indexer.models.convert.common import add_special_token_ids, configured_special_ids, read_json

# tokenizers' normalizers and pre-tokenizers llama.cpp's UGM tokenizer does itself (charsmap, whitespace
# rules, the "▁" prefix); anything else would change the token ids.
_NORMALIZERS = frozenset({"Precompiled", "Replace", "Strip"})
_PRE_TOKENIZERS = frozenset({"Metaspace", "WhitespaceSplit"})
_SPACE = "\u2581"


@dataclass(frozen=True)
class UnigramVocab:
    tokens: list[str]
    scores: list[float]
    types: list[gguf.TokenType]
    special_ids: dict[str, int]
    add_space_prefix: bool
    remove_extra_whitespaces: bool
    charsmap: bytes


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


def read_unigram_vocab(src_dir: Path, config_vocab_size: int) -> UnigramVocab:
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
    ids = configured_special_ids(src_dir, index, (("bos", "<s>"), ("eos", "</s>"), ("sep", "</s>"),
                                                  ("pad", "<pad>"), ("mask", "<mask>")))
    if isinstance(unk, int) and 0 <= unk < size:
        ids["unk"] = unk
    if ids["bos"] is None or ids["eos"] is None:
        raise ModelError(f"{path}: vocabulary lacks <s> / </s>; not an XLM-RoBERTa tokenizer")
    if ids.get("unk") is None:
        raise ModelError(f"{path}: the Unigram model names no unk_id; llama.cpp's UGM tokenizer needs one")
    _check_template(path, tok.get("post_processor"), tokens, int(ids["bos"]), int(ids["eos"]))
    charsmap, prefix, remove_extra = _normalizer_rules(src_dir, tok)
    special_ids = {k: v for k, v in ids.items() if v is not None}
    return UnigramVocab(tokens, scores, types, special_ids, prefix, remove_extra, charsmap)


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


def write_unigram_vocab(writer: gguf.GGUFWriter, v: UnigramVocab, token_type_count: int) -> None:
    """The vocabulary keys as llama.cpp's converter writes them for XLM-R's unigram (``t5``) tokenizer."""
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(v.tokens)
    writer.add_token_scores(v.scores)
    writer.add_token_types(v.types)
    writer.add_add_space_prefix(v.add_space_prefix)
    writer.add_token_type_count(token_type_count)
    writer.add_remove_extra_whitespaces(v.remove_extra_whitespaces)
    if v.charsmap:
        writer.add_precompiled_charsmap(v.charsmap)
    add_special_token_ids(writer, v.special_ids)
    # gguf's SpecialVocab on XLM-R's template: <s> A </s> and <s> A </s></s> B </s>
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(True)
