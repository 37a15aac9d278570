"""The SQLite sidecar of a FAISS collection: the source of truth.

It holds, per point, the UUID, its int64 FAISS id, the payload (JSON), the filterable fields and the vector
(float32 blob), plus an op log (one row per touched id, with a monotonically increasing sequence). The
``.faiss`` file next to it is only a cache that records the sequence it reflects; anything after that is
replayed from the op log, or the index is rebuilt from the vectors here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexer.plugin_api import StoreError, database_error, lexical

SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    iid INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    path TEXT,
    file_type TEXT,
    payload TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS points_path ON points(path);
CREATE INDEX IF NOT EXISTS points_file_type ON points(file_type);
CREATE TABLE IF NOT EXISTS ops (seq INTEGER PRIMARY KEY, iid INTEGER NOT NULL);
"""
# The lexical index: one FTS5 row per point (rowid = iid) holding the point's lexical terms (indexer.search.lexical),
# written in the same transactions as the points. The terms are made by the analyzer, space-separated; the ``ascii``
# tokenizer (every non-ASCII character a token character, '_' too) keeps each whole, so FTS5 never re-cuts them
# (``unicode61``, version 1's tokenizer, split हिन्दी at its vowel signs). A version-1 table keeps its tokenizer
# (SQLite records it) until `indexer index` rebuilds it.
_LEXICAL = """
CREATE VIRTUAL TABLE lexical USING fts5(title, body, tokenize="ascii tokenchars '_'")
"""


@dataclass(frozen=True)
class Row:
    iid: int
    uuid: str
    path: str | None
    file_type: str | None
    payload: str  # JSON
    vector: bytes  # float32 little-endian
    title: str = ""  # lexical terms (space-separated) of the title and body fields
    body: str = ""
    terms: str = lexical.LEXICAL_VERSION  # the analyzer version that made title and body


@dataclass(frozen=True)
class SyncState:
    seq: int
    pruned_through: int
    generation: str


def sidecar_error(exc: BaseException, path: Path, what: str) -> StoreError:
    """One line naming the sidecar file, what failed and the fix (locked, damaged, disk full, permissions)."""
    return database_error(
        exc,
        path,
        what="the FAISS store file",
        rebuild="run `indexer index` to rebuild it (or drop the collection and re-index)",
        error=StoreError,
        action=what,
    )


