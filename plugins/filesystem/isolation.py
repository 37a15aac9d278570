"""A worker process for parsers that must not take the indexer down: a reader marked ``isolated`` (the document
readers, PDF, CSV/TSV, the image reader) reads in it, under a time limit (``parse_timeout``) and a memory limit
(``parse_memory_mb``, the worker's data segment, ``RLIMIT_DATA``). The time limit bounds a stall: a reader that
works part by part (:func:`indexer.plugin_api.parts.part_done`: a page, a message, a block of rows) sends a
heartbeat after its parts, and each heartbeat starts the limit again; a reader that sends none has the limit for
the whole file. A parse that stalls is killed with its worker (only the worker: never a process of the user's
command); one that runs out of memory fails in the worker (or kills it). Either way the file is reported failed
with the reason, and the next file gets a fresh worker.

The worker is a plain ``python -m plugins.filesystem.parse_worker`` child (not multiprocessing: nothing of the
parent, its threads, its models or its ``__main__`` is copied or re-run), started on first use and kept for the
files after it; jobs and results travel as length-prefixed pickles over its stdin and stdout.

A :class:`ParsePool` holds ``parse_workers`` such workers, so that many files parse at once (the indexer reads
files in threads: a 3,000-page scan in one worker never holds back the small files after it); each worker has
the limits above, so the parsers together use at most ``parse_workers x parse_memory_mb``.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import weakref
from typing import IO, Any

from indexer.plugin_api import Document, Reader, SourceError, SourceRef
from indexer.plugin_api import parts as reader_parts

logger = logging.getLogger(__name__)
_HEADER = 8
STARTUP_S = 60.0  # the most a worker's start and the job's loading may take (not the parse: ``parse_timeout``)


def _write(stream: IO[bytes], value: object) -> None:
    blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(blob).to_bytes(_HEADER, "big") + blob)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    parts, left = [], size
    while left:
        part = stream.read(left)
        if not part:
            raise EOFError("worker stream closed")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _read_exact_fd(fd: int, size: int) -> bytes:
    """Unbuffered, so ``select`` on the descriptor never misses a message already read ahead into a buffer."""
    parts, left = [], size
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            raise EOFError("worker stream closed")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _handle(job: tuple[Reader, SourceRef, bytes]) -> tuple[bool, Any]:
    reader, ref, data = job
    try:
        return True, reader.read(ref, data)
    except SourceError as exc:
        return False, (exc.reason, exc.code)
    except MemoryError:
        return False, ("parsing ran out of memory (parse_memory_mb); the file is too large or hostile", "error")
    except RecursionError:
        return False, ("parsing recursed too deeply (a hostile or broken file)", "error")
    except Exception as exc:
        return False, (f"{getattr(reader, 'kind', 'document')} reader failed ({type(exc).__name__}: {exc})", "error")


def serve(memory_bytes: int) -> None:  # pragma: no cover - runs in the worker process
    import resource
    import signal

    # Ctrl-C reaches the terminal's whole process group: the user's command decides (and says one line); a
    # worker's traceback would be noise. The parent ends the worker when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        pass
    jobs = sys.stdin.buffer
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the results
    while True:
        try:
            header = jobs.read(_HEADER)
            if len(header) < _HEADER:
                return
            job = pickle.loads(_read_exact(jobs, int.from_bytes(header, "big")))
        except (EOFError, OSError):
            return
        _write(results, ("loaded", 0))  # the parse's time limit starts here (see ParseWorker._result)
        reader_parts.listen(lambda count: _write(results, ("part", count)))
        try:
            result = _handle(job)
            reader_parts.listen(None)
            _write(results, result)
        except MemoryError:
            _write(results, (False, ("parsing ran out of memory (parse_memory_mb)", "error")))


class ParseWorker:
    """Runs ``reader.read(ref, data)`` in a worker process with a time and memory limit (thread-safe: one file
    at a time). Readers, refs and documents must pickle (plain classes and frozen dataclasses do)."""

    def __init__(self, timeout: float = 60.0, memory_mb: int = 2048) -> None:
        self.timeout = timeout
        self.memory_bytes = memory_mb * 1024 * 1024
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def read(self, reader: Reader, ref: SourceRef, data: bytes) -> Document:
        with self._lock:
            process = self._ensure()
            assert process.stdin is not None and process.stdout is not None
            try:
                _write(process.stdin, (reader, ref, data))
            except (OSError, ValueError, pickle.PicklingError) as exc:
                code = self._stop()
                reason = f"the parser process could not take the file ({exc}; exit {code})"
                raise SourceError(ref.path, reason) from None
            ok, value = self._result(process, ref)
        if ok:
            return value
        reason, code = value
        raise SourceError(ref.path, reason, code=code)

    def _result(self, process: subprocess.Popen[bytes], ref: SourceRef) -> tuple[bool, Any]:
        """The worker's answer, heartbeats (``("part", count)``) starting the time limit again. Until the worker says
        the job is ``loaded`` (its interpreter started, the reader's module imported), the wait is bounded by
        ``STARTUP_S`` instead: a cold start on a loaded machine is not the file's parse."""
        assert process.stdout is not None
        fd, done, loaded = process.stdout.fileno(), 0, False
        while True:
            limit = self.timeout if loaded else max(self.timeout, STARTUP_S)
            ready, _, _ = select.select([fd], [], [], limit)
            if not ready:
                self._stop()
                if not loaded:
                    raise SourceError(ref.path, f"the parser process did not start within {limit:g} s; stopped",
                                      code="timeout")  # fmt: skip
                raise SourceError(ref.path, self._stalled(done), code="timeout")
            try:
                size = int.from_bytes(_read_exact_fd(fd, _HEADER), "big")
                tag, value = pickle.loads(_read_exact_fd(fd, size))
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                code = self._stop()
                raise SourceError(
                    ref.path,
                    f"the parser process died (exit {code}: {exc}); the file may be too large (parse_memory_mb="
                    f"{self.memory_bytes // (1024 * 1024)}) or hostile",
                ) from None
            if tag == "loaded":
                loaded = True
                continue
            if tag != "part":
                return bool(tag), value
            done = int(value)

    def _stalled(self, done: int) -> str:
        if not done:
            return (f"parsing took longer than {self.timeout:g} s (parse_timeout); stopped. Raise the limit if the "
                    "file is genuine, or exclude it")
        return (f"parsing stalled: no part (page, message, rows) finished within {self.timeout:g} s "
                f"(parse_timeout) after {done} part(s); stopped. Raise the limit if the file is genuine, or "
                "exclude it")

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._stop()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        process = subprocess.Popen(
            [sys.executable, "-m", "plugins.filesystem.parse_worker", str(self.memory_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )  # fmt: skip
        self._process = process
        self._finalizer = weakref.finalize(self, _end, process)  # a dropped source leaves no process behind
        return process

    def _stop(self) -> int | None:
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        return None if process is None else _end(process)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def abort(self) -> None:
        """End the worker now, even in the middle of a parse (another thread's ``read`` then fails): for a
        shutdown that must not wait for a long file."""
        process = self._process
        if process is not None:
            _end(process)


class ParsePool:
    """``size`` :class:`ParseWorker` s, started on first use: ``read`` takes an idle one (the most recently
    used first, so one file at a time keeps one process warm) and blocks while all are busy."""

    def __init__(self, timeout: float = 60.0, memory_mb: int = 2048, size: int = 1) -> None:
        self.size = max(1, size)
        self._workers = [ParseWorker(timeout, memory_mb) for _ in range(self.size)]
        self._idle: queue.LifoQueue[ParseWorker] = queue.LifoQueue()
        for worker in reversed(self._workers):
            self._idle.put(worker)

    @property
    def timeout(self) -> float:
        return self._workers[0].timeout

    def read(self, reader: Reader, ref: SourceRef, data: bytes) -> Document:
        worker = self._idle.get()
        try:
            return worker.read(reader, ref, data)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        for worker in self._workers:
            worker.close()

    def abort(self) -> None:
        for worker in self._workers:
            worker.abort()


def _end(process: subprocess.Popen[bytes]) -> int | None:
    for stream in (process.stdin, process.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    if process.poll() is None:
        process.kill()
    try:
        return process.wait(5)
    except subprocess.TimeoutExpired:
        return None
