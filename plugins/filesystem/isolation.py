"""A worker process for parsers that must not take the indexer down: a reader marked ``isolated`` (the document
readers) reads in it, under a time limit per file (``parse_timeout``) and a memory limit (``parse_memory_mb``,
the worker's data segment, ``RLIMIT_DATA``). A parse that runs over time is killed with its worker; one that
runs out of memory fails in the worker (or kills it). Either way the file is reported failed with the reason,
and the next file gets a fresh worker. The worker is started with ``spawn`` (no copy of the parent's threads or
model memory) on first use and kept for the files after it.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from multiprocessing.connection import Connection
from typing import Any

from indexer.plugin_api import Document, Reader, SourceError, SourceRef

logger = logging.getLogger(__name__)


def _serve(conn: Connection, memory_bytes: int) -> None:  # pragma: no cover - runs in the worker process
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        pass
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        reader, ref, data = job
        try:
            conn.send((True, reader.read(ref, data)))
        except SourceError as exc:
            conn.send((False, (exc.reason, exc.code)))
        except MemoryError:
            reason = "parsing ran out of memory (parse_memory_mb); the file is too large or hostile"
            conn.send((False, (reason, "error")))
        except RecursionError:
            conn.send((False, ("parsing recursed too deeply (a hostile or broken file)", "error")))
        except Exception as exc:
            conn.send((False, (f"{getattr(reader, 'kind', 'document')} reader failed ({type(exc).__name__}: {exc})",
                               "error")))


class ParseWorker:
    """Runs ``reader.read(ref, data)`` in a worker process with a time and memory limit (thread-safe: one file
    at a time)."""

    def __init__(self, timeout: float = 60.0, memory_mb: int = 2048) -> None:
        self.timeout = timeout
        self.memory_bytes = memory_mb * 1024 * 1024
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None

    def read(self, reader: Reader, ref: SourceRef, data: bytes) -> Document:
        with self._lock:
            conn = self._ensure()
            try:
                conn.send((reader, ref, data))
                ready = conn.poll(self.timeout)
            except (OSError, EOFError):
                self._stop()
                raise SourceError(ref.path, "the parser process died; the file may be hostile") from None
            if not ready:
                self._stop()
                raise SourceError(
                    ref.path,
                    f"parsing took longer than {self.timeout:g} s (parse_timeout); stopped. Raise the limit if the "
                    "file is genuine, or exclude it",
                )
            try:
                ok, value = conn.recv()
            except (EOFError, OSError):
                code = self._stop()
                raise SourceError(
                    ref.path,
                    f"the parser process died (exit {code}; out of memory at parse_memory_mb="
                    f"{self.memory_bytes // (1024 * 1024)}?); the file may be too large or hostile",
                ) from None
        if ok:
            return value
        reason, code = value
        raise SourceError(ref.path, reason, code=code)

    def _ensure(self) -> Connection:
        if self._process is not None and self._process.is_alive() and self._conn is not None:
            return self._conn
        self._stop()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, self.memory_bytes), daemon=True, name="indexer-parser")
        process.start()
        child.close()
        self._process, self._conn = process, parent
        return parent

    def _stop(self) -> int | None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join(5)
        return process.exitcode

    def close(self) -> None:
        with self._lock:
            self._stop()
