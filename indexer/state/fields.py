"""The filterable fields of every chunk, in the state database: the exact evaluator of the filter language.

Each indexed chunk has its file's ``path``, ``type``, ``modified`` and ``size`` (the ``chunks`` and ``files``
tables) and its metadata and location values (``chunk_fields``: one row per name, the value as written, folded to
lower case, and as a number when it reads as one: numbers as numbers, dates as seconds since the epoch).
:class:`FieldIndex` turns clauses (:mod:`indexer.search.filters`) into SQL over those tables and answers:

* :meth:`~FieldIndex.select` -- the exact point ids a filter matches (the store then searches among them only);
* :meth:`~FieldIndex.facets` -- counts per value of a field among the matches;
* :meth:`~FieldIndex.summary` -- the fields a collection has, with counts and example values (`indexer fields`).

None of these fields is part of a point's id or payload fingerprint: a ``touch`` changes ``modified`` here only.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from indexer.errors import InputError, StateError
from indexer.state.columns import MAX_CHUNKS, Columns
from indexer.state.field_values import BUILTIN, chunk_values, field_rows
from indexer.state.sql_functions import file_type, folder, month
from indexer.types import Clause

FACET_VALUES = 20  # values per facet, most frequent first
FACETABLE_BUILTIN = ("type", "folder", "modified")
# Location values the readers record to place a hit (a table's rows, a mail's index, OCR languages): filterable by
# name, but not offered by `indexer fields` nor in messages.
INTERNAL = frozenset({"first_row_line", "row_numbers", "range", "message", "ocr", "block"})


# -- the SQL of a filter -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Where:
    """A filter as SQL over ``chunks c JOIN files f``: the condition and its arguments, in two forms: ``sql`` to
    list every match (a metadata clause is one indexed subquery, run once), ``probe_sql`` to test a few given
    chunks (a metadata clause is a primary-key lookup per chunk). ``probe_rest``/``probe_rest_args``: the probe's
    condition without the collection's (the sampled estimate names the collection itself)."""

    sql: str
    args: tuple[Any, ...]
    probe_sql: str = ""
    probe_args: tuple[Any, ...] = ()
    probe_rest: str = "1"
    probe_rest_args: tuple[Any, ...] = ()
    # each clause's probe condition alone, in the clauses' order (the estimate's share of each: clause_order)
    clause_probes: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    # every part (path prefix, types, each clause) in its listing form with its own arguments: ANDed, the filter
    # (indexer.state.columns evaluates each once into a mask)
    parts: tuple[tuple[str, tuple[Any, ...]], ...] = ()


TEXT_ONLY_HINT = "= == != ^= ~ or in"


def compile_where(
    collection: str,
    clauses: Sequence[Clause],
    path_prefix: str | None = None,
    file_types: Sequence[str] = (),
    kinds: Mapping[str, str] | None = None,
    *,
    selective_first: bool = False,
) -> Where:
    """The SQL of a filter; ``kinds`` (metadata name -> text, number or date: :meth:`FieldIndex.kinds`) decides how
    a metadata clause compares: as text, by number or by period. A range operator on a text field, or a value
    that does not read as the field's kind, is an InputError naming the clause. ``selective_first``: the clauses
    are ordered by :func:`clause_order`, so the listing starts from the first metadata clause's matches and
    checks the other clauses on each of them."""
    kinds = kinds or {}
    for c in clauses:
        _check_kind(c, kinds.get(c.field, "text"))
    listing, largs, _, pieces = _compile(collection, clauses, path_prefix, file_types, kinds, probe=False,
                                         lead=selective_first)
    if selective_first:  # each part on its own lists its matches (the masks of indexer.state.columns)
        pieces = _compile(collection, clauses, path_prefix, file_types, kinds, probe=False)[3]
    probe, pargs, each, _ = _compile(collection, clauses, path_prefix, file_types, kinds, probe=True)
    return Where(
        " AND ".join(["c.collection = ?", *listing]), (collection, *largs),
        " AND ".join(["c.collection = ?", *probe]), (collection, *pargs),
        " AND ".join(probe) or "1", tuple(pargs), tuple(each), tuple(pieces),
    )


