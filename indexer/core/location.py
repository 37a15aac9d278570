"""Where the data is, with the standard library only: the config file, the data directory, the collection name.

:mod:`indexer.settings` (pydantic) is the whole truth; this module answers the two questions ``indexer search``
needs before it can ask a running server, without importing pydantic: the same precedence (flags > ``INDEXER_*``
environment > config file > defaults), the same default folders, the same collection-name rule.
``tests/unit/test_location.py`` holds the two to the same answers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("indexer", appauthor=False))


MODELS_DIR_ENV = "INDEXER_MODELS_DIR"


def models_dir() -> Path:
    """Where built models (and the native probe's verdicts) live: ``$INDEXER_MODELS_DIR``, else the user cache
    dir of indexer + ``/models``."""
    env = os.environ.get(MODELS_DIR_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("indexer")) / "models"


def config_file_path() -> Path:
    env = os.environ.get("INDEXER_CONFIG")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_config_dir("indexer", appauthor=False)) / "config.toml"


# The one collection-name rule (settings, the CLI, the HTTP API and every store plugin's folder and collection
# names): ASCII, because a name becomes a folder name and a store's collection name (FAISS, Qdrant).
COLLECTION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$"
COLLECTION_NAME_RULE = (
    "collection names are 1-200 ASCII letters, digits, '-', '_' and '.', beginning with a letter or digit"
)
_COLLECTION_NAME = re.compile(COLLECTION_PATTERN)


def valid_collection_name(name: str) -> bool:
    return isinstance(name, str) and _COLLECTION_NAME.fullmatch(name) is not None


def data_dir_and_collection(collection: str | None = None) -> tuple[Path, str] | None:
    """The data directory and collection :func:`indexer.settings.load_settings` would give; None when the config
    file cannot be read or a value is invalid (the full settings then say what is wrong)."""
    config: dict[str, Any] = {}
    path = config_file_path()
    if path.is_file():
        import tomllib

        try:
            config = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
    data = _first(_env("data_dir"), config.get("data_dir"))
    if data is None:
        data = str(default_data_dir())  # platformdirs only when needed: it costs ~10 ms of start-up
    name = _first(collection, _env("collection"), config.get("collection"), "default")
    if not isinstance(data, str) or not isinstance(name, str) or not valid_collection_name(name):
        return None
    return Path(data), name


def _env(name: str) -> str | None:
    """``INDEXER_<NAME>`` from the environment, matched case-insensitively as pydantic-settings does."""
    wanted = f"indexer_{name}"
    return _first(*(value for key, value in os.environ.items() if key.lower() == wanted))


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)
