"""``indexer backup`` / ``indexer restore``: a consistent snapshot of one collection, taken while indexing goes on.

A backup is a folder::

    manifest.json          format, collection, store, schema migrations, the collection record
    state.sqlite           the state rows of this collection only (record, roots, files, chunks, pending ids,
                           the cached vectors its chunks use), copied with SQLite's online backup API
    store/...              the vectors, as the store plugin's ``snapshot`` writes them (FAISS: ``points.sqlite``
                           through the online backup API + ``index.faiss``; embedded Qdrant: its folder; a Qdrant
                           server: ``<collection>.snapshot`` from its snapshot API)

Backup holds no store's file layout: it asks the store plugin (:class:`indexer.ports.StoreSnapshots`). A plugin
without those capabilities is refused, naming it.

Consistency while a writer runs: the store is copied under the store's own writer guard (FAISS ``writer.lock``);
for a single-process store (embedded Qdrant) under the collection's writer lock instead, and
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
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.core import registry
from indexer.core.locks import collection_lock_path, lock_for
from indexer.core.paths import user_path
from indexer.core.snapshots import copy_sqlite
from indexer.errors import ConfigError, InputError, NotFoundError, StateError
from indexer.ports import StoreSnapshots
from indexer.settings import Settings
from indexer.state.database import StateStore
from indexer.state.transfer import collection_row, keep_only, merge_collection

logger = logging.getLogger(__name__)

FORMAT = 1
MANIFEST = "manifest.json"
STATE = "state.sqlite"
STORE = "store"


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


def _vectors(rec: dict[str, Any]) -> str:
    """The store collection holding the collection's vectors (another name after `indexer reindex`)."""
    return str(rec["store_options"].get("vectors") or rec["name"])


def _store_options(settings: Settings, rec: dict[str, Any]) -> dict[str, Any]:
    """The options the store plugin is built from: ours (``vectors``) removed, locations absolute."""
    from indexer.collection.aliases import store_options

    return registry.absolute_options(store_options(rec["store_options"]), settings.data_dir)


def _snapshots(store: str) -> StoreSnapshots:
    capable = registry.snapshots(store)
    if capable is None:
        raise ConfigError(
            f"the {store!r} store plugin has no snapshot support (StoreSnapshots), so backup cannot copy it; "
            "use that store's own tools"
        )
    return capable


# -- backup ------------------------------------------------------------------------------------------------------
def backup(settings: Settings, dest: str | Path) -> BackupReport:
    """Write a snapshot of collection ``settings.collection`` into the new or empty folder ``dest``."""
    started = time.perf_counter()
    name = settings.collection
    dest = user_path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(f"{dest} exists and is not an empty folder; pass a new folder for the backup")
    state_file = _state_file(settings)
    if not state_file.exists():
        raise InputError(f"no state database in {settings.data_dir}; nothing to back up (check INDEXER_DATA_DIR)")
    rec, applied = collection_row(state_file, name)
    if rec is None:
        raise NotFoundError.collection(name)
    store = _snapshots(rec["store"])
    options = _store_options(settings, rec)

    work = Path(tempfile.mkdtemp(prefix=".backup-", dir=dest.parent if dest.parent.exists() else None))
    try:
        with _store_guard(settings, rec, store, options):
            points = store.snapshot(options, _vectors(rec), work / STORE, settings)
            copy_sqlite(state_file, work / STATE)
        counts = keep_only(work / STATE, name)
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


def _store_guard(
    settings: Settings, rec: dict[str, Any], store: StoreSnapshots, options: dict[str, Any]
) -> AbstractContextManager[None]:
    """What keeps the store still while the store and then the state are copied: the collection's writer lock
    for a single-process store (only one process can write it), else the store's own writer guard."""
    if store.single_process(options):
        return _collection_lock(settings, rec["name"])
    return store.writer_guard(options, _vectors(rec))


@contextmanager
def _collection_lock(settings: Settings, name: str) -> Iterator[None]:
    message = (
        f"collection {name!r} (a single-process store) has been written by another process for two minutes; back "
        "it up when indexing ends, or use a store that takes snapshots while it is written (a Qdrant server)"
    )
    with lock_for(collection_lock_path(settings.data_dir, name)).hold(timeout=120.0, message=message):
        yield


# -- restore -----------------------------------------------------------------------------------------------------
def restore(settings: Settings, source: str | Path) -> BackupReport:
    """Bring the collection in backup ``source`` back into ``settings.data_dir`` (it must not exist there)."""
    started = time.perf_counter()
    src = user_path(source)
    try:
        manifest = json.loads((src / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{src} is not an indexer backup (no readable {MANIFEST}): {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise InputError(f"{src} has backup format {manifest.get('format')!r}; this indexer reads format {FORMAT}")
    name, rec = manifest["collection"], manifest["record"]
    store = _snapshots(rec["store"])
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)

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
        target = registry.store_factory(rec["store"]).default_options(data_dir, name, settings)
        options = store.restore_snapshot(src / STORE, rec["store_options"], _vectors(rec), target, settings)
        merge_collection(_state_file(settings), upgraded, name, registry.relative_options(options, data_dir))
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
