"""The watcher's status file: one concern, writing it (atomically, the newest snapshot winning, and at most every
``STATUS_EVERY`` seconds while a batch or a scan runs, with one trailing write after the last change)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from indexer.state.watch_files import write_json_atomic

logger = logging.getLogger("indexer.watch")  # one logger name for live sync (docs/watch.md)

STATUS_EVERY = 0.25  # seconds between status writes while a batch or a scan runs


class StatusFile:
    """Writes ``snapshot()`` to ``path``; ``cond`` is the watcher's condition (guards the trailing timer),
    ``stopped`` its stopped event (no trailing write after it)."""

    def __init__(
        self,
        path: Path,
        snapshot: Callable[[], dict[str, Any]],
        cond: threading.Condition,
        stopped: threading.Event,
    ) -> None:
        self.path = path
        self._snapshot = snapshot
        self._cond = cond
        self._stopped = stopped
        self._lock = threading.Lock()  # one status writer at a time (worker, observer threads)
        self._written = 0.0  # monotonic time of the last status write
        self._updated_at = 0.0  # the written status's updated_at (wall time)
        self._timer: threading.Timer | None = None  # a write due after the throttle (see tick)

    def write(self) -> None:
        # The snapshot first (it takes _cond, which the worker may hold while calling this), then the file
        # under _lock, never the other way round; a snapshot older than the one written is dropped.
        status = self._snapshot()
        with self._lock:
            if status["updated_at"] < self._updated_at:
                return
            self._updated_at = status["updated_at"]
            self._written = time.monotonic()
            try:
                write_json_atomic(self.path, status)
            except OSError as exc:
                logger.debug("cannot write the watch status: %s", exc)

    def tick(self) -> None:
        """While a batch or a scan runs (its progress calls, new events): the status file at most every
        ``STATUS_EVERY`` seconds, and once more after the last change, so ``indexer status`` shows the running
        batch and the queue at any moment."""
        wait = STATUS_EVERY - (time.monotonic() - self._written)
        if wait <= 0 and not self._lock.locked():
            self.write()
            return
        with self._cond:
            if self._timer is not None or self._stopped.is_set():
                return
            self._timer = threading.Timer(max(wait, 0.01), self._trailing)
            self._timer.daemon = True
            self._timer.start()

    def _trailing(self) -> None:
        with self._cond:
            self._timer = None
        if not self._stopped.is_set():
            self.write()
