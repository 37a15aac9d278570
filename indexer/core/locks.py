"""The one file-lock helper of indexer, on the ``filelock`` library (cross-platform, timeouts).

Semantics, the same everywhere:

* A :class:`FileLock` is exclusive across processes (an OS file lock on ``path``) *and* across the threads of
  one process (an in-process ``RLock``): one thread of one process holds it at a time. It is reentrant in the
  holding thread, so nested ``hold()`` blocks of one thread do not deadlock.
* ``lock_for(path)`` returns the one instance of this process for ``path``, so every part of the process that
  locks the same file shares the same thread lock and reentrancy count.
* ``hold(timeout=0)`` tries once: a held lock raises :class:`~indexer.errors.LockedError` at once (the
  collection writer lock: "being written by another process", never a silent wait).
* ``hold(timeout=T)`` waits up to ``T`` seconds (short critical sections: the FAISS writer lock, a model
  build), then raises ``LockedError`` (or the ``error`` class given) with the message given.
* ``hold(timeout=None)`` waits as long as it takes.
* :class:`LifetimeLock` is for a lock held for an object's life (a watcher): taken once without waiting,
  released from any thread, with its own file descriptor, so a second holder is refused even in the same
  process. It is not reentrant.

The lock file stays in place (an empty file); deleting it while a lock is held would let a second process lock
a new file of the same name.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from indexer.errors import IndexerError, LockedError

logger = logging.getLogger(__name__)

_registry: dict[str, FileLock] = {}
_registry_lock = threading.Lock()


class FileLock:
    """Exclusive, reentrant lock on ``path`` across processes and threads (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._file: filelock.BaseFileLock | None = None

    @property
    def held(self) -> bool:
        """True while some thread of this process holds the lock."""
        return self._depth > 0

    @contextmanager
    def hold(
        self,
        timeout: float | None = None,
        message: str | None = None,
        error: type[IndexerError] = LockedError,
    ) -> Iterator[None]:
        """Hold the lock for the ``with`` block; ``timeout`` 0 = try once, None = wait forever."""
        self.acquire(timeout, message, error)
        try:
            yield
        finally:
            self.release()

    def acquire(
        self, timeout: float | None = None, message: str | None = None, error: type[IndexerError] = LockedError
    ) -> None:
        """Take the lock in this thread (``release()`` it in the same thread); see ``hold``."""
        self._acquire(timeout, message, error)

    def _acquire(self, timeout: float | None, message: str | None, error: type[IndexerError]) -> None:
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        got = self._thread_lock.acquire() if timeout is None else self._thread_lock.acquire(timeout=max(timeout, 0))
        if not got:
            raise error(message or self._busy_text(timeout))
        try:
            if self._depth == 0:
                left = -1.0 if deadline is None else max(deadline - time.monotonic(), 0.0)
                self._lock_file(left, message, error)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise

    def _lock_file(self, timeout: float, message: str | None, error: type[IndexerError]) -> None:
        if self._file is None:
            self._file = _new_file_lock(self.path, error)
        _take(self._file, self.path, timeout, message or self._busy_text(timeout), error)

    def release(self) -> None:
        """Release one ``acquire`` of this thread."""
        try:
            self._depth -= 1
            if self._depth == 0 and self._file is not None:
                self._file.release()
        finally:
            self._thread_lock.release()

    def _busy_text(self, timeout: float | None) -> str:
        waited = "" if not timeout else f" for more than {timeout:.0f} s"
        return f"{self.path} is held by another process or thread{waited}; wait for it to finish and retry"


class LifetimeLock:
    """A lock held for an object's life: ``take()`` once (never waits), ``release()`` from any thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: filelock.BaseFileLock | None = None
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        return self._file is not None

    def take(self, message: str, error: type[IndexerError] = LockedError) -> None:
        """Take the lock now, or raise ``error(message)`` when any other holder (this process too) has it."""
        with self._guard:
            if self._file is not None:
                raise error(message)
            lock = _new_file_lock(self.path, error)
            _take(lock, self.path, 0, message, error)
            self._file = lock

    def release(self) -> None:
        with self._guard:
            lock, self._file = self._file, None
        if lock is not None:
            lock.release(force=True)


def _new_file_lock(path: Path, error: type[IndexerError]) -> filelock.BaseFileLock:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"cannot create the lock folder {path.parent}: {exc}; check permissions") from exc
    # One object per holder (not filelock's per-path singleton), shared by threads: exclusion between threads
    # is ours (FileLock's RLock) or none is needed (LifetimeLock). The file stays: see the module docstring.
    return filelock.FileLock(str(path), thread_local=False, preserve_lock_file=True)


def _take(
    lock: filelock.BaseFileLock, path: Path, timeout: float, message: str, error: type[IndexerError]
) -> None:
    try:
        if timeout == 0:
            lock.acquire(blocking=False)
        else:
            lock.acquire(timeout=timeout, poll_interval=0.01)
    except filelock.Timeout:
        raise error(message) from None
    except OSError as exc:
        raise error(f"cannot lock {path}: {exc}; check permissions and disk") from exc


def lock_for(path: str | os.PathLike[str]) -> FileLock:
    """The process-wide :class:`FileLock` for ``path`` (created on first use)."""
    key = os.path.abspath(os.fspath(path))
    with _registry_lock:
        lock = _registry.get(key)
        if lock is None:
            lock = _registry[key] = FileLock(key)
        return lock


def collection_lock_path(data_dir: str | os.PathLike[str], collection: str) -> Path:
    """The writer lock file of a collection: every writer of it (index, watch, backup, reindex) holds this one."""
    return Path(data_dir) / "locks" / f"{collection}.lock"


@contextmanager
def writer_lock(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """The non-blocking writer lock of ``what`` (e.g. "collection 'notes'"): held, or LockedError at once."""
    message = f"{what} is being written by another indexer process; wait for it to finish (searching works meanwhile)"
    with lock_for(path).hold(timeout=0, message=message):
        yield


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a pid recorded in a status or announce file; pids are reused, so this says
    "maybe still running", and callers pair it with a freshness time or a lock)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True

