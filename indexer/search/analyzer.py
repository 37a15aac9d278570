"""How text becomes lexical terms: one analyzer for the index side, the query side and the marks on the page.

An :class:`Analyzer` has a name and a version (a collection records which made its terms, so a query is cut the
same way until the collection's lexical side is rebuilt) and one job: ``terms(text)`` gives each term with the
[start, end) characters of ``text`` it came from. Text is cut into runs by script:

- **words** (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Tamil, ... : scripts that put spaces between
  words) are Unicode ``\\w+`` runs of the ``regex`` module, whose ``\\w`` keeps combining marks (Python's ``re``
  breaks ``हिन्दी`` into ``ह``, ``न``, ``द``). A word is NFKC-folded and case-folded, then stopped and stemmed
  (PyStemmer's Snowball) as the text's language (version 3, ``by_language``; version 2: English for every text),
  per word by its script (:mod:`indexer.search.languages`): a word of the chunk's script as the chunk's language
  when it has its own stemmer here (German, Dutch, Swedish, Polish, Russian, with Snowball's stopwords), any other
  Latin word as English with the English stopwords below, any other Cyrillic word as Russian (a Ukrainian chunk's
  own words unstemmed). English terms are exactly those of versions 1 and 2.
  Identifiers are kept whole and split: ``ERR_QUOTA_7731`` gives ``err_quota_7731``, ``err``, ``quota``, ``7731``;
  ``parseHttpHeader`` gives ``parsehttpheader``, ``pars``, ``http``, ``header``. Words over 64 characters
  (hashes, base64) are skipped.
- **CJK** (Han, Hiragana, Katakana) runs become overlapping character bigrams, as Lucene's CJK analyzer makes
  them (no dictionary, so new words and names are found): ``项目预算`` gives ``项目``, ``目预``, ``预算``; a run of
  one character is kept as it is. Han characters are folded Traditional -> Simplified (:mod:`indexer.search.hanzi`:
  ``數據庫`` and ``数据库`` make the same terms); full-width and half-width forms by NFKC.
- **Hangul** words (eojeol) give, from version 3 (``hangul_words``), the word, the word without its particle when
  it ends in one of :data:`HANGUL_PARTICLES` (two syllables or more left: ``데이터베이스는`` also gives
  ``데이터베이스``) and, when that stem has :data:`HANGUL_COMPOUND` syllables or more, the stem's bigrams (a
  compound's parts). Measured on the Korean man pages (0.872 with version 2's bigrams, 0.884 with version 1's whole
  words, 0.888 so) and the hand-written Korean set (1.0). Version 2: bigrams, as CJK.
- **Thai, Lao, Khmer and Myanmar** (written without spaces, and whose word breaks need dictionaries) become
  overlapping bigrams of grapheme clusters (a consonant with its vowel and tone marks), the same rule.

**Queries** (:meth:`Analyzer.query_words`): from version 3, a query whose language is told with confidence among
the collection's languages (a store counts its chunks' ``lang``) is stemmed as that language; a shorter one (a
word or two) becomes each word's stems in every way a chunk of the collection could have stemmed it, so an
English query on an English collection gets version 2's terms.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import regex

from indexer.errors import ConfigError
from indexer.search import languages
from indexer.search.hanzi import SIMPLIFIED, TRADITIONAL

Term = tuple[str, int, int]  # (term, start, end): the characters of the analyzed text it came from

# The stopword list of the BM25 reference run (a common English list); short, function words only.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)
MAX_TERM_CHARS = 64  # longer words (hashes, base64) are skipped: they bloat the vocabulary and match nothing

# Ideographs and kana with their marks: the iteration marks 々 〆, the prolonged sound mark ー (full and half
# width), the half-width voiced marks and the combining voiced marks of decomposed kana.
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u3005\u3006\u30fc\u3099\u309a\uff70\uff9e\uff9f"
_SEA = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_RUN = regex.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<sea>[{_SEA}]+)|(?P<word>[\w--[{_CJK}{_SEA}]]+)", regex.V1)
_WORD = regex.compile(r"\w+")
_ASCII_WORD = re.compile(r"(?P<word>\w+)")  # ASCII text: the same runs, by the faster ``re``
_CLUSTER = regex.compile(r"\X")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD_V1 = re.compile(r"\w+")  # version 1's words: Python's \w (no combining marks)
_FOLD_HAN = str.maketrans(dict(zip(TRADITIONAL, SIMPLIFIED, strict=True)))


class TermMaker(Protocol):
    """What makes a collection's terms: an :class:`Analyzer`, or version 1's (:class:`WordsV1`)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def label(self) -> str: ...

    def words(self, text: str, language: str | None = None) -> list[str]: ...

    def query_words(self, text: str, held: Collection[str] | None = None) -> list[str]: ...

    def language(self, text: str) -> str: ...


