"""Files read in threads, so a slow file (a 3,000-page scan being OCR'd, a 20,000-message mailbox) never holds
back the files after it.

The pipeline hands the files to read to a :class:`ReadAhead`, smallest first, at most ``width`` at a time (the
source's ``parallel_reads``: the filesystem source parses documents in ``parse_workers`` worker processes, each
within ``parse_memory_mb``), and takes each document as its read ends, in whatever order. Chunking, embedding and
writing stay in the caller's thread.

A read may outlive the call that started it: the watcher (:meth:`ReadAhead.detach`) leaves a read that has run
longer than a batch in the background, syncs the other changes, and is told (``listener``) when the read ends;
the next sync of that path takes the finished document (if the file has not changed since) instead of reading
it again. At most ``width - 1`` such reads (at least one) run in the background, so a parse worker stays free
for the documents of the calls after them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from indexer.ports import Source
from indexer.types import Document, SourceRef

logger = logging.getLogger(__name__)
UNTAKEN_SECONDS = 300.0  # a background read's document is kept this long for the sync that takes it


@dataclass
class _Read:
    key: tuple[int, int]  # the file's (size, mtime_ns) when the read started
    future: Future[Document]
    source: Source
    started: float = field(default_factory=time.monotonic)
    detached: bool = False
    ended: float | None = None


class ReadAhead:
    """Reads in threads; one object per collection writer, kept across its calls (see the module docstring)."""

    def __init__(self, width: int = 1) -> None:
        self.width = max(1, width)
        # ``width`` threads for a call's reads, ``width`` more for reads left running in the background
        self._pool = ThreadPoolExecutor(2 * self.width, thread_name_prefix="indexer-read")
        self._lock = threading.Lock()
        self._reads: dict[str, _Read] = {}
        self.listener: Callable[[str], None] | None = None
        self._closed = False

    def submit(self, source: Source, ref: SourceRef) -> Future[Document]:
        """The read of ``ref``: one already started for the same file content (size and mtime) if any."""
        key = (ref.size, ref.mtime_ns)
        with self._lock:
            self._forget_untaken()
            known = self._reads.get(ref.path)
            if known is not None and known.key == key and not known.future.cancelled():
                known.detached = False
                return known.future
            future = self._pool.submit(source.read, ref)
            self._reads[ref.path] = _Read(key, future, source)
        future.add_done_callback(partial(self._ended, ref.path))
        return future

    def taken(self, path: str) -> None:
        """The caller has the document of ``path``: forget the read."""
        with self._lock:
            self._reads.pop(path, None)

    def age(self, path: str) -> float:
        """Seconds the read of ``path`` has been running."""
        read = self._reads.get(path)
        return 0.0 if read is None else time.monotonic() - read.started

    def can_detach(self) -> int:
        """How many more reads may be left running in the background: ``width - 1`` at most (at least one), so
        a parse worker stays free for the documents of the next calls."""
        with self._lock:
            busy = sum(1 for r in self._reads.values() if r.detached and not r.future.done())
        return max(1, self.width - 1) - busy

    def detach(self, path: str) -> None:
        """Leave the read of ``path`` running after the call returns; ``listener(path)`` hears when it ends."""
        with self._lock:
            read = self._reads.get(path)
            if read is None:
                return
            read.detached = True
            done = read.future.done()
        if done:
            self._tell(path)

    def reading(self) -> list[dict[str, object]]:
        """The reads left running in the background (status): path and seconds so far."""
        now = time.monotonic()
        with self._lock:
            return [{"path": p, "seconds": round(now - r.started, 1)} for p, r in self._reads.items()
                    if r.detached and not r.future.done()]  # fmt: skip

    def _forget_untaken(self) -> None:
        """Drop background reads that ended long ago and were never taken (the file was deleted or changed
        meanwhile): their documents are not kept in memory. Under ``_lock``."""
        now = time.monotonic()
        for path in [p for p, r in self._reads.items() if r.ended is not None and now - r.ended > UNTAKEN_SECONDS]:
            del self._reads[path]

    def _ended(self, path: str, future: Future[Document]) -> None:
        with self._lock:
            read = self._reads.get(path)
            if read is not None and read.future is future:
                read.ended = time.monotonic()
            tell = read is not None and read.future is future and read.detached and not self._closed
        if tell:
            self._tell(path)

    def _tell(self, path: str) -> None:
        listener = self.listener
        if listener is not None:
            try:
                listener(path)
            except Exception:  # a listener's failure must not lose the read's thread
                logger.exception("a read listener failed for %s", path)

    def close(self) -> None:
        """Stop: reads not started are cancelled, parses in flight are ended (``abort_reads`` of their source),
        so a shutdown never waits for a long file."""
        with self._lock:
            self._closed = True
            reads = list(self._reads.values())
            self._reads.clear()
        for read in reads:
            if not read.future.done() and not read.future.cancel():
                abort = getattr(read.source, "abort_reads", None)
                if abort is not None:
                    abort()
        self._pool.shutdown(wait=False, cancel_futures=True)
