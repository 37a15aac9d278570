"""Path rules every layer shares (file names that are not UTF-8: :mod:`indexer.names`)."""

from __future__ import annotations

import os
from pathlib import Path


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def user_path(path: str | os.PathLike[str]) -> Path:
    """A path as a user typed it (a root, a ``--under`` prefix, a backup's destination), made absolute the one way:
    ``~`` expanded, relative to this process's working directory, links and ``..`` resolved. A front end resolves
    before it sends a path elsewhere (a server's working directory is not the user's)."""
    return Path(path).expanduser().resolve()
