"""How much of a collection's text its embedding model barely reads: the model's blind spots, said out loud.

Per chunk two shares are measured: the share of its letters in scripts the model's catalogue entry does not
cover (:attr:`CatalogueEntry.scripts`; a model outside the catalogue has no such entry and this share is 0), and
the share of its tokens the model's own tokenizer (the ``tokenizer.json`` our converter stores in the GGUF) maps
to the unknown token or to byte-fallback pieces (``<0xE4>``). The script share is needed because unknown tokens
alone miss Korean (an English WordPiece model reads it as jamo, which are in its vocabulary), Japanese kana and
Hindi; the token share catches a model outside the catalogue that cannot read a script. A chunk's unread share is
the larger of the two; a collection's is the letter-weighted mean over a sample of its chunks (up to
:data:`SAMPLE` chunks spread over the first :data:`SCAN` stored ones: a bounded cost for ``index`` and
``status``). At :data:`WARN_SHARE` or more, ``indexer index`` and ``indexer status`` say so once, with the share,
the scripts and the fix: a multilingual model through ``indexer models build --from`` and ``indexer reindex``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from indexer.models.catalogue import CATALOGUE

logger = logging.getLogger(__name__)

SAMPLE = 300  # chunks measured
SCAN = 3000  # stored chunks the sample is spread over
WARN_SHARE = 0.25  # a collection this unread is said to be so
SCRIPTS = ("Latin", "Cyrillic", "Greek", "Han", "Hiragana", "Katakana", "Hangul", "Thai", "Arabic", "Hebrew",
           "Devanagari", "Tamil", "Bengali", "Armenian", "Georgian", "Lao", "Khmer", "Myanmar")  # fmt: skip
_SCRIPT_RE = {name: regex.compile(rf"\p{{{name}}}") for name in SCRIPTS}
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
_UNKNOWN_NAMES = ("[UNK]", "<unk>", "<|unk|>", "<UNK>")


@dataclass
class Reading:
    """A collection's text as its model reads it: ``share`` of its letters the model barely reads."""

    share: float = 0.0
    chunks: int = 0
    scripts: dict[str, float] = field(default_factory=dict)  # uncovered script -> share of all letters
    unknown_tokens: float = 0.0  # share of tokens that are unknown or byte fallback

    @property
    def blind(self) -> bool:
        return self.chunks > 0 and self.share >= WARN_SHARE

    def to_dict(self) -> dict[str, Any]:
        return {"share": round(self.share, 3), "chunks": self.chunks, "unknown_tokens": round(self.unknown_tokens, 3),
                "scripts": {k: round(v, 3) for k, v in self.scripts.items()}}


def letters_by_script(text: str) -> dict[str, int]:
    """Letters of ``text`` per script of :data:`SCRIPTS` (others under ``"other"``)."""
    total = sum(1 for ch in text if ch.isalpha())
    out: dict[str, int] = {}
    for name, pattern in _SCRIPT_RE.items():
        if total - sum(out.values()) <= 0:
            break
        n = len(pattern.findall(text))
        if n:
            out[name] = n
    rest = total - sum(out.values())
    if rest > 0:
        out["other"] = rest
    return out


class _Tokens:
    """The model's tokenizer.json (from its GGUF) and which of its ids are unknown or byte fallback."""

    def __init__(self, definition: str) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_str(definition)
        vocab = self.tokenizer.get_vocab()
        self.unread = {i for t, i in vocab.items() if t in _UNKNOWN_NAMES or _BYTE_TOKEN.match(t)}

    def unread_share(self, text: str) -> float:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return sum(1 for i in ids if i in self.unread) / len(ids) if ids else 0.0


@lru_cache(maxsize=4)
def _model_facts(model_path: str) -> tuple[frozenset[str] | None, _Tokens | None, str]:
    """(the scripts the model's catalogue entry covers or None, its tokenizer or None, its name)."""
    from indexer.models.gguf_header import read_header

    try:
        values = read_header(model_path, ("general.name", "indexer.tokenizer.json")).values
    except (OSError, ValueError) as exc:
        logger.debug("cannot read %s: %s", model_path, exc)
        return None, None, Path(model_path).stem
    name = str(values.get("general.name") or Path(model_path).stem)
    entry = CATALOGUE.get(name)
    covered = frozenset(entry.scripts) if entry is not None and entry.scripts else None
    definition = values.get("indexer.tokenizer.json")
    tokens = None
    if isinstance(definition, str):
        try:
            tokens = _Tokens(definition)
        except Exception as exc:  # a definition the tokenizers library cannot read: the script share alone
            logger.debug("cannot read the tokenizer of %s: %s", model_path, exc)
    return covered, tokens, name


def measure(texts: Iterable[str], model_path: str) -> Reading:
    """How much of ``texts`` (chunks) the model at ``model_path`` barely reads."""
    covered, tokens, _ = _model_facts(str(model_path))
    letters_total = 0.0
    unread_total = 0.0
    token_total = 0.0
    per_script: dict[str, float] = {}
    chunks = 0
    for text in texts:
        counts = letters_by_script(text)
        letters = sum(counts.values())
        if not letters:
            continue
        chunks += 1
        uncovered = {s: n for s, n in counts.items() if s != "other" and s not in covered} if covered else {}
        script_share = sum(uncovered.values()) / letters
        token_share = tokens.unread_share(text) if tokens is not None else 0.0
        letters_total += letters
        unread_total += letters * max(script_share, token_share)
        token_total += letters * token_share
        for s, n in uncovered.items():
            per_script[s] = per_script.get(s, 0) + n
    if not letters_total:
        return Reading()
    return Reading(unread_total / letters_total, chunks,
                   {s: n / letters_total for s, n in sorted(per_script.items(), key=lambda kv: -kv[1])},
                   token_total / letters_total)


def sample(payloads: Iterable[tuple[str, Mapping[str, Any]]], stored: int) -> list[str]:
    """Up to :data:`SAMPLE` chunk texts spread over the first :data:`SCAN` of ``stored`` payloads (pictures
    and empty chunks skipped)."""
    step = max(1, min(stored, SCAN) // SAMPLE)
    out: list[str] = []
    for n, (_, payload) in enumerate(payloads):
        if n >= SCAN or len(out) >= SAMPLE:
            break
        text = payload.get("text")
        if n % step == 0 and isinstance(text, str) and text.strip() and not payload.get("media"):
            out.append(text)
    return out


def advice(reading: Reading, collection: str, model_path: str) -> str | None:
    """The one sentence ``index`` and ``status`` say when the collection is mostly text its model barely reads."""
    if not reading.blind:
        return None
    _, _, name = _model_facts(str(model_path))
    scripts = ", ".join(f"{s} {v:.0%}" for s, v in list(reading.scripts.items())[:4])
    what = f" (scripts it does not cover: {scripts})" if scripts else ""
    return (f"{reading.share:.0%} of the text of collection {collection!r} is in writing its model {name} barely "
            f"reads{what}; unknown or byte-fallback tokens {reading.unknown_tokens:.0%}: dense and hybrid search "
            "rank it by noise. Use a multilingual model, e.g. bge-m3 or jina-embeddings-v2-base-zh: `indexer models "
            f"build --from CHECKPOINT_DIR --name NAME`, then `indexer reindex -c {collection} --model NAME`")
