"""A watcher's batch policy: what each batch's outcome does (issue 43 split it from the watcher's lifecycle).

- :class:`Ledger` keeps the record a status shows: counts, the files that failed (newest last, at most
  ``ERRORS_KEPT``), the last batch, change->searchable times. The watcher calls it under its condition.
- :class:`Backoff` decides what a failed batch becomes: retried later with exponential back-off (a store that is
  unreachable, a collection locked by another writer), narrowed down path by path (any other error of a batch
  of several paths), retried a few times and then skipped (one path that keeps failing).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from enum import Enum
from typing import Any

from indexer.core.paths import within
from indexer.names import printable
from indexer.state.watch_files import ERRORS_KEPT, Freshness
from indexer.types import IndexReport
from indexer.watch.batch import Batch
from indexer.watch.target import is_retryable

logger = logging.getLogger("indexer.watch")

# A file charged this many seconds of one batch (read, chunk, embed, write, commit: IndexReport.held) is named in the
# log, once per file, with how long and in which stage; status keeps the last such batch (``last_slow_batch``).
SLOW_PATH_SECONDS = 1.0
SLOW_NAMED_KEPT = 10_000  # files already named (not named again while remembered)

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
ATTEMPTS_PER_PATH = 3


def own_work(stages: dict[str, float]) -> float:
    """The seconds a file's own content cost a batch (read, chunk, embed: ``IndexReport.held``), what the rate
    limit goes by. Not its write and commit shares: those hold the store's work for everyone (the first write
    loading the index, a checkpoint), and a note must not be held back for minutes for being written then."""
    return sum(seconds for stage, seconds in stages.items() if stage in ("read", "chunk", "embed"))


class Ledger:
    """Counts, errors and freshness of one watcher (read by its status; changed under the watcher's lock)."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.freshness = Freshness()
        self.batches = 0
        self.totals = {
            "files_indexed": 0,
            "files_removed": 0,
            "files_failed": 0,
            "chunks_embedded": 0,
            "chunks_reused": 0,
        }
        self.last_batch: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.last_slow_batch: dict[str, Any] | None = None
        self.slow_seconds = SLOW_PATH_SECONDS
        self._named: dict[str, None] = {}  # files the log named as slow (oldest first)

    def record(self, report: IndexReport, scope: Sequence[str]) -> None:
        """Count ``report`` and set the errors of the paths inside ``scope`` to its failures."""
        self.totals["files_indexed"] += report.files_indexed
        self.totals["files_removed"] += report.files_removed
        self.totals["files_failed"] += len(report.failed)
        self.totals["chunks_embedded"] += report.chunks_embedded
        self.totals["chunks_reused"] += report.chunks_reused
        failed = dict(report.failed)
        for path in [p for p in self.errors if any(within(p, s) for s in scope) and p not in failed]:
            del self.errors[path]
        for path, reason in failed.items():
            self.failed(path, reason)

    def failed(self, path: str, reason: str) -> None:
        self.errors.pop(path, None)
        self.errors[path] = reason  # newest last
        self.last_error = f"{path}: {reason}"
        while len(self.errors) > ERRORS_KEPT:
            del self.errors[next(iter(self.errors))]

    def finished(self, batch: Batch, report: IndexReport, now: float) -> list[float]:
        """A batch was synced at ``now`` (the watcher's clock): its change->searchable ages (file changes only: a
        folder pass mostly re-checks files already synced one by one), counted and kept as the last batch."""
        # a large file part-written (unfinished) is not searchable yet: its age counts when its last slice is written
        ages = [now - batch.first_seen.get(p, now) for p in batch.paths
                if p not in report.unfinished and not os.path.isdir(p)]  # fmt: skip
        for age in ages:
            self.freshness.add(age)
        self.record(report, batch.paths)
        self.batches += 1
        self.last_batch = {
            "at": time.time(),
            "paths": len(batch),
            "indexed": report.files_indexed,
            "removed": report.files_removed,
            "failed": len(report.failed),
            "chunks_embedded": report.chunks_embedded,
            "chunks_reused": report.chunks_reused,
            "seconds": round(report.seconds, 3),
            "freshness_ms": round(max(ages) * 1000, 1) if ages else None,
            "stages": {stage: round(seconds, 3) for stage, seconds in report.stages.items()},
            "slowest": [{**row, "path": printable(row["path"])} for row in report.slowest(3)],
            "unfinished": len(report.unfinished),
        }
        self._slow(report)
        return ages

    def _slow(self, report: IndexReport) -> None:
        """Name each file this batch was charged ``slow_seconds`` or more for (once per file), and keep the batch."""
        slow = [row for row in report.slowest(len(report.held)) if row["seconds"] >= self.slow_seconds]
        if not slow:
            return
        self.last_slow_batch = {"at": time.time(), "batch": self.batches, "seconds": round(report.seconds, 3),
                                "paths": [{**row, "path": printable(row["path"])} for row in slow]}  # fmt: skip
        for row in slow:
            path = str(row["path"])
            if path in self._named:
                continue
            self._named[path] = None
            while len(self._named) > SLOW_NAMED_KEPT:
                del self._named[next(iter(self._named))]
            stages = report.held.get(path, {})
            ranked = sorted(stages.items(), key=lambda item: item[1], reverse=True)
            why = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in ranked if seconds >= 0.005)
            logger.warning("%s held batch %d for %.1f s, mostly %s (%s)%s; named once", printable(path), self.batches,
                           row["seconds"], row["stage"], why,
                           ": written in slices between other changes" if path in report.unfinished else "")

    def log_batch(self, batch: Batch, report: IndexReport, ages: list[float], queued: int) -> None:
        fresh = self.freshness.summary()
        logger.info(
            "batch %d: %d paths in %.2fs: %d indexed, %d removed, %d unchanged, %d failed; %d chunks embedded, "
            "%d reused; change->searchable %.0f ms (p50 %s, p95 %s); %d queued",
            self.batches,
            len(batch),
            report.seconds,
            report.files_indexed,
            report.files_removed,
            report.files_unchanged + report.files_touched,
            len(report.failed),
            report.chunks_embedded,
            report.chunks_reused,
            max(ages) * 1000 if ages else 0.0,
            fresh["p50_ms"],
            fresh["p95_ms"],
            queued,
        )


