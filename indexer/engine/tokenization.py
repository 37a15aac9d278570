"""Text to token ids as the model was trained: the model's own tokenizer definition, else llama.cpp's.

Our converter stores the checkpoint's ``tokenizer.json`` in the GGUF (``indexer.tokenizer.json``), so one file
travels. With it, texts are tokenized by the ``tokenizers`` library (the reference implementation transformers
uses) and llama.cpp receives token ids: equal to the reference in every writing system, where llama.cpp's own
tokenizer is not (its WordPiece accent stripping keeps only the leading consonant of a Hangul syllable; the
whitespace BPE of jina-v2-zh drops characters the reference maps to ``<unk>``). Measured choice and figures:
docs/models.md ("Tokenization").

A GGUF without the definition (converted elsewhere) falls back to llama.cpp's tokenizer with the known
differences fixed in the text where that is possible (``llama.cpp+fixes``), said once per file.

The behaviour is recorded per collection (``indexer.tokenizer`` in the store's metadata): a collection made
before this existed has no record and keeps llama.cpp's tokenizer as it was (``llama.cpp``), so its queries
are tokenized as its documents were, until it is reindexed.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

KEY_TOKENIZER_JSON = "indexer.tokenizer.json"  # written by indexer.models.convert
META_TOKENIZER = "indexer.tokenizer"  # a collection's tokenizer behaviour, in its store's metadata

REFERENCE = "reference"  # the model's tokenizer.json through the tokenizers library
RUNTIME_FIXED = "llama.cpp+fixes-1"  # llama.cpp's tokenizer with the known differences fixed in the text
RUNTIME = "llama.cpp"  # llama.cpp's tokenizer as it is (collections made before the record existed)
MODES = (REFERENCE, RUNTIME_FIXED, RUNTIME)

_warned: set[str] = set()


def _hangul_to_jamo(text: str) -> str:
    """Hangul syllables decomposed into their jamo (full NFD), as BertNormalizer's accent stripping sees them:
    llama.cpp's one-codepoint NFD table keeps only a syllable's leading consonant."""
    if not any("\uac00" <= ch <= "\ud7a3" for ch in text):
        return text
    return "".join(unicodedata.normalize("NFD", ch) if "\uac00" <= ch <= "\ud7a3" else ch for ch in text)


def runtime_fix(metadata: Mapping[str, str]) -> Callable[[str], str] | None:
    """The text fix llama.cpp's tokenizer needs for this model, or None: WordPiece models that strip accents
    (lowercase) get Hangul decomposed. Not fixable in the text, so only the reference tokenizer fixes them:
    llama.cpp's WordPiece also strips spacing vowel signs (Unicode Mc: Devanagari's ि, ा, ो), which
    BertNormalizer keeps; jina-v2-zh's whitespace BPE drops what the reference maps to <unk>."""
    model = str(metadata.get("tokenizer.ggml.model", ""))
    lowercase = str(metadata.get("tokenizer.ggml.normalizer.lowercase", "true")).lower() == "true"
    strip = str(metadata.get("tokenizer.ggml.normalizer.strip_accents", str(lowercase))).lower() == "true"
    if model == "bert" and strip:
        return _hangul_to_jamo
    return None


def _runtime_is_exact(metadata: Mapping[str, Any]) -> bool:
    """llama.cpp's unigram (``t5``/UGM) tokenizer follows sentencepiece, which transformers uses for these models;
    the tokenizers library on the tokenizer.json real checkpoints ship differs where trailing spaces leave a
    final "▁" (measured: bench/tokenizer_choice.py). Every other family is tokenized by the definition."""
    return str(metadata.get("tokenizer.ggml.model", "")) == "t5"


class ReferenceTokens:
    """The model's tokenizer.json through the ``tokenizers`` library (added special tokens in a text are
    matched, as transformers does)."""

    mode = REFERENCE

    def __init__(self, definition: str, n_vocab: int) -> None:
        from tokenizers import Tokenizer

        self._n_vocab = n_vocab
        self._tok = Tokenizer.from_str(definition)
        self._tok.no_truncation()  # the engine cuts to the model's limit
        self._tok.no_padding()

    def _checked(self, ids: list[int]) -> list[int]:
        if ids and max(ids) >= self._n_vocab:  # llama.cpp would abort the process on such an id
            raise ValueError(f"the tokenizer definition gave id {max(ids)}, beyond the GGUF's {self._n_vocab} "
                             "tokens: the file is inconsistent; convert the checkpoint again")
        return ids

    def encode(self, text: str, add_special: bool, parse_special: bool = False) -> list[int]:
        return self._checked(list(self._tok.encode(text, add_special_tokens=add_special).ids))

    def encode_batch(self, texts: list[str], add_special: bool) -> list[list[int]]:
        return [self._checked(list(e.ids)) for e in self._tok.encode_batch(texts, add_special_tokens=add_special)]

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))


class RuntimeTokens:
    """llama.cpp's tokenizer (``tokenize(bytes, add_bos, special)`` / ``detokenize``), the text fixed first
    when ``fix`` is given."""

    def __init__(self, tokenize: Callable[[bytes, bool, bool], list[int]], detokenize: Callable[..., bytes],
                 fix: Callable[[str], str] | None) -> None:
        self._tokenize = tokenize
        self._detokenize = detokenize
        self._fix = fix
        self.mode = RUNTIME_FIXED if fix is not None else RUNTIME

    def encode(self, text: str, add_special: bool, parse_special: bool = False) -> list[int]:
        if self._fix is not None:
            text = self._fix(text)
        return self._tokenize(text.encode("utf-8"), add_special, parse_special)

    def encode_batch(self, texts: list[str], add_special: bool) -> list[list[int]]:
        return [self.encode(t, add_special) for t in texts]

    def decode(self, ids: list[int]) -> str:
        return self._detokenize(ids, special=True).decode("utf-8", errors="ignore")


Tokens = ReferenceTokens | RuntimeTokens


def choose(metadata: Mapping[str, Any], mode: str | None, tokenize: Callable[[bytes, bool, bool], list[int]],
           detokenize: Callable[..., bytes], n_vocab: int, where: str) -> Tokens:
    """The tokenizer for ``mode`` (None: the best this file allows) over llama.cpp's ``tokenize``/``detokenize``
    and ``n_vocab`` tokens. ``reference`` needs the definition in the file; asked for without it, the error
    names the fix."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown tokenizer {mode!r}; use one of {', '.join(MODES)}")
    definition = metadata.get(KEY_TOKENIZER_JSON)
    if mode == RUNTIME or (mode is None and _runtime_is_exact(metadata)):
        return RuntimeTokens(tokenize, detokenize, None)
    if mode in (None, REFERENCE) and definition:
        return ReferenceTokens(str(definition), n_vocab)
    if mode == REFERENCE:
        raise ValueError(f"{where} has no tokenizer definition ({KEY_TOKENIZER_JSON}); convert the checkpoint "
                         "with `indexer models build` to store it, or use the llama.cpp tokenizer")
    fix = runtime_fix(metadata)
    if not definition and where not in _warned:
        _warned.add(where)
        logger.warning("%s carries no tokenizer definition (%s): tokenizing with llama.cpp's tokenizer%s; "
                       "convert the model with indexer's converter for the reference tokenization", where,
                       KEY_TOKENIZER_JSON, " with Hangul decomposed first" if fix else "")
    return RuntimeTokens(tokenize, detokenize, fix)