def clause_order(shares: Sequence[float]) -> list[int]:
    """The clauses' indexes, the one estimated to keep the fewest chunks first (ties keep their order). SQLite
    lists a filter's matches from its first metadata clause's subquery and checks the others against each of
    them, so the most selective clause first lists the fewest (``team=red``, ``n<100``: 10,000 ids walked; the
    other way round, 50)."""
    return sorted(range(len(shares)), key=lambda i: shares[i])


def wanted_fields(clauses: Sequence[Clause], facets: Sequence[str]) -> list[str]:
    """The metadata fields a filter and its facets name (not the built-in ones)."""
    return [c.field for c in clauses if c.field not in BUILTIN] + [f for f in facets if f not in FACETABLE_BUILTIN]


def check_names(collection: str, wanted: Sequence[str], facets: Sequence[str], known: Iterable[str]) -> None:
    """Every field named exists in the collection (``known``); facets are facetable. An InputError names the
    unknown one and lists the fields there are (the state's check and a stateless worker's)."""
    known = set(known)
    for name in facets:
        if name in ("path", "size"):
            raise InputError(
                f"{name} cannot be a facet (its values are all different); facets: type, folder, modified and "
                "the metadata fields (`indexer fields`)"
            )
    for name in wanted:
        if name not in known:
            listed = [*BUILTIN, *sorted(n for n in known if n not in INTERNAL)]
            close = difflib.get_close_matches(name, [*listed, "folder"], n=3, cutoff=0.7)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise InputError(
                f"collection {collection!r} has no field {name!r}; {hint}filterable fields: "
                f"{', '.join(listed[:40])} (`indexer fields` lists them with example values)"
            )


def kind_of(n: int, numbers: int, dates: int) -> str:
    """A field's kind from its values' counts: date or number when most of its values read as one, else text."""
    return _kind(n, numbers, dates)


def check_kind(c: Clause, kind: str) -> None:
    """The clause's operator and values fit its field's kind (else an InputError naming the clause)."""
    _check_kind(c, kind)


def _check_kind(c: Clause, kind: str) -> None:
    if c.field in BUILTIN:
        return
    if kind == "text" and c.op in ("<", "<=", ">", ">="):
        raise InputError(
            f"{c.field} is a text field (its values are not numbers or dates); filter clause '{c.text}' needs "
            f"{TEXT_ONLY_HINT}, not {c.op} (`indexer fields` shows each field's kind)"
        )
    if kind in ("date", "number") and c.op in ("^=", "~"):
        raise InputError(
            f"{c.field} is a {kind} field; filter clause '{c.text}' needs = == != in < <= > or >=, not {c.op}"
        )
    for v in c.values:
        if kind == "date" and v.start is None:
            raise InputError(
                f"{c.field} is a date field; filter clause '{c.text}': '{v.text}' is not a date; write 2025, "
                "2025-03, 2025-03-14, 2025-03-14T09:30 (+01:00 for a time zone) or a relative time (-7d)"
            )
        if kind == "number" and v.number is None and c.op not in ("<", "<=", ">", ">="):
            raise InputError(f"{c.field} is a number field; filter clause '{c.text}': '{v.text}' is not a number")


