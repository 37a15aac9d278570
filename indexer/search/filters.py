"""The filter language: one clause reader for every front end (CLI ``--where``, ``/search``'s ``where``, MCP, the
search page's where box).

A filter is a list of clauses, all of which a hit must meet. A clause is ``[not] FIELD OP VALUE``; how each
operator compares depends on the field's kind (text, date, number), the same on every front end:

=========  ============================================================================================
``=``      text: contains, any case (``sender=ada``; ``type=md`` is equality); a date: within the period
           (``date=2025-03``); a number: equal (``rows=5``)
``==``     text: the whole value, any case; a date: within the period; a number: equal.
           ``F==(a, b)``: equal to any of them
``!=``     has the field, with a value ``==`` would not match (``F!=(a, b)``: none of them)
``^=``     text: starts with, any case; ``path^=FOLDER``: the file or folder and everything under it
``~``      text: glob, any case (``path~*.md`` on the absolute or root-relative path; ``subject~*invoice*``)
``in``     any of a comma-separated list, each compared as ``=`` (``sender in ada,linus``: contains either;
           ``type in md,txt``; ``date in 2024-12,2025-01``); quote a value holding a comma
``< <= > >=``  dates and numbers (``size>10k``, ``modified>=2025-01-01``, ``date<2024``, ``modified>=-7d``);
           refused on a text field, naming it
=========  ============================================================================================

Paths: a value starting with ``/`` (or ``~``, the user's home) is absolute; any other is relative to the
collection's roots (``./docs`` and ``docs`` alike: the folder ``docs`` of any root), whichever front end sent it,
so a path means the same in the CLI, over HTTP and in MCP. ``..`` leaving a root is refused.

Fields: ``path``, ``type`` (extension or reader kind), ``modified`` (the file's modification time), ``size`` (bytes;
``k``, ``M``, ``G`` are powers of 1024) and any metadata or location name a reader recorded (``author``, ``title``,
``sender``, ``date``, ``sheet``, ``slide``...; ``indexer fields`` lists a collection's). Dates are ISO 8601
(``2025``, ``2025-03``, ``2025-03-14``, ``2025-03-14T09:30``, ``2025-03-14T09:30+01:00``), read as UTC unless they
carry an offset, or relative to now (``-36h``, ``-7d``, ``-2w``, ``-1y``). A period compares by its bounds:
``>=2025-03`` is from March 1st, ``<=2025-03`` up to the end of March, ``>2025-03`` from April 1st.

One text may hold several clauses (the page's where box, a ``--where`` value): they are split before each word
that starts a clause (``FIELD OP...``, ``FIELD in``, ``not FIELD...``) or at ``;``; any other word continues the
value before it, so ``title==Weekly notes not type=pdf`` is two clauses. Quote a value that holds ``;`` or a word
that looks like a clause (``subject="a=b c"``).

This module reads and checks the syntax (an :class:`~indexer.errors.InputError` naming the clause and the fix);
whether a field exists in a collection, and its kind, is checked where its fields are known
(:mod:`indexer.state.fields`).
"""

from __future__ import annotations

import csv
import json
import posixpath
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

from indexer.errors import InputError
from indexer.types import FILTER_OPS, MAX_CLAUSES, Clause

MAX_VALUES = 256  # items of one `in` list
MAX_CLAUSE_CHARS = 2048
MAX_FIELD_CHARS = 200

PATH, TYPE, MODIFIED, SIZE = "path", "type", "modified", "size"
BUILTIN_FIELDS = (PATH, TYPE, MODIFIED, SIZE)
RANGE_OPS = ("<", "<=", ">", ">=")
TEXT_OPS = ("=", "==", "!=", "^=", "~", "in")
TYPED_OPS = ("=", "==", "!=", "in", *RANGE_OPS)  # dates and numbers
_INT64 = 2**63 - 1

