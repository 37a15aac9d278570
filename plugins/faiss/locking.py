"""A cross-process writer lock (``fcntl.flock``) combined with an in-process lock."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexer.errors import StoreError

logger = logging.getLogger(__name__)


class WriterLock:
    """Exclusive lock on ``path`` held by one thread of one process at a time.

    The file descriptor stays open for the life of the object; ``flock`` is taken per ``hold()``.
    """

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._fd: int | None = None
        self._depth = 0

    def _ensure_fd(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth == 0:
                self._acquire(self._ensure_fd())
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _acquire(self, fd: int) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"another process has been writing {self.path.parent} for more than "
                        f"{self.timeout:.0f} s; wait for it to finish or stop it"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def close(self) -> None:
        with self._thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
