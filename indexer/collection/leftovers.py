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

from indexer.core import registry
from indexer.core.paths import within
from indexer.errors import NotFoundError
from indexer.settings import Settings

logger = logging.getLogger(__name__)


def folders(settings: Settings, name: str) -> list[Path]:
    """Folders in the data directory where a store plugin would keep collection ``name`` (call it for a name the
    state has no record of)."""
    data_dir = Path(settings.data_dir).resolve()
    found: list[Path] = []
    for kind in sorted(registry.available(registry.STORES)):
        try:
            options = registry.store_factory(kind).default_options(data_dir, name, settings)
        except Exception:  # noqa: BLE001 - a plugin that needs other settings (a URL) keeps no folder here
            continue
        path = options.get("path") if isinstance(options, dict) else None
        if not path:
            continue
        folder = Path(path).resolve()
        if folder.is_dir() and folder != data_dir and within(str(folder), str(data_dir)) and folder not in found:
            found.append(folder)
    return found


def not_found(settings: Settings, name: str) -> NotFoundError:
    """The collection does not exist; when a store folder of its name does, say so and what to do."""
    left = folders(settings, name)
    if not left:
        return NotFoundError.collection(name)
    shown = ", ".join(str(f) for f in left)
    return NotFoundError(
        f"collection {name!r} is not in the state database, but a store folder of that name exists ({shown}): "
        "left by a first write cut short (a full disk, a kill) or by a replaced state database. `indexer drop "
        f"{name}` removes it; `indexer index PATH -c {name}` adopts it when its settings match, else "
        "replaces it"
    )


def remove(settings: Settings, name: str) -> list[Path]:
    """Delete the store folders of an unrecorded collection (``indexer drop``; close its store first); the ones
    removed."""
    left = folders(settings, name)
    for folder in left:
        logger.warning("removing store folder %s of collection %r, unknown to the state database", folder, name)
        shutil.rmtree(folder, ignore_errors=True)
    return left
