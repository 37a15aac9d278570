"""The SQLite state store: collections, roots, files, chunks, pending write intents and the vector cache.

One database per data directory, in WAL mode so a searching process can read while another indexes. The
schema lives in ``indexer.migrations`` and is brought up to date on open.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexer.core.normalization import Normalization, normalization_name
from indexer.core.sqlite_errors import database_error, translating
from indexer.errors import StateError
from indexer.migrations import MIGRATIONS, NewerStateError, upgrade
from indexer.state.fields import FieldIndex, field_rows
from indexer.state.sql_functions import register

logger = logging.getLogger(__name__)

STATE_DB = "the state database"
STATE_REBUILD = "re-index your folders (`indexer index PATH`)"


@dataclass(frozen=True)
class CollectionRecord:
    name: str
    store: str
    store_options: dict[str, Any]
    metric: str
    model_id: str
    model_path: str
    normalization: Normalization
    dimensions: int
    created_at: float = 0.0

    def identity_meta(self) -> dict[str, str]:
        """What a store records of the vectors it holds (model, normalization, metric), checked on every open."""
        return {
            "indexer.model_id": self.model_id,
            "indexer.normalization": normalization_name(self.normalization),
            "indexer.metric": self.metric,
        }


@dataclass(frozen=True)
class FileRecord:
    path: str
    root: str
    size: int
    mtime_ns: int
    content_hash: str
    status: str  # "indexed" or "failed"
    error: str | None = None
    kind: str | None = None
    checked_ns: int = 0


# (size, mtime_ns, status, checked_ns) of one file: the FileRecord fields a no-change check reads.
FileStat = tuple[int, int, str, int]


@dataclass(frozen=True)
class ChunkRecord:
    point_id: str
    path: str
    chunk_index: int
    content_hash: str
    n_tokens: int
    fields: tuple[tuple[str, Any], ...] = ()  # metadata and location values, filterable (indexer.state.fields)


@dataclass(frozen=True)
class FileUpdate:
    """The new state of one file: its record and its complete list of chunks."""

    file: FileRecord
    chunks: tuple[ChunkRecord, ...]


@translating(what=STATE_DB, rebuild=STATE_REBUILD, error=StateError, catch=(sqlite3.Error, OSError))
class StateStore:
    """Typed access to the state database. Each public write is one transaction."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # One connection shared by the threads of a process; write transactions are serialized by this lock
        # (sqlite3 serializes single calls itself). Writers of other processes wait on SQLite's busy timeout.
        self._lock = threading.RLock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            register(self._db)
        except sqlite3.DatabaseError as exc:
            raise database_error(exc, self.path, what=STATE_DB, rebuild=STATE_REBUILD, error=StateError) from exc

    # -- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        self._db.close()

    def _migrate(self) -> None:
        try:
            upgrade(self._db, MIGRATIONS)
        except NewerStateError as exc:
            raise StateError(
                f"the state database {self.path} was written by a newer indexer (migrations {exc}); "
                "upgrade indexer or use another INDEXER_DATA_DIR"
            ) from exc

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT name FROM schema_migrations ORDER BY name")]

    def _tx(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    @property
    def fields(self) -> FieldIndex:
        """Filter evaluation, facets and the field list of this database (indexer.state.fields); one per database,
        so its cache of unfiltered facet counts lives as long as the connection."""
        index = self.__dict__.get("_field_index")
        if index is None:
            index = self.__dict__["_field_index"] = FieldIndex(self._db, self._lock)
        return index

    # -- collections -----------------------------------------------------------------------------------
    def get_collection(self, name: str) -> CollectionRecord | None:
        row = self._db.execute(
            "SELECT name, store, store_options, metric, model_id, model_path, normalization, dimensions, created_at"
            " FROM collections WHERE name=?",
            (name,),
        ).fetchone()
        return _collection(row) if row else None

    def list_collections(self) -> list[CollectionRecord]:
        rows = self._db.execute(
            "SELECT name, store, store_options, metric, model_id, model_path, normalization, dimensions, created_at"
            " FROM collections ORDER BY name"
        ).fetchall()
        return [_collection(r) for r in rows]

    def create_collection(self, rec: CollectionRecord) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO collections VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.name,
                    rec.store,
                    json.dumps(rec.store_options, sort_keys=True),
                    rec.metric,
                    rec.model_id,
                    rec.model_path,
                    Normalization.parse(rec.normalization).value,
                    rec.dimensions,
                    rec.created_at or time.time(),
                ),
            )

    def drop_collection(self, name: str) -> None:
        with self._tx() as db:
            for table in ("pending", "chunk_fields", "fields_backfill", "chunks", "files", "roots", "collections"):
                column = "name" if table == "collections" else "collection"
                db.execute(f"DELETE FROM {table} WHERE {column}=?", (name,))

    # -- roots -----------------------------------------------------------------------------------------
    def roots(self, collection: str) -> list[str]:
        rows = self._db.execute("SELECT path FROM roots WHERE collection=? ORDER BY path", (collection,))
        return [r[0] for r in rows]

    def add_root(self, collection: str, path: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO roots VALUES (?, ?, ?)", (collection, path, time.time()))

    def remove_root(self, collection: str, path: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM roots WHERE collection=? AND path=?", (collection, path))

    # -- files and chunks ------------------------------------------------------------------------------
    def files(self, collection: str, root: str | None = None) -> dict[str, FileRecord]:
        sql = (
            "SELECT path, root, size, mtime_ns, content_hash, status, error, kind, checked_ns FROM files"
            " WHERE collection=?"
        )
        args: tuple[Any, ...] = (collection,)
        if root is not None:
            sql += " AND root=?"
            args += (root,)
        return {r[0]: FileRecord(*r) for r in self._db.execute(sql, args)}

    def chunk_ids(self, collection: str, paths: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for path in paths:
            rows = self._db.execute(
                "SELECT point_id FROM chunks WHERE collection=? AND path=? ORDER BY chunk_index", (collection, path)
            )
            out[path] = [r[0] for r in rows]
        return out

    def chunks(self, collection: str, path: str) -> list[ChunkRecord]:
        rows = self._db.execute(
            "SELECT point_id, path, chunk_index, content_hash, n_tokens FROM chunks"
            " WHERE collection=? AND path=? ORDER BY chunk_index",
            (collection, path),
        )
        return [ChunkRecord(*r) for r in rows]

    def counts(self, collection: str) -> dict[str, int]:
        def one(sql: str) -> int:
            return int(self._db.execute(sql, (collection,)).fetchone()[0])

        return {
            "files": one("SELECT COUNT(*) FROM files WHERE collection=? AND status='indexed'"),
            "failed": one("SELECT COUNT(*) FROM files WHERE collection=? AND status='failed'"),
            "chunks": one("SELECT COUNT(*) FROM chunks WHERE collection=?"),
            "tokens": one("SELECT COALESCE(SUM(n_tokens), 0) FROM chunks WHERE collection=?"),
        }

    def image_points(self, collection: str) -> int:
        """The collection's image points: the chunks made from a picture carry no text, so no tokens (a text
        chunk counts its special tokens at least)."""
        sql = "SELECT COUNT(*) FROM chunks WHERE collection=? AND n_tokens=0"
        return int(self._db.execute(sql, (collection,)).fetchone()[0])

    def last_commit(self, collection: str) -> float | None:
        """When a file of the collection was last committed (seconds since the epoch), None before any."""
        row = self._db.execute("SELECT MAX(checked_ns) FROM files WHERE collection=?", (collection,)).fetchone()
        return row[0] / 1e9 if row and row[0] else None

    def paths(self, collection: str, limit: int) -> list[str]:
        """Up to ``limit`` indexed file paths of the collection, in path order."""
        rows = self._db.execute(
            "SELECT path FROM files WHERE collection=? AND status='indexed' ORDER BY path LIMIT ?", (collection, limit)
        )
        return [r[0] for r in rows]

    def point_ids(self, collection: str) -> set[str]:
        """Every point id a committed chunk of the collection owns."""
        rows = self._db.execute("SELECT point_id FROM chunks WHERE collection=?", (collection,))
        return {r[0] for r in rows}

    def count_points(self, collection: str) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM chunks WHERE collection=?", (collection,)).fetchone()[0])

    def count_pending(self, collection: str) -> int:
        """Point ids of a write in flight (or interrupted): recorded, not yet committed (written or deleted)."""
        return int(self._db.execute("SELECT COUNT(*) FROM pending WHERE collection=?", (collection,)).fetchone()[0])

    def change_mark(self) -> tuple[int, int]:
        """Changes whenever the database is written, by this connection or by any other (threads, processes):
        read it before and after a comparison to know that no commit happened in between."""
        version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        return version, self._db.total_changes

    def pending_ids(self, collection: str) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT point_id FROM pending WHERE collection=?", (collection,))]

    def paths_of_points(self, collection: str, point_ids: Iterable[str]) -> list[str]:
        ids = list(point_ids)
        out: set[str] = set()
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT DISTINCT path FROM chunks WHERE collection=? AND point_id IN ({marks})", (collection, *part)
            )
            out.update(r[0] for r in rows)
        return sorted(out)

    def invalidate_files(self, collection: str, paths: Sequence[str]) -> None:
        """Make the next sync re-read and re-write these files (their chunks and cached vectors are kept)."""
        with self._tx() as db:
            db.executemany(
                "UPDATE files SET content_hash='', checked_ns=0 WHERE collection=? AND path=?",
                [(collection, p) for p in paths],
            )

    def files_under(self, collection: str, path: str) -> dict[str, FileRecord]:
        """The file ``path`` itself and every file below it (``path`` as a folder)."""
        rows = self._db.execute(
            "SELECT path, root, size, mtime_ns, content_hash, status, error, kind, checked_ns FROM files"
            f" WHERE collection=? AND {_UNDER}",
            (collection, *_under(path)),
        )
        return {r[0]: FileRecord(*r) for r in rows}

    def file_stats(self, collection: str, under: str) -> dict[str, FileStat]:
        """``(size, mtime_ns, status, checked_ns)`` of ``under`` and every file below it, by path: what a sync
        compares a scan with. Plain tuples, since a re-run reads one per file (a FileRecord costs 10x more)."""
        rows = self._db.execute(
            f"SELECT path, size, mtime_ns, status, checked_ns FROM files WHERE collection=? AND {_UNDER}",
            (collection, *_under(under)),
        )
        return {r[0]: r[1:] for r in rows}

    def files_at(self, collection: str, paths: Iterable[str]) -> dict[str, FileRecord]:
        """The records of those ``paths`` that the collection has."""
        unique = list(dict.fromkeys(paths))
        out: dict[str, FileRecord] = {}
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                "SELECT path, root, size, mtime_ns, content_hash, status, error, kind, checked_ns FROM files"
                f" WHERE collection=? AND path IN ({marks})",
                (collection, *part),
            )
            out.update((r[0], FileRecord(*r)) for r in rows)
        return out

    def failures(self, collection: str) -> list[tuple[str, str]]:
        rows = self._db.execute(
            "SELECT path, COALESCE(error, '') FROM files WHERE collection=? AND status='failed' ORDER BY path",
            (collection,),
        )
        return [(r[0], r[1]) for r in rows]

    def add_pending(self, collection: str, items: Sequence[tuple[str, str]]) -> None:
        """Record point ids (with their file) before they are written to the store."""
        with self._tx() as db:
            db.executemany(
                "INSERT OR IGNORE INTO pending(collection, point_id, path) VALUES (?, ?, ?)",
                [(collection, pid, path) for pid, path in items],
            )

    def pending_orphans(self, collection: str, keep: Sequence[str] = ()) -> list[str]:
        """Pending point ids that no committed chunk owns: left by an interrupted run (not those of the files
        ``keep``: large files a writer is still writing)."""
        rows = self._db.execute(
            "SELECT p.point_id, p.path FROM pending p LEFT JOIN chunks c"
            " ON c.collection=p.collection AND c.point_id=p.point_id"
            " WHERE p.collection=? AND c.point_id IS NULL",
            (collection,),
        )
        kept = set(keep)
        return [r[0] for r in rows if r[1] not in kept]

    def pending_by_path(self, collection: str) -> dict[str, int]:
        """Per file, how many of its points are written and not yet committed (a large file mid-write)."""
        rows = self._db.execute(
            "SELECT p.path, COUNT(*) FROM pending p LEFT JOIN chunks c"
            " ON c.collection=p.collection AND c.point_id=p.point_id"
            " WHERE p.collection=? AND c.point_id IS NULL GROUP BY p.path",
            (collection,),
        )
        return {str(path): int(n) for path, n in rows}

    def clear_pending(self, collection: str, keep: Sequence[str] = ()) -> None:
        """Forget the pending ids (but those of the files ``keep``)."""
        with self._tx() as db:
            if not keep:
                db.execute("DELETE FROM pending WHERE collection=?", (collection,))
                return
            kept = set(keep)
            paths = [r[0] for r in db.execute("SELECT DISTINCT path FROM pending WHERE collection=?", (collection,))]
            db.executemany("DELETE FROM pending WHERE collection=? AND path=?",
                           [(collection, path) for path in paths if path not in kept])  # fmt: skip

    def commit_files(self, collection: str, updates: Sequence[FileUpdate], removed: Sequence[str] = ()) -> None:
        """Replace the state of ``updates`` and forget ``removed`` files, in one transaction."""
        now = time.time_ns()
        with self._tx() as db:
            for path in removed:
                _delete_fields(db, collection, path)
                db.execute("DELETE FROM chunks WHERE collection=? AND path=?", (collection, path))
                db.execute("DELETE FROM files WHERE collection=? AND path=?", (collection, path))
                db.execute("DELETE FROM pending WHERE collection=? AND path=?", (collection, path))
            for up in updates:
                f = up.file
                db.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (collection, f.path, f.root, f.size, f.mtime_ns, f.content_hash, f.status, f.error, f.kind, now),
                )
                if f.status != "indexed":
                    continue  # a failed file keeps its previous chunks (and points) until it reads again
                _delete_fields(db, collection, f.path)
                db.execute("DELETE FROM chunks WHERE collection=? AND path=?", (collection, f.path))
                db.executemany(
                    "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
                    [(collection, c.point_id, c.path, c.chunk_index, c.content_hash, c.n_tokens) for c in up.chunks],
                )
                db.executemany(
                    "INSERT OR REPLACE INTO chunk_fields VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(collection, *row) for c in up.chunks for row in field_rows(c.point_id, c.fields)],
                )
                db.execute("DELETE FROM pending WHERE collection=? AND path=?", (collection, f.path))

    # -- vector cache ----------------------------------------------------------------------------------
    def cached_vectors(self, model_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT content_hash, vector FROM vector_cache WHERE model_key=? AND content_hash IN ({marks})",
                (model_key, *part),
            )
            for h, blob in rows:
                out[h] = np.frombuffer(blob, dtype=np.float32).copy()
        return out

    def put_vectors(self, model_key: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vector_cache VALUES (?, ?, ?)",
                [(model_key, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items],
            )

    def gc_vector_cache(self, model_key: str) -> int:
        """Drop cached vectors no chunk of any collection refers to any more."""
        with self._tx() as db:
            cur = db.execute(
                "DELETE FROM vector_cache WHERE model_key=? AND content_hash NOT IN (SELECT content_hash FROM chunks)",
                (model_key,),
            )
            return cur.rowcount


# ``path`` itself or a path below it, as one range on the primary key: [path, prefix0) holds ``path``, the paths
# starting with "prefix/" ("0" sorts right after "/") and siblings such as "prefix-old" (sorting before "/"),
# which the last test drops. Takes the parameters of ``_under``.
_UNDER = "path>=? AND path<? AND (path=? OR path>=?)"


def _delete_fields(db: sqlite3.Connection, collection: str, path: str) -> None:
    db.execute(
        "DELETE FROM chunk_fields WHERE collection=? AND point_id IN "
        "(SELECT point_id FROM chunks WHERE collection=? AND path=?)",
        (collection, collection, path),
    )


def _under(path: str) -> tuple[str, str, str, str]:
    base = path.rstrip("/")
    return path, base + "0", path, base + "/"


class _Transaction:
    """``with`` block = one IMMEDIATE transaction (the connection is in autocommit mode otherwise)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
        finally:
            self._lock.release()


def _collection(row: tuple[Any, ...]) -> CollectionRecord:
    name, store, options, metric, model_id, model_path, normalization, dimensions, created_at = row
    # Version 0.1 recorded llama.cpp's integer mode (-1, 2); later versions the Normalization name.
    return CollectionRecord(
        name,
        store,
        json.loads(options),
        metric,
        model_id,
        model_path,
        Normalization.parse(normalization),
        dimensions,
        created_at,
    )
