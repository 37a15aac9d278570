"""Freshness of `indexer watch`: time from writing a small Markdown file to a search in another process finding
its new text. p50/p95 over N edits, idle, during a burst of other changes, and during churn (a large log that a
logger opens, appends to and closes every 100 ms, the way many loggers write).

    python bench/freshness.py [--edits 50] [--burst 1000] [--churn-mb 5] [--phases idle,burst,churn]
                              [--store faiss] [--json out.json]

Runs in a temporary data dir: indexes a small corpus, starts `indexer watch` as a subprocess (the writer),
and searches from this process (the reader) with a path filter on the edited file until a hit holds the edit's
marker. The reference, measured in the same run before the watcher starts: the same edit synced in-process
with ``Collection.sync_paths`` (the work itself, no watcher), then found by the same search loop.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WORDS = """amber basalt cedar delta ember fjord granite harbor iris juniper kelp lagoon meadow nectar onyx prairie
quartz reef sierra tundra umber valley willow xenon yarrow zephyr""".split()  # noqa: SIM905


def quantile(data: list[float], q: float) -> float:
    ordered = sorted(data)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": round(quantile(samples, 0.5) * 1000, 1),
        "p95_ms": round(quantile(samples, 0.95) * 1000, 1),
        "mean_ms": round(statistics.fmean(samples) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
    }


def edit_text(i: int, phase: str) -> tuple[str, str]:
    marker = f"{phase}{i}x{WORDS[i % len(WORDS)]}"
    body = (
        f"# Field note {i}\n\nThe {WORDS[(i * 7) % len(WORDS)]} survey recorded {marker} near the "
        f"{WORDS[(i * 3) % len(WORDS)]} ridge after the storm.\n"
    )
    return marker, body


def wait_found(col, path: str, marker: str, timeout: float = 300.0) -> float:
    """Search (filtered to ``path``) until a hit contains ``marker``; returns when found (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        hits = col.search("field note survey", k=3, path_prefix=path, rerank=False).hits
        if any(marker in h.text for h in hits):
            return time.perf_counter()
        time.sleep(0.005)
    raise TimeoutError(f"edit {marker} not searchable after {timeout}s")


def run_edits(col, root: Path, n: int, phase: str, sync=None, starts: list[float] | None = None) -> list[float]:
    out = []
    target = root / f"{phase}-note.md"
    for i in range(n):
        marker, body = edit_text(i, phase)
        started = time.perf_counter()
        if starts is not None:
            starts.append(started)
        target.write_text(body, encoding="utf-8")
        if sync is not None:
            sync([str(target)])
        found = wait_found(col, str(target.resolve()), marker)
        out.append(found - started)
    return out


def write_burst(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9))
        (folder / f"b{i:04d}.md").write_text(f"# Burst {i}\n\nItem {i} lists {words} in order {i * 13}.\n")


LOG_BLOCK = "".join(
    f"2026-12-01 12:00:{i % 60:02d} INFO worker-{i % 7} handled request {i} of the queue in {i * 3 % 97} ms\n"
    for i in range(40)
)  # repeated: the log's chunks embed once (the cost that stays is re-reading and re-chunking it per sync)


def write_log(path: Path, megabytes: float) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        while fh.tell() < megabytes * 1e6:
            fh.write(LOG_BLOCK)


def append_forever(path: Path, interval: float, stop: threading.Event) -> None:
    """A logger that opens, appends one line and closes every ``interval`` seconds until ``stop``."""
    n = 0
    while not stop.is_set():
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"2026-12-01 12:01:00 WARN churn line {n}\n")
        n += 1
        stop.wait(interval)


def wait_status(data_dir: Path, collection: str, predicate, timeout: float = 600.0) -> dict:
    from indexer.state.watch_files import read_status

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(data_dir, collection) or {}
        if predicate(status):
            return status
        time.sleep(0.05)
    raise TimeoutError("watcher status condition not reached")


