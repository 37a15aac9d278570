"""``indexer backup`` / ``indexer restore``: a consistent snapshot of one collection, taken while indexing goes on.

A backup is a folder::

    manifest.json          format, collection, store, schema migrations, the collection record
    state.sqlite           the state rows of this collection only (record, roots, files, chunks, pending ids,
                           the cached vectors its chunks use), copied with SQLite's online backup API
    store/...              the vectors: FAISS ``points.sqlite`` (online backup API) + ``index.faiss``;
                           embedded Qdrant: its folder; Qdrant server: ``<collection>.snapshot`` (its snapshot API)

Consistency while a writer runs: the store is copied under the store's own writer lock (FAISS
``writer.lock``; for embedded Qdrant the collection's writer lock, since only one process can write it), and
the state is copied while that lock is still held, so no store write falls between the two copies. A batch the
writer had in flight is either complete in both, or recorded as *pending* point ids in the state copy (the
first sync after a restore deletes those points), or its files still carry their old content hash (the next sync
re-reads them). A restored collection therefore searches at once and catches up with the files on its next
sync, embedding only what changed since the backup.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer import migrations
from indexer.core.locks import collection_lock_path, lock_for
from indexer.errors import ConfigError, InputError, StateError, StoreError
from indexer.settings import Settings

logger = logging.getLogger(__name__)

FORMAT = 1
MANIFEST = "manifest.json"
STATE = "state.sqlite"
STORE = "store"
_TABLES = ("collections", "roots", "files", "chunks", "pending")


@dataclass(frozen=True)
class BackupReport:
    collection: str
    path: str
    store: str
    files: int
    chunks: int
    points: int
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


# -- helpers -----------------------------------------------------------------------------------------------------
def _state_file(settings: Settings) -> Path:
    return Path(settings.data_dir) / "state.sqlite"


def _store_dir(settings: Settings, options: dict[str, Any]) -> Path | None:
    """The embedded store folder of a collection (relative locations are inside the data directory)."""
    path = options.get("path")
    if not path:
        return None
    p = Path(path)
    return p if p.is_absolute() else Path(settings.data_dir) / p


def _vectors(rec: dict[str, Any]) -> str:
    """The store collection holding the collection's vectors (another name after `indexer reindex`)."""
    return str(rec["store_options"].get("vectors") or rec["name"])


def _sqlite_copy(src: Path, dest: Path) -> None:
    """A consistent copy of a live SQLite database (WAL included), via the online backup API."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=60.0)
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    db.execute("PRAGMA foreign_keys=OFF")
    return db


def _record(db: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    db.row_factory = sqlite3.Row
    try:
        row = db.execute("SELECT * FROM collections WHERE name=?", (name,)).fetchone()
    finally:
        db.row_factory = None
    if row is None:
        return None
    out = dict(row)
    out["store_options"] = json.loads(out["store_options"])
    return out


@contextmanager
def _flock(path: Path, timeout: float = 120.0) -> Iterator[None]:
    """The FAISS store's cross-process writer lock (waits for a writer's current operation, not its run)."""
    from plugins.faiss.locking import WriterLock

    lock = WriterLock(path, timeout)
    try:
        with lock.hold():
            yield
    finally:
        lock.close()


# -- backup ------------------------------------------------------------------------------------------------------
def backup(settings: Settings, dest: str | Path) -> BackupReport:
    """Write a snapshot of collection ``settings.collection`` into the new or empty folder ``dest``."""
    started = time.perf_counter()
    name = settings.collection
    dest = Path(dest).expanduser().resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(f"{dest} exists and is not an empty folder; pass a new folder for the backup")
    state_file = _state_file(settings)
    if not state_file.exists():
        raise InputError(f"no state database in {settings.data_dir}; nothing to back up (check INDEXER_DATA_DIR)")
    probe = _connect(state_file)
    try:
        rec = _record(probe, name)
        applied = migrations.plan(probe).applied
    finally:
        probe.close()
    if rec is None:
        raise InputError(f"collection {name!r} does not exist in {settings.data_dir}; `indexer collections` lists them")

    work = Path(tempfile.mkdtemp(prefix=".backup-", dir=dest.parent if dest.parent.exists() else None))
    try:
        with _store_guard(settings, rec):
            points = _copy_store(settings, rec, work / STORE)
            _sqlite_copy(state_file, work / STATE)
        counts = _keep_only(work / STATE, name)
        manifest = {
            "format": FORMAT,
            "collection": name,
            "store": rec["store"],
            "created_at": time.time(),
            "migrations": list(applied),
            "record": rec,
            "counts": {**counts, "points": points},
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        if dest.exists():
            dest.rmdir()
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    report = BackupReport(
        name, str(dest), rec["store"], counts["files"], counts["chunks"], points, time.perf_counter() - started
    )
    logger.info("backed up %s to %s", name, dest)
    return report


def _store_guard(settings: Settings, rec: dict[str, Any]) -> Any:
    """The lock that keeps the store still while the store and then the state are copied."""
    folder = _store_dir(settings, rec["store_options"])
    if rec["store"] == "faiss" and folder is not None:
        return _flock(folder / _vectors(rec) / "writer.lock")
    if rec["store"] == "qdrant" and folder is not None:
        return _collection_lock(settings, rec["name"])
    return nullcontext()


@contextmanager
def _collection_lock(settings: Settings, name: str) -> Iterator[None]:
    """Embedded Qdrant has one writer process at a time: wait for the collection's writer lock."""
    message = (
        f"collection {name!r} (embedded Qdrant) has been written by another process for two minutes; back it up "
        "when indexing ends, or use a Qdrant server (snapshots while writing)"
    )
    with lock_for(collection_lock_path(settings.data_dir, name)).hold(timeout=120.0, message=message):
        yield


