"""The language of a chunk, and that language's Snowball stemmer and stopwords (the analyzer's version 3).

**Detection** is py3langid's (langid.py's naive Bayes model over byte n-grams, 97 languages; BSD-3-Clause): pure
Python and numpy with its model inside the wheel (4.4 MB), so nothing is fetched at first use. Chosen by
measurement against lingua-language-detector (docs/search.md, "Languages"): on short chunks of the yardstick's
European man pages both are right almost always, and py3langid installs in a tenth of the space. A text is
detected from its first :data:`SAMPLE_CHARS` characters; one with fewer than :data:`MIN_LETTERS` letters of
spaced scripts (a CJK or Thai chunk, a table of numbers), or whose best language scores under
:data:`MIN_CONFIDENCE`, or whose language has no Snowball stemmer here, is *unknown* (``""``): its words are not
stemmed (rather than stemmed as English) and the English stopwords are dropped from it, as every text's were before.

**Stemmers**: PyStemmer's Snowball algorithms (:data:`SNOWBALL`: ISO 639-1 code -> algorithm). **Stopwords**:
Snowball's own lists for the same languages (stopwords.json beside this module, as PostgreSQL ships them;
BSD-3-Clause), except English, which keeps the analyzer's list (the terms of English text do not change).
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

UNKNOWN = ""  # the language of a text that was not detected: no stemming
SAMPLE_CHARS = 1000  # detection reads this many characters of a chunk (enough on every set measured)
MIN_LETTERS = 12  # fewer letters of spaced scripts than this: unknown
MIN_CONFIDENCE = 0.5  # py3langid's normalized probability below this: unknown

# ISO 639-1 -> PyStemmer's Snowball algorithm: the languages that are stemmed and stopped as themselves.
SNOWBALL: dict[str, str] = {
    "en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian", "pt": "portuguese",
    "nl": "dutch", "sv": "swedish", "da": "danish", "no": "norwegian", "nb": "norwegian", "fi": "finnish",
    "hu": "hungarian", "ru": "russian", "tr": "turkish", "ro": "romanian", "ca": "catalan", "pl": "polish",
    "cs": "czech", "lt": "lithuanian", "et": "estonian", "id": "indonesian", "ga": "irish", "el": "greek",
    "eu": "basque",
}  # fmt: skip
_LETTER = regex.compile(r"[\p{Latin}\p{Cyrillic}\p{Greek}\p{Armenian}\p{Georgian}]")
_lock = threading.Lock()
_identifier: Any = None


@lru_cache(maxsize=1)
def stemmed() -> dict[str, str]:
    """The languages of :data:`SNOWBALL` whose algorithm this PyStemmer has (older ones lack a few)."""
    import Stemmer

    have = set(Stemmer.algorithms())
    return {code: algo for code, algo in SNOWBALL.items() if algo in have}


def _model() -> Any:
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def detect(text: str) -> str:
    """The ISO 639-1 code of ``text``'s language (stemmed here or not), else :data:`UNKNOWN`."""
    sample = text[:SAMPLE_CHARS]
    if len(_LETTER.findall(sample)) < MIN_LETTERS:
        return UNKNOWN
    lang, confidence = _model().classify(sample)
    return str(lang) if confidence >= MIN_CONFIDENCE else UNKNOWN


# The language a word is stemmed as when its chunk's language does not write its script (a Russian word in an
# English chunk) or the chunk's language is unknown: the script's commonest language here.
SCRIPT_DEFAULT = {"Latin": "en", "Cyrillic": "ru", "Greek": "el"}
QUERY_MIN_LETTERS = 16
QUERY_MIN_CONFIDENCE = 0.9
_SCRIPTS = [(name, regex.compile(rf"\p{{{name}}}")) for name in SCRIPT_DEFAULT]


@lru_cache(maxsize=100_000)
def script(word: str) -> str:
    """The script of a word's first letter among those stemmed here (``""``: another one, or none)."""
    for ch in word:
        if ch.isalpha():
            for name, pattern in _SCRIPTS:
                if pattern.match(ch):
                    return name
            return ""
    return ""


_CYRILLIC = frozenset("ru uk be bg mk sr kk ky mn tg".split())
_NOT_LATIN = _CYRILLIC | frozenset("el zh ja ko th lo km my ar fa ur ps he yi hi mr ne bn pa gu or ta te kn ml si am ka hy".split())


def writes(code: str) -> str:
    """The script of language ``code`` among Latin, Cyrillic and Greek (``""``: another or unknown)."""
    if not code:
        return ""
    return "Cyrillic" if code in _CYRILLIC else "Greek" if code == "el" else "" if code in _NOT_LATIN else "Latin"


def by_stemmer(lang: str, words: list[str]) -> dict[str, list[str]]:
    """Words grouped by the language they are stemmed as (``""``: not stemmed): the chunk's language ``lang`` for
    the words of its script (unstemmed when it has no stemmer: Ukrainian), the script's default language for the
    other words and for every word of a chunk of unknown language."""
    codes = stemmed()
    out: dict[str, list[str]] = {}
    home = writes(lang)
    for w in words:
        sc = script(w)
        if not sc:
            code = ""
        elif sc == home:
            code = lang if lang in codes else ""
        else:
            code = SCRIPT_DEFAULT[sc] if SCRIPT_DEFAULT[sc] in codes else ""
        out.setdefault(code, []).append(w)
    return out


def detect_query(text: str, held: Any = None) -> str:
    """A query's language among the languages ``held`` (None: all) when it is told with confidence (enough
    letters, probability >= QUERY_MIN_CONFIDENCE among them), else UNKNOWN."""
    if len(_LETTER.findall(text)) < QUERY_MIN_LETTERS:
        return UNKNOWN
    ranked = [(lang, p) for lang, p in _model().rank(text) if held is None or lang in held]
    total = sum(p for _, p in ranked)
    if not ranked or total <= 0:
        return UNKNOWN
    return str(ranked[0][0]) if ranked[0][1] / total >= QUERY_MIN_CONFIDENCE else UNKNOWN


def candidates(word: str, told: str, held: Any = None) -> list[str]:
    """The languages a query word is stemmed in (``""``: as it is): the query's told language when it writes the
    word's script, else each language ``held`` (None: each stemmed here) that writes it, and the script's
    default language (the mixed and unknown chunks' words)."""
    sc = script(word)
    if not sc:
        return [""]
    codes = stemmed()
    if told and writes(told) == sc:
        return [told if told in codes else ""]
    pool = list(codes) if held is None else [c for c in held if writes(c) == sc]
    found = [c if c in codes else "" for c in pool if writes(c) == sc]
    default = SCRIPT_DEFAULT[sc] if SCRIPT_DEFAULT[sc] in codes else ""
    return list(dict.fromkeys([*found, default]))


@lru_cache(maxsize=64)
def stopwords(code: str) -> frozenset[str]:
    """Snowball's stopword list of language ``code`` (empty when it has none)."""
    return frozenset(_lists().get(code, "").split())


@lru_cache(maxsize=1)
def _lists() -> dict[str, str]:
    data = json.loads((Path(__file__).with_name("stopwords.json")).read_text(encoding="utf-8"))
    return dict(data["lists"])
