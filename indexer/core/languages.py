"""The language of a text: py3langid, its model inside the wheel (nothing is fetched at first use).

Indexing records each chunk's language in its payload (``lang``: an ISO 639-1 code, ``""`` when unknown); the
lexical analyzer stems and stops the chunk's words by it (:mod:`indexer.search.languages`). Chosen by measurement
against lingua-language-detector (docs/search.md, "Languages"): on the NAME lines of the yardstick's European man
pages (20-100 characters) both are right 91.3 % of the time, py3langid in 0.04 ms against 1.7 ms per line, in
4.4 MB against 96 MB installed, loaded in 0.5 s against 6 s. A text is detected from its first
:data:`SAMPLE_CHARS` characters; one with fewer than :data:`MIN_LETTERS` letters of Latin, Cyrillic or Greek
script (a CJK or Thai chunk, a table of numbers), or whose best language scores under :data:`MIN_CONFIDENCE`, is
unknown (``""``).
"""

from __future__ import annotations

import threading
from typing import Any

import regex

UNKNOWN = ""  # the language of a text that was not detected
SAMPLE_CHARS = 1000  # detection reads this many characters of a chunk
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
    if len(LETTER.findall(sample)) < min_letters:
        return UNKNOWN
    lang, confidence = model().classify(sample)
    return str(lang) if confidence >= min_confidence else UNKNOWN
