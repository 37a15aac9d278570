"""The Python functions the filter SQL of :mod:`indexer.state.fields` calls (registered on the state database's
connection): a file's type, its path relative to its root, globs, the ``folder`` facet and a month."""

from __future__ import annotations

import fnmatch
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path


# -- the functions the SQL calls -----------------------------------------------------------------------------------
def file_type(path: str, kind: str | None) -> str:
    """A chunk's ``type``: its file's extension, else its reader kind (as in the store's payload)."""
    return Path(path).suffix.lower().lstrip(".") or (kind or "")


def _rel(path: str, root: str) -> str | None:
    """A file's path relative to its root, folded (None outside it)."""
    if not root or not path.startswith(root.rstrip("/") + "/"):
        return None
    return path[len(root.rstrip("/")) + 1:].lower()


def _glob(path: str, root: str, pattern: str) -> bool:
    """``path~PATTERN``: the folded absolute or root-relative path matches the (folded) glob."""
    rel = _rel(path, root)
    return fnmatch.fnmatchcase(path.lower(), pattern) or (rel is not None and fnmatch.fnmatchcase(rel, pattern))


def folder(path: str, root: str) -> str:
    """A chunk's ``folder`` facet: the root's name and the first folder below it (``notes/work``)."""
    base = os.path.basename(root.rstrip("/")) or root
    rel = os.path.relpath(os.path.dirname(path), root) if root and path.startswith(root) else ""
    first = "" if rel in ("", ".") else rel.split(os.sep, 1)[0]
    return f"{base}/{first}" if first else base


def month(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, tz=timezone.utc).strftime("%Y-%m")


def register(db: sqlite3.Connection) -> None:
    """The Python functions the filter SQL uses, on one connection."""
    db.create_function("idx_type", 2, file_type, deterministic=True)
    db.create_function("idx_glob", 3, _glob, deterministic=True)
    db.create_function("idx_rel", 2, _rel, deterministic=True)
    db.create_function("idx_fnmatch", 2, lambda v, p: fnmatch.fnmatchcase(v or "", p), deterministic=True)
    db.create_function("idx_folder", 2, folder, deterministic=True)
    db.create_function("idx_month", 1, month, deterministic=True)
