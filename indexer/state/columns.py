"""A collection's chunks as arrays in memory, kept until the state database changes: filters as masks, facets as
counts.

:class:`Columns` holds one collection's chunks in rowid order (each one's point id and file) as read once per state
of the database (its change mark: any commit, by any process, makes a new one). A filter's parts (each clause, the
path prefix, the types: :attr:`indexer.state.fields.Where.parts`) are each evaluated once by their own SQL into a
boolean mask over those chunks, and kept: a filter is the AND of its parts' masks (numpy), its matches are the
chunks set there, listed once (a frozenset, kept with the mask), and a search's candidates are checked against that
set. Facets are counts of value codes among the mask (``np.bincount``), each code computed once per state: a file's
``type``, ``folder`` and month by the same functions the SQL calls, a metadata field's values grouped as the SQL
groups them (folded, shown as the smallest value as written; a date field by month).

The results are the SQL's by construction: each part is the SQL of :mod:`indexer.state.fields` (a part that SQL
reads as NULL keeps no chunk, as in its WHERE), and parts are only ANDed. Collections of more than
:data:`MAX_CHUNKS` chunks are not held (their filters run in the state database as before).
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from indexer.state.sql_functions import file_type, folder, month

MAX_CHUNKS = 250_000  # a collection held in memory at most this big (~25 MB of point ids at 100 bytes each)
MAX_MASK_BYTES = 64 << 20  # the masks kept per collection, all together
FACET_VALUES = 20
BUILTIN_FACETS = ("type", "folder", "modified")

_JOIN = "FROM chunks c JOIN files f ON f.collection = c.collection AND f.path = c.path"
Part = tuple[str, tuple[Any, ...]]


class Columns:
    """One collection's chunks at one state of the database (:mod:`indexer.state.columns`). Not thread-safe:
    its owner (:class:`indexer.state.fields.FieldIndex`) calls it under the state's lock."""

    def __init__(self, db: sqlite3.Connection, collection: str) -> None:
        self._db = db
        self.collection = collection
        rows = db.execute(f"SELECT c.rowid, c.point_id, f.rowid {_JOIN} WHERE c.collection = ? ORDER BY c.rowid",
                          (collection,)).fetchall()
        self.size = len(rows)
        self.rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=self.size)
        self.point_ids = [r[1] for r in rows]
        self._file_rowids = np.fromiter((r[2] for r in rows), dtype=np.int64, count=self.size)
        self._parts: OrderedDict[Part, np.ndarray] = OrderedDict()
        self._filters: OrderedDict[tuple[Part, ...], tuple[np.ndarray, int, list[frozenset[str]]]] = OrderedDict()
        self._codes: dict[tuple[str, str], tuple[np.ndarray, list[Any]]] = {}
        self._fields: dict[str, tuple[np.ndarray, np.ndarray, list[str], list[str | None]]] = {}
        self._max_masks = max(8, MAX_MASK_BYTES // max(self.size, 1))

    # -- filters ---------------------------------------------------------------------------------------------
    def _part(self, part: Part) -> np.ndarray:
        mask = self._parts.get(part)
        if mask is None:
            sql, args = part
            found = self._db.execute(f"SELECT c.rowid {_JOIN} WHERE c.collection = ? AND {sql}",
                                     (self.collection, *args)).fetchall()
            mask = np.zeros(self.size, dtype=bool)
            if found:
                mask[np.searchsorted(self.rowids, np.fromiter((r[0] for r in found), dtype=np.int64))] = True
            self._keep(self._parts, part, mask)
        else:
            self._parts.move_to_end(part)
        return mask

    def _keep(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        cache[key] = value
        while len(cache) > self._max_masks:
            cache.popitem(last=False)

    def _filter(self, parts: Sequence[Part]) -> tuple[np.ndarray, int, list[frozenset[str]]]:
        key = tuple(parts)
        entry = self._filters.get(key)
        if entry is None:
            mask = np.ones(self.size, dtype=bool)
            for part in parts:
                mask &= self._part(part)
            entry = (mask, int(mask.sum()), [])
            self._keep(self._filters, key, entry)
        else:
            self._filters.move_to_end(key)
        return entry

    def count(self, parts: Sequence[Part]) -> int:
        """How many of the collection's chunks the filter of ``parts`` matches (exact)."""
        return self._filter(parts)[1]

    def matching(self, parts: Sequence[Part]) -> frozenset[str]:
        """The point ids the filter of ``parts`` matches: listed once per state, then the same set."""
        mask, _, listed = self._filter(parts)
        if not listed:
            listed.append(frozenset(self.point_ids[i] for i in np.flatnonzero(mask).tolist()))
        return listed[0]

    # -- facets ----------------------------------------------------------------------------------------------
    def facets(self, parts: Sequence[Part], names: Sequence[str], kinds: Mapping[str, str]
               ) -> dict[str, list[tuple[str, int]]]:
        """Counts per value among the matches, the commonest 20 first (ties by value): as
        :meth:`indexer.state.fields.FieldIndex.facets` counts them in SQL."""
        mask = self._filter(parts)[0]
        out: dict[str, list[tuple[str, int]]] = {}
        for name in names:
            if name in BUILTIN_FACETS:
                codes, values = self._file_codes(name)
                counts = np.bincount(codes[mask], minlength=len(values))
                pairs = [(str(values[i]), int(counts[i])) for i in np.flatnonzero(counts).tolist()]
                out[name] = sorted(pairs, key=lambda vn: (-vn[1], vn[0]))[:FACET_VALUES]
            else:
                out[name] = self._field_facet(name, mask, kinds.get(name) == "date")
        return out

    def _file_codes(self, name: str) -> tuple[np.ndarray, list[Any]]:
        """Each chunk's code of its file's ``name`` value (type, folder, month) and the values by code."""
        key = ("file", name)
        known = self._codes.get(key)
        if known is None:
            files = self._db.execute("SELECT rowid, path, kind, root, mtime_ns FROM files WHERE collection = ? "
                                     "ORDER BY rowid", (self.collection,)).fetchall()
            of: Callable[[tuple[Any, ...]], str] = {
                "type": lambda r: file_type(r[1], r[2]), "folder": lambda r: folder(r[1], r[3]),
                "modified": lambda r: month(r[4])}[name]
            values: dict[str, int] = {}
            per_file = np.fromiter((values.setdefault(of(r), len(values)) for r in files), dtype=np.int64,
                                   count=len(files))
            file_rowids = np.fromiter((r[0] for r in files), dtype=np.int64, count=len(files))
            codes = per_file[np.searchsorted(file_rowids, self._file_rowids)] if len(files) else per_file
            known = self._codes[key] = (codes, list(values))
        return known

    def _field_facet(self, name: str, mask: np.ndarray, by_month: bool) -> list[tuple[str, int]]:
        """A metadata field's facet: its rows among the matches grouped by folded value (shown as the smallest
        value as written among them) or, for a date field, by month (rows with a number only)."""
        positions, groups, shown, months = self._field(name)
        chosen = mask[positions]
        if by_month:
            counts: dict[str | None, int] = {}
            for i in np.flatnonzero(chosen).tolist():
                if months[i] != _NO_NUMBER:
                    counts[months[i]] = counts.get(months[i], 0) + 1
            ranked = sorted(counts.items(), key=lambda vn: (-vn[1], vn[0] is not None, vn[0] or ""))
            return [(str(v), int(n)) for v, n in ranked[:FACET_VALUES]]
        picked = groups[chosen]
        if not len(picked):
            return []
        counts_by = np.bincount(picked)
        smallest: dict[int, str] = {}
        for g, value in zip(picked.tolist(), (shown[i] for i in np.flatnonzero(chosen).tolist()), strict=True):
            if g not in smallest or value < smallest[g]:
                smallest[g] = value
        ranked_groups = sorted(smallest, key=lambda g: (-int(counts_by[g]), smallest[g]))
        return [(smallest[g], int(counts_by[g])) for g in ranked_groups[:FACET_VALUES]]

    def _field(self, name: str) -> tuple[np.ndarray, np.ndarray, list[str], list[str | None]]:
        """A metadata field's rows of the held chunks: each one's chunk position, folded-value group, value as
        written and month (None: no number; ``_NO_NUMBER``: a number SQLite's strftime reads as no date)."""
        known = self._fields.get(name)
        if known is None:
            rows = self._db.execute(
                "SELECT c.rowid, m.folded, m.value, m.num IS NOT NULL, strftime('%Y-%m', m.num, 'unixepoch') "
                "FROM chunk_fields m JOIN chunks c ON c.collection = m.collection AND c.point_id = m.point_id "
                "WHERE m.collection = ? AND m.name = ? ORDER BY c.rowid", (self.collection, name)).fetchall()
            rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            at = np.searchsorted(self.rowids, rowids)
            held = (at < self.size) & (self.rowids[np.minimum(at, max(self.size - 1, 0))] == rowids) \
                if self.size else np.zeros(len(rows), dtype=bool)
            folded: dict[str, int] = {}
            groups, shown, months, positions = [], [], [], []
            for r, ok, p in zip(rows, held.tolist(), at.tolist(), strict=True):
                if not ok:
                    continue
                positions.append(p)
                groups.append(folded.setdefault(r[1], len(folded)))
                shown.append(r[2])
                months.append(r[4] if r[3] else _NO_NUMBER)
            known = self._fields[name] = (np.asarray(positions, dtype=np.int64),
                                          np.asarray(groups, dtype=np.int64), shown, months)
        return known


_NO_NUMBER = "\0no number"  # a row without a number: not in a date facet (the SQL's `m.num IS NOT NULL`)
