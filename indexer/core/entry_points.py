"""Entry-point discovery, standard library only: the plugin names of a group, and loading one by name.

:mod:`indexer.core.registry` builds stores, sources and readers from what is found here; settings validation
asks :func:`names` only (so the settings never import the ports)."""

from __future__ import annotations

import logging
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from indexer.errors import ConfigError

logger = logging.getLogger("indexer.core.registry")

STORES = "indexer.stores"
SOURCES = "indexer.sources"
READERS = "indexer.readers"
GROUPS = (STORES, SOURCES, READERS)

#: the plugin API's version (``indexer.plugin_api.PLUGIN_API_VERSION``). A plugin may declare the version it was
#: written for as ``INDEXER_PLUGIN_API = N`` on the object its entry point names; one written for a newer API than
#: this indexer's is refused at load with the fix, never half-run. Raised when a port changes incompatibly.
PLUGIN_API_VERSION = 1
API_ATTRIBUTE = "INDEXER_PLUGIN_API"


def check_api(obj: Any, group: str, name: str) -> Any:
    """``obj`` when the plugin API it declares (if any) is one this indexer has; else ConfigError naming both."""
    wanted = getattr(obj, API_ATTRIBUTE, None)  # the one declaration read by name: a plain int, optional
    if wanted is None:
        return obj
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
        raise ConfigError(f"plugin {name!r} ({group}) declares {API_ATTRIBUTE} = {wanted!r}; it must be a whole "
                          f"number (this indexer's plugin API is {PLUGIN_API_VERSION}); fix the plugin")
    if wanted > PLUGIN_API_VERSION:
        raise ConfigError(f"plugin {name!r} ({group}) was written for plugin API {wanted}; this indexer has "
                          f"{PLUGIN_API_VERSION}: upgrade indexer, or install a version of the plugin for API "
                          f"{PLUGIN_API_VERSION}")
    return obj
OUR_DISTRIBUTION = "llama-indexer"


@cache
def available(group: str) -> dict[str, EntryPoint]:
    """Name -> entry point of every plugin registered in ``group`` (loaded lazily by ``load``)."""
    return {ep.name: ep for ep in entry_points(group=group)}


def names(group: str) -> list[str]:
    """The registered plugin names of ``group``, sorted."""
    return sorted(available(group))


def refresh() -> None:
    """Forget what was discovered, so plugins installed since (or put on sys.path) are found."""
    available.cache_clear()


def load(group: str, name: str) -> Any:
    eps = available(group)
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none"
        raise ConfigError(
            f"no plugin named {name!r} in {group} (registered: {known}); install the package that provides it"
        )
    try:
        obj = eps[name].load()
    except Exception as exc:  # ImportError, or any error raised while importing third-party code
        raise ConfigError(f"plugin {name!r} ({group}) failed to import: {exc}; reinstall it") from exc
    return check_api(obj, group, name)


def load_all(group: str) -> dict[str, Any]:
    """Load every plugin of ``group``; a broken third-party plugin is logged and skipped."""
    out: dict[str, Any] = {}
    for name in available(group):
        try:
            out[name] = load(group, name)
        except ConfigError as exc:
            logger.warning("%s", exc)
    return out


def distribution(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.metadata["Name"]) if dist is not None else ""


def target(group: str, name: str) -> str:
    ep = available(group).get(name)
    return ep.value if ep is not None else "?"
