"""Schema migrations of the SQLite state store, shipped in the wheel as ``indexer.migrations``.

Each migration is a named function taking a connection. ``indexer.state`` applies the ones not yet recorded in
``schema_migrations``, each together with its record in one transaction, in the order of ``MIGRATIONS``.
Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def _execute_all(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (``executescript`` would commit first)."""
    for statement in script.split(";"):
        lines = [line.split("--")[0] for line in statement.splitlines()]
        if "".join(lines).strip():
            db.execute("\n".join(lines))


def m0001_initial(db: sqlite3.Connection) -> None:
    """Collections, their roots, indexed files, their chunks, pending write intents and the vector cache."""
    _execute_all(
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


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [m0001_initial]