@lru_cache(maxsize=4)
def stemmer(language: str) -> Any:
    """PyStemmer's Snowball stemmer for ``language`` (a dependency of the package)."""
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ConfigError("lexical search needs PyStemmer: pip install PyStemmer") from exc
    out = Stemmer.Stemmer(language)
    out.maxCacheSize = 100_000
    return out


@dataclass(frozen=True)
class Analyzer:
    """Text -> terms with their spans (module docstring). ``name`` and ``version`` are what a collection records."""

    name: str
    version: str
    stopwords: frozenset[str] = STOPWORDS
    stemmer: str | None = "english"  # a Snowball language of PyStemmer, or None: words unstemmed
    fold_han: bool = True  # Traditional -> Simplified
    by_language: bool = False  # each text stemmed and stopped as its own language; queries expanded (version 3)
    hangul_words: bool = False  # a Hangul word (eojeol) also gives itself without its particle (version 3)

    @property
    def label(self) -> str:
        """How status names it: ``name vversion``."""
        return f"{self.name} v{self.version}"

    def language(self, text: str) -> str:
        """The language ``text`` is stemmed as: its detected one (by_language), else this analyzer's stemmer's."""
        return languages.detect(text) if self.by_language else ("en" if self.stemmer == "english" else "")

    def terms(self, text: str, language: str | None = None) -> list[Term]:
        """Every term of ``text`` in order (repeats kept: they are term frequencies) with its [start, end).
        ``language`` (by_language only): the text's ISO 639-1 code, ``""`` for unknown, None to detect it."""
        if not self.by_language:
            return self._stemmed(text, self.stopwords, self.stemmer)
        lang = languages.detect(text) if language is None else language
        out, plain = self._cut(text, frozenset())
        distinct = list(dict.fromkeys(t for (t, _, _), p in zip(out, plain, strict=True) if p))
        if not distinct:
            return out
        made: dict[str, str | None] = {}  # word -> its term (None: a stopword, dropped)
        groups = ({languages.stemmer_for(lang, "Latin"): distinct} if text.isascii()  # (the common case, fast)
                  else languages.by_stemmer(lang, distinct))
        for code, words in groups.items():
            stop = self.stopwords if code in ("en", "") else languages.stopwords(code)
            kept = [w for w in words if w not in stop]
            made.update(dict.fromkeys(words))
            if code:
                made.update(zip(kept, stemmer(languages.stemmed()[code]).stemWords(kept), strict=True))
            else:
                made.update((w, w) for w in kept)
        result: list[Term] = []
        for (t, a, b), p in zip(out, plain, strict=True):
            if not p:
                result.append((t, a, b))
            elif (m := made[t]) is not None:
                result.append((m, a, b))
        return result

    def words(self, text: str, language: str | None = None) -> list[str]:
        """The terms alone (what the stores index)."""
        return [t for t, _, _ in self.terms(text, language)]

    def query_words(self, text: str, held: Collection[str] | None = None) -> list[str]:
        """A query's distinct terms (``held``: the languages of the collection's chunks, when the store knows).
        By language: a query whose language is told with confidence (:func:`languages.detect_query`, among
        ``held``) is stemmed and stopped as a chunk of that language is; otherwise (a word or two) each word
        becomes its stems in every way a chunk of ``held`` could have stemmed it (:func:`languages.candidates`),
        leaving out a way where the word is that language's stopword, and an English stopword altogether."""
        if not self.by_language:
            return list(dict.fromkeys(self.words(text)))
        out, plain = self._cut(text, frozenset())
        words = list(dict.fromkeys(t for (t, _, _), p in zip(out, plain, strict=True) if p))
        if not words:
            return list(dict.fromkeys(t for t, _, _ in out))
        told = languages.detect_query(text, held)
        variants: dict[str, list[str]] = {}
        for word in words:
            found: list[str] = []
            for code in [] if not told and word in self.stopwords else languages.candidates(word, told, held):
                if word not in (self.stopwords if code in ("en", "") else languages.stopwords(code)):
                    found.append(stemmer(languages.stemmed()[code]).stemWord(word) if code else word)
            variants[word] = found
        made: list[str] = []
        for (term, _, _), p in zip(out, plain, strict=True):
            made.extend(variants[term] if p else (term,))
        return list(dict.fromkeys(made))

    # -- runs --------------------------------------------------------------------------------------------------
    def _stemmed(self, text: str, stop: frozenset[str], algo: str | None) -> list[Term]:
        out, plain = self._cut(text, stop)
        words = [t for (t, _, _), p in zip(out, plain, strict=True) if p]
        if algo is None or not words:
            return out
        distinct = list(dict.fromkeys(words))
        stems = dict(zip(distinct, stemmer(algo).stemWords(distinct), strict=True))
        return [(stems.get(t, t), a, b) for t, a, b in out]

    def _cut(self, text: str, stop: frozenset[str]) -> tuple[list[Term], list[bool]]:
        """(every unstemmed term with its span, whether each is a plain word: to be stemmed); plain words in
        ``stop`` are left out."""
        out: list[Term] = []
        plain: list[bool] = []  # the plain words (not whole identifiers, not bigrams), stemmed later
        for run in (_ASCII_WORD if text.isascii() else _RUN).finditer(text):
            start, end = run.span()
            kind = run.lastgroup
            if kind == "word":  # (inline: the hot loop) an identifier's whole form is not stemmed, unless the
                for term, is_plain in _split_word(run.group()):  # same word also stands alone, as in version 1
                    if is_plain and term in stop:
                        continue
                    out.append((term, start, end))
                    plain.append(is_plain)
                continue
            if kind == "cjk":
                units = self._cjk_units(run.group(), start)
                if self.hangul_words and _HANGUL_SYLLABLE.match(run.group()):
                    made = _hangul_terms(units)
                else:
                    made = list(_bigrams(units))
            else:
                made = list(_bigrams(_clusters(run.group(), start)))
            out.extend(made)
            plain.extend([False] * len(made))
        return out, plain

    def _cjk_units(self, raw: str, start: int) -> list[Term]:
        """The characters of a CJK run, each NFKC-folded (and Han folded to Simplified), with its span."""
        norm = unicodedata.normalize("NFKC", raw)
        if len(norm) == len(raw):
            units = [(c, start + i, start + i + 1) for i, c in enumerate(norm)]
        else:  # half-width kana with a separate voiced mark, or a compatibility character (㍿ -> 株式会社)
            units = []
            for i, ch in enumerate(raw):
                folded = unicodedata.normalize("NFKC", ch)
                if units and folded in ("\u3099", "\u309a"):  # a voiced mark joins the kana before it
                    prev, a, _ = units[-1]
                    units[-1] = (unicodedata.normalize("NFC", prev + folded), a, start + i + 1)
                else:
                    units.append((folded, start + i, start + i + 1))
        if self.fold_han:
            units = [(u.translate(_FOLD_HAN), a, b) for u, a, b in units]
        return units


