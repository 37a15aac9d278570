"""The Snowball stemmer and stopwords each word gets (the analyzer's version 3), by its chunk's language.

A chunk's language is detected at indexing (:mod:`indexer.core.languages`, recorded in its payload as ``lang``).
**Which stemmer a word gets** (:func:`by_stemmer`): a word of its chunk's script is stemmed and stopped as the
chunk's language when that language has its own stemmer here (:data:`OWN`, PyStemmer's Snowball algorithms, with
Snowball's stopword list: stopwords.json beside this module, as PostgreSQL ships them; BSD-3-Clause); any other
Latin word is stemmed as English with the analyzer's English stopwords (version 2's terms), any other Cyrillic
word as Russian (:data:`SCRIPT_DEFAULT`), except the words of a Cyrillic chunk whose language has no stemmer here
(Ukrainian), left as they are, as before. Only the languages whose own stemmer measured better than English stems
on the yardstick are in :data:`OWN`; French, Spanish, Portuguese and Italian measured worse with theirs
(docs/search.md) and keep English stems, which fold their plurals (``budgets``/``budget``).

**A query's language** (:func:`detect_query`) is told only with confidence (enough letters, probability at least
:data:`QUERY_MIN_CONFIDENCE`), and among the languages the collection holds when the store says which
(``held``): such a query is stemmed as that language. Otherwise (a word or two) each word is expanded into its
stems in every way a chunk of the collection could have stemmed it (:func:`candidates`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from functools import lru_cache
from pathlib import Path

import regex

from indexer.core.languages import LETTER, detect, model

__all__ = ["by_stemmer", "candidates", "detect", "detect_query", "stemmed", "stemmer_for", "stopwords"]
QUERY_MIN_LETTERS = 10  # a query with fewer letters is expanded rather than told
QUERY_MIN_CONFIDENCE = 0.7  # measured on the yardstick: 0.7 and 0.9 tie, 0.5 loses Dutch queries

# ISO 639-1 -> PyStemmer's Snowball algorithm: the languages stemmed and stopped as themselves (measured better
# than English stems on the yardstick: German, Dutch, Swedish, Polish, Russian).
OWN: dict[str, str] = {"de": "german", "nl": "dutch", "sv": "swedish", "pl": "polish", "ru": "russian"}
# The language a word of a script is stemmed as outside a chunk of a language in OWN ("" : not stemmed).
SCRIPT_DEFAULT = {"Latin": "en", "Cyrillic": "ru", "Greek": ""}
_ALGORITHMS = {"en": "english", **OWN}
_CYRILLIC = frozenset(["ru", "uk", "be", "bg", "mk", "sr", "kk", "ky", "mn", "tg"])
_SCRIPTS = [(name, regex.compile(rf"\p{{{name}}}")) for name in SCRIPT_DEFAULT]


@lru_cache(maxsize=1)
def stemmed() -> dict[str, str]:
    """Code -> Snowball algorithm of English and the languages in :data:`OWN` this PyStemmer has."""
    import Stemmer

    have = set(Stemmer.algorithms())
    return {code: algo for code, algo in _ALGORITHMS.items() if algo in have}


@lru_cache(maxsize=100_000)
def script(word: str) -> str:
    """The script of a word's first letter among Latin, Cyrillic and Greek (``""``: another one, or none)."""
    for ch in word:
        if ch.isalpha():
            for name, pattern in _SCRIPTS:
                if pattern.match(ch):
                    return name
            return ""
    return ""


def writes(code: str) -> str:
    """The script of a language in :data:`OWN` (or English)."""
    return "Cyrillic" if code in _CYRILLIC else "Latin"


def stemmer_for(lang: str, word_script: str) -> str:
    """The code a word of ``word_script`` in a chunk of language ``lang`` is stemmed as (``""``: not stemmed)."""
    if not word_script:
        return ""
    codes = stemmed()
    if lang in codes and lang != "en" and writes(lang) == word_script:
        return lang
    if word_script == "Cyrillic" and lang in _CYRILLIC:
        return ""  # a Cyrillic language without a stemmer here (Ukrainian): its words as they are
    default = SCRIPT_DEFAULT[word_script]
    return default if default in codes else ""


def by_stemmer(lang: str, words: list[str]) -> dict[str, list[str]]:
    """Words grouped by the code they are stemmed as (``""``: not stemmed) in a chunk of language ``lang``."""
    out: dict[str, list[str]] = {}
    for w in words:
        out.setdefault(stemmer_for(lang, script(w)), []).append(w)
    return out


def detect_query(text: str, held: Collection[str] | None = None) -> str:
    """A query's language when it is told with confidence (enough letters, probability at least
    :data:`QUERY_MIN_CONFIDENCE` among the languages ``held`` when given), else ``""``."""
    if len(LETTER.findall(text)) < QUERY_MIN_LETTERS:
        return ""
    ranked = [(lang, p) for lang, p in model().rank(text) if held is None or lang in held]
    total = sum(p for _, p in ranked)
    if not ranked or total <= 0:
        return ""
    return str(ranked[0][0]) if ranked[0][1] / total >= QUERY_MIN_CONFIDENCE else ""


def candidates(word: str, told: str, held: Collection[str] | None = None) -> list[str]:
    """The codes a query word is stemmed as (``""``: as it is): as the told language would stem it; when the
    language was not told, every way a chunk of a language ``held`` (None: of any language) could have stemmed a
    word of its script."""
    sc = script(word)
    if not sc:
        return [""]
    if told:
        return [stemmer_for(told, sc)]
    pool = [c for c in stemmed() if c != "en"] if held is None else list(held)
    return list(dict.fromkeys([stemmer_for(lang, sc) for lang in ["", *pool]] +
                              ([""] if sc == "Cyrillic" and held is None else [])))


@lru_cache(maxsize=64)
def stopwords(code: str) -> frozenset[str]:
    """Snowball's stopword list of language ``code`` (empty when it has none)."""
    return frozenset(_lists().get(code, "").split())


@lru_cache(maxsize=1)
def _lists() -> dict[str, str]:
    data = json.loads((Path(__file__).with_name("stopwords.json")).read_text(encoding="utf-8"))
    return dict(data["lists"])
