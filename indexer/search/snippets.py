"""A hit's snippet: the passage of its chunk around what matched the query, and the words that matched.

One function for every front end (the CLI line, MCP's compact answer, ``snippet``/``marks`` in /search): the
words are matched as the lexical index matches them: the terms and their spans come from the analyzer
(:data:`indexer.search.lexical.ANALYZER`: the same word boundaries, stopwords and stemmer, and the same CJK and Thai
bigrams), so "mutations" marks "mutation", "the" marks nothing and 预算 is marked inside 项目预算 (overlapping
bigram matches make one mark). The window of ``width`` characters holding the most distinct query terms is
chosen, starting a little before its first match; a hit that shares no term with the query (a dense-only match)
shows the chunk's opening. Cost: one pass of the analyzer over the chunk per hit, each distinct word split once
per process (a cache): measured 0.23 ms for a 1,500-character English chunk (0.18 ms with version 1's per-word
terms), 0.5 ms for a Chinese one.
"""

from __future__ import annotations

import bisect
import re

from indexer.search.lexical import ANALYZER, query_terms

WIDTH = 240
LEAD = 40  # characters of context kept before the first match


def matches(text: str, query: str) -> list[tuple[int, int, str]]:
    """(start, end, term) of each span of ``text`` that matches a term of ``query`` (a word, or the characters of
    matching bigrams; overlapping matches merged into one, named by its first term)."""
    wanted = set(query_terms(query))
    if not wanted:
        return []
    out: list[tuple[int, int, str]] = []
    for term, a, b in ANALYZER.terms(text):
        if term not in wanted:
            continue
        if out and a < out[-1][1]:  # the next bigram of a run, or another term of the same word
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b, out[-1][2])
            continue
        out.append((a, b, term))
    return out


def without_shown_headings(text: str, shown: str) -> str:
    """``text`` without its leading Markdown heading lines whose title the hit's line already shows (a slide
    title, a mail subject or a sheet name in the locator) and header lines whose value it shows (a mail's sender
    and day), so the snippet does not repeat them; ``text`` itself when nothing else would be left."""
    lines = text.split("\n")
    folded = shown.casefold()
    start = 0
    while start < len(lines):
        line = lines[start].strip()
        title = line.lstrip("#").strip()
        heading = line.startswith("#") and bool(title) and title.casefold() in folded
        if not line or heading or _shown_field(line, folded):
            start += 1
        else:
            break
    rest = "\n".join(lines[start:])
    return rest if rest.strip() else text


_FIELD = re.compile(r"^(from|to|cc|date|sender|subject|title|sheet): (.+)$", re.IGNORECASE)


def _shown_field(line: str, shown: str) -> bool:
    """A header line (``From: ...``, ``Date: 2026-03-03T09:30``) whose value the hit's locator already shows (a
    date by its day), or a message's recipients when the locator names the message."""
    m = _FIELD.match(line)
    if not m:
        return False
    name, value = m.group(1).lower(), m.group(2).strip().casefold()
    if name in ("to", "cc"):  # a message's recipients, between its sender and date: the viewer shows them
        return " — " in shown or "message" in shown
    return value in shown or (m.group(1).lower() == "date" and value[:10] in shown)


def matched_lines(text: str, query: str) -> set[int]:
    """The indexes of the lines of ``text`` (split on ``\n``) matching the most distinct terms of ``query``
    (so a word every line shares, such as a column name, does not pick them all when one line has more)."""
    found: dict[int, set[str]] = {}
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    for a, _, term in matches(text, query):
        found.setdefault(bisect.bisect_right(starts, a) - 1, set()).add(term)
    best = max((len(t) for t in found.values()), default=0)
    return {line for line, t in found.items() if len(t) == best}


def passage_marks(text: str, query: str, first_line: int = 1, last_line: int | None = None) -> list[tuple[int, int]]:
    """[start, end) offsets in ``text`` of the words matching ``query`` (as :func:`matches` matches them) on
    lines ``first_line``..``last_line`` (1-based, inclusive; None: to the end): the file viewer's marks for a hit."""
    lines = text.split("\n")
    first = max(1, first_line)
    last = len(lines) if last_line is None else min(len(lines), last_line)
    if first > last:
        return []
    start = sum(len(line) + 1 for line in lines[: first - 1])
    end = start + sum(len(line) + 1 for line in lines[first - 1 : last]) - 1
    return [(start + a, start + b) for a, b, _ in matches(text[start:end], query)]


def snippet(text: str, query: str, width: int = WIDTH) -> tuple[str, list[tuple[int, int]]]:
    """(passage, marks): at most ``width`` characters of ``text`` (whitespace folded, '…' where cut) around the
    best-matching span, and the [start, end) of each matching word inside the passage."""
    flat = " ".join(text.split())
    found = matches(flat, query)
    start = _best_start(found, width) if found else 0
    if start > 0:
        space = flat.rfind(" ", 0, start)
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    prefix, suffix = ("…" if start > 0 else ""), ("…" if end < len(flat) else "")
    marks = [(a - start + len(prefix), b - start + len(prefix)) for a, b, _ in found if a >= start and b <= end]
    return f"{prefix}{flat[start:end]}{suffix}", marks


def _best_start(found: list[tuple[int, int, str]], width: int) -> int:
    """The start of the window (LEAD characters before a match) holding the most distinct terms, then matches."""
    best, best_key = 0, (-1, -1)
    for i, (a, _, _) in enumerate(found):
        inside = [f for f in found[i:] if f[1] <= a + width - LEAD]
        key = (len({f[2] for f in inside}), len(inside))
        if key > best_key:
            best, best_key = a, key
    return max(0, best - LEAD)

