"""The language of a text: py3langid, its model inside the wheel (nothing is fetched at first use).

Indexing records each chunk's language in its payload (``lang``: an ISO 639-1 code, ``""`` when unknown); the
lexical analyzer stems and stops the chunk's words by it (:mod:`indexer.search.languages`). Chosen by measurement
against lingua-language-detector (docs/search.md, "Languages"): on the NAME lines of the yardstick's European man
pages (20-100 characters) both are right 91.3 % of the time, py3langid in 0.04 ms against 1.7 ms per line, in
4.4 MB against 96 MB installed, loaded in 0.5 s against 6 s. A text is detected from its first
:data:`SAMPLE_CHARS` characters; one with fewer than :data:`MIN_LETTERS` letters of Latin, Cyrillic or Greek
script (a table of numbers), or whose letters are mostly of other scripts (a CJK or Thai chunk: its few Latin
words get English stems either way), or whose best language scores under :data:`MIN_CONFIDENCE`, is unknown
(``""``). Cost: about 0.3 ms for a 1,000-character European chunk (the detector walks its UTF-8 bytes).
"""

from __future__ import annotations

import threading
from typing import Any

import regex

UNKNOWN = ""  # the language of a text that was not detected
SAMPLE_CHARS = 1000  # detection reads this many characters of a chunk (600 lost German, Dutch and Polish queries)
MIN_SHARE = 0.5  # a text whose letters are mostly of other scripts (CJK, Thai) is not detected
MIN_LETTERS = 12  # fewer letters of spaced scripts than this: unknown
MIN_CONFIDENCE = 0.5  # py3langid's normalized probability below this: unknown
LETTER = regex.compile(r"[\p{Latin}\p{Cyrillic}\p{Greek}]")
_lock = threading.Lock()
_identifier: Any = None


def model() -> Any:
    """py3langid's identifier (loaded once, about 0.5 s), its probabilities normalized."""
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def detect(text: str, min_letters: int = MIN_LETTERS, min_confidence: float = MIN_CONFIDENCE) -> str:
    """The ISO 639-1 code of ``text``'s language, else :data:`UNKNOWN`."""
    sample = text[:SAMPLE_CHARS]
    spaced = len(LETTER.findall(sample))
    if spaced < min_letters or spaced < MIN_SHARE * sum(1 for ch in sample if ch.isalpha()):
        return UNKNOWN  # its Latin words are stemmed as English whatever it is (indexer.search.languages)
    lang, confidence = model().classify(sample)
    return str(lang) if confidence >= min_confidence else UNKNOWN
