"""Plugin discovery through entry points. Built-ins are registered in pyproject.toml exactly like third-party ones.

Groups (see docs/plugins.md for how to write one):

- ``indexer.stores``: a :class:`~indexer.ports.StoreFactory` (usually the VectorStore class itself, with the
  classmethods ``default_options`` and ``from_options``);
- ``indexer.sources``: a :class:`~indexer.ports.SourceFactory` (usually the Source class, with the classmethod
  ``from_settings``);
- ``indexer.readers``: a :class:`~indexer.ports.Reader` class (or any callable returning a Reader).

A third-party package adds its own with, in its pyproject.toml::

    [project.entry-points."indexer.readers"]
    docx = "my_package.readers:DocxReader"

The core builds every part through the functions here, with options passed generically: it never names a plugin's
constructor arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexer.core.entry_points import (
    GROUPS,
    OUR_DISTRIBUTION,
    READERS,
    SOURCES,
    STORES,
    available,
    distribution,
    load,
    load_all,
    names,
    refresh,
    target,
)
from indexer.errors import ConfigError, IndexerError
from indexer.ports import (
    Reader,
    Source,
    SourceFactory,
    SourcePlugin,
    StoreFactory,
    StoreProcesses,
    StoreSnapshots,
    VectorStore,
    as_source,
)
from indexer.types import Metric

if TYPE_CHECKING:
    from indexer.settings import Settings

logger = logging.getLogger(__name__)

__all__ = [
    "GROUPS", "OUR_DISTRIBUTION", "READERS", "SOURCES", "STORES", "absolute_options", "available", "load", "load_all",
    "load_readers", "names", "new_store_options", "open_source", "open_store", "refresh", "relative_options",
    "single_process", "snapshots", "store_factory",
]

# -- stores ------------------------------------------------------------------------------------------------
def store_factory(name: str) -> StoreFactory:
    factory = load(STORES, name)
    if not isinstance(factory, StoreFactory):
        raise ConfigError(
            f"store plugin {name!r} ({target(STORES, name)}) has no default_options/from_options; "
            "see docs/plugins.md for what a store plugin provides"
        )
    return factory


def new_store_options(settings: Settings, collection: str) -> dict[str, Any]:
    """The options a new collection's store is created with (recorded in the state database).

    The plugin's defaults for this data directory and collection, with ``settings.store_options`` laid over them.
    """
    factory = store_factory(settings.store)
    options = dict(factory.default_options(Path(settings.data_dir), collection, settings))
    options.update(settings.store_options)
    return options


def relative_options(options: Mapping[str, Any], data_dir: str | Path) -> dict[str, Any]:
    """Options as recorded: a ``path`` inside the data directory relative to it (the directory can move)."""
    out = dict(options)
    path = out.get("path")
    if path is not None and Path(path).is_absolute():
        root, resolved = Path(data_dir).resolve(), Path(path).resolve()
        if resolved == root or root in resolved.parents:
            out["path"] = str(resolved.relative_to(root))
    return out


def absolute_options(options: Mapping[str, Any], data_dir: str | Path) -> dict[str, Any]:
    """Recorded options with a relative ``path`` resolved against the data directory."""
    path = options.get("path")
    if path is None or Path(path).is_absolute():
        return dict(options)
    return {**options, "path": str(Path(data_dir) / path)}


def snapshots(name: str) -> StoreSnapshots | None:
    """The store plugin's snapshot capabilities (backup, restore), or None when it has none."""
    factory = store_factory(name)
    return factory if isinstance(factory, StoreSnapshots) else None


def single_process(name: str, options: Mapping[str, Any]) -> bool:
    """Whether only one process at a time may open store ``name`` with ``options`` (embedded Qdrant)."""
    factory = store_factory(name)
    return bool(factory.single_process(options)) if isinstance(factory, StoreProcesses) else False


def open_store(name: str, options: Mapping[str, Any], metric: Metric, settings: Settings) -> VectorStore:
    """Build the store plugin ``name`` from recorded ``options``; bad options are a ConfigError naming them."""
    factory = store_factory(name)
    try:
        store = factory.from_options(dict(options), Metric(metric), settings)
    except IndexerError:
        raise
    except (TypeError, KeyError, ValueError) as exc:
        raise ConfigError(
            f"store plugin {name!r} cannot be built from options {dict(options)!r}: {exc}; fix store_options"
        ) from exc
    if not isinstance(store, VectorStore):
        raise ConfigError(f"store plugin {name!r} built {type(store).__name__}, which is not a VectorStore")
    return store


# -- sources and readers -------------------------------------------------------------------------------------
def load_readers() -> list[Reader]:
    """One instance of every registered reader: ours first, then third-party ones by name (so a third-party
    reader wins an extension both claim). A reader that fails to load is logged and skipped."""
    eps = available(READERS)
    order = sorted(eps, key=lambda n: (distribution(eps[n]) != OUR_DISTRIBUTION, n))
    readers: list[Reader] = []
    for name in order:
        try:
            reader = _instantiate(load(READERS, name))
        except Exception as exc:  # a broken third-party reader must not stop indexing with the others
            logger.warning("skipping reader plugin %r: %s", name, exc)
            continue
        if not isinstance(reader, Reader):
            logger.warning("skipping reader plugin %r: %r has no kind/extensions/read", name, reader)
            continue
        readers.append(reader)
    if not readers:
        raise ConfigError(f"no reader is registered in {READERS}; reinstall indexer (pip install -e .)")
    return readers


def open_source(settings: Settings, roots: Sequence[str | Path], readers: Sequence[Reader] | None = None) -> Source:
    """Build the configured source plugin (``settings.source``) over ``roots`` with the registered readers."""
    factory = load(SOURCES, settings.source)
    if not isinstance(factory, SourceFactory):
        raise ConfigError(
            f"source plugin {settings.source!r} ({target(SOURCES, settings.source)}) has no from_settings; "
            "see docs/plugins.md for what a source plugin provides"
        )
    chosen = list(readers) if readers is not None else load_readers()
    source = factory.from_settings([Path(r) for r in roots], settings, chosen)
    if not isinstance(source, SourcePlugin):
        raise ConfigError(f"source plugin {settings.source!r} built {type(source).__name__}, which is not a Source "
                          "(it needs scan, available, read and ref_for; see docs/plugins.md)")
    return as_source(source)


def _instantiate(obj: Any) -> Any:
    """A reader class or factory function is called; a ready reader instance is taken as it is."""
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Reader)):
        return obj()
    return obj
