"""One collection's rows between state databases: a reindex switch, a backup's copy, a restore.

Each function opens the SQLite files itself (read-only where it only reads) and does its work in one
transaction, all or nothing; the live store (``StateStore``) is in database.py.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from indexer.core.normalization import Normalization
from indexer.migrations import plan
from indexer.state.database import CollectionRecord


@contextmanager
def attached_transaction(path: Path, other: Path, alias: str) -> Iterator[sqlite3.Connection]:
    """One write transaction on the state database at ``path`` with the database ``other`` attached as ``alias``:
    committed when the block ends, rolled back if it raises. A restore (backup.py) and a reindex switch
    (reindex.py) copy a collection's rows between state databases this way, all or nothing."""
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    try:
        db.execute("PRAGMA foreign_keys=OFF")
        db.execute(f"ATTACH DATABASE ? AS {alias}", (str(other),))
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute(f"DETACH DATABASE {alias}")
    finally:
        db.close()


# -- one collection's rows between state databases (reindex switch, backup, restore) ------------------------------
# all but the shared vector cache
_COLLECTION_TABLES = ("collections", "roots", "files", "chunks", "pending", "chunk_fields", "fields_backfill")


def _key_column(table: str) -> str:
    return "name" if table == "collections" else "collection"


def _read_only(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)


def count_files(path: Path, collection: str) -> int:
    """Files recorded for ``collection`` in the state database at ``path`` (0 when it cannot be read yet)."""
    try:
        db = _read_only(path, 10.0)
    except sqlite3.Error:
        return 0
    try:
        return int(db.execute("SELECT COUNT(*) FROM files WHERE collection=?", (collection,)).fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def cached_vectors(path: Path, collection: str, model_key: str, limit: int) -> list[tuple[str, bytes]]:
    """Up to ``limit`` (content hash, vector blob) pairs of the vector cache that ``collection``'s chunks use."""
    db = _read_only(path)
    try:
        return db.execute(
            "SELECT v.content_hash, v.vector FROM vector_cache v JOIN chunks c ON c.content_hash = v.content_hash"
            " WHERE v.model_key=? AND c.collection=? LIMIT ?",
            (model_key, collection, limit),
        ).fetchall()
    finally:
        db.close()


def switch_collection(path: Path, shadow: Path, rec: CollectionRecord) -> None:
    """A reindex switch, in one transaction: ``rec`` (the new model and vectors) becomes the collection's record
    and its files, chunks and pending ids become those of the ``shadow`` state database."""
    with attached_transaction(path, shadow, "shadow") as db:
        db.execute(
            "UPDATE collections SET store_options=?, model_id=?, model_path=?, normalization=?, dimensions=?"
            " WHERE name=?",
            (
                json.dumps(rec.store_options, sort_keys=True),
                rec.model_id,
                rec.model_path,
                Normalization.parse(rec.normalization).value,
                rec.dimensions,
                rec.name,
            ),
        )
        for table in ("chunks", "files", "pending", "chunk_fields", "fields_backfill"):
            db.execute(f"DELETE FROM main.{table} WHERE collection=?", (rec.name,))
            db.execute(f"INSERT INTO main.{table} SELECT * FROM shadow.{table} WHERE collection=?", (rec.name,))
        db.execute("INSERT OR IGNORE INTO main.vector_cache SELECT * FROM shadow.vector_cache")


def collection_row(path: Path, name: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """The raw record of collection ``name`` (store options parsed) and the migrations applied to ``path``."""
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM collections WHERE name=?", (name,)).fetchone()
        db.row_factory = None
        applied = tuple(plan(db).applied)
    finally:
        db.close()
    if row is None:
        return None, applied
    out = dict(row)
    out["store_options"] = json.loads(out["store_options"])
    return out, applied


def keep_only(path: Path, name: str) -> dict[str, int]:
    """Reduce a copy of a state database to collection ``name`` and the cached vectors its chunks use; returns
    its counts of indexed files and chunks."""
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    try:
        db.execute("PRAGMA foreign_keys=OFF")
        db.execute("BEGIN")
        for table in _COLLECTION_TABLES:
            db.execute(f"DELETE FROM {table} WHERE {_key_column(table)} != ?", (name,))
        db.execute(
            "DELETE FROM vector_cache WHERE content_hash NOT IN (SELECT content_hash FROM chunks WHERE collection=?)",
            (name,),
        )
        db.execute("COMMIT")
        db.execute("VACUUM")
        files = int(db.execute("SELECT COUNT(*) FROM files WHERE status='indexed'").fetchone()[0])
        chunks = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        return {"files": files, "chunks": chunks}
    finally:
        db.close()


def merge_collection(path: Path, other: Path, name: str, store_options: dict[str, Any]) -> None:
    """Copy collection ``name``'s rows from the state database ``other`` (same schema) into ``path``, in one
    transaction, recording ``store_options`` for it (a restore)."""
    with attached_transaction(path, other, "b") as db:
        for table in _COLLECTION_TABLES:
            db.execute(f"INSERT INTO main.{table} SELECT * FROM b.{table} WHERE {_key_column(table)}=?", (name,))
        db.execute("INSERT OR IGNORE INTO main.vector_cache SELECT * FROM b.vector_cache")
        options = json.dumps(store_options, sort_keys=True)
        db.execute("UPDATE main.collections SET store_options=? WHERE name=?", (options, name))
