"""Path rules every layer shares (file names that are not UTF-8: :mod:`indexer.names`)."""

from __future__ import annotations

import os


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
