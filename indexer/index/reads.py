"""Files read in threads, so a slow file (a 3,000-page scan being OCR'd, a 20,000-message mailbox) never holds
back the files after it.

The pipeline hands the files to read to a :class:`ReadAhead`, smallest first, at most ``width`` at a time (the
source's ``parallel_reads``: the filesystem source parses documents in ``parse_workers`` worker processes, each
within ``parse_memory_mb``), and takes each document as its read ends, in whatever order. Chunking, embedding and
writing stay in the caller's thread.

Two lanes of ``width`` threads each: reads a source says take a parse worker (``heavy_read(ref)``, optional:
without it every read is heavy) and the others (plain text, code, Markdown, read in this process). So a text
file is never queued behind documents waiting for a parse worker, and no heavy thread ever waits for a worker:
heavy reads beyond ``width`` wait in their lane's queue, in the order they came.

A read may outlive the call that started it: the watcher (:meth:`ReadAhead.detach`) leaves a read that has run
longer than a moment in the background, syncs the other changes, and is told (``listener``) when the read ends;
the next sync of that path takes the finished document (if the file has not changed since) instead of reading
it again. Detached reads hold no more than their lane's threads, so their number needs no cap.
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
# the watcher leaves each read running longer than this in the background and goes on with the rest of its call: a
# change saved meanwhile waits at most about this long for the call (re-syncing the path later costs one batch)
DETACH_SECONDS = 0.5
QUEUED_SECONDS = 0.1  # a read queued this long behind others is slow too
UNTAKEN_SECONDS = 300.0  # a background read's document is kept this long for the sync that takes it


@dataclass
class _Read:
    key: tuple[int, int]  # the file's (size, mtime_ns) when the read started
    future: Future[Document]
    source: Source
    started: float = field(default_factory=time.monotonic)
    running: float | None = None  # when a lane's thread took it (None: still queued behind other reads)
    detached: bool = False
    ended: float | None = None


class ReadAhead:
    """Reads in threads; one object per collection writer, kept across its calls (see the module docstring)."""

    def __init__(self, width: int = 1) -> None:
        self.width = max(1, width)
        # one lane for reads that take a parse worker, one for the rest (see the module docstring)
        self._heavy = ThreadPoolExecutor(self.width, thread_name_prefix="indexer-parse")
        self._light = ThreadPoolExecutor(self.width, thread_name_prefix="indexer-read")
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
            read = _Read(key, Future(), source)
            read.future = self._lane(source, ref).submit(self._run, read, source, ref)
            self._reads[ref.path] = read
            future = read.future
        future.add_done_callback(partial(self._ended, ref.path))
        return future

    @staticmethod
    def _run(read: _Read, source: Source, ref: SourceRef) -> Document:
        read.running = time.monotonic()
        return source.read(ref)

    def _lane(self, source: Source, ref: SourceRef) -> ThreadPoolExecutor:
        try:
            return self._heavy if source.heavy_read(ref) else self._light
        except Exception:  # only a scheduling hint
            return self._heavy

    def taken(self, path: str) -> None:
        """The caller has the document of ``path``: forget the read."""
        with self._lock:
            self._reads.pop(path, None)

    def ran(self, path: str, since: float) -> float:
        """Seconds the read of ``path`` ran after ``since`` (``time.monotonic``): what it held the call that
        started at ``since`` (a read left in the background by an earlier call is charged only its rest)."""
        read = self._reads.get(path)
        if read is None or read.running is None:
            return 0.0
        end = read.ended if read.ended is not None else time.monotonic()
        return max(0.0, end - max(read.running, since))

    def age(self, path: str) -> float:
        """Seconds the read of ``path`` has been running (0 while it is queued)."""
        read = self._reads.get(path)
        return 0.0 if read is None or read.running is None else time.monotonic() - read.running

    def slow(self, path: str, after: float) -> bool:
        """Whether the read of ``path`` is not about to end: running for ``after`` seconds or more, or queued for
        a moment behind other reads (all the lane's threads are busy with slow ones)."""
        read = self._reads.get(path)
        if read is None or read.future.done():
            return False
        now = time.monotonic()
        return now - read.running >= after if read.running is not None else now - read.started >= QUEUED_SECONDS

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
                read.source.abort_reads()
        for lane in (self._heavy, self._light):
            lane.shutdown(wait=False, cancel_futures=True)
