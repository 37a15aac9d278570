"""The filter language: one syntax for every front end (CLI ``--where``, ``/search``'s ``where``, MCP, the page).

A filter is a list of clauses, all of which a hit must meet. A clause is ``[not] FIELD OP VALUE``:

=========  ============================================================================================
``=``      text: contains, any case (``sender=ada``, the ``--meta`` meaning); a date: within the period
           (``modified=2025-03``); a number: equal
``==``     the whole value, any case (a number or date: equal / within the period)
``!=``     not ``==``
``^=``     starts with, any case; ``path^=FOLDER``: at or under that folder
``~``      glob (``path~*.md`` on the absolute or root-relative path; ``subject~*invoice*``)
``in``     any of a comma-separated list (``type in md,txt``; quote a value holding a comma)
``< <= > >=``  numbers and dates (``size>10k``, ``modified>=2025-01-01``, ``date<2024``, ``modified>=-7d``)
=========  ============================================================================================

Fields: ``path``, ``type`` (extension or reader kind), ``modified`` (the file's modification time), ``size`` (bytes;
``k``, ``M``, ``G`` are powers of 1024) and any metadata or location name a reader recorded (``author``, ``title``,
``sender``, ``date``, ``sheet``, ``slide``...; ``indexer fields`` lists a collection's). Dates are ISO 8601
(``2025``, ``2025-03``, ``2025-03-14``, ``2025-03-14T09:30``), read as UTC unless they carry an offset, or
relative to now (``-36h``, ``-7d``, ``-2w``, ``-1y``). A period compares by its bounds: ``>=2025-03`` is from
March 1st, ``<=2025-03`` up to the end of March, ``>2025-03`` from April 1st.

This module parses and checks the syntax (an :class:`~indexer.errors.InputError` naming the clause and the fix);
whether a field exists in a collection is checked where its fields are known (:mod:`indexer.state.fields`).
"""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from indexer.errors import InputError
from indexer.types import FILTER_OPS, Clause

MAX_CLAUSES = 32
MAX_VALUES = 256  # items of one `in` list
MAX_CLAUSE_CHARS = 2048

PATH, TYPE, MODIFIED, SIZE = "path", "type", "modified", "size"
BUILTIN_FIELDS = (PATH, TYPE, MODIFIED, SIZE)
RANGE_OPS = ("<", "<=", ">", ">=")

_CLAUSE = re.compile(
    r"^\s*(?P<not>not\s+|!(?!=))?\s*(?P<field>[A-Za-z_][\w.\-]*)\s*"
    r"(?P<op>==|!=|<=|>=|\^=|=|<|>|~|\s+in\s+)\s*(?P<value>.*?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_RELATIVE = re.compile(r"^-(\d{1,6})([hdwmy])$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?$", re.IGNORECASE)
_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}
_SYNTAX = (
    "write FIELD OP VALUE, e.g. sender=ada, modified>=2025-01-01, type in md,txt, path~*.md, not type=pdf "
    "(operators: = == != ^= ~ in < <= > >=)"
)


def parse(items: Iterable[Any]) -> tuple[Clause, ...]:
    """Clauses from strings (``"size>10k"``), mappings (``{"field": ..., "op": ..., "value": ...}``, optionally
    ``"not": true``) or Clauses; at most :data:`MAX_CLAUSES`."""
    out = []
    for item in items:
        if isinstance(item, Clause):
            out.append(item)
        elif isinstance(item, str):
            out.append(parse_clause(item))
        elif isinstance(item, Mapping):
            out.append(_from_mapping(item))
        else:
            raise InputError(f"filter clause {item!r} is neither text nor an object; {_SYNTAX}")
        if len(out) > MAX_CLAUSES:
            raise InputError(f"the filter has more than {MAX_CLAUSES} clauses; combine them (`in` lists) or narrow it")
    return tuple(out)


def parse_clause(text: str) -> Clause:
    if len(text) > MAX_CLAUSE_CHARS:
        raise InputError(f"a filter clause has {len(text)} characters; the limit is {MAX_CLAUSE_CHARS}")
    m = _CLAUSE.match(text)
    if m is None:
        raise InputError(f"cannot read the filter clause {text.strip()!r}; {_SYNTAX}")
    op = m["op"].strip().lower()
    raw = m["value"]
    values = _split_list(raw) if op == "in" else [raw]
    return make(m["field"], op, values, negate=bool(m["not"]), text=text.strip())


def _from_mapping(item: Mapping[str, Any]) -> Clause:
    unknown = sorted(set(item) - {"field", "op", "value", "not"})
    if unknown or "field" not in item:
        raise InputError(f"filter object {dict(item)!r} needs field, op and value (optional: not); {_SYNTAX}")
    op = str(item.get("op", "=")).strip().lower()
    value = item.get("value")
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if any(v is None or isinstance(v, (dict, list)) for v in values):
        raise InputError(f"filter object {dict(item)!r} needs a text or number value")
    negate = item.get("not", False)
    if not isinstance(negate, bool):
        raise InputError(f"'not' in filter object {dict(item)!r} must be true or false")
    text = f"{'not ' if negate else ''}{item['field']}{op if op != 'in' else ' in '}{','.join(map(str, values))}"
    return make(str(item["field"]), op, [str(v) for v in values], negate=negate, text=text)


