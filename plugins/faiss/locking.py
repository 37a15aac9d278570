"""The FAISS writer lock: indexer's one file-lock helper (``indexer.core.locks``), blocking with a timeout."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexer.plugin_api import LockedError, lock_for


class WriterLock:
    """Exclusive lock on ``path`` held by one thread of one process at a time (reentrant in that thread).

    A writer waits up to ``timeout`` seconds (writes are short), then gets a ``LockedError`` naming the folder.
    """

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout

    @contextmanager
    def hold(self) -> Iterator[None]:
        message = (
            f"another process has been writing {self.path.parent} for more than {self.timeout:.0f} s; "
            "wait for it to finish or stop it"
        )
        with lock_for(self.path).hold(timeout=self.timeout, message=message, error=LockedError):
            yield

    def close(self) -> None:
        """Nothing to release: the lock file is opened per hold and closed when the outermost hold ends."""
