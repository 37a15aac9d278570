"""Files read in threads, so a slow file (a 3,000-page scan being OCR'd, a 20,000-message mailbox) never holds
back the files after it.

The pipeline hands the files to read to a :class:`ReadAhead`, smallest first, at most ``width`` at a time (the
source's ``parallel_reads``: the filesystem source parses documents in ``parse_workers`` worker processes, each
within ``parse_memory_mb``), and takes each document as its read ends, in whatever order. Chunking, embedding and
writing stay in the caller's thread.

Under the watcher a file is also chunked in its reader thread (``prepare``), so a file that takes long to chunk
(a 5 MB log appended every 100 ms) is left in the background like a slow parse, and the batch goes on with the
other changes. One read per file at a time: while a read of a file runs, the file's next sync takes that read
even if the file has changed since (the document is indexed under the size and time it was read with:
:meth:`ReadAhead.read_ref`; the caller syncs the file again), so a file changing all the time is never read by
several threads at once.

Two lanes of ``width`` threads each: reads a source says take a parse worker (``heavy_read(ref)``, optional:
without it every read is heavy) and the others (plain text, code, Markdown, read in this process). So a text
file is never queued behind documents waiting for a parse worker, and no heavy thread ever waits for a worker:
heavy reads beyond ``width`` wait in their lane's queue, in the order they came.

A read may outlive the call that started it: the watcher (:meth:`ReadAhead.detach`) leaves a read that has run
longer than a moment in the background, syncs the other changes, and is told (``listener``) when the read ends;
the next sync of that path takes the finished document instead of reading it again (if the file has changed
since, that version is indexed first and the file synced again). Detached reads hold no more than their lane's
threads, so their number needs no cap.

A third lane may take the heavy reads elsewhere (:attr:`ReadAhead.far`: the Ray cluster's nodes, set by the
collection's writer with the ``cluster`` setting; docs/deploy.md#indexing-on-a-ray-cluster): there a document is
read, parsed and chunked, and comes back with its chunks (:meth:`ReadAhead.prepared`). A call uses it only when it
has at least :data:`FAR_MIN_FILES` heavy reads (:meth:`ReadAhead.plan`: a watcher's one-file edit stays here), with
as many reads in flight as the lane takes. A far read that fails for another reason than the file (its node died,
the cluster was lost) is read here instead: nothing is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from indexer.errors import SourceError
from indexer.ports import Source
from indexer.types import Chunk, Document, SourceRef

logger = logging.getLogger(__name__)
# the watcher leaves each read running longer than this in the background and goes on with the rest of its call: a
# change saved meanwhile waits at most about this long for the call (re-syncing the path later costs one batch)
DETACH_SECONDS = 0.5
QUEUED_SECONDS = 0.1  # a read queued this long behind others is slow too
UNTAKEN_SECONDS = 300.0  # a background read's document is kept this long for the sync that takes it
REMEMBERED = 10_000  # files whose last read's duration is kept (a file read slowly last time is not waited for)
FAR_MIN_FILES = 4  # a call with fewer heavy reads reads them here: the far lane's dispatch never slows an edit


class FarLane(Protocol):
    """Heavy reads done elsewhere, each document coming back with its chunks (indexer.cluster.parsing)."""

    def capacity(self) -> int:
        """How many reads it takes in flight at once (0: none now)."""
        ...

    def start(self, source: Source, ref: SourceRef) -> Future[tuple[Document, list[Chunk]]] | None:
        """The read of ``ref`` elsewhere (None: not this one). Fails with the file's SourceError, or with anything
        else when it could not be done there (then it is read here)."""
        ...


@dataclass
class _Read:
    key: tuple[int, int]  # the file's (size, mtime_ns) when the read started
    future: Future[Document]
    source: Source
    ref: SourceRef | None = None  # what the read was started with
    prepared: Any = None  # what ``prepare`` made of the document in the reader thread (chunks), if anything
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
        self._took: dict[str, float] = {}  # path -> seconds its last read ran (oldest first)
        self.listener: Callable[[str], None] | None = None
        self._closed = False
        self.far: FarLane | None = None
        self._far_now = False  # this call's heavy reads go to the far lane (plan)

    def plan(self, source: Source, refs: Sequence[SourceRef]) -> int:
        """How many reads a call over ``refs`` may have in flight, and whether its heavy reads go to the far lane
        (at least :data:`FAR_MIN_FILES` of them): then as many more as the lane takes."""
        self._far_now = False
        width = max(1, min(self.width, int(source.parallel_reads or 1)))
        if self.far is None or sum(1 for r in refs if self._lane(source, r) is self._heavy) < FAR_MIN_FILES:
            return width
        try:
            more = self.far.capacity()
        except Exception as exc:  # the cluster could not be reached or made no worker: every read here
            logger.warning("reading here: the far lane takes no reads (%s)", exc)
            return width
        self._far_now = more > 0
        return width + max(0, more)

    def submit(
        self, source: Source, ref: SourceRef, prepare: Callable[[Document], Any] | None = None
    ) -> Future[Document]:
        """The read of ``ref``: one of the same file already started and not taken yet, if any (its content may
        be older: :meth:`read_ref` says which version it read). ``prepare(document)`` runs in the reader thread
        after the read (the watcher's chunking); :meth:`prepared` has its result."""
        key = (ref.size, ref.mtime_ns)
        with self._lock:
            self._forget_untaken()
            known = self._reads.get(ref.path)
            if known is not None and not known.future.cancelled():
                known.detached = False
                return known.future
            read = _Read(key, Future(), source, ref)
            lane = self._lane(source, ref)
            far = self._far_start(source, ref) if self._far_now and lane is self._heavy else None
            if far is None:
                read.future = lane.submit(self._run, read, source, ref, prepare)
            else:
                read.running = time.monotonic()
                far.add_done_callback(partial(self._far_done, read, source, ref, prepare))
            self._reads[ref.path] = read
            future = read.future
        future.add_done_callback(partial(self._ended, ref.path))
        return future

    @staticmethod
    def _run(read: _Read, source: Source, ref: SourceRef, prepare: Callable[[Document], Any] | None) -> Document:
        read.running = time.monotonic()
        doc = source.read(ref)
        if prepare is not None:
            read.prepared = prepare(doc)
        return doc

    def _far_start(self, source: Source, ref: SourceRef) -> Future[tuple[Document, list[Chunk]]] | None:
        assert self.far is not None
        try:
            return self.far.start(source, ref)
        except Exception as exc:  # the file could not be sent (vanished, unreadable): the read here says why
            logger.debug("%s read here: %s", ref.path, exc)
            return None

    def _far_done(self, read: _Read, source: Source, ref: SourceRef, prepare: Callable[[Document], Any] | None,
                  far: Future[tuple[Document, list[Chunk]]]) -> None:
        """A far read ended: its document and chunks, the file's own error, or (lost) the file read here."""
        exc = far.exception()
        if exc is None:
            doc, read.prepared = far.result()
            _settle(read.future, doc, None)
        elif isinstance(exc, SourceError) or self._closed:
            _settle(read.future, None, exc)
        else:
            logger.info("%s is read here: its far read was lost (%s)", ref.path, exc)
            here = self._heavy.submit(self._run, read, source, ref, prepare)
            here.add_done_callback(lambda f: _settle(read.future, None if f.exception() else f.result(),
                                                     f.exception()))

    def read_ref(self, path: str) -> SourceRef | None:
        """The ref the read of ``path`` was started with (older than the caller's when the file changed while a
        read ran): the document is that version's."""
        read = self._reads.get(path)
        return None if read is None else read.ref

    def prepared(self, path: str) -> Any:
        """What ``prepare`` made of the document of ``path`` in the reader thread (None: nothing)."""
        read = self._reads.get(path)
        return None if read is None else read.prepared

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
        if self._took.get(path, 0.0) >= after:  # its last read was slow: a hot log re-chunked, a scan
            return True
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
                self._took.pop(path, None)
                self._took[path] = read.ended - (read.running or read.ended)
                while len(self._took) > REMEMBERED:
                    del self._took[next(iter(self._took))]
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


def _settle(future: Future[Document], doc: Document | None, exc: BaseException | None) -> None:
    """End a far read's future (unless it was cancelled meanwhile: a closing writer)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(doc)  # type: ignore[arg-type]
    except InvalidStateError:
        pass