@lru_cache(maxsize=65536)
def _split_word(raw: str) -> tuple[tuple[str, bool], ...]:
    """The case-folded terms of a word run, each with whether it is a plain word (to be stemmed, or dropped as a
    stopword) rather than an identifier's whole form; NFKC-folded unless ASCII; words over the limit dropped."""
    out: list[tuple[str, bool]] = []
    pieces = [raw] if raw.isascii() else _WORD.findall(unicodedata.normalize("NFKC", raw))
    for word in pieces:
        if len(word) > MAX_TERM_CHARS:
            continue
        parts = [p for p in word.split("_") if p]
        camel = [piece for p in parts for piece in (_CAMEL.findall(p) if p.isascii() else [p])]
        if len(parts) > 1 or len(camel) > len(parts):
            out.append((word.casefold(), False))
            out.extend((p.casefold(), True) for p in camel)
        else:
            out.append((word.casefold(), True))
    return tuple(out)


# Korean particles (josa) and the commonest endings of 하다/되다 verbs, longest first: a Hangul word ending in one
# (with at least two syllables before it) also gives the word without it, so 데이터베이스는 gives 데이터베이스.
HANGUL_PARTICLES = tuple(sorted(
    """에서부터 으로부터 로부터 에서는 에서도 에게서 에게는 으로써 으로서 으로는 까지는 부터는 이라는 이라고 에서 에게
    한테 께서 으로 로써 로서 로는 부터 까지 마저 조차 처럼 보다 만큼 이나 이며 이고 라는 라고 하는 하고 하여 해서 한다
    합니다 된다 되는 되어 됩니다 와 과 은 는 이 가 을 를 의 에 로 도 만 나 랑 한 된 할 해""".split(),  # noqa: SIM905
    key=len, reverse=True))
