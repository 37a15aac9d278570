"""Live sync: a watchdog observer over a collection's roots keeps the index equal to the folders.

:class:`Watcher` is the embeddable part (``start()``/``stop()``; the HTTP service runs one per collection in a
background thread); :func:`run_watch` is ``indexer watch`` in the foreground. How it works:

- Observers first, then a reconciliation scan (the writer's ``index``/``sync``), so nothing changed during the scan
  is missed; the same scan runs every ``watch_rescan_seconds`` (inotify drops events silently when its queue
  overflows, and network filesystems miss some).
- Events become batches by the rules of :mod:`indexer.watch.batch` (at once, settled, grace for vanishing
  files, folders by prefix, ignore-file edits), of the events the root's source claims. Each batch is one
  ``sync_paths`` call of the collection's writer (:mod:`indexer.watch.target`: what a watcher drives) under the
  writer lock; the pipeline reuses cached vectors, so a rename re-embeds nothing.
- inotify limits (ENOSPC: ``fs.inotify.max_user_watches``, EMFILE: ``fs.inotify.max_user_instances``) fall back
  to polling for that root with a warning; ``polling=True`` polls every root (NFS, SMB, some Docker mounts).
- Failures: a bad file is reported (status file, log) and skipped; an unreachable store or a collection locked
  by another writer keeps the batch queued (persisted in the data dir) and retries with backoff; any other
  error of a batch is narrowed down path by path, so one bad path cannot hold the others back.
- ``stop()`` (SIGTERM/SIGINT in the CLI) finishes the batch in flight, interrupts a reconciliation scan between
  two file batches (the pipeline is crash-safe), persists what is queued and returns; a SIGKILL is recovered
  by the next start (pending write intents, the persisted queue, the reconciliation scan).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexer.core.locks import LifetimeLock
from indexer.core.paths import user_path, within
from indexer.errors import IndexerError, InputError
from indexer.names import printable, printable_data
from indexer.ports import Progress, Source
from indexer.state.watch_files import (
    ERRORS_KEPT,
    STATUS_PATHS_SHOWN,
    load_queue,
    lock_path,
    read_status,
    save_queue,
    status_path,
)
from indexer.types import IndexReport
from indexer.watch.batch import Batch, ChangeBatcher, What
from indexer.watch.ledger import ATTEMPTS_PER_PATH, Backoff, Failure, Ledger, own_work
from indexer.watch.observers import OVERFLOW
from indexer.watch.root_watches import RootWatches
from indexer.watch.status_file import StatusFile
from indexer.watch.target import WatchError, WatchOptions, WatchTarget, options_from_settings

logger = logging.getLogger("indexer.watch")  # one logger name for live sync (docs/watch.md)

class _Stopping(Exception):
    """Raised from the progress callback to end a reconciliation scan early when the watcher stops."""


class _StopCheck(Progress):
    """Pipeline progress that only checks whether the watcher is stopping."""

    def __init__(
        self,
        stopping: threading.Event,
        tick: Callable[[], None] | None = None,
        on_part: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.stopping = stopping
        self.tick = tick
        self.on_part = on_part

    def file_part(self, path: str, done: int, total: int) -> None:
        """A large file's slice was written: ``done`` of ``total`` chunks (status shows it)."""
        if self.on_part is not None:
            self.on_part(path, done, total)
        self._check()

    def files_total(self, n: int) -> None:
        self._check()

    def file_done(self, path: str) -> None:
        self._check()

    def embedded(self, chunks: int, tokens: int) -> None:
        self._check()

    def _check(self) -> None:
        if self.stopping.is_set():
            raise _Stopping()
        if self.tick is not None:
            self.tick()


