"""Plugin discovery through entry points. Built-ins are registered in pyproject.toml exactly like third-party ones.

Groups: ``indexer.stores`` (VectorStore classes), ``indexer.sources`` (Source classes), ``indexer.readers``
(Reader classes). A third-party package adds its own with, in its pyproject.toml::

    [project.entry-points."indexer.readers"]
    docx = "my_package.readers:DocxReader"
"""

from __future__ import annotations

import logging
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from indexer.errors import ConfigError

logger = logging.getLogger(__name__)

GROUPS = ("indexer.stores", "indexer.sources", "indexer.readers")


@cache
def available(group: str) -> dict[str, Any]:
    """Name -> entry point of every plugin registered in ``group`` (loaded lazily by ``load``)."""
    return {ep.name: ep for ep in entry_points(group=group)}


def load(group: str, name: str) -> Any:
    eps = available(group)
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none"
        raise ConfigError(
            f"no plugin named {name!r} in {group} (installed: {known}); install the package that provides it"
        )
    try:
        return eps[name].load()
    except ImportError as exc:
        raise ConfigError(f"plugin {name!r} ({group}) failed to import: {exc}; reinstall it") from exc


def load_all(group: str) -> dict[str, Any]:
    """Load every plugin of ``group``; a broken third-party plugin is logged and skipped."""
    out: dict[str, Any] = {}
    for name in available(group):
        try:
            out[name] = load(group, name)
        except ConfigError as exc:
            logger.warning("%s", exc)
    return out