HANGUL_COMPOUND = 5  # a stem this long also gives its bigrams (measured: 4 loses a man-page query, 5 and 6 tie)
_HANGUL_SYLLABLE = regex.compile(r"^[\uac00-\ud7a3]+$")


def _hangul_terms(units: list[Term]) -> list[Term]:
    """A Hangul word's (eojeol's) terms: the word, the word without its particle when it ends in one (with at
    least two syllables before it) and, when that stem has :data:`HANGUL_COMPOUND` syllables or more (likely a
    compound, 데이터베이스서버), the stem's bigrams."""
    word = "".join(u for u, _, _ in units)
    stem = word
    for particle in HANGUL_PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 2:
            stem = word[: len(word) - len(particle)]
            break
    n = len(stem)
    out = [(word, units[0][1], units[-1][2])]
    if n < len(word):
        out.append((stem, units[0][1], units[n - 1][2]))
    if n >= HANGUL_COMPOUND:
        out.extend(_bigrams(units[:n]))
    return out


def _clusters(raw: str, start: int) -> list[Term]:
    """The grapheme clusters of a run (a Thai consonant with its marks), NFKC-folded, with their spans."""
    out: list[Term] = []
    for m in _CLUSTER.finditer(raw):
        out.append((unicodedata.normalize("NFKC", m.group()), start + m.start(), start + m.end()))
    return out


def _bigrams(units: list[Term]) -> Iterator[Term]:
    """Overlapping pairs of units; a single unit as it is."""
    if len(units) == 1:
        yield units[0]
        return
    for (a, s, _), (b, _, e) in zip(units, units[1:]):  # noqa: B905 - one shorter on purpose
        yield a + b, s, e


# Version 1 (indexer <= 0.4): Python's ``re`` \w+ runs of the NFKC-folded text, the same folding, stopwords,
# identifiers and stemmer; no spans (its collections are only queried until their lexical side is rebuilt).
class WordsV1:
    """The analyzer of lexical version 1, kept to query collections made with it until they are rebuilt."""

    name = "python-words"
    version = "1"
    label = "python-words v1"

    def language(self, text: str) -> str:
        return "en"

    def query_words(self, text: str, held: Collection[str] | None = None) -> list[str]:
        return list(dict.fromkeys(self.words(text)))

    def words(self, text: str, language: str | None = None) -> list[str]:
        out: list[str] = []
        plain: list[str] = []
        for word in self._words(text):
            if word.startswith("!"):
                out.append(word[1:])
                continue
            folded = word.casefold()
            if folded in STOPWORDS:
                continue
            plain.append(folded)
            out.append(folded)
        if plain:
            stems = dict(zip(plain, stemmer("english").stemWords(plain), strict=True))
            out = [stems.get(t, t) for t in out]
        return out

    @staticmethod
    def _words(text: str) -> Iterator[str]:
        for match in _WORD_V1.finditer(unicodedata.normalize("NFKC", text)):
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