_FIELD = r"[A-Za-z_][\w.\-]*"
_OP = r"==|!=|<=|>=|\^=|=|<|>|~"
_CLAUSE = re.compile(
    rf"^\s*(?P<not>not\s+|!(?!=))?\s*(?P<field>{_FIELD})\s*"
    rf"(?P<op>{_OP}|\s+in\s+)\s*(?P<value>.*?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_STARTS = re.compile(rf"^!?{_FIELD}\s*(?:{_OP})", re.IGNORECASE)  # a word that opens a clause: sender=..., !type=..
_BARE = re.compile(rf"^{_FIELD}$")
_RELATIVE = re.compile(r"^-(\d{1,6})([hdwmy])$")
_SIZE = re.compile(r"^(\d{1,30}(?:\.\d{1,30})?)\s*([kmgt]?)(i?b)?$", re.IGNORECASE)
_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}
_SYNTAX = (
    "write FIELD OP VALUE, e.g. sender=ada, modified>=2025-01-01, sender in ada,linus, path~*.md, not type=pdf "
    "(operators: = == != ^= ~ in < <= > >=)"
)


class Value(NamedTuple):
    """One operand of a metadata clause, read every way the field's kind may need: its folded text, the number
    it reads as and the period it reads as (start, end in epoch seconds); the field's kind picks one."""

    text: str
    number: float | None
    start: float | None
    end: float | None


class PathValue(NamedTuple):
    """One operand of a ``path`` clause: the folded text as written (for ``=`` and ``~``), and the path it names,
    absolute or relative to a root (``rel``), folded, for ``==``, ``!=`` and ``^=`` (None: it names none)."""

    text: str
    path: str | None
    rel: bool


def check_clause_count(n: int) -> None:
    """The one check of a filter's size, whichever front end it came from (:data:`MAX_CLAUSES`)."""
    if n > MAX_CLAUSES:
        raise InputError(f"the filter has {n} clauses; the limit is {MAX_CLAUSES}: combine them (`in` lists) or "
                         "narrow it")


def show(text: Any, limit: int = 120) -> str:
    """A value quoted for a message: printable, cut at ``limit`` characters (no Python repr)."""
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    s = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in s)
    return "'" + (s if len(s) <= limit else s[:limit] + "…") + "'"


# -- reading ---------------------------------------------------------------------------------------------------
def parse(items: Iterable[Any]) -> tuple[Clause, ...]:
    """Clauses from texts (``"size>10k"``; one text may hold several clauses, :func:`split`), mappings
    (``{"field": ..., "op": ..., "value": ...}``, optionally ``"not": true``) or Clauses; at most
    :data:`MAX_CLAUSES`."""
    out: list[Clause] = []
    for item in items:
        if isinstance(item, Clause):
            out.append(item)
        elif isinstance(item, str):
            out += [parse_clause(piece) for piece in split(item)]
        elif isinstance(item, Mapping):
            out.append(_from_mapping(item))
        else:
            raise InputError(
                f"filter clause {show(item)} is neither text nor an object {{field, op, value, not}}; {_SYNTAX}"
            )
        check_clause_count(len(out))
    return tuple(out)


def split(text: str) -> list[str]:
    """The clauses of one text: split at ``;`` and before each word that opens a clause (outside quotes)."""
    _check_chars(text, text[:60])
    if len(text) > MAX_CLAUSE_CHARS * MAX_CLAUSES:
        raise InputError(f"a filter has {len(text):,} characters; the limit is {MAX_CLAUSE_CHARS * MAX_CLAUSES:,}")
    out: list[str] = []
    for segment in _outside_quotes(text, ";"):
        words = _words(segment)
        current: list[tuple[int, str]] = []
        for i, (pos, word) in enumerate(words):
            nxt = words[i + 1][1] if i + 1 < len(words) else ""
            after = words[i + 2][1] if i + 2 < len(words) else ""
            opens = bool(_STARTS.match(word)) or bool(_BARE.match(word)) and (
                nxt.lower() == "in" and bool(after) or bool(re.match(rf"^(?:{_OP})", nxt)))
            if word.lower() == "not" and (_STARTS.match(nxt) or _BARE.match(nxt) and (
                    after.lower() == "in" or re.match(rf"^(?:{_OP})", after))):
                opens = True
            if current and opens and _complete(segment, current, pos):
                out.append(segment[current[0][0]:pos].strip())
                current = []
            current.append((pos, word))
        if current:
            out.append(segment[current[0][0]:].strip())
    return [c for c in out if c]