def _compile(
    collection: str,
    clauses: Sequence[Clause],
    path_prefix: str | None,
    file_types: Sequence[str],
    kinds: Mapping[str, str],
    *,
    probe: bool,
    lead: bool = False,
) -> tuple[list[str], list[Any], list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
    """(the parts' SQL, their arguments, each clause's part with its own, every part with its own)."""
    pieces: list[tuple[str, tuple[Any, ...]]] = []
    if path_prefix is not None:
        under: list[Any] = []
        pieces.append((_under("c.path", under, path_prefix), tuple(under)))
    if file_types:
        pieces.append((f"idx_type(c.path, f.kind) IN ({','.join('?' * len(file_types))})", tuple(file_types)))
    first = len(pieces)
    # Listing with ``lead``: the first metadata clause (not negated), the most selective (clause_order), lists its
    # chunks by its index, once; every other metadata clause is checked on each of them by primary key (cheaper
    # than listing its own matches too). Otherwise (or with no such clause) each metadata clause lists its own.
    driver = next((i for i, c in enumerate(clauses) if not c.negate and c.field not in BUILTIN), None) if lead else None
    for i, clause in enumerate(clauses):
        own: list[Any] = []
        sql = _clause(clause, own, kinds, collection, probe or (driver is not None and i != driver))
        pieces.append((f"NOT ({sql})" if clause.negate else f"({sql})", tuple(own)))
    return [p for p, _ in pieces], [a for _, own in pieces for a in own], pieces[first:], pieces


def _under(column: str, args: list[Any], folder: str) -> str:
    prefix = folder.rstrip("/") or "/"
    under = prefix if prefix.endswith("/") else prefix + "/"
    args += [prefix, under, under[:-1] + chr(ord("/") + 1)]
    return f"({column} = ? OR ({column} >= ? AND {column} < ?))"


def _any(conds: list[str]) -> str:
    return conds[0] if len(conds) == 1 else " OR ".join(f"({x})" for x in conds)


def _clause(c: Clause, args: list[Any], kinds: Mapping[str, str], collection: str, probe: bool) -> str:
    if c.field == "path":
        return _path(c, args)
    if c.field == "type":
        args += list(c.values)
        sql = f"idx_type(c.path, f.kind) IN ({','.join('?' * len(c.values))})"
        return f"NOT ({sql})" if c.op == "!=" else sql
    if c.field in ("modified", "size"):
        column = "f.mtime_ns" if c.field == "modified" else "f.size"
        return _typed(column, c.op, list(c.values), args)
    return _metadata(c, args, kinds.get(c.field, "text"), collection, probe)


def _path(c: Clause, args: list[Any]) -> str:
    # Every comparison ignores case; == != ^= take an absolute path or one relative to the file's root.
    conds = []
    for v in c.values:
        if c.op in ("=", "in"):
            args.append(v.text)
            conds.append("instr(lower(c.path), ?) > 0")
        elif c.op == "~":
            args.append(v.text)
            conds.append("idx_glob(c.path, f.root, ?)")
        elif c.op == "^=":
            column = "idx_rel(c.path, f.root)" if v.rel else "lower(c.path)"
            if v.rel and v.path == "":
                conds.append(f"{column} IS NOT NULL")
                continue
            args += [v.path, v.path.rstrip("/") + "/"]
            conds.append(f"({column} = ? OR substr({column}, 1, length(?)) = ?)")
            args.append(v.path.rstrip("/") + "/")
        else:  # == and !=
            args.append(v.path)
            conds.append(f"{'idx_rel(c.path, f.root)' if v.rel else 'lower(c.path)'} IS ?")
    sql = _any(conds)
    return f"NOT ({sql})" if c.op == "!=" else sql


def _typed(column: str, op: str, bounds: list[tuple[Any, Any]], args: list[Any]) -> str:
    """A date (each bound a period: [start, end)) or a number (start == end) compared by value."""
    if op in ("<", "<=", ">", ">="):
        start, end = bounds[0]
        if start == end:  # a number: the bound is the number itself
            args.append(start)
            return f"{column} {op} ?"
        args.append({"<": start, ">=": start, "<=": end, ">": end}[op])
        return f"{column} {'<' if op in ('<', '<=') else '>='} ?"
    conds = []
    for start, end in bounds:
        if start == end:
            args.append(start)
            conds.append(f"{column} = ?")
        else:
            args += [start, end]
            conds.append(f"({column} >= ? AND {column} < ?)")
    sql = _any(conds)
    return f"{column} IS NOT NULL AND NOT ({sql})" if op == "!=" else sql


def _metadata(c: Clause, args: list[Any], kind: str, collection: str, probe: bool) -> str:
    # Listing: not correlated with the outer row, so SQLite runs the subquery once, by its index. Probing a few
    # chunks: one primary-key lookup each.
    head = ("EXISTS (SELECT 1 FROM chunk_fields m WHERE m.collection = ? AND m.point_id = c.point_id AND "
            "m.name = ? AND " if probe else
            "c.point_id IN (SELECT m.point_id FROM chunk_fields m WHERE m.collection = ? AND m.name = ? AND ")
    args += [collection, c.field]
    if kind in ("date", "number") or c.op in ("<", "<=", ">", ">="):
        if kind == "date" and all(v.start is not None for v in c.values):
            bounds = [(v.start, v.end) for v in c.values]
        elif c.op in ("<", "<=", ">", ">=") and c.values[0].number is None:
            bounds = [(c.values[0].start, c.values[0].end)]  # a date bound on a field of numbers: compares nothing
        else:
            bounds = [(v.number, v.number) for v in c.values]
        return head + "(" + _typed("m.num", c.op, bounds, args) + "))"
    conds = []
    for v in c.values:
        if c.op == "~":
            args.append(v.text)
            conds.append("idx_fnmatch(m.folded, ?)")
        elif c.op == "^=":
            args += [len(v.text), v.text]
            conds.append("substr(m.folded, 1, ?) = ?")
        elif c.op in ("=", "in"):
            args.append(v.text)
            conds.append("instr(m.folded, ?) > 0")
        else:
            args.append(v.text)
            conds.append("m.folded = ?")
    sql = _any(conds)
    if c.op == "!=":  # has the field, with another value (`not F==V` also keeps chunks without it)
        return head + f"NOT ({sql}))"
    return head + f"({sql}))"


# -- reading ---------------------------------------------------------------------------------------------------
class FieldIndex:
    """Filter evaluation, facets and the field list over one state database connection."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock
        self._facet_cache: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, int], dict[str, Any]]] = {}
        # each collection's field names and each field's kind, kept until the database changes (the mark of
        # StateStore.change_mark: any commit, by this connection or another): a search does not count them again
        self._mark: tuple[int, int] | None = None
        self._names: dict[str, frozenset[str]] = {}
        self._kinds: dict[tuple[str, str], str] = {}
        self._columns: dict[str, Columns | None] = {}  # each collection's chunks as arrays, until the mark moves

    def _fresh(self) -> None:
        """Forget the kept names and kinds if the database changed since they were read (call under the lock)."""
        mark = (int(self._db.execute("PRAGMA data_version").fetchone()[0]), self._db.total_changes)
        if mark != self._mark:
            self._mark = mark
            self._names.clear()
            self._kinds.clear()
            self._columns.clear()

    def _held(self, collection: str) -> Columns | None:
        """The collection's chunks in memory at this state (:mod:`indexer.state.columns`; call under the lock), or
        None when it has more than MAX_CHUNKS of them (its filters then run in SQL only)."""
        self._fresh()
        if collection not in self._columns:
            size = self._db.execute("SELECT COUNT(*) FROM chunks WHERE collection=?", (collection,)).fetchone()[0]
            self._columns[collection] = Columns(self._db, collection) if size <= MAX_CHUNKS else None
        return self._columns[collection]

    def count(self, collection: str, where: Where) -> tuple[int, int] | None:
        """(the collection's chunks, how many the filter matches), exact, from the masks of the held columns; None
        when the collection is not held (more than MAX_CHUNKS chunks: :meth:`estimate` then)."""
        with self._lock:
            columns = self._held(collection)
            return None if columns is None else (columns.size, columns.count(where.parts))

    def matching(self, collection: str, where: Where) -> frozenset[str]:
        """The point ids the filter matches, from the held columns: the same set until the state changes."""
        with self._lock:
            columns = self._held(collection)
            if columns is None:
                return frozenset(self.select(where))
            return columns.matching(where.parts)

    def names(self, collection: str) -> frozenset[str]:
        """The metadata field names the collection's chunks have."""
        with self._lock:
            self._fresh()
            known = self._names.get(collection)
            if known is None:
                known = self._names[collection] = frozenset(r[0] for r in self._db.execute(
                    "SELECT DISTINCT name FROM chunk_fields WHERE collection=?", (collection,)))
            return known

    def complete(self, collection: str) -> bool:
        """False while a collection indexed before metadata filters existed waits for its fields (the next
        `indexer index` adds them from the store's payloads, without re-embedding)."""
        row = self._db.execute("SELECT 1 FROM fields_backfill WHERE collection=?", (collection,)).fetchone()
        return row is None

    def check(self, collection: str, clauses: Sequence[Clause], facets: Sequence[str] = ()) -> dict[str, str]:
        """Every field named exists in the collection (or is built in); an InputError names the unknown one and
        lists the fields there are. Returns the kinds of the metadata fields named (:meth:`kinds`)."""
        wanted = wanted_fields(clauses, facets)
        if not wanted:
            return {}
        if not self.complete(collection):
            raise StateError(
                f"collection {collection!r} was indexed before metadata filters; run `indexer index -c {collection}` "
                "once to record its fields (no re-embedding), then filter on them"
            )
        check_names(collection, wanted, facets, self.names(collection))
        return self.kinds(collection, wanted)

    def kinds(self, collection: str, names: Sequence[str]) -> dict[str, str]:
        """The kind of each metadata field: date or number when most of its values read as one, else text."""
        out = {}
        with self._lock:
            self._fresh()
            for name in dict.fromkeys(names):
                kind = self._kinds.get((collection, name))
                if kind is None:
                    n, numbers, dates = self._db.execute(
                        "SELECT COUNT(*), SUM(kind='number'), SUM(kind='date') FROM chunk_fields WHERE collection=? "
                        "AND name=?", (collection, name)).fetchone()
                    kind = self._kinds[(collection, name)] = _kind(n, numbers or 0, dates or 0)
                out[name] = kind
        return out

    def estimate(self, where: Where, sample: int = 500) -> tuple[int, float]:
        """(estimated chunks of the collection, estimated fraction of them the filter matches), from a random sample
        of the chunks table's rowids (about 3 ms); (0, 0.0) when the sample holds too few of the collection's rows
        to say (the caller then lists the matches exactly)."""
        total, fraction, _ = self.estimate_clauses(where, sample)
        return total, fraction

    def estimate_clauses(self, where: Where, sample: int = 500) -> tuple[int, float, tuple[float, ...]]:
        """:meth:`estimate`, and the fraction each clause alone keeps (in the same pass over the same sample; only
        for two clauses or more, else empty): :func:`clause_order` lists the most selective one first."""
        import random

        each = where.clause_probes if len(where.clause_probes) > 1 else ()
        with self._lock:
            top = self._db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0] or 0
            if top < sample * 10:
                return 0, 0.0, ()
            rowids = json.dumps(random.Random(top).sample(range(1, top + 1), sample))
            have, hit, hits = self._sampled(
                rowids, where.probe_rest, (where.probe_args[0], *where.probe_rest_args), each)
        if have < 100:
            return 0, 0.0, ()
        return int(have * top / sample), hit / have, tuple(h / have for h in hits)

    def _sampled(
        self, rowids: str, probe: str, args: tuple[Any, ...], each: Sequence[tuple[str, tuple[Any, ...]]] = ()
    ) -> tuple[int, int, list[int]]:
        """(rows of the collection, rows matching, rows each of ``each`` matches) among the sampled rowids: one
        pass."""
        collection, rest = args[0], args[1:]
        sums = "".join(f", COALESCE(SUM({sql}), 0)" for sql, _ in each)
        row = self._db.execute(
            f"SELECT COUNT(*), COALESCE(SUM({probe}), 0){sums} FROM chunks c JOIN files f ON f.collection = "
            "c.collection AND f.path = c.path WHERE c.rowid IN (SELECT value FROM json_each(?)) AND +c.collection = ?",
            (*rest, *(a for _, own in each for a in own), rowids, collection),
        ).fetchone()
        return int(row[0]), int(row[1]), [int(x) for x in row[2:]]

    def among(self, where: Where, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the filter matches (a broad filter's check of a search's candidates)."""
        if not ids:
            return set()
        sql = (f"SELECT c.point_id FROM chunks c JOIN files f ON f.collection = c.collection AND f.path = c.path "
               f"WHERE c.point_id IN (SELECT value FROM json_each(?)) AND {where.probe_sql}")
        with self._lock:
            return {r[0] for r in self._db.execute(sql, (json.dumps(list(ids)), *where.probe_args))}

    def any(self, where: Where) -> bool:
        """Whether the filter matches at least one chunk."""
        sql = f"SELECT 1 FROM chunks c JOIN files f ON f.collection = c.collection AND f.path = c.path " \
              f"WHERE {where.sql} LIMIT 1"
        with self._lock:
            return self._db.execute(sql, where.args).fetchone() is not None

    def select(self, where: Where) -> list[str]:
        sql = f"SELECT c.point_id FROM chunks c JOIN files f ON f.collection = c.collection AND f.path = c.path " \
              f"WHERE {where.sql}"
        with self._lock:
            return [r[0] for r in self._db.execute(sql, where.args)]

    def facets(self, collection: str, where: Where, names: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """Counts per value among the matches: type, folder, modified (by month) and metadata fields (a date field
        by month too, the values as written otherwise, folded together)."""
        unfiltered = where.sql == "c.collection = ?"
        if unfiltered:  # the same counts until the state changes: an unfiltered search does not pay them again
            with self._lock:
                version = (self._db.total_changes, self._db.execute("PRAGMA data_version").fetchone()[0])
            key = (collection, tuple(names))
            cached = self._facet_cache.get(key)
            if cached is not None and cached[0] == version:
                return {k: list(v) for k, v in cached[1].items()}
        kinds = self.kinds(collection, [n for n in names if n not in FACETABLE_BUILTIN])
        with self._lock:
            columns = self._held(collection)  # held: counts of value codes among the filter's mask
            out = columns.facets(where.parts, names, kinds) if columns is not None else None
        if out is None:
            out = self._sql_facets(collection, where, names, kinds)
        if unfiltered:
            if len(self._facet_cache) > 64:
                self._facet_cache.clear()
            self._facet_cache[key] = (version, {k: list(v) for k, v in out.items()})
        return out

    def _sql_facets(self, collection: str, where: Where, names: Sequence[str], kinds: Mapping[str, str]
                    ) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {}
        base = f"FROM chunks c JOIN files f ON f.collection = c.collection AND f.path = c.path WHERE {where.sql}"
        builtin = [n for n in names if n in FACETABLE_BUILTIN]
        if builtin:  # each value is its file's: one pass counts the matches per file, the values come from those
            with self._lock:
                files = self._db.execute(
                    f"SELECT c.path, f.kind, f.root, f.mtime_ns, COUNT(*) {base} GROUP BY c.path", where.args
                ).fetchall()
            for name in builtin:
                of = {"type": lambda r: file_type(r[0], r[1]), "folder": lambda r: folder(r[0], r[2]),
                      "modified": lambda r: month(r[3])}[name]
                counts: dict[str, int] = {}
                for row in files:
                    v = of(row)
                    counts[v] = counts.get(v, 0) + int(row[4])
                out[name] = sorted(counts.items(), key=lambda vn: (-vn[1], vn[0]))[:FACET_VALUES]
        for name in names:
            if name not in FACETABLE_BUILTIN:
                by_month = kinds.get(name) == "date"
                value = "strftime('%Y-%m', m.num, 'unixepoch')" if by_month else "MIN(m.value)"
                group = "1" if by_month else "m.folded"
                sql = (f"SELECT {value} AS v, COUNT(*) AS n FROM chunk_fields m WHERE m.collection = ? AND "
                       f"m.name = ? AND m.point_id IN (SELECT c.point_id {base}) "
                       f"{'AND m.num IS NOT NULL ' if by_month else ''}GROUP BY {'v' if by_month else group} "
                       f"ORDER BY n DESC, v LIMIT {FACET_VALUES}")
                args = (collection, name, *where.args)
                with self._lock:
                    out[name] = [(str(v), int(n)) for v, n in self._db.execute(sql, args)]
        return {name: out[name] for name in names}  # in the order asked

    def commonest(
        self, collection: str, names: Sequence[str], limit: int, chunks: int, sample: int = 5000
    ) -> list[tuple[str, int]]:
        """The ``limit`` commonest values of the metadata fields ``names`` (e.g. titles) among about ``sample`` of
        the collection's ``chunks``, with their counts there. Point ids are UUIDs (name-based: uniformly spread), so
        the chunks whose id falls in the first ``sample / chunks`` of the id space are a uniform sample, read by a
        range of the primary key: the cost is that of ``sample`` chunks whatever the collection's size (~25 ms for
        5,000 of 1M chunks with a subject each)."""
        if not names:
            return []
        with self._lock:
            share = min(1.0, sample / chunks) if chunks else 1.0
            bound = "g" if share >= 1.0 else f"{int(share * 16**8):08x}"  # "g" sorts after every hex digit
            rows = self._db.execute(
                f"SELECT value, folded FROM chunk_fields WHERE collection = ? AND point_id < ? AND +name IN "
                f"({','.join('?' * len(names))})", (collection, bound, *names)).fetchall()
        counts: dict[str, list[Any]] = {}
        for value, folded in rows:
            seen = counts.setdefault(folded, [value, 0])
            seen[0], seen[1] = min(seen[0], value), seen[1] + 1
        ranked = sorted(counts.values(), key=lambda vn: (-vn[1], vn[0]))
        return [(str(v), int(n)) for v, n in ranked[:limit]]

    def summary(self, collection: str, examples: int = 3) -> list[dict[str, Any]]:
        """The collection's filterable fields: name, kind, chunks that have it, and the commonest values."""
        with self._lock:
            count = self._db.execute("SELECT COUNT(*) FROM chunks WHERE collection=?", (collection,))
            chunks = int(count.fetchone()[0])
            out: list[dict[str, Any]] = [
                {"field": "path", "kind": "path", "chunks": chunks, "examples": []},
                {"field": "type", "kind": "text", "chunks": chunks, "examples": []},
                {"field": "modified", "kind": "date", "chunks": chunks, "examples": []},
                {"field": "size", "kind": "number", "chunks": chunks, "examples": []},
            ]
            rows = self._db.execute(
                "SELECT name, COUNT(*), SUM(kind='number'), SUM(kind='date') FROM chunk_fields WHERE collection=? "
                "GROUP BY name ORDER BY COUNT(*) DESC, name", (collection,)).fetchall()
            for name, n, numbers, dates in rows:
                if name in INTERNAL:
                    continue
                kind = _kind(n, numbers, dates)
                top = self._db.execute(
                    "SELECT MIN(value), COUNT(*) AS k FROM chunk_fields WHERE collection=? AND name=? GROUP BY folded "
                    "ORDER BY k DESC LIMIT ?", (collection, name, examples)).fetchall()
                out.append({"field": name, "kind": kind, "chunks": int(n),
                            "examples": [[str(v), int(k)] for v, k in top]})
        where = compile_where(collection, ())
        facets = self.facets(collection, where, ("type",))
        out[1]["examples"] = [list(x) for x in facets["type"][:examples]]
        return out

    # -- the backfill of collections indexed before these fields ------------------------------------------------
    def backfill(self, collection: str, payloads: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Record the fields of ``collection``'s chunks from their stored payloads; returns the rows written."""
        known = {r[0] for r in self._db.execute("SELECT point_id FROM chunks WHERE collection=?", (collection,))}
        rows: list[tuple[Any, ...]] = []
        for pid, payload in payloads:
            if pid in known:
                rows += [(collection, *r) for r in field_rows(pid, chunk_values(payload))]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM chunk_fields WHERE collection=?", (collection,))
                self._db.executemany("INSERT OR REPLACE INTO chunk_fields VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                self._db.execute("DELETE FROM fields_backfill WHERE collection=?", (collection,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(rows)


def _kind(n: int, numbers: int, dates: int) -> str:
    return "date" if dates * 2 > n else "number" if numbers * 2 > n else "text"
