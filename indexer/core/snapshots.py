"""Copying live files for snapshots: SQLite's online backup API (WAL included) and plain files."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from indexer.errors import InputError


def copy_sqlite(src: Path, dest: Path) -> None:
    """A consistent copy of a live SQLite database (its WAL included), via the online backup API."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=60.0)
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def count_rows(db_file: Path, table: str) -> int:
    """Rows of ``table`` in the SQLite file ``db_file`` (0 when it has no such table)."""
    db = sqlite3.connect(db_file)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def copy_folder(src: Path, dest: Path, *, skip: tuple[str, ...] = (), skip_dir_suffixes: tuple[str, ...] = ()) -> None:
    """Copy the folder ``src`` into ``dest`` (created), SQLite files through :func:`copy_sqlite`; files named in
    ``skip`` and folders whose name ends with one of ``skip_dir_suffixes`` (work in progress) are left out."""
    for path in src.rglob("*"):
        if path.is_dir() or path.name in skip:
            continue
        if skip_dir_suffixes and any(part.endswith(skip_dir_suffixes) for part in path.relative_to(src).parts[:-1]):
            continue
        target = dest / path.relative_to(src)
        if path.suffix == ".sqlite":
            copy_sqlite(path, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def restore_folder(src: Path, target: Path) -> None:
    """Put a snapshot folder back at ``target``, which must be missing or empty."""
    if target.exists() and any(target.iterdir()):
        raise InputError(f"{target} already holds store files; restore into an empty data directory")
    shutil.copytree(src, target, dirs_exist_ok=True)