def _complete(segment: str, words: list[tuple[int, str]], end: int) -> bool:
    m = _CLAUSE.match(segment[words[0][0]:end])
    return bool(m and m["value"].strip())


def _outside_quotes(text: str, sep: str) -> list[str]:
    parts, start, quote = [], 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'" and (i == 0 or not text[i - 1].isalnum()):
            quote = ch
        elif ch == sep:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _words(segment: str) -> list[tuple[int, str]]:
    """(position, word) of each run of non-space characters, a quoted part kept whole."""
    out, i, n = [], 0, len(segment)
    while i < n:
        if segment[i].isspace():
            i += 1
            continue
        start, quote = i, ""
        while i < n and (quote or not segment[i].isspace()):
            ch = segment[i]
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "\"'" and (i == start or not segment[i - 1].isalnum()):
                quote = ch
            i += 1
        out.append((start, segment[start:i]))
    return out


def _check_chars(text: str, where: str) -> None:
    for i, ch in enumerate(text):
        if ch in "\t\n\r":
            continue
        cat = unicodedata.category(ch)
        if cat == "Cs" or cat == "Cc":
            what = "a lone surrogate" if cat == "Cs" else "a control character"
            raise InputError(
                f"filter clause {show(where)} holds {what} (U+{ord(ch):04X} at character {i}); "
                "filters are plain text"
            )


def parse_clause(text: str) -> Clause:
    if len(text) > MAX_CLAUSE_CHARS:
        raise InputError(
            f"a filter clause has {len(text):,} characters ({show(text, 40)}); the limit is {MAX_CLAUSE_CHARS:,}"
        )
    _check_chars(text, text)
    m = _CLAUSE.match(text)
    if m is None:
        raise InputError(f"cannot read the filter clause {show(text.strip())}; {_SYNTAX}")
    op = m["op"].strip().lower()
    raw = m["value"]
    listed = op == "in" or (op in ("==", "!=") and _listed(raw))
    values = _split_list(raw) if listed else [_unquote(raw)]
    return make(m["field"], op, values, negate=bool(m["not"]), text=text.strip())


def _listed(raw: str) -> bool:
    raw = raw.strip()
    return raw.startswith("(") and raw.endswith(")")


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def _from_mapping(item: Mapping[str, Any]) -> Clause:
    shown = show(dict(item))
    unknown = sorted(str(k) for k in set(item) - {"field", "op", "value", "not"})
    if unknown or "field" not in item or "value" not in item:
        extra = f" (unknown: {', '.join(unknown)})" if unknown else ""
        raise InputError(f"filter object {shown} needs field, op and value (optional: not){extra}; {_SYNTAX}")
    field, op, value, negate = item["field"], item.get("op", "="), item["value"], item.get("not", False)
    if not isinstance(field, str) or not field.strip():
        raise InputError(f"filter object {shown}: field must be a field name such as sender, type or modified")
    if len(field) > MAX_FIELD_CHARS:
        raise InputError(f"filter object {show(field, 40)}: a field name has at most {MAX_FIELD_CHARS} characters")
    if not isinstance(op, str) or op.strip().lower() not in FILTER_OPS:
        raise InputError(f"filter object {shown}: op must be one of {' '.join(FILTER_OPS)}")
    op = op.strip().lower()
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, (str, int, float)) for v in values):
        raise InputError(f"filter object {shown}: value must be text, a number or a list of them")
    if len(values) > 1 and op not in ("in", "==", "!="):
        raise InputError(f"filter object {shown}: a list of values needs op in, == or !=")
    if not isinstance(negate, bool):
        raise InputError(f"filter object {shown}: not must be true or false")
    texts = [v if isinstance(v, str) else (str(int(v)) if float(v).is_integer() and abs(v) < 1e18 else repr(v))
             for v in values]
    for v in texts:
        _check_chars(v, v)
    joined = ",".join(texts)
    spaced = f" {op} " if op == "in" else op
    operand = joined if len(values) == 1 or op == "in" else f"({joined})"
    text = f"{'not ' if negate else ''}{field.strip()}{spaced}{operand}"
    return make(field, op, texts, negate=negate, text=text)


