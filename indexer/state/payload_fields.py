"""What a point's payload carries for the filter language, so that a store that filters on payloads (Qdrant) can
answer every clause without the state database: a stateless search worker (docs/deploy.md#stateless-workers).

The writer (:mod:`indexer.index.pipeline`) adds three keys to each point of such a store, beside the payload the
point's id covers (none of them is part of its fingerprint, so adding them re-writes no point):

``filter`` (:func:`filter_payload`, version ``v`` = :data:`VERSION`; made from what the state's ``chunk_fields``
rows are made of, by the same function, so both evaluators see the same values):

* ``p``, ``pr``: the absolute path folded to lower case, and reversed (a glob's suffix is a prefix of the
  reversed text); ``rp``, ``rpr``: the same of the path relative to its root;
* ``folder``: the ``folder`` facet's value; ``names``: the metadata and location names the chunk has, and
  ``#NAME`` / ``@NAME`` for those whose value reads as a number / a date (a field's kind is decided by most of its
  values: one facet call counts all three; a name never starts with ``#`` or ``@``);
* ``t``, ``tr``, ``n``, ``m``: per name (:func:`key`), the value folded (cut at 512 characters), reversed, its
  number (dates as seconds since the epoch) and that number's month (``YYYY-MM``, UTC: a date field's facet
  counts by month, as the state's does).

``stat`` (:func:`stat_payload`): ``s`` and ``ns``, the file's modification time in whole seconds and the
nanoseconds beyond (two integers: a 64-bit float would round a nanosecond time by up to 256 ns), ``size`` in
bytes and ``month`` (the ``modified`` facet's value). A ``touch`` sets it anew on the file's points
(``set_payload``), re-embedding nothing.

``uncommitted``: true from the upsert of a point until the state commits its file (then removed): a worker never
returns a point a writer has not committed (a large file mid-write is seen as its previous version), as the
state's ``pending`` table does for the writer's own searches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from indexer.state.field_values import chunk_values, field_rows
from indexer.state.sql_functions import folder, month

FILTER = "filter"
# The filter payload's version (``filter.v``): a point without it is filled again by the writer's backfill
# (from its stored payload and the state's file records, nothing re-embedded). 2: the month keys ``m``.
VERSION = 2
CURRENT = f"{FILTER}.v"
STAT = "stat"
UNCOMMITTED = "uncommitted"
KEYS = (FILTER, STAT, UNCOMMITTED)  # never part of a point's id

# the payload indexes a store creates for them (name -> keyword, integer, bool)
# Each payload index costs about 2 MB of disk per segment whatever the points (qdrant-edge 0.9, measured on a
# tmpfs), so only what a worker's filters and facets need is indexed (an unindexed condition costs ~2 us a point:
# 9 ms a search at 5,000 points); ``stat.ns`` is read only beside an exact ``stat.s`` match.
KEYWORD_INDEXES = ("filter.p", "filter.pr", "filter.rp", "filter.rpr", "filter.folder", "filter.names", "stat.month")
INTEGER_INDEXES = ("stat.s", "stat.size")
MAX_FIELD_INDEXES = 8  # metadata fields indexed (the first the writer meets); any other is filtered unindexed
NUMBER, DATE = "#", "@"  # filter.names entries of a field whose value reads as a number, a date
BOOL_INDEXES = (UNCOMMITTED,)



def field_index_keys(name: str) -> dict[str, str]:
    """The payload indexes of metadata field ``name`` (key -> schema): its folded text (keyword: equal, prefix,
    substring, and its facet), its number (float: ranges). Its reversed text (a glob's suffix) is not indexed.
    ``@NAME`` (the field has values that read as dates): its months (keyword: its facet by month)."""
    if name.startswith(DATE):
        return {f"filter.m.{key(name[1:])}": "keyword"}
    if name.startswith(NUMBER):
        return {}
    k = key(name)
    return {f"filter.t.{k}": "keyword", f"filter.n.{k}": "float"}


def month_of(seconds: float) -> str | None:
    """The month (``YYYY-MM``, UTC) of a time in seconds since the epoch: SQLite's ``strftime('%Y-%m', s,
    'unixepoch')``, which the state's facet of a date field groups by; None out of the years 1-9999."""
    try:
        moment = EPOCH + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None
    return f"{moment.year:04d}-{moment.month:02d}"


def capped(extra: dict[str, str], have: set[str]) -> dict[str, str]:
    """Of ``extra`` (metadata fields' index keys), those to create beside the indexed keys ``have``: the fields
    already indexed, and new fields while fewer than :data:`MAX_FIELD_INDEXES` are."""
    indexed = {k.split(".", 2)[2] for k in have if k.startswith("filter.t.")}
    out: dict[str, str] = {}
    for k, schema in extra.items():
        field = k.split(".", 2)[2]
        if field not in indexed and len(indexed) >= MAX_FIELD_INDEXES:
            continue
        indexed.add(field)
        if k not in have:
            out[k] = schema
    return out


# facets a store answers from its payload indexes: the facet's name -> the payload key
FACET_KEYS = {"type": "file_type", "folder": "filter.folder", "modified": "stat.month"}

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
NS = 1_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def key(name: str) -> str:
    """The key of metadata field ``name`` under ``filter.t``/``tr``/``n``: the name itself when it is a plain
    identifier, else ``_x`` and its UTF-8 bytes in hex (a ``.`` or ``-`` would read as a path in a payload key)."""
    return name if _PLAIN.match(name) else "_x" + name.encode("utf-8").hex()


def filter_payload(path: str, root: str, values: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The ``filter`` payload of one chunk of file ``path`` under ``root`` with metadata and location ``values``
    (:func:`indexer.state.field_values.chunk_values`)."""
    folded = path.lower()
    out: dict[str, Any] = {"v": VERSION, "p": folded, "pr": folded[::-1], "folder": folder(path, root)}
    base = root.rstrip("/")
    if root and path.startswith(base + "/"):
        rel = path[len(base) + 1:].lower()
        out["rp"], out["rpr"] = rel, rel[::-1]
    names: list[str] = []
    kinds: list[str] = []
    t: dict[str, str] = {}
    tr: dict[str, str] = {}
    n: dict[str, float] = {}
    m: dict[str, str] = {}
    for _pid, name, _value, text, num, kind in field_rows("", values):
        names.append(name)
        k = key(name)
        t[k], tr[k] = text, text[::-1]
        if num is not None:
            n[k] = num
            when = month_of(num)
            if when is not None:
                m[k] = when
        if kind in ("number", "date"):
            kinds.append((NUMBER if kind == "number" else DATE) + name)
    out.update(names=names + kinds, t=t, tr=tr, n=n, m=m)
    return out


def payload_filter_values(payload: dict[str, Any]) -> list[tuple[str, Any]]:
    """A stored payload's metadata and location values (for a backfill of points written before these keys)."""
    return chunk_values(payload)


def stat_payload(mtime_ns: int, size: int) -> dict[str, Any]:
    """The ``stat`` payload of a file's chunks."""
    seconds, rest = divmod(int(mtime_ns), NS)
    return {"s": seconds, "ns": rest, "size": int(size), "month": month(int(mtime_ns))}
