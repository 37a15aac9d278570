"""What a watcher keeps in the data directory: its queue of unsynced paths and a small status file.

Both live under ``<data_dir>/watch/`` and are written atomically (temp file, fsync, rename), so a reader or a
restarted watcher never sees half a file:

- ``<collection>.queue.json``: paths changed but not yet synced (persisted at every batch boundary, so an
  unreachable store or a restart loses nothing; events between two boundaries are found again by the
  reconciliation scan every start runs).
- ``<collection>.status.json``: pid, state, queued paths, the last error per file, freshness (change ->
  searchable, last/p50/p95) and the last batch. ``read_status`` adds ``running`` (is that pid alive).
- ``<collection>.lock``: held (flock) by the running watcher; a second watcher of the collection is refused.

Only the standard library (and :mod:`indexer.names`) is imported here: ``indexer status`` reads the status
without loading watchdog.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from indexer.names import printable_data

logger = logging.getLogger(__name__)

STATUS_PATHS_SHOWN = 20
ERRORS_KEPT = 200
FRESHNESS_WINDOW = 1000


def watch_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / "watch"


def queue_path(data_dir: str | os.PathLike[str], collection: str) -> Path:
    return watch_dir(data_dir) / f"{collection}.queue.json"


def status_path(data_dir: str | os.PathLike[str], collection: str) -> Path:
    return watch_dir(data_dir) / f"{collection}.status.json"


def lock_path(data_dir: str | os.PathLike[str], collection: str) -> Path:
    return watch_dir(data_dir) / f"{collection}.lock"


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_queue(data_dir: str | os.PathLike[str], collection: str) -> list[str]:
    """The persisted queue (absolute paths); empty when there is none or it is unreadable (logged)."""
    path = queue_path(data_dir, collection)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable watch queue %s (%s); the reconciliation scan covers it", path, exc)
        return []
    paths = data.get("paths", []) if isinstance(data, dict) else []
    return [p for p in paths if isinstance(p, str) and os.path.isabs(p)]


def save_queue(data_dir: str | os.PathLike[str], collection: str, paths: list[str]) -> None:
    path = queue_path(data_dir, collection)
    if not paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    write_json_atomic(path, {"saved_at": time.time(), "paths": sorted(set(paths))})


class Freshness:
    """Change-to-searchable times (seconds) of the last ``FRESHNESS_WINDOW`` synced paths."""

    def __init__(self, window: int = FRESHNESS_WINDOW) -> None:
        self.samples: deque[float] = deque(maxlen=window)

    def add(self, seconds: float) -> None:
        self.samples.append(max(0.0, seconds))

    def summary(self) -> dict[str, float | int | None]:
        data = sorted(self.samples)
        if not data:
            return {"last_ms": None, "p50_ms": None, "p95_ms": None, "samples": 0}
        return {
            "last_ms": round(self.samples[-1] * 1000, 1),
            "p50_ms": round(_quantile(data, 0.50) * 1000, 1),
            "p95_ms": round(_quantile(data, 0.95) * 1000, 1),
            "samples": len(data),
        }


def _quantile(sorted_data: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted data."""
    rank = max(1, min(len(sorted_data), int(-(-q * len(sorted_data) // 1))))
    return sorted_data[rank - 1]


def watcher_running(data_dir: str | os.PathLike[str], collection: str) -> bool:
    """Whether a watcher holds the collection's watch lock now (a killed one has released it)."""
    path = lock_path(data_dir, collection)
    try:
        fh = open(path)  # noqa: SIM115
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def read_status(data_dir: str | os.PathLike[str], collection: str) -> dict[str, Any] | None:
    """The last status a watcher of ``collection`` wrote, with ``running``; None if no watcher ever ran.

    A watcher that died without cleaning up (SIGKILL) shows ``running: false`` and its last state; the queue
    it left is reported from the queue file (the next watcher start applies it). ``running`` is checked against the
    watcher's lock, not the pid (pids are reused)."""
    path = status_path(data_dir, collection)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        queued = load_queue(data_dir, collection)
        if not queued:
            return None
        return {"running": False, "queued": len(queued), "queued_paths": printable_data(queued[:STATUS_PATHS_SHOWN])}
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    running = bool(data.get("running")) and watcher_running(data_dir, collection)
    data["running"] = running
    if not running:
        queued = load_queue(data_dir, collection)
        data["state"] = "stopped"
        data["batch"] = None
        data["queued"] = len(queued)
        data["queued_paths"] = queued[:STATUS_PATHS_SHOWN]
    result: dict[str, Any] = printable_data(data)  # a name that is not UTF-8 never reaches an output raw
    return result


def describe(status: dict[str, Any] | None) -> str:
    """One line for `indexer status`: running or not, state, queue, errors and freshness."""
    if not status:
        return "not running (never started; `indexer watch`)"
    fresh = status.get("freshness") or {}
    batch = status.get("batch") if status.get("running") else None
    held = status.get("held_back") if status.get("running") else None
    parts = [
        f"running (pid {status.get('pid')}), {status.get('state')}" if status.get("running") else "not running",
        *([f"a batch of {batch['paths']} paths running for {batch['seconds']:.1f}s"] if batch else []),
        f"{status.get('queued', 0)} queued" + (f" ({held} held back)" if held else ""),
        f"{len(status.get('errors') or {})} files with errors",
    ]
    if status.get("running"):
        parts += [f"reading {r['path']} ({r['seconds']:.0f}s so far)" for r in status.get("reading") or []]
        writing = status.get("writing")
        if writing:
            parts.append(f"writing {writing['path']}: {writing['chunks_written']} of {writing['chunks_total']} chunks")
    if fresh.get("samples"):
        parts.append(
            f"change->searchable last {fresh['last_ms']} ms, p50 {fresh['p50_ms']} ms, p95 {fresh['p95_ms']} ms"
        )
    slow = status.get("last_slow_batch") or {}
    if slow.get("paths"):  # the last batch a file held past the threshold (docs/watch.md): which, how long, why
        top = slow["paths"][0]
        parts.append(f"last slow batch ({slow.get('batch')}): {top['path']} held it {top['seconds']:.1f}s, mostly "
                     f"{top['stage']}")
    if status.get("polled_roots"):
        parts.append("polling " + ", ".join(status["polled_roots"]))
    return "; ".join(parts)