def make(field: str, op: str, values: Sequence[str], *, negate: bool = False, text: str = "") -> Clause:
    """A checked clause: the operator fits the field, each value parses as the field's type."""
    name = field.strip().lower()
    text = text or f"{name}{op}{','.join(values)}"
    if op not in FILTER_OPS:
        raise InputError(f"unknown operator {show(op)} in filter clause {show(text)}; {_SYNTAX}")
    cleaned = [v.strip() for v in values]
    if not cleaned or any(not v for v in cleaned):
        raise InputError(f"filter clause {show(text)} has no value; {_SYNTAX}")
    if len(cleaned) > MAX_VALUES:
        raise InputError(f"filter clause {show(text, 60)} lists {len(cleaned)} values; the limit is {MAX_VALUES}")
    if len(cleaned) > 1 and op not in ("in", "==", "!="):
        raise InputError(f"filter clause {show(text)}: a list of values needs in, == or !=")
    if name == MODIFIED:
        typed: list[Any] = _dates(cleaned, op, text)
    elif name == SIZE:
        typed = _sizes(cleaned, op, text)
    elif name == PATH:
        typed = _paths(cleaned, op, text)
    elif name == TYPE:
        typed = _types(cleaned, op, text)
    else:
        typed = [_metadata_value(v, op, text) for v in cleaned]
    return Clause(name, op, tuple(typed), negate, text)


# -- values ------------------------------------------------------------------------------------------------
def _split_list(raw: str) -> list[str]:
    raw = raw.strip()
    if raw.startswith("(") and raw.endswith(")"):
        raw = raw[1:-1]
    try:
        row = next(csv.reader([raw], skipinitialspace=True))
    except (csv.Error, StopIteration):
        row = []
    return [v.strip() for v in row]


def _types(values: list[str], op: str, text: str) -> list[str]:
    if op not in ("=", "==", "!=", "in"):
        raise InputError(f"type is text compared whole; filter clause {show(text)} needs = == != or in "
                         f"(e.g. type in md,pdf), not {op}")
    return [v.lower().lstrip(".") for v in values]


def _paths(values: list[str], op: str, text: str) -> list[PathValue]:
    if op in RANGE_OPS:
        raise InputError(f"path is text; filter clause {show(text)} needs = == != ^= ~ or in, not {op}")
    if op in ("==", "!=", "^="):
        return [PathValue(v.lower(), *_path_of(v, text)) for v in values]
    return [PathValue(v.lower(), None, False) for v in values]


def _path_of(value: str, text: str) -> tuple[str | None, bool]:
    """(the folded path a value names, relative to a root?): ``/x`` and ``~/x`` absolute, anything else relative
    to the collection's roots (``./docs`` = ``docs``; ``.`` = the roots themselves)."""
    v = value.replace("\\", "/") if "\\" in value and "/" not in value else value
    if v.startswith("~"):
        v = str(Path(v).expanduser())
    if v.startswith("/"):
        return posixpath.normpath(v).lower(), False
    rel = posixpath.normpath(v)
    if rel == ".." or rel.startswith("../"):
        raise InputError(
            f"filter clause {show(text)}: {show(value)} leaves the collection's roots; write an absolute path "
            "or one relative to a root (docs/notes.md)"
        )
    return ("" if rel == "." else rel).lower(), True


def _metadata_value(value: str, op: str, text: str) -> Value:
    number = _number(value)
    start: float | None
    end: float | None
    try:
        start, end = period(value)
    except InputError:
        start = end = None
    if op in RANGE_OPS and number is None and start is None:
        raise InputError(
            f"filter clause {show(text)} compares with {show(value)}, which is neither a number nor a date; ranges "
            "need one (e.g. pages>10, date>=2025-01-01)"
        )
    return Value(value.lower(), number, start, end)


def _dates(values: list[str], op: str, text: str) -> list[Any]:
    """``modified``: (start, end) in ns since the epoch of each value's period."""
    if op not in TYPED_OPS:
        raise InputError(f"modified is a date; filter clause {show(text)} needs = == != in < <= > or >=, not {op}")
    out: list[Any] = []
    for v in values:
        try:
            start, end = period(v)
        except InputError as exc:
            raise InputError(f"filter clause {show(text)}: {exc}") from None
        out.append((_ns(start, text), _ns(end, text)))
    return out