def make(field: str, op: str, values: Sequence[str], *, negate: bool = False, text: str = "") -> Clause:
    """A checked clause: the operator fits the field, each value parses as the field's type."""
    name = field.strip().lower()
    text = text or f"{name}{op}{','.join(values)}"
    if op not in FILTER_OPS:
        raise InputError(f"unknown operator {op!r} in filter clause {text!r}; {_SYNTAX}")
    cleaned = [v.strip() for v in values]
    if not cleaned or any(not v for v in cleaned):
        raise InputError(f"filter clause {text!r} has no value; {_SYNTAX}")
    if len(cleaned) > MAX_VALUES:
        raise InputError(f"filter clause {text!r} lists {len(cleaned)} values; the limit is {MAX_VALUES}")
    if name == MODIFIED:
        typed = _dates(cleaned, op, text, scale=1_000_000_000)
    elif name == SIZE:
        typed = _sizes(cleaned, op, text)
    elif name in (PATH, TYPE):
        typed = _texts(name, cleaned, op, text)
    else:
        typed = _metadata(cleaned, op, text)
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


def _texts(name: str, values: list[str], op: str, text: str) -> list[str]:
    if op in RANGE_OPS:
        raise InputError(f"{name} is text; filter clause {text!r} needs = == != ^= ~ or in, not {op}")
    if name == TYPE:
        if op in ("^=", "~"):
            raise InputError(f"type takes = == != or in (e.g. type in md,pdf), not {op} in {text!r}")
        return [v.lower().lstrip(".") for v in values]
    if op == "^=":
        return [str(Path(v).expanduser().resolve()) if (v.startswith(("/", "~", "."))) else v for v in values]
    return values


def _metadata(values: list[str], op: str, text: str) -> list[Any]:
    if op not in RANGE_OPS:
        return [v.lower() for v in values]
    # (number, period start, period end): "2025" is both; the field's kind in the collection decides which applies
    value = values[0]
    number = _number(value)
    try:
        start, end = period(value)
    except InputError:
        if number is None:
            raise InputError(
                f"filter clause {text!r} compares with {value!r}, which is neither a number nor a date; ranges need "
                "one (e.g. pages>10, date>=2025-01-01)"
            ) from None
        return [number, None, None]
    return [number, start, end]


def _dates(values: list[str], op: str, text: str, *, scale: int) -> list[Any]:
    if op in ("^=", "~", "in"):
        raise InputError(f"modified is a date; filter clause {text!r} needs = != < <= > or >=, not {op}")
    try:
        start, end = period(values[0])
    except InputError as exc:
        raise InputError(f"filter clause {text!r}: {exc}") from None
    return [int(start * scale), int(end * scale)]


def _sizes(values: list[str], op: str, text: str) -> list[Any]:
    if op in ("^=", "~", "in"):
        raise InputError(f"size is a number of bytes; filter clause {text!r} needs = != < <= > or >=, not {op}")
    m = _SIZE.match(values[0])
    if m is None:
        raise InputError(f"filter clause {text!r}: {values[0]!r} is not a size; write bytes or 10k, 5M, 1G")
    n = float(m[1]) * 1024 ** "_kmgt".index((m[2] or "_").lower()) if m[2] else float(m[1])
    return [int(n), int(n)]


def _number(value: str) -> float | None:
    try:
        n = float(value)
    except ValueError:
        return None
    return n if n == n and abs(n) != float("inf") else None


def period(value: str, now: float | None = None) -> tuple[float, float]:
    """(start, end) in seconds since the epoch of a date, a partial date (its whole year, month or day) or a
    relative time (``-7d``: from 7 days ago to now); InputError when it is none of them."""
    v = value.strip()
    rel = _RELATIVE.match(v.lower())
    if rel:
        now = time.time() if now is None else now
        return now - int(rel[1]) * _UNITS[rel[2]], now
    for fmt, step in (("%Y", "year"), ("%Y-%m", "month"), ("%Y-%m-%d", "day")):
        if not re.fullmatch(r"\d{4}(-\d{2}){0,2}", v):
            break
        try:
            start = datetime.strptime(v, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        return start.timestamp(), _next(start, step).timestamp()
    try:
        moment = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{value!r} is not a date; write 2025, 2025-03, 2025-03-14, 2025-03-14T09:30 or a relative time (-7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    unit = timedelta(seconds=1) if moment.second or ":" in v[16:] else timedelta(minutes=1)
    return moment.timestamp(), (moment + unit).timestamp()


def _next(start: datetime, step: str) -> datetime:
    if step == "year":
        return start.replace(year=start.year + 1)
    if step == "month":
        return start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
    return start + timedelta(days=1)


# -- the legacy options as clauses ---------------------------------------------------------------------------
def legacy_clauses(path_glob: str | None, metadata: Sequence[tuple[str, str]]) -> tuple[Clause, ...]:
    """``path_glob`` and ``metadata`` pairs (``--path``, ``--meta``) in the filter language: ``path~GLOB`` and
    ``NAME=VALUE`` (contains, any case): the same meaning as before, now evaluated inside the engine."""
    out = [make(PATH, "~", [path_glob], text=f"path~{path_glob}")] if path_glob else []
    out += [make(name, "=", [value], text=f"{name}={value}") for name, value in metadata]
    return tuple(out)


def describe(clauses: Sequence[Clause]) -> str:
    return " and ".join(c.text or f"{c.field}{c.op}{','.join(map(str, c.values))}" for c in clauses)