class Failure(Enum):
    """What a failed batch becomes (:meth:`Backoff.failed`)."""

    RETRY = "retry"  # may pass later (store unreachable, writer lock taken): requeued behind the back-off
    AGAIN = "again"  # its one path failed: requeued behind the back-off, up to ATTEMPTS_PER_PATH times
    NARROW = "narrow"  # requeued; taken again one path per batch until the queue drains
    SKIP = "skip"  # its one path failed ATTEMPTS_PER_PATH times: reported and dropped until the next rescan


class Backoff:
    """Retry policy of one watcher's worker (its thread alone uses it)."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.retry_at = 0.0
        self.failures_in_row = 0
        self.narrow = False

    def succeeded(self) -> None:
        self.delay = 0.0
        self.retry_at = 0.0
        self.failures_in_row = 0

    def later(self, now: float) -> float:
        """Double the wait (from BACKOFF_FIRST up to BACKOFF_MAX); returns it."""
        self.delay = min(BACKOFF_MAX, self.delay * 2 if self.delay else BACKOFF_FIRST)
        self.retry_at = now + self.delay
        return self.delay

    def failed(self, batch: Batch, exc: Exception) -> Failure:
        """Retry what may pass later; narrow other failures down to the path that causes them, then skip it."""
        if is_retryable(exc):
            return Failure.RETRY
        if len(batch) > 1:
            self.narrow = True
            return Failure.NARROW
        self.failures_in_row += 1
        if self.failures_in_row < ATTEMPTS_PER_PATH:
            return Failure.AGAIN
        self.failures_in_row = 0
        return Failure.SKIP
