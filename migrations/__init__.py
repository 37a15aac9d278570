"""Schema migrations of the SQLite state store, shipped in the wheel as ``indexer.migrations``.

Each migration is a named function taking a connection, listed in ``MIGRATIONS`` in the order they apply.
:func:`upgrade` applies the ones not yet recorded in ``schema_migrations``, each together with its record in
one ``BEGIN IMMEDIATE`` transaction: a failing migration leaves neither schema changes nor its record.
Statements run one by one through :func:`run_script`, which splits a script with SQLite's own
``sqlite3.complete_statement`` (``;`` inside string literals, comments and trigger bodies stay put);
``executescript`` is never used, because it commits the open transaction first.

Never edit a released migration: add a new one (``m0003_...``) at the end of ``MIGRATIONS``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

Migration = Callable[[sqlite3.Connection], None]


class NewerStateError(Exception):
    """The database records migrations this code does not know (translated to StateError by the caller)."""


def split_statements(script: str) -> Iterator[str]:
    """The complete SQL statements of ``script``, in order, as SQLite itself delimits them."""
    pending = ""
    for piece in script.split(";"):
        pending = f"{pending}{piece};"
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                yield pending.strip()
            pending = ""
    if _has_code(pending[:-1]):
        raise ValueError(f"incomplete SQL statement at the end of a migration script: {pending[:-1].strip()[:80]!r}")


def _has_code(text: str) -> bool:
    """False for text that is only whitespace, ``;`` and comments."""
    for line in text.splitlines():
        code = line.split("--", 1)[0].strip().strip(";").strip()
        if code and not code.startswith("/*"):
            return True
    return False


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute every statement of ``script`` inside the caller's transaction."""
    for statement in split_statements(script):
        db.execute(statement)


# -- the migrations --------------------------------------------------------------------------------------------
def m0001_initial(db: sqlite3.Connection) -> None:
    """Collections, their roots, indexed files, their chunks, pending write intents and the vector cache."""
    run_script(
        db,
        """
        CREATE TABLE collections (
            name TEXT PRIMARY KEY,
            store TEXT NOT NULL,           -- plugin name: faiss, qdrant
            store_options TEXT NOT NULL,   -- JSON: location, index type, url (never the API key)
            metric TEXT NOT NULL,
            model_id TEXT NOT NULL,
            model_path TEXT NOT NULL,
            normalization INTEGER NOT NULL,
            dimensions INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE roots (
            collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
            path TEXT NOT NULL,
            added_at REAL NOT NULL,
            PRIMARY KEY (collection, path)
        );
        CREATE TABLE files (
            collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
            path TEXT NOT NULL,
            root TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            status TEXT NOT NULL,          -- indexed | failed
            error TEXT,
            kind TEXT,
            checked_ns INTEGER NOT NULL,   -- wall clock when this row was written (racy-mtime rule)
            PRIMARY KEY (collection, path)
        );
        CREATE INDEX files_root ON files(collection, root);
        CREATE TABLE chunks (
            collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
            point_id TEXT NOT NULL,
            path TEXT NOT NULL,
            chunk_index INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            n_tokens INTEGER NOT NULL,
            PRIMARY KEY (collection, point_id)
        );
        CREATE INDEX chunks_path ON chunks(collection, path);
        CREATE INDEX chunks_hash ON chunks(content_hash);
        -- Point ids about to be written to the store. Written (committed) before the upsert, cleared with the
        -- file's final state, so ids of an interrupted run can always be found and cleaned up.
        CREATE TABLE pending (
            collection TEXT NOT NULL,
            point_id TEXT NOT NULL,
            path TEXT NOT NULL,
            PRIMARY KEY (collection, point_id)
        );
        -- Vectors by (model, normalization, chunk text hash): unchanged and moved chunks are never re-embedded.
        CREATE TABLE vector_cache (
            model_key TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model_key, content_hash)
        );
        """,
    )