def burst_phase(col, root: Path, data_dir: Path, args: argparse.Namespace) -> dict[str, object]:
    """Edits while a burst of ``args.burst`` new files is written and indexed."""
    figures: dict[str, object] = {}
    burst_started = time.perf_counter()
    writer = threading.Thread(target=write_burst, args=(root / "burst", args.burst))
    writer.start()
    done: list[float] = []

    def burst_indexed() -> None:
        db = sqlite3.connect(f"file:{data_dir / 'state.sqlite'}?mode=ro", uri=True, timeout=30)
        like = f"{root.resolve() / 'burst'}/%"
        while db.execute("SELECT COUNT(*) FROM files WHERE path LIKE ?", (like,)).fetchone()[0] < args.burst:
            time.sleep(0.05)
        db.close()
        done.append(time.perf_counter())

    monitor = threading.Thread(target=burst_indexed)
    monitor.start()
    starts: list[float] = []
    busy = run_edits(col, root, args.edits, "busy", starts=starts)
    monitor.join()
    status = wait_status(data_dir, "fresh", lambda s: s.get("state") == "idle" and s.get("queued") == 0)
    burst_done = done[0] - burst_started
    during = [lat for lat, t in zip(busy, starts, strict=True) if t < done[0]]
    figures["during_burst"] = summary(during or busy)
    figures["edits_during_burst"] = len(during)
    figures["burst_indexed_seconds"] = round(burst_done, 1)
    figures["watcher_freshness"] = status.get("freshness")
    figures["watcher_batches"] = status.get("batches")
    print("during burst:", figures["during_burst"], f"(burst fully indexed in {burst_done:.1f}s)", flush=True)
    return figures


def churn_phase(col, root: Path, data_dir: Path, args: argparse.Namespace) -> dict[str, object]:
    """Edits while a ``args.churn_mb`` MB log is opened, appended to and closed every ``args.churn_interval`` s."""
    log = root / "logs" / "app.log"
    stop = threading.Event()
    logger = threading.Thread(target=append_forever, args=(log, args.churn_interval, stop), daemon=True)
    before = wait_status(data_dir, "fresh", lambda s: s.get("state") == "idle" and s.get("queued") == 0)
    logger.start()
    try:
        churn = run_edits(col, root, args.edits, "churn")
        status = wait_status(data_dir, "fresh", lambda s: True)
    finally:
        stop.set()
        logger.join()
    figures: dict[str, object] = {
        "during_churn": summary(churn),
        "churn_log_mb": args.churn_mb,
        "churn_interval_s": args.churn_interval,
        "churn_batches": (status.get("batches") or 0) - (before.get("batches") or 0),
        "churn_held_back_at_end": status.get("held_back"),
    }
    print(
        "during churn:",
        figures["during_churn"],
        f"({args.churn_mb} MB log appended every {args.churn_interval}s)",
        flush=True,
    )
    return figures


def main() -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--churn-mb", type=float, default=5.0, help="size of the log appended during the churn phase")
    ap.add_argument("--churn-interval", type=float, default=0.1, help="seconds between the log's appends")
    ap.add_argument("--phases", default="idle,burst,churn", help="which of idle, burst, churn to run")
    ap.add_argument("--store", default="faiss", choices=["faiss"], help="other processes can search FAISS")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    phases = set(args.phases.split(","))

    tmp = Path(tempfile.mkdtemp(prefix="freshness-"))
    data_dir, root = tmp / "data", tmp / "root"
    os.environ["INDEXER_DATA_DIR"] = str(data_dir)
    (root / "notes").mkdir(parents=True)
    for i in range(20):
        (root / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\n{' '.join(WORDS[i:] + WORDS[:i])}\n")

    if "churn" in phases:
        (root / "logs").mkdir()
        write_log(root / "logs" / "app.log", args.churn_mb)

    import indexer

    figures: dict[str, object] = {"edits": args.edits, "burst": args.burst, "store": args.store}
    figures["load_at_start"] = os.getloadavg()[0]
    with indexer.open_collection("fresh", store=args.store) as col:
        col.index([root])
        sync_paths = getattr(col, "sync_paths", None)
        if sync_paths is not None:
            ref = run_edits(col, root, args.edits, "ref", sync=sync_paths)
            figures["reference_in_process_sync"] = summary(ref)
            print("reference (in-process sync_paths + search):", figures["reference_in_process_sync"], flush=True)

        log = open(tmp / "watch.log", "w")  # noqa: SIM115
        watcher = subprocess.Popen(
            [sys.executable, "-m", "indexer.cli", "watch", "--collection", "fresh"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "INDEXER_DATA_DIR": str(data_dir)},
        )
        try:
            wait_status(data_dir, "fresh", lambda s: s.get("running") and s.get("state") == "idle")
            if "idle" in phases:
                idle = run_edits(col, root, args.edits, "idle")
                figures["idle"] = summary(idle)
                print("idle:", figures["idle"], flush=True)
            if "burst" in phases:
                figures.update(burst_phase(col, root, data_dir, args))
            if "churn" in phases:
                figures.update(churn_phase(col, root, data_dir, args))

        finally:
            watcher.terminate()
            code = watcher.wait(60)
            log.close()
        figures["watcher_exit_code"] = code
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
