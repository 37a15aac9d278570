"""The model worker: one thread that runs every model call of the server, fed by a bounded priority queue.

llama.cpp contexts are not thread-safe, and on a machine with few cores two model calls in parallel only fight
over the cores. So the server sends each piece of model work (a search, an embedding batch, a rerank) to one
thread, from the event loop, without blocking it:

* a bounded queue: when ``max_queue`` jobs are already queued or running, a new one is refused at once with
  :class:`Overloaded` (the app answers 503 with ``Retry-After``) instead of piling up without bound;
* priorities: searches go ahead of /v1/rerank, which goes ahead of /v1/embeddings batches;
* a job that waited longer than ``queue_timeout`` seconds, or whose caller went away, is not run;
* ``Retry-After`` is estimated from the queue length and the mean time of recent jobs.

Indexing (the watcher) runs in its own thread with its own embedding context, so a long indexing batch never
sits in front of a search in this queue.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from indexer.errors import IndexerError

logger = logging.getLogger(__name__)

T = TypeVar("T")

PRIORITY_SEARCH = 0
PRIORITY_RERANK = 1
PRIORITY_EMBED = 2


class Overloaded(IndexerError):
    """The model queue is full or a job waited too long; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(order=True)
class _Job:
    priority: int
    seq: int
    fn: Callable[[], Any] = field(compare=False)
    future: asyncio.Future[Any] = field(compare=False)
    loop: asyncio.AbstractEventLoop = field(compare=False)
    queued_at: float = field(compare=False)


def _stop() -> None:
    """Marker job: the worker thread ends when it reaches it (after every job queued before it)."""


class ModelWorker:
    """Runs callables one at a time on a dedicated thread; ``await worker.run(fn, priority=...)``."""

    def __init__(
        self,
        max_queue: int = 32,
        queue_timeout: float = 30.0,
        name: str = "indexer-model",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_queue = max_queue
        self._clock = clock
        self.queue_timeout = queue_timeout
        self._queue: queue.PriorityQueue[_Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._pending = 0  # queued + running
        self._mean_s = 0.05  # moving mean of job time, for Retry-After
        self.completed = 0
        self.rejected = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Jobs queued or running."""
        return self._pending

    def retry_after(self) -> int:
        return max(1, math.ceil(self._pending * self._mean_s))

    async def run(self, fn: Callable[[], T], priority: int = PRIORITY_SEARCH) -> T:
        """Run ``fn()`` on the worker thread; raise :class:`Overloaded` at once when the queue is full."""
        with self._lock:
            if self._pending >= self.max_queue:
                self.rejected += 1
                raise Overloaded(
                    f"the server is busy ({self._pending} model jobs queued or running, the limit is "
                    f"{self.max_queue}); retry in {self.retry_after()} s",
                    self.retry_after(),
                )
            self._pending += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()  # the request's marks (its caller: indexer.core.caller) go with it
        job = partial(context.run, fn)
        self._queue.put(_Job(priority, next(self._seq), job, future, loop, self._clock()))
        return await future

    def submit_nowait(self, fn: Callable[[], Any], priority: int = PRIORITY_SEARCH) -> None:
        """Queue ``fn`` without waiting for it and without the bound (for follow-up work a running job schedules:
        ``fn`` reports its own results). Errors are logged."""

        def job() -> None:
            try:
                fn()
            except Exception:
                logger.exception("a follow-up model job failed")

        with self._lock:
            self._pending += 1
        self._queue.put(_Job(priority, next(self._seq), job, None, None, self._clock()))  # type: ignore[arg-type]

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the jobs already queued; wait up to ``timeout`` seconds for the thread."""
        if self._thread.is_alive():
            self._queue.put(_Job(10**9, next(self._seq), _stop, None, None, 0.0))  # type: ignore[arg-type]
            self._thread.join(timeout)

    def call_sync(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """Run ``fn()`` on the worker thread from a thread that has no event loop (startup, shutdown)."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def job() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed back to the caller
                box["error"] = exc
            finally:
                done.set()

        with self._lock:
            self._pending += 1
        self._queue.put(_Job(PRIORITY_SEARCH, next(self._seq), job, None, None, self._clock()))  # type: ignore[arg-type]
        if not done.wait(timeout):
            raise TimeoutError("the model worker did not answer in time")
        if "error" in box:
            raise box["error"]
        return box["value"]

    # -- the thread --------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job.fn is _stop:
                return
            try:
                self._run_one(job)
            finally:
                with self._lock:
                    self._pending -= 1

    def _run_one(self, job: _Job) -> None:
        if job.future is None:  # call_sync: the callable reports on its own
            job.fn()
            return
        if job.future.cancelled():  # the caller went away while the job waited
            return
        waited = self._clock() - job.queued_at
        if waited > self.queue_timeout:
            exc = Overloaded(
                f"the request waited {waited:.1f} s for the model (queue_timeout is {self.queue_timeout} s); "
                "retry later",
                self.retry_after(),
            )
            job.loop.call_soon_threadsafe(_settle, job.future, None, exc)
            return
        started = time.monotonic()
        try:
            value, error = job.fn(), None
        except BaseException as exc:  # handed back to the awaiting request
            value, error = None, exc
        self._mean_s = 0.8 * self._mean_s + 0.2 * (time.monotonic() - started)
        self.completed += 1
        try:
            job.loop.call_soon_threadsafe(_settle, job.future, value, error)
        except RuntimeError:  # the loop is closed (server shutting down)
            logger.debug("dropped the result of a model job: the event loop is closed")


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