def _ns(seconds: float, text: str) -> int:
    n = int(seconds * 1_000_000_000)
    if abs(n) > _INT64:
        raise InputError(f"filter clause {show(text)}: the date is out of range (years 1678 to 2262 for modified)")
    return n


def _sizes(values: list[str], op: str, text: str) -> list[Any]:
    if op not in TYPED_OPS:
        raise InputError(f"size is a number of bytes; filter clause {show(text)} needs = == != in < <= > or >=, "
                         f"not {op}")
    out: list[Any] = []
    for v in values:
        m = _SIZE.match(v)
        if m is None:
            raise InputError(f"filter clause {show(text)}: {show(v)} is not a size; write bytes or 10k, 5M, 1G")
        n = float(m[1]) * 1024 ** "_kmgt".index((m[2] or "_").lower()) if m[2] else float(m[1])
        if n > _INT64:
            raise InputError(f"filter clause {show(text, 60)}: the size is out of range (at most 8 EiB, 2^63 bytes)")
        out.append((int(n), int(n)))
    return out


def _number(value: str) -> float | None:
    if len(value) > 64:
        return None
    try:
        n = float(value)
    except ValueError:
        return None
    return n if n == n and abs(n) != float("inf") else None


def period(value: str, now: float | None = None) -> tuple[float, float]:
    """(start, end) in seconds since the epoch of a date, a partial date (its whole year, month or day) or a
    relative time (``-7d``: from 7 days ago to now); InputError when it is none of them."""
    v = value.strip()
    problem = (f"{show(value)} is not a date; write 2025, 2025-03, 2025-03-14, 2025-03-14T09:30 (+01:00 for a "
               "time zone) or a relative time (-7d)")
    rel = _RELATIVE.match(v.lower())
    try:
        if rel:
            now = time.time() if now is None else now
            return now - int(rel[1]) * _UNITS[rel[2]], now
        if re.fullmatch(r"\d{4}(-\d{2}){0,2}", v):
            fmt, step = {4: ("%Y", "year"), 7: ("%Y-%m", "month"), 10: ("%Y-%m-%d", "day")}[len(v)]
            start = datetime.strptime(v, fmt).replace(tzinfo=timezone.utc)
            return start.timestamp(), _next(start, step).timestamp()
        if len(v) > 40 or not re.match(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}", v):
            raise InputError(problem)
        moment = datetime.fromisoformat(v.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        clock = re.match(r"^\d{4}-\d{2}-\d{2}[T ](\d{2})(:\d{2})?(:\d{2})?", v)
        assert clock is not None
        unit = timedelta(seconds=1) if clock[3] else timedelta(minutes=1) if clock[2] else timedelta(hours=1)
        return moment.timestamp(), (moment + unit).timestamp()
    except (ValueError, OverflowError):
        raise InputError(problem) from None


def _next(start: datetime, step: str) -> datetime:
    if step == "year":
        return start.replace(year=start.year + 1) if start.year < 9999 else start.replace(month=12, day=31, hour=23)
    if step == "month":
        return start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
    return start + timedelta(days=1)


# -- the legacy options as clauses ---------------------------------------------------------------------------
def legacy_clauses(path_glob: str | None, metadata: Sequence[tuple[str, str]]) -> tuple[Clause, ...]:
    """``path_glob`` and ``metadata`` pairs (``--path``, ``--meta``) in the filter language: ``path~GLOB`` and
    ``NAME=VALUE``: the same meaning as written as clauses (for a date or number field, the typed ``=``)."""
    out = [make(PATH, "~", [path_glob], text=f"path~{path_glob}")] if path_glob else []
    out += [make(name, "=", [value], text=f"{name}={value}") for name, value in metadata]
    return tuple(out)


def describe(clauses: Sequence[Clause]) -> str:
    return " and ".join(c.text or f"{c.field}{c.op}{','.join(map(str, c.values))}" for c in clauses)