def _copy_store(settings: Settings, rec: dict[str, Any], dest: Path) -> int:
    """Copy the collection's vectors into ``dest``; returns the number of points copied."""
    name, options = _vectors(rec), rec["store_options"]
    folder = _store_dir(settings, options)
    if rec["store"] == "faiss" and folder is not None:
        src = folder / name
        _sqlite_copy(src / "points.sqlite", dest / name / "points.sqlite")
        if (src / "index.faiss").exists():
            shutil.copy2(src / "index.faiss", dest / name / "index.faiss")
        db = sqlite3.connect(dest / name / "points.sqlite")
        try:
            return int(db.execute("SELECT COUNT(*) FROM points").fetchone()[0])
        finally:
            db.close()
    if rec["store"] == "qdrant" and folder is not None:
        return _copy_embedded_qdrant(folder, dest)
    if rec["store"] == "qdrant" and options.get("url"):
        return _qdrant_server_snapshot(settings, options["url"], name, dest)
    raise ConfigError(f"backup does not know how to copy a {rec['store']!r} store; use that store's own tools")


def _copy_embedded_qdrant(folder: Path, dest: Path) -> int:
    points = 0
    for src in folder.rglob("*"):
        if src.is_dir() or src.name == ".lock":
            continue
        target = dest / src.relative_to(folder)
        if src.suffix == ".sqlite":
            _sqlite_copy(src, target)
            db = sqlite3.connect(target)
            try:
                points += int(db.execute("SELECT COUNT(*) FROM points").fetchone()[0])
            except sqlite3.Error:
                pass
            finally:
                db.close()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return points


def _qdrant_server_snapshot(settings: Settings, url: str, name: str, dest: Path) -> int:
    """Qdrant's own snapshot API: create, download into ``dest``, delete the server-side copy."""
    import httpx
    from qdrant_client import QdrantClient

    client = QdrantClient(url=url, api_key=settings.qdrant_api_key, timeout=300, check_compatibility=False)
    try:
        snap = client.create_snapshot(name, wait=True)
        if snap is None:
            raise StoreError(f"Qdrant at {url} made no snapshot of {name!r}")
        count = int(client.count(name, exact=True).count)
        headers = {"api-key": settings.qdrant_api_key} if settings.qdrant_api_key else {}
        dest.mkdir(parents=True, exist_ok=True)
        with httpx.stream(
            "GET", f"{url.rstrip('/')}/collections/{name}/snapshots/{snap.name}", headers=headers, timeout=300
        ) as response:
            response.raise_for_status()
            with open(dest / f"{name}.snapshot", "wb") as fh:
                for part in response.iter_bytes():
                    fh.write(part)
        client.delete_snapshot(name, snap.name)
        return count
    except (httpx.HTTPError, OSError, ValueError, RuntimeError) as exc:
        raise StoreError(f"Qdrant snapshot of {name!r} at {url} failed: {exc}; check the server and API key") from exc
    finally:
        client.close()


