"""SQLite errors translated into one clear line naming the file and the fix.

Used by every adapter that keeps a SQLite file (the state store, the FAISS sidecar): ``raise
database_error(exc, path, ...) from exc``. "database is locked" is waited for by SQLite's busy timeout first
(each adapter sets one); only when that runs out does it reach the user, as "locked by another process".
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from indexer.errors import IndexerError

_CORRUPT = ("malformed", "not a database", "file is encrypted", "corrupt", "disk i/o error")
_LOCKED = ("locked", "busy")
_ACCESS = ("readonly", "read-only", "unable to open", "permission", "access")

T = TypeVar("T")
E = TypeVar("E", bound=IndexerError)
_BUGS = (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)


def database_error(
    exc: BaseException,
    path: str | os.PathLike[str],
    *,
    what: str,
    rebuild: str,
    error: type[E],
    action: str = "",
) -> E:
    """One line: what went wrong with which file, and the fix.

    ``what`` names the file for a user ("the state database"); ``rebuild`` is the command that rebuilds its
    contents after it was moved aside; ``action`` (optional) is what was being done ("writing the files").
    """
    exc = _cause(exc)
    text = str(exc).strip() or type(exc).__name__
    lower = text.lower()
    doing = f" while {action}" if action else ""
    if any(word in lower for word in _LOCKED):
        fix = "another process holds it for a long write; wait for that process to finish and retry"
        return error(f"{what} {path} is locked ({text}){doing}: {fix}")
    if any(word in lower for word in _CORRUPT):
        fix = f"restore it from a backup, or move it aside and {rebuild}"
        return error(f"{what} {path} is damaged ({text}){doing}: {fix}")
    if "full" in lower:
        return error(f"{what} {path}: the disk is full{doing}; free some space and retry")
    if isinstance(exc, OSError) or any(word in lower for word in _ACCESS):
        return error(f"cannot use {what} {path} ({text}){doing}: check that its folder exists and is writable")
    return error(f"{what} {path} failed ({text}){doing}: check the disk, or restore the file from a backup")


def _cause(exc: BaseException) -> BaseException:
    """The error worth reporting: a failed ROLLBACK/COMMIT after SQLite ended the transaction itself (a damaged
    page, a full disk) says "no transaction is active"; the error that ended it is in ``__context__``."""
    seen = {id(exc)}
    while "no transaction is active" in str(exc) and exc.__context__ is not None and id(exc.__context__) not in seen:
        exc = exc.__context__
        seen.add(id(exc))
    return exc


def translating(
    *, what: str, rebuild: str, error: type[IndexerError], catch: tuple[type[BaseException], ...] = (sqlite3.Error,)
) -> Callable[[type[T]], type[T]]:
    """Class decorator: every public method (and ``__init__``) turns ``catch`` errors into ``database_error``.

    The instance must have a ``path`` attribute (set before the first statement that can fail in ``__init__``).
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except _BUGS:
                raise  # our mistake, not the file's: no "restore the file" advice
            except catch as exc:
                path = getattr(self, "path", "?")
                raise database_error(exc, path, what=what, rebuild=rebuild, error=error) from exc

        return method

    def decorate(cls: type[T]) -> type[T]:
        for name, value in list(vars(cls).items()):
            if callable(value) and (name == "__init__" or not name.startswith("_")):
                setattr(cls, name, wrap(value))
        return cls

    return decorate
