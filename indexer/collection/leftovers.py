"""Store folders the state database does not know: no dead ends.

A first write cut short (a full disk, a kill) or a replaced state database can leave a store folder for a
collection name that has no record. Such a folder is named by ``indexer status`` (with what to do), removed by
``indexer drop NAME``, and replaced by the next ``indexer index`` when it cannot be adopted: its settings cannot
be read, or were never recorded (a shard created without them). Nothing of it was ever committed to the state, so
nothing indexed is lost. A folder whose settings can be read is adopted when they match (an earlier state
database's collection) and refused, naming ``indexer drop``, when they do not.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexer.core import registry
from indexer.core.paths import within
from indexer.errors import NotFoundError, StoreError

if TYPE_CHECKING:
    from indexer.collection.parts import CollectionParts

logger = logging.getLogger(__name__)


def folders(parts: CollectionParts) -> list[Path]:
    """Folders in the data directory where a store plugin would keep collection ``parts.name``, that exist
    while the state has no record of it."""
    if parts.record is not None:
        return []
    data_dir = Path(parts.settings.data_dir).resolve()
    found: list[Path] = []
    for kind in sorted(registry.available(registry.STORES)):
        try:
            options = registry.store_factory(kind).default_options(data_dir, parts.name, parts.settings)
        except Exception:  # noqa: BLE001 - a plugin that needs other settings (a URL) keeps no folder here
            continue
        path = options.get("path") if isinstance(options, dict) else None
        if not path:
            continue
        folder = Path(path).resolve()
        if folder.is_dir() and folder != data_dir and within(str(folder), str(data_dir)) and folder not in found:
            found.append(folder)
    return found


def not_found(parts: CollectionParts) -> NotFoundError:
    """The collection does not exist; when a store folder of its name does, say so and what to do."""
    left = folders(parts)
    if not left:
        return NotFoundError.collection(parts.name)
    shown = ", ".join(str(f) for f in left)
    return NotFoundError(
        f"collection {parts.name!r} is not in the state database, but a store folder of that name exists ({shown}): "
        "left by a first write cut short (a full disk, a kill) or by a replaced state database. `indexer drop "
        f"{parts.name}` removes it; `indexer index PATH -c {parts.name}` adopts it when its settings match, else "
        "replaces it"
    )


def remove(parts: CollectionParts) -> list[Path]:
    """Delete the store folders of an unrecorded collection (``indexer drop``); the ones removed."""
    left = folders(parts)
    parts.drop_store()
    for folder in left:
        logger.warning("removing store folder %s of collection %r, unknown to the state database", folder, parts.name)
        shutil.rmtree(folder, ignore_errors=True)
    return left


def adoptable_meta(parts: CollectionParts, identity: dict[str, Any]) -> dict[str, str] | None:
    """The store's meta of a collection the state does not know (None when there is none), after replacing a
    leftover that cannot be adopted: its settings unreadable, or none of ``identity``'s keys recorded."""
    try:
        meta = parts.store.collection_meta(parts.name)
    except StoreError as exc:
        why = f"it cannot be read ({exc})"
    else:
        if meta is None or any(meta.get(key) is not None for key in identity):
            return meta
        why = "its settings were never recorded (a first write cut short)"
    logger.warning("replacing the store's collection %r, unknown to the state database: %s", parts.name, why)
    parts.store.drop(parts.name)
    return None