class Watcher:
    """Keeps ``collection`` in step with its roots (or with ``paths``, added as roots first) until stopped.

    ``start()`` returns at once; the reconciliation scan and every batch run in a worker thread. ``stop()``
    ends it cleanly. Only one watcher per collection and data directory runs at a time (a file lock)."""

    def __init__(
        self,
        collection: WatchTarget,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        options: WatchOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        observer_factory: Callable[[], Any] | None = None,
        polling_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.collection = collection
        self.options = options or options_from_settings(collection.settings)
        self.data_dir = Path(collection.settings.data_dir)
        self.name: str = collection.name
        self._add_paths = [str(user_path(p)) for p in paths or ()]
        self._clock = clock
        self._cond = threading.Condition()
        self._batcher = ChangeBatcher(self.options.timing)
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        # the roots' observers (inotify, or polling where asked or where inotify is refused): watch/root_watches.py
        self.watches = RootWatches(self.options, lambda path, what: self.on_event(path, what), observer_factory,
                                   polling_factory)
        self._sources: dict[str, Source] = {}  # root -> its source (asked which paths are its own)
        self._lock: LifetimeLock | None = None
        self.roots: list[str] = []
        self._in_flight: Batch | None = None
        self._state = "starting"
        self._backoff = Backoff()  # what a failed batch becomes (watch/ledger.py)
        self.ledger = Ledger()  # counts, errors, freshness (watch/ledger.py)
        self.errors = self.ledger.errors
        self.totals = self.ledger.totals
        self.freshness_stats = self.ledger.freshness
        self._batch_started: float | None = None  # wall time the batch in flight started (status)
        self._status_file = StatusFile(status_path(self.data_dir, self.name), self.status, self._cond, self._stopped)
        self._wake_at = float("-inf")  # while the worker sleeps: when it plans to wake (events due sooner notify)
        self._next_rescan = float("inf")
        self._reconciled = False
        self.started_at = time.time()
        self._writing: dict[str, Any] | None = None  # the large file being written: path, chunks done, total
        self._background: set[str] = set()  # paths still being read after their batch returned

    # -- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Take the watcher lock, start the observers and the worker thread (which reconciles first)."""
        self._take_lock()
        try:
            self.roots = self._initial_roots()
            for path in load_queue(self.data_dir, self.name):
                self._batcher.note(path, What.CLOSED, self._clock())
            self._start_observers()
        except BaseException:
            self._stop_observers()
            self._release_lock()
            raise
        self.collection.follow_reads(self._read_ended)  # a slow read goes on in the background; its end queues it
        self._status_file.write()
        OVERFLOW.watchers.add(self)
        self._thread = threading.Thread(target=self._run, name=f"indexer-watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Finish the batch in flight, persist what is queued, stop observing. Idempotent."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self._stop_observers()
        if self._thread is None or not self._thread.is_alive():
            self._release_lock()

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def polled_roots(self) -> list[str]:
        """The roots polled instead of watched by inotify (the option, or a kernel limit)."""
        return self.watches.polled_roots

    @property
    def batches(self) -> int:
        return self.ledger.batches

    @property
    def last_batch(self) -> dict[str, Any] | None:
        return self.ledger.last_batch

    @property
    def last_error(self) -> str | None:
        return self.ledger.last_error

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_idle(self, timeout: float) -> bool:
        """Block until reconciled with nothing queued or in flight (tests, benchmarks); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._idle.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                with self._cond:
                    if self._idle.is_set() and not len(self._batcher) and self._in_flight is None:
                        return True
            if self._stopped.is_set():
                return False
        return False

    def freshness(self) -> dict[str, Any]:
        """A short summary for a service's status page: state, queue, errors, change->searchable times."""
        with self._cond:
            queued = len(self._batcher) + (len(self._in_flight) if self._in_flight else 0)
        return {
            "state": self._state,
            "queued": queued,
            "files_with_errors": len(self.errors),
            "batches": self.batches,
            "polled_roots": list(self.polled_roots),
            **self.freshness_stats.summary(),
        }

    def request_rescan(self, reason: str) -> None:
        """Run the reconciliation scan as soon as the batch in flight is done (events were lost)."""
        logger.warning("%s: rescanning %s", reason, ", ".join(self.roots))
        with self._cond:
            self._next_rescan = float("-inf")
            self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        with self._cond:  # the worker changes these under the same lock
            queued = sorted(set(self._batcher.paths()) | set(self._in_flight.paths if self._in_flight else ()))
            errors = dict(list(self.errors.items())[-ERRORS_KEPT:])
            totals = dict(self.totals)
            batch = self._running_batch()
            held = self._batcher.held_back(self._clock())
        status: dict[str, Any] = printable_data(  # names that are not UTF-8 appear with \x escapes
            {
                "roots": self.roots,
                "polled_roots": self.polled_roots,
                "queued_paths": queued[:STATUS_PATHS_SHOWN],
                "errors": errors,
                "last_error": self.last_error,
            }
        )
        return {
            **status,
            "pid": os.getpid(),
            "collection": self.name,
            "running": not self._stopped.is_set(),
            "state": self._state,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "queued": len(queued),  # every path not yet synced: waiting, held back, or in the running batch
            "batch": batch,
            "held_back": len(held),  # rate-limited: changing continuously, synced at most every few seconds
            "freshness": self.freshness_stats.summary(),
            "batches": self.batches,
            "totals": totals,
            "last_batch": self.last_batch,
            "last_slow_batch": self.ledger.last_slow_batch,  # a file held it SLOW_PATH_SECONDS or more (which, why)
            # large files: being read in the background (path, seconds so far), being written (chunks so far)
            "reading": printable_data(self._reading()),
            "writing": printable_data(self._writing),
        }

    def _reading(self) -> list[dict[str, Any]]:
        return list(self.collection.reading())

    def _running_batch(self) -> dict[str, Any] | None:
        """The batch in flight (paths, start, seconds so far, estimated seconds), or None; under ``_cond``."""
        batch, started = self._in_flight, self._batch_started
        if batch is None or started is None:
            return None
        return {
            "paths": len(batch),
            "started_at": started,
            "seconds": round(max(0.0, time.time() - started), 3),
            "estimated_seconds": round(batch.estimate, 3),
        }

    # -- setup -----------------------------------------------------------------------------------------
    def _take_lock(self) -> None:
        lock = LifetimeLock(lock_path(self.data_dir, self.name))
        try:
            lock.take(f"a watcher of collection {self.name!r} already runs", error=WatchError)
        except WatchError as exc:
            other = read_status(self.data_dir, self.name) or {}
            raise WatchError(
                f"a watcher of collection {self.name!r} already runs (pid {other.get('pid', '?')}); stop it first "
                "(one watcher per collection)"
            ) from exc
        self._lock = lock

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _initial_roots(self) -> list[str]:
        known = list(self.collection.state.roots(self.name)) if self.collection.record is not None else []
        if not self._add_paths:
            if not known:
                raise InputError(
                    f"collection {self.name!r} has no roots yet; run `indexer watch PATH` (or `indexer index PATH`)"
                )
            return known
        for path in self._add_paths:
            if not os.path.isdir(path):
                raise InputError(f"{path} is not an existing folder; pass folders to watch")
        return self._add_paths

    def _watchable(self, roots: list[str]) -> list[str]:
        present = [r for r in roots if os.path.isdir(r)]
        for root in roots:
            if root not in present:
                logger.warning("root %s is unavailable (unmounted or deleted): not watched; its points are kept", root)
        if not present:
            raise WatchError("no root of the collection is available to watch; mount or restore them")
        return present

    def _start_observers(self) -> None:
        self.watches.start(self._watchable(self.roots))

    def _refresh_watches(self) -> None:
        """After a rescan: watch roots added to the collection since the start (no PATH given) and roots that
        came back after being deleted or unmounted (their watch ended with them)."""
        if not self._add_paths:
            self.roots = list(self.collection.state.roots(self.name))
        self.watches.refresh(self.roots)

    def _stop_observers(self) -> None:
        self.watches.stop()

    def _read_ended(self, path: str) -> None:
        """A read left running in the background ended (a reader thread): sync the path again, which takes the
        finished document."""
        with self._cond:
            self._background.discard(path)
        self.on_event(path, What.CLOSED)

    # -- events (observer threads) ---------------------------------------------------------------------
    def on_event(self, path: str, what: What) -> None:
        """Record one change (called by the observer's handler; public for embedding and tests)."""
        if not self._wanted(path):
            return
        with self._cond:
            now = self._clock()
            self._batcher.note(path, what, now)
            self._idle.clear()
            if now + self._batcher.delay_of(path, what) < self._wake_at:
                self._cond.notify_all()  # the worker sleeps past the moment this change is due
            busy = self._in_flight is not None or self._state == "reconciling"
        if busy:
            self._status_file.tick()  # the worker is inside a batch: the queue it cannot report grows

    def _wanted(self, path: str) -> bool:
        """Cheap pre-filter: inside a watched root, outside the data dir, and claimed by the root's source (which
        says what is its own: :meth:`indexer.ports.Source.claims`)."""
        root = next((r for r in self.roots if within(path, r)), None)
        if root is None or within(path, str(self.data_dir)):
            return False
        return self._source(root).claims(path)

    def _source(self, root: str) -> Source:
        """The source of ``root`` (opened once per root; observer threads share it: ``claims`` reads only names)."""
        source = self._sources.get(root)
        if source is None:
            source = self._sources[root] = self.collection.source_for(root)
        return source

    # -- the worker --------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                now = self._clock()
                if now < self._backoff.retry_at:
                    self._wait(self._backoff.retry_at - now)
                    continue
                if not self._reconciled or now >= self._next_rescan:
                    self._reconcile()
                    continue
                with self._cond:
                    if self._backoff.narrow and not len(self._batcher):
                        self._backoff.narrow = False  # back to whole batches once the narrowed-down queue is drained
                    batch = self._batcher.take(now, max_paths=1 if self._backoff.narrow else None)
                    if batch is None:
                        due = self._batcher.next_due(now)
                        if due is None:
                            self._idle.set()
                            if self._state == "syncing":
                                self._state = "idle"
                                self._status_file.write()
                        wake = min(self._next_rescan, due if due is not None else now + 1.0, now + 1.0)
                        self._wake_at = wake
                        self._cond.wait(max(0.001, wake - now))
                        self._wake_at = float("-inf")
                        continue
                    self._in_flight = batch
                self._process(batch)
        except BaseException:
            logger.exception("the watcher of %s stopped on an unexpected error", self.name)
            raise
        finally:
            self._shutdown()

    def _wait(self, seconds: float) -> None:
        with self._cond:
            self._cond.wait(max(0.001, seconds))

    def _shutdown(self) -> None:
        with self._cond:
            leftover = self._batcher.take_all()
            in_flight = self._in_flight.paths if self._in_flight else ()
            self._in_flight = None
            self._batch_started = None
            background = sorted(self._background)
        self.collection.follow_reads(None)
        save_queue(self.data_dir, self.name, [*leftover.paths, *in_flight, *background])
        self._state = "stopped"
        self._stopped.set()
        self._status_file.write()
        logger.info("watcher of %s stopped; %d paths queued for the next start", self.name, len(leftover))

    def _reconcile(self) -> None:
        """The full scan: at start (adding ``paths`` as roots) and every ``rescan_seconds``."""
        self._state = "reconciling"
        self._status_file.write()
        started = self._clock()
        try:
            stop = _StopCheck(self._stopping, self._status_file.tick, self._file_part)
            if self._add_paths:
                report = self.collection.index(self._add_paths, progress=stop)
            else:
                report = self.collection.sync(progress=stop)
        except _Stopping:
            logger.info("reconciliation scan of %s interrupted by stop; the next start runs it again", self.name)
            self._stopping.set()
            return
        except Exception as exc:
            if not isinstance(exc, IndexerError):
                logger.exception("reconciliation scan of %s failed", self.name)
            self._retry_later(f"reconciliation scan failed: {exc}")
            return
        self._backoff.succeeded()
        with self._cond:
            self._writing = None
            self._background |= set(report.reading)
            for path in report.stale:  # indexed as the version a running read had (it changed since)
                self._batcher.note(path, What.CLOSED, self._clock())
        if not self._reconciled:
            self._warm_up()
        else:
            self._refresh_watches()
        self._reconciled = True
        with self._cond:
            rescan = self.options.rescan_seconds
            self._next_rescan = self._clock() + rescan if rescan > 0 else float("inf")
        self._record_failures(report, self.roots)
        seconds = self._clock() - started
        logger.info(
            "reconciled %s in %.2fs: %d files seen, %d indexed, %d removed, %d failed",
            ", ".join(self.roots),
            seconds,
            report.files_seen,
            report.files_indexed,
            report.files_removed,
            len(report.failed),
        )
        self._state = "syncing"
        self._status_file.write()

    def _warm_up(self) -> None:
        """One embedding through the model, so the first change after start does not pay for the first model call."""
        try:
            self.collection.warm_up()
        except Exception as exc:  # only an optimisation
            logger.debug("warm-up query failed: %s", exc)

    def _process(self, batch: Batch) -> None:
        self._state = "syncing"
        self._batch_started = time.time()
        self._persist_queue()
        self._status_file.write()  # the running batch and the queue, before the batch can take seconds
        started = self._clock()
        try:
            report = self._sync(list(batch.paths))
        except _Stopping:
            self._requeue(batch)  # stopped between two file batches (crash-safe): persisted for the next start
            with self._cond:
                self._in_flight = None
                self._batch_started = None
            return
        except Exception as exc:
            with self._cond:
                self._in_flight = None
                self._batch_started = None
            self._failed(batch, exc)
            return
        now = self._clock()
        with self._cond:
            self._in_flight = None
            self._batch_started = None
            unfinished = set(report.unfinished)  # large files part-written: their next slices go in the next batch
            if self._writing is not None and self._writing["path"] not in unfinished:
                self._writing = None
            reading = set(report.reading)
            self._background |= reading
            elapsed = now - started
            if reading:  # a read left in the background is no measure of its path's cost: it comes back; the
                # time the batch waited for it is not its neighbours' cost either (or a note saved beside a slow
                # scan would be rate-limited as a costly path)
                elapsed = max(0.0, elapsed - report.stages.get("read", 0.0))
            # nor are a large file's slices (written for about a second per batch, after the others)
            elapsed -= sum(sum(report.held.get(p, {}).values()) for p in unfinished | set(batch.going_on))
            batch = replace(batch, costs={p: c for p, c in batch.costs.items() if p not in reading | unfinished})
            charged = {p: own_work(report.held[p]) for p in batch.costs if p in report.held}
            self._batcher.learn(batch, max(0.0, elapsed), now, charged)  # cost model and per-path rate limit
            for path in unfinished:
                self._batcher.go_on(path, now, batch.first_seen.get(path))
            for path in report.stale:  # an older version was indexed (its read had started before the change)
                self._batcher.note(path, What.CLOSED, now)
            self._batcher.charge_reads(report.read_before, unfinished, now)  # reads in the background: rate-limited
        self._backoff.succeeded()
        self._finish_batch(batch, report)

    def _sync(self, paths: list[str]) -> IndexReport:
        progress = _StopCheck(self._stopping, self._status_file.tick, self._file_part)  # stop() interrupts it
        return self.collection.sync_paths(paths, progress=progress)

    def _file_part(self, path: str, done: int, total: int) -> None:
        self._writing = {"path": path, "chunks_written": done, "chunks_total": total}

    def _failed(self, batch: Batch, exc: Exception) -> None:
        """What the batch becomes is the back-off's call (watch/ledger.py): retried, narrowed down, or skipped."""
        outcome = self._backoff.failed(batch, exc)
        if outcome is Failure.NARROW:
            logger.warning("a batch of %d paths failed (%s); retrying them one by one", len(batch), printable(str(exc)))
            self._requeue(batch)
            return
        reason = f"{type(exc).__name__}: {exc}"
        if outcome is not Failure.SKIP:
            self._requeue(batch)
            self._retry_later(str(exc) if outcome is Failure.RETRY else f"syncing {batch.paths[0]} failed ({reason})")
            return
        path = batch.paths[0]
        logger.error("skipping %s after %d failures: %s (the next rescan retries)", printable(path), ATTEMPTS_PER_PATH,
                     reason)
        with self._cond:
            self.ledger.failed(path, reason)
        self._persist_queue()
        self._status_file.write()

    def _requeue(self, batch: Batch) -> None:
        with self._cond:
            self._batcher.requeue(batch, self._clock())
        self._persist_queue()

    def _retry_later(self, reason: str) -> None:
        delay = self._backoff.later(self._clock())
        self._state = "waiting to retry"
        self.ledger.last_error = reason
        logger.warning("%s; retrying in %.1fs (changes stay queued)", printable(reason), delay)
        self._persist_queue()
        self._status_file.write()

    def _finish_batch(self, batch: Batch, report: IndexReport) -> None:
        with self._cond:
            ages = self.ledger.finished(batch, report, self._clock())
            queued = len(self._batcher)
        self.ledger.log_batch(batch, report, ages, queued)
        self._persist_queue()
        self._status_file.write()

    def _record_failures(self, report: IndexReport, scope: Sequence[str]) -> None:
        with self._cond:
            self.ledger.record(report, scope)

    def _persist_queue(self) -> None:
        with self._cond:
            paths = [*self._batcher.paths(), *(self._in_flight.paths if self._in_flight else ())]
        try:
            save_queue(self.data_dir, self.name, paths)
        except OSError as exc:
            logger.warning("cannot persist the watch queue (%s); the next start's reconciliation scan covers it", exc)
