"""The lexical side of search: one analyzer for every store, and the BM25 pieces stores need.

Every store keeps its lexical index from the same terms, so a query matches the same words whatever the store:
:class:`indexer.search.analyzer.Analyzer` makes them (Unicode words that keep combining marks, stopped and
Snowball-stemmed as their chunk's language (:func:`chunk_language`; version 3), identifiers whole and split, CJK
and Thai/Lao/Khmer/Myanmar as overlapping bigrams, Hangul words with and without their particle; its docstring has
the rules). :data:`ANALYZER` is the one new collections get; a collection records the version of the one that
made its terms (:data:`LEXICAL_VERSION` when current), and a query against it is cut by that one
(:func:`analyzer`) until ``indexer index`` rebuilds its lexical side (no re-embedding). A store that counts its
chunks' languages (:func:`count_languages`) passes the ones it holds (:func:`held`) to the query side.

A chunk's lexical document has two fields: ``title`` (its heading path and file name) and ``body`` (its text).
FAISS indexes them in SQLite FTS5 (BM25 with per-field weights) as pre-made terms, one token each; Qdrant as a
sparse vector whose values are BM25 term weights (title terms counted ``TITLE_WEIGHT`` times) with Qdrant's IDF
modifier, named for the analyzer's version (:func:`sparse_name`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from pathlib import PurePath
from typing import Any

from indexer.errors import StoreError
from indexer.search.analyzer import MAX_TERM_CHARS, STOPWORDS, Analyzer, TermMaker, WordsV1

__all__ = ["ANALYZER", "LEXICAL_VERSION", "MAX_TERM_CHARS", "STOPWORDS", "analyzer", "terms", "query_terms"]

TITLE_WEIGHT = 2.0  # a title term counts as this many body occurrences (FTS5 column weight, Qdrant tf)
BM25_K1 = 1.2
BM25_B = 0.75
SPARSE_AVG_TERMS = 120.0  # Qdrant's sparse values use a fixed average document length (terms per chunk)

ANALYZER_V2 = Analyzer("unicode-words+cjk-bigrams", "2")  # English stems for every text; Hangul as bigrams
ANALYZER = Analyzer("unicode-words+cjk-bigrams+stems-by-language", "3", by_language=True, hangul_words=True)
LEXICAL_VERSION = ANALYZER.version  # bump (with a new analyzer) when the terms change: stores rebuild
_ANALYZERS: dict[str, TermMaker] = {"1": WordsV1(), "2": ANALYZER_V2, ANALYZER.version: ANALYZER}


def analyzer(version: str | None = None) -> TermMaker:
    """The analyzer of lexical ``version`` (None: the current one)."""
    if version is None or version == LEXICAL_VERSION:
        return ANALYZER
    found = _ANALYZERS.get(version)
    if found is None:
        raise StoreError(
            f"this collection's lexical terms were made by analyzer version {version!r}, which this indexer does "
            f"not know (it knows {', '.join(sorted(_ANALYZERS))}); upgrade indexer, or run `indexer index` to "
            "rebuild the lexical side with this version's terms"
        )
    return found


def versions() -> list[str]:
    """The analyzer versions this indexer can query with, oldest first."""
    return sorted(_ANALYZERS, key=int)


def known(version: str | None) -> bool:
    """Whether ``version`` names an analyzer this indexer can query with."""
    return version in _ANALYZERS


def sparse_name(version: str = LEXICAL_VERSION) -> str:
    """The named sparse vector holding the terms of analyzer ``version`` on Qdrant."""
    return f"bm25_v{version}"


def terms(text: str, made_by: TermMaker = ANALYZER) -> list[str]:
    """The lexical terms of ``text``, in order (repeats kept: they are term frequencies)."""
    return made_by.words(text)


def query_terms(text: str, made_by: TermMaker = ANALYZER, held: Collection[str] | None = None) -> list[str]:
    """Distinct terms of a query, in first-seen order (from version 3: stemmed as the query's language when it
    can be told, else each word expanded into the stems it could have in the collection's languages ``held``:
    :meth:`Analyzer.query_words`)."""
    return made_by.query_words(text, held)


HELD_SHARE = 0.02  # a language counts as the collection's when at least this share of its chunks is in it


def count_languages(payloads: Iterable[Mapping[str, Any]], counts: Mapping[str, Any] | None = None) -> dict[str, int]:
    """``counts`` (language -> chunks) plus the ``lang`` of each payload that records one (a store keeps these
    to tell :func:`held` a query; they are not lowered on delete: a superset of the collection's languages)."""
    out = {str(k): int(v) for k, v in (counts or {}).items()}
    for payload in payloads:
        lang = payload.get("lang")
        if isinstance(lang, str):
            out[lang] = out.get(lang, 0) + 1
    return out


def held(counts: Mapping[str, int] | None) -> frozenset[str] | None:
    """The languages a collection holds (at least :data:`HELD_SHARE` of its chunks), from a store's counts;
    None when the store has none (its chunks were written before languages were recorded)."""
    if not counts:
        return None
    total = sum(counts.values())
    return frozenset(lang for lang, n in counts.items() if lang and n >= HELD_SHARE * total)


def chunk_language(payload: Mapping[str, Any], made_by: TermMaker = ANALYZER) -> str:
    """The language a chunk's terms are made in: the ``lang`` its payload records (indexing records it), else
    detected from its text (a chunk written before the field existed)."""
    lang = payload.get("lang")
    return lang if isinstance(lang, str) else made_by.language(str(payload.get("text") or ""))


def fields(payload: Mapping[str, Any], made_by: TermMaker = ANALYZER) -> tuple[list[str], list[str]]:
    """(title terms, body terms) of a chunk from its payload: heading path and file name; text. Both are made in
    the chunk's language (:func:`chunk_language`)."""
    heading = payload.get("heading") or ()
    title_parts = [str(h) for h in heading] if isinstance(heading, (list, tuple)) else [str(heading)]
    path = payload.get("path")
    if isinstance(path, str) and path:
        title_parts.append(PurePath(path).stem)
    lang = chunk_language(payload, made_by)
    return made_by.words(" ".join(title_parts), lang), made_by.words(str(payload.get("text") or ""), lang)


def term_index(term: str) -> int:
    """A term's index in a sparse vector: 32 bits of its blake2b digest (stable across processes)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def sparse_document(payload: Mapping[str, Any], made_by: TermMaker = ANALYZER) -> tuple[list[int], list[float]]:
    """BM25 term weights of a chunk (k1, b, a fixed average length); the store multiplies in the IDF."""
    title, body = fields(payload, made_by)
    counts: Counter[str] = Counter(body)
    for t in title:
        counts[t] += TITLE_WEIGHT  # type: ignore[assignment]
    length = sum(counts.values())
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / SPARSE_AVG_TERMS)
    merged: dict[int, float] = {}
    for term, tf in counts.items():
        idx = term_index(term)
        merged[idx] = merged.get(idx, 0.0) + tf * (BM25_K1 + 1) / (tf + norm)
    indices = sorted(merged)
    return indices, [merged[i] for i in indices]


def sparse_query(text: str, made_by: TermMaker = ANALYZER, languages: Collection[str] | None = None
                 ) -> tuple[list[int], list[float]]:
    indices = sorted({term_index(t) for t in query_terms(text, made_by, languages)})
    return indices, [1.0] * len(indices)


def fts_text(items: Iterable[str]) -> str:
    """Terms as FTS5 column text: space-separated (the FTS5 tokenizer keeps each whole; see the FAISS store)."""
    return " ".join(items)


def fts_fields(payload: Mapping[str, Any], version: str | None = None) -> tuple[str, str]:
    """(title, body) FTS5 column texts of a chunk, with the terms of analyzer ``version`` (None: current)."""
    title, body = fields(payload, analyzer(version))
    return fts_text(title), fts_text(body)


def fts_query(text: str, version: str | None = None, languages: Collection[str] | None = None) -> str | None:
    """An FTS5 MATCH expression: any of the query's terms, each quoted (no FTS5 syntax reaches SQLite)."""
    words = query_terms(text, analyzer(version), languages)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


