"""The lexical side of search: one tokenizer for every store, and the BM25 pieces stores need.

Every store keeps its lexical index from the same terms, so a query matches the same words whatever the store:

- words are Unicode ``\\w+`` runs, case-folded (NFKC); English stopwords are dropped;
- words are stemmed with the Snowball English stemmer (PyStemmer), so "mutations" matches "mutation";
- identifiers are kept whole as well as split: ``ERR_QUOTA_7731`` gives ``err_quota_7731``, ``err``, ``quota``,
  ``7731``; ``parseHttpHeader`` gives ``parsehttpheader``, ``pars``, ``http``, ``header``. An exact identifier
  in a query then matches its whole form (rare, so highly weighted) and its parts.

A chunk's lexical document has two fields: ``title`` (its heading path and file name) and ``body`` (its text).
FAISS indexes them in SQLite FTS5 (BM25 with per-field weights); Qdrant as a sparse vector whose values are BM25
term weights (title terms counted ``TITLE_WEIGHT`` times) with Qdrant's IDF modifier.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import PurePath
from typing import Any

from indexer.errors import ConfigError

# The stopword list of the BM25 reference run (a common English list); short, function words only.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)
MAX_TERM_CHARS = 64  # longer runs (hashes, base64) are skipped: they bloat the vocabulary and match nothing
TITLE_WEIGHT = 2.0  # a title term counts as this many body occurrences (FTS5 column weight, Qdrant tf)
BM25_K1 = 1.2
BM25_B = 0.75
SPARSE_AVG_TERMS = 120.0  # Qdrant's sparse values use a fixed average document length (terms per chunk)
LEXICAL_VERSION = "1"  # bump when the terms change: stores rebuild their lexical index

_WORD = re.compile(r"\w+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ConfigError("lexical search needs PyStemmer: pip install PyStemmer") from exc
    stemmer = Stemmer.Stemmer("english")
    stemmer.maxCacheSize = 100_000
    return stemmer


def _words(text: str) -> Iterable[str]:
    """Raw words and, for identifiers, their whole folded form marked with a leading '!'."""
    for match in _WORD.finditer(unicodedata.normalize("NFKC", text)):
        word = match.group()
        if len(word) > MAX_TERM_CHARS:
            continue
        parts = [p for p in word.split("_") if p]
        camel = [piece for p in parts for piece in (_CAMEL.findall(p) if p.isascii() else [p])]
        if len(parts) > 1 or len(camel) > len(parts):
            yield "!" + word.casefold()
            yield from camel
        else:
            yield word


def terms(text: str) -> list[str]:
    """The lexical terms of ``text``, in order (repeats kept: they are term frequencies)."""
    out: list[str] = []
    plain: list[str] = []
    for word in _words(text):
        if word.startswith("!"):
            out.append(word[1:])
            continue
        folded = word.casefold()
        if folded in STOPWORDS:
            continue
        plain.append(folded)
        out.append(folded)
    if plain:
        stems = dict(zip(plain, _stemmer().stemWords(plain), strict=True))
        out = [stems.get(t, t) for t in out]
    return out


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, in first-seen order."""
    return list(dict.fromkeys(terms(text)))


def fields(payload: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(title terms, body terms) of a chunk from its payload: heading path and file name; text."""
    heading = payload.get("heading") or ()
    title_parts = [str(h) for h in heading] if isinstance(heading, (list, tuple)) else [str(heading)]
    path = payload.get("path")
    if isinstance(path, str) and path:
        title_parts.append(PurePath(path).stem)
    return terms(" ".join(title_parts)), terms(str(payload.get("text") or ""))


def term_index(term: str) -> int:
    """A term's index in a sparse vector: 32 bits of its blake2b digest (stable across processes)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def sparse_document(payload: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    """BM25 term weights of a chunk (k1, b, a fixed average length); the store multiplies in the IDF."""
    title, body = fields(payload)
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


def sparse_query(text: str) -> tuple[list[int], list[float]]:
    indices = sorted({term_index(t) for t in query_terms(text)})
    return indices, [1.0] * len(indices)


def fts_text(items: Iterable[str]) -> str:
    """Terms as FTS5 column text (the FTS5 tokenizer keeps '_' inside tokens; see the stores)."""
    return " ".join(items)


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression: any of the query's terms, each quoted (no FTS5 syntax reaches SQLite)."""
    words = query_terms(text)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