def m0002_relative_store_paths(db: sqlite3.Connection) -> None:
    """Store locations inside the data directory become relative to it (0.1 recorded absolute paths).

    0.1 created every embedded store at ``<data dir>/faiss/<name>`` or ``<data dir>/qdrant/<name>`` of the data
    directory holding the state. A path of that form is rewritten to ``faiss/<name>`` (resolved against the data
    directory on open), so a moved or copied data directory uses its own store, never the original's. Any other
    path (a store placed elsewhere by hand) is left as it is.
    """
    for name, store, raw in db.execute("SELECT name, store, store_options FROM collections").fetchall():
        options = json.loads(raw)
        path = options.get("path")
        if not isinstance(path, str) or not Path(path).is_absolute():
            continue
        p = Path(path)
        if p.parent.name == store and p.name == name:
            options["path"] = str(Path(store) / name)
            db.execute(
                "UPDATE collections SET store_options=? WHERE name=?", (json.dumps(options, sort_keys=True), name)
            )


def m0003_filter_fields(db: sqlite3.Connection) -> None:
    """The filterable metadata and location values of every chunk (indexer.state.fields), outside the point ids.

    Collections that exist already are listed in ``fields_backfill``: their next `indexer index` records their
    fields from the store's payloads (no re-embedding); until then, a filter on a metadata field names that step.
    """
    run_script(
        db,
        """
        CREATE TABLE chunk_fields (
            collection TEXT NOT NULL,
            point_id TEXT NOT NULL,
            name TEXT NOT NULL,            -- lower case: sender, date, sheet, ...
            value TEXT NOT NULL,           -- as the reader wrote it (capped)
            folded TEXT NOT NULL,          -- lower case, for any-case matching
            num REAL,                      -- a number, or a date in seconds since the epoch; NULL for text
            kind TEXT NOT NULL,            -- text | number | date
            PRIMARY KEY (collection, point_id, name)
        );
        CREATE INDEX chunk_fields_text ON chunk_fields(collection, name, folded);
        CREATE INDEX chunk_fields_num ON chunk_fields(collection, name, num);
        CREATE TABLE fields_backfill (collection TEXT PRIMARY KEY);
        INSERT INTO fields_backfill SELECT DISTINCT collection FROM chunks;
        """,
    )


MIGRATIONS: list[Migration] = [m0001_initial, m0002_relative_store_paths, m0003_filter_fields]


# -- the runner ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MigrationPlan:
    applied: tuple[str, ...]  # recorded in the database, in the order they were applied
    pending: tuple[str, ...]  # known here, not applied yet, in the order they will apply
    unknown: tuple[str, ...]  # recorded but not known here: the database is newer than this code

    def to_dict(self) -> dict[str, list[str]]:
        return {"applied": list(self.applied), "pending": list(self.pending), "unknown": list(self.unknown)}


def _ensure_table(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")


def plan(db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> MigrationPlan:
    """What :func:`upgrade` would do, without changing anything (a missing table means nothing applied)."""
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone()
    rows = db.execute("SELECT name FROM schema_migrations ORDER BY applied_at, name").fetchall() if exists else []
    applied = tuple(r[0] for r in rows)
    known = [m.__name__ for m in migrations]
    return MigrationPlan(
        applied=applied,
        pending=tuple(n for n in known if n not in applied),
        unknown=tuple(sorted(set(applied) - set(known))),
    )


def upgrade(db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the pending migrations (``db`` in autocommit mode); returns the names applied by this call.

    Raises :class:`NewerStateError` before touching anything when the database knows migrations this code
    does not.
    """
    _ensure_table(db)
    current = plan(db, migrations)
    if current.unknown:
        raise NewerStateError(", ".join(current.unknown))
    done = []
    for migration in migrations:
        if migration.__name__ not in current.pending:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the write lock.
            if db.execute("SELECT 1 FROM schema_migrations WHERE name=?", (migration.__name__,)).fetchone():
                db.execute("COMMIT")
                continue
            migration(db)
            db.execute(
                "INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (migration.__name__, time.time())
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        logger.info("applied migration %s", migration.__name__)
        done.append(migration.__name__)
    return done
