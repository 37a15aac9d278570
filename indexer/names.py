"""File names as the OS allows them: any byte string, and how every output shows them.

A POSIX file name is any byte string; Python hands names that are not valid UTF-8 over as ``str`` with lone
surrogates (``os.fsdecode``, surrogateescape: byte ``0xff`` becomes ``"\\udcff"``). Such a string opens the file,
but it cannot be written to SQLite, JSON for strict readers, a store payload or a UTF-8 log. So:
:func:`encodable` tells whether a path can be stored (the source reports the
others as ``bad_name`` and skips them alone), and :func:`printable` is the form every output uses (``\\xff``
escapes, valid UTF-8). Standard library only: the vocabulary (:mod:`indexer.types`) uses it.
"""

from __future__ import annotations

from typing import Any


def encodable(path: str) -> bool:
    """Whether ``path`` is valid UTF-8 text (no surrogate-escaped bytes): it can be stored and printed as is."""
    if path.isascii():
        return True
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: str) -> str:
    """``path`` as valid UTF-8 for output: bytes that are not UTF-8 appear as ``\\xff`` escapes."""
    if encodable(path):
        return path
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to (not from surrogateescape)
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def printable_data(data: Any) -> Any:
    """``data`` (JSON-shaped: dicts, lists, strings, numbers) with every string, keys included, made printable."""
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {printable(k) if isinstance(k, str) else k: printable_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [printable_data(v) for v in data]
    return data