class Sidecar:
    """One SQLite connection (WAL, synchronous=FULL) to one collection's sidecar file."""

    def __init__(self, path: Path, create: bool = True) -> None:
        """``create=False``: open an existing file only (a reader): a collection dropped between a reader's check
        and its open must not come back as an empty file that keeps the dropped folder alive."""
        self.path = path
        try:
            target = str(path) if create else Path(os.path.abspath(path)).as_uri() + "?mode=rw"
            self.conn = sqlite3.connect(target, timeout=60.0, isolation_level=None, check_same_thread=False,
                                        uri=not create)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA busy_timeout=60000")
            st = path.stat()
            self.inode = (st.st_dev, st.st_ino)
        except (sqlite3.Error, OSError) as exc:
            with suppress(sqlite3.Error, AttributeError):
                self.conn.close()
            raise sidecar_error(exc, path, "opening it") from exc

    @classmethod
    def existing(cls, path: Path) -> Sidecar | None:
        """A reader's open: the sidecar at ``path``, or None when there is none (also when a drop removed it
        between the check and the open)."""
        if not path.exists():
            return None
        try:
            return cls(path, create=False)
        except StoreError:
            if not path.exists():
                return None
            raise

    def close(self) -> None:
        with suppress(sqlite3.Error):
            self.conn.close()

    def still_current(self) -> bool:
        """False when the file was removed or replaced (the collection was dropped or re-created)."""
        try:
            st = self.path.stat()
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.inode

    @contextmanager
    def read(self) -> Iterator[None]:
        """A read transaction: every query inside sees one snapshot."""
        try:
            self.conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise sidecar_error(exc, self.path, "read") from exc
        try:
            yield
        finally:
            # SQLite may have ended the transaction itself (a damaged page): then there is nothing to end, and
            # the error that ended it is the one to report.
            if self.conn.in_transaction:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error:
                    with suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction (BEGIN IMMEDIATE); committed (durably) on normal exit."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise sidecar_error(exc, self.path, "write") from exc
        try:
            yield
        except BaseException:
            with suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise sidecar_error(exc, self.path, "commit") from exc

    # --- schema and meta -------------------------------------------------------------------------
    def create(self, dimensions: int, metric: str, index: str, meta: Mapping[str, str]) -> None:
        """Create tables and record meta (inside an outer write transaction)."""
        for stmt in _SCHEMA.strip().split(";"):
            if stmt.strip():
                self.conn.execute(stmt)
        values = {
            "schema": SCHEMA_VERSION,
            "dimensions": str(dimensions),
            "metric": metric,
            "index": index,
            "user_meta": json.dumps(dict(meta), sort_keys=True),
            "seq": "0",
            "pruned_through": "0",
            "generation": uuid.uuid4().hex,
        }
        self.conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(values.items()))
        self.create_lexical()

    # --- the lexical index -----------------------------------------------------------------------
    def lexical_version(self) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'lexical'").fetchone()
        return str(row[0]) if row else None

    def terms_version(self) -> str:
        """The analyzer version new rows' terms are made with: the table's when this indexer knows it, else the
        current one (a table of an unknown version is rebuilt by ensure_lexical before it is written)."""
        version = self.lexical_version()
        return version if version is not None and lexical.known(version) else lexical.LEXICAL_VERSION

    def create_lexical(self) -> None:
        """(Re)create the empty lexical table and record its version (inside a write transaction)."""
        self.conn.execute("DROP TABLE IF EXISTS lexical")
        self.conn.execute(_LEXICAL)
        self.set_meta("lexical", lexical.LEXICAL_VERSION)

    def fill_lexical(self) -> None:
        """Fill the new (empty) lexical table with every point's terms, made from its stored payload by the
        current analyzer, 1,000 rows at a time (inside the write transaction that created the table)."""
        batch: list[tuple[int, str, str]] = []
        counts: dict[str, int] = {}
        for iid, payload_json in list(self.conn.execute("SELECT iid, payload FROM points")):
            payload = json.loads(payload_json)
            payload["lang"] = lang = lexical.chunk_language(payload)  # detected once (older payloads lack it)
            counts[lang] = counts.get(lang, 0) + 1
            batch.append((iid, *lexical.fts_fields(payload)))
            if len(batch) >= 1000:
                self.put_lexical(batch)
                batch = []
        self.put_lexical(batch)
        self.set_meta("languages", json.dumps(counts, sort_keys=True))

    def languages(self) -> dict[str, int]:
        """Chunks per recorded language (a superset: not lowered on delete; :func:`lexical.held`)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'languages'").fetchone()
        return {str(k): int(v) for k, v in json.loads(row[0]).items()} if row else {}

    def put_lexical(self, rows: Sequence[tuple[int, str, str]]) -> None:
        """Replace the lexical rows (iid, title terms, body terms)."""
        self._delete_lexical([r[0] for r in rows])
        self.conn.executemany("INSERT INTO lexical(rowid, title, body) VALUES (?, ?, ?)", rows)

    def _delete_lexical(self, iids: Sequence[int]) -> None:
        for part in _chunks(list(iids), 500):
            marks = ",".join("?" * len(part))
            self.conn.execute(f"DELETE FROM lexical WHERE rowid IN ({marks})", part)

    def search_lexical(
        self, match: str, limit: int, path_prefix: str | None, file_types: Sequence[str], title_weight: float,
        iids: np.ndarray | None = None, excluded: np.ndarray | None = None,
    ) -> list[tuple[str, str, float]]:
        """(uuid, payload JSON, BM25 score, higher is better) of the best ``limit`` points matching ``match``,
        among ``iids`` when given (the exact selection of a filter's other clauses), never ``excluded``."""
        where, args = _filter_sql(path_prefix, file_types)
        if iids is not None:
            where += " AND p.iid IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(iids.tolist()))
        if excluded is not None and len(excluded):
            where += " AND p.iid NOT IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(excluded.tolist()))
        sql = (
            "SELECT p.uuid, p.payload, -bm25(lexical, ?, 1.0) AS score FROM lexical "
            "JOIN points p ON p.iid = lexical.rowid "
            f"WHERE lexical MATCH ? AND {where} ORDER BY score DESC LIMIT ?"
        )
        return [(u, pl, float(sc)) for u, pl, sc in self.conn.execute(sql, [title_weight, match, *args, limit])]

    def meta(self) -> dict[str, str] | None:
        """All meta keys, or None when the collection was never completely created."""
        try:
            rows = self.conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise sidecar_error(exc, self.path, "reading meta") from exc
        except sqlite3.Error as exc:
            raise sidecar_error(exc, self.path, "reading meta") from exc
        values = dict(rows)
        return values if "dimensions" in values else None

    def sync_state(self) -> SyncState:
        rows = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('seq', 'pruned_through', 'generation')"
            ).fetchall()
        )
        return SyncState(int(rows["seq"]), int(rows["pruned_through"]), rows["generation"])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # --- points ----------------------------------------------------------------------------------
    def uuids_of(self, iids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for part in _chunks(list(iids), 500):
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT iid, uuid FROM points WHERE iid IN ({marks})", part))
        return out

    def put(self, rows: Sequence[Row], seq: int) -> int:
        """Insert or replace ``rows``; log one op per row. Returns the new sequence."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO points(iid, uuid, path, file_type, payload, vector) VALUES (?,?,?,?,?,?)",
            [(r.iid, r.uuid, r.path, r.file_type, r.payload, r.vector) for r in rows],
        )
        if any('"lang"' in r.payload for r in rows):
            counts = lexical.count_languages((json.loads(r.payload) for r in rows), self.languages())
            self.set_meta("languages", json.dumps(counts, sort_keys=True))
        version = self.lexical_version()
        if version is not None and lexical.known(version):  # terms as the table's analyzer makes them
            self.put_lexical([(r.iid, r.title, r.body) if r.terms == version else
                              (r.iid, *lexical.fts_fields(json.loads(r.payload), version)) for r in rows])
        return self._log([r.iid for r in rows], seq)

    def remove(self, iids: Sequence[int], seq: int) -> tuple[list[int], int]:
        """Delete the points that exist among ``iids``; returns (deleted iids, new sequence)."""
        present = list(self.uuids_of(iids))
        for part in _chunks(present, 500):
            marks = ",".join("?" * len(part))
            self.conn.execute(f"DELETE FROM points WHERE iid IN ({marks})", part)
        if self.lexical_version() is not None:
            self._delete_lexical(present)
        return present, self._log(present, seq)

    def _log(self, iids: Sequence[int], seq: int) -> int:
        self.conn.executemany(
            "INSERT INTO ops(seq, iid) VALUES (?, ?)", [(seq + i + 1, iid) for i, iid in enumerate(iids)]
        )
        new_seq = seq + len(iids)
        self.set_meta("seq", str(new_seq))
        return new_seq

    def touched_since(self, seq: int) -> np.ndarray:
        cur = self.conn.execute("SELECT DISTINCT iid FROM ops WHERE seq > ?", (seq,))
        return np.fromiter((r[0] for r in cur), dtype=np.int64)

    def prune_ops(self, through: int) -> None:
        self.conn.execute("DELETE FROM ops WHERE seq <= ?", (through,))

    def vectors_of(self, iids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(iids present, their vectors) for the given ids."""
        found: list[int] = []
        blobs: list[bytes] = []
        for part in _chunks([int(i) for i in iids], 500):
            marks = ",".join("?" * len(part))
            for iid, blob in self.conn.execute(f"SELECT iid, vector FROM points WHERE iid IN ({marks})", part):
                found.append(iid)
                blobs.append(blob)
        return _to_arrays(found, blobs, dim)

    def all_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        found: list[int] = []
        blobs: list[bytes] = []
        for iid, blob in self.conn.execute("SELECT iid, vector FROM points"):
            found.append(iid)
            blobs.append(blob)
        return _to_arrays(found, blobs, dim)

    def matching(self, path_prefix: str | None, file_types: Sequence[str]) -> np.ndarray:
        """FAISS ids of points whose path is at or under ``path_prefix`` and whose file_type is listed."""
        where, args = _filter_sql(path_prefix, file_types)
        cur = self.conn.execute(f"SELECT iid FROM points WHERE {where}", args)
        return np.fromiter((r[0] for r in cur), dtype=np.int64)

    def fetch(self, iids: Sequence[int]) -> dict[int, tuple[str, str]]:
        out: dict[int, tuple[str, str]] = {}
        for part in _chunks(list(iids), 500):
            marks = ",".join("?" * len(part))
            for iid, uid, payload in self.conn.execute(
                f"SELECT iid, uuid, payload FROM points WHERE iid IN ({marks})", part
            ):
                out[iid] = (uid, payload)
        return out

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM points").fetchone()[0])

    def all_uuids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT uuid FROM points")}


def _filter_sql(path_prefix: str | None, file_types: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL condition on the points table: path at or under ``path_prefix``, file_type among ``file_types``."""
    clauses: list[str] = []
    args: list[Any] = []
    if path_prefix is not None:
        prefix = path_prefix.rstrip("/") or "/"
        under = prefix if prefix.endswith("/") else prefix + "/"
        # Range scan on the BINARY-collated index: every string that starts with ``under``.
        upper = under[:-1] + chr(ord("/") + 1)
        clauses.append("(path = ? OR (path >= ? AND path < ?))")
        args += [prefix, under, upper]
    if file_types:
        clauses.append(f"file_type IN ({','.join('?' * len(file_types))})")
        args += list(file_types)
    return (" AND ".join(clauses) if clauses else "1"), args


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _to_arrays(iids: list[int], blobs: list[bytes], dim: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(iids, dtype=np.int64)
    if not blobs:
        return ids, np.zeros((0, dim), dtype=np.float32)
    vecs = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
    return ids, vecs.astype(np.float32, copy=False)