def _keep_only(path: Path, name: str) -> dict[str, int]:
    """Reduce a copy of the state database to one collection (and the cached vectors its chunks use)."""
    db = _connect(path)
    try:
        db.execute("BEGIN")
        for table in _TABLES:
            column = "name" if table == "collections" else "collection"
            db.execute(f"DELETE FROM {table} WHERE {column} != ?", (name,))
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


# -- restore -----------------------------------------------------------------------------------------------------
def restore(settings: Settings, source: str | Path) -> BackupReport:
    """Bring the collection in backup ``source`` back into ``settings.data_dir`` (it must not exist there)."""
    started = time.perf_counter()
    src = Path(source).expanduser().resolve()
    try:
        manifest = json.loads((src / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{src} is not an indexer backup (no readable {MANIFEST}): {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise InputError(f"{src} has backup format {manifest.get('format')!r}; this indexer reads format {FORMAT}")
    name, rec = manifest["collection"], manifest["record"]
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)

    from indexer.state.store import StateStore

    with tempfile.TemporaryDirectory(dir=data_dir) as tmp:
        upgraded = Path(tmp) / STATE
        shutil.copy2(src / STATE, upgraded)
        try:
            StateStore(upgraded).close()  # brings an older backup's schema up to this code (a newer one is refused)
        except StateError as exc:
            raise StateError(f"cannot restore {src}: {exc}") from exc
        state = StateStore(_state_file(settings))  # the target, created and migrated when new
        try:
            if state.get_collection(name) is not None:
                raise InputError(
                    f"collection {name!r} already exists in {data_dir}; restore into another INDEXER_DATA_DIR "
                    f"or drop it first (`indexer drop {name}`)"
                )
        finally:
            state.close()
        options = _restore_store(settings, rec, src / STORE)
        _merge_state(_state_file(settings), upgraded, name, options)
    counts = manifest.get("counts", {})
    logger.info("restored %s from %s", name, src)
    return BackupReport(
        name,
        str(src),
        rec["store"],
        int(counts.get("files", 0)),
        int(counts.get("chunks", 0)),
        int(counts.get("points", 0)),
        time.perf_counter() - started,
    )


def _restore_store(settings: Settings, rec: dict[str, Any], src: Path) -> dict[str, Any]:
    """Put the vectors back; returns the store options to record (embedded stores: inside the data dir)."""
    options = dict(rec["store_options"])
    data_dir = Path(settings.data_dir)
    if options.get("url"):
        vectors = _vectors(rec)
        _qdrant_server_restore(settings, options["url"], vectors, src / f"{vectors}.snapshot")
        return options
    relative = Path(rec["store"]) / rec["name"]
    target = data_dir / relative
    if target.exists() and any(target.iterdir()):
        raise InputError(f"{target} already holds store files; restore into an empty data directory")
    shutil.copytree(src, target, dirs_exist_ok=True)
    options["path"] = str(relative)  # inside the data directory: relative, so the directory can move
    return options


def _qdrant_server_restore(settings: Settings, url: str, name: str, snapshot: Path) -> None:
    import httpx

    headers = {"api-key": settings.qdrant_api_key} if settings.qdrant_api_key else {}
    try:
        with open(snapshot, "rb") as fh:
            response = httpx.post(
                f"{url.rstrip('/')}/collections/{name}/snapshots/upload",
                params={"priority": "snapshot", "wait": "true"},
                files={"snapshot": (snapshot.name, fh)},
                headers=headers,
                timeout=600,
            )
        response.raise_for_status()
    except (httpx.HTTPError, OSError) as exc:
        raise StoreError(f"cannot restore Qdrant collection {name!r} at {url}: {exc}") from exc


def _merge_state(target: Path, backup_db: Path, name: str, options: dict[str, Any]) -> None:
    """Copy the collection's rows from the (upgraded) backup database into the data directory's state."""
    from indexer.state.store import attached_transaction

    with attached_transaction(target, backup_db, "b") as db:
        for table in _TABLES:
            column = "name" if table == "collections" else "collection"
            db.execute(f"INSERT INTO main.{table} SELECT * FROM b.{table} WHERE {column}=?", (name,))
        db.execute("INSERT OR IGNORE INTO main.vector_cache SELECT * FROM b.vector_cache")
        db.execute(
            "UPDATE main.collections SET store_options=? WHERE name=?", (json.dumps(options, sort_keys=True), name)
        )
