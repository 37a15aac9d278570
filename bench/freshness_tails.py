"""Freshness tails (issue 44): a small edit beside a hot log, and small files beside a huge mailbox.

    python bench/freshness_tails.py [--cases hotlog,mbox] [--edits 20] [--log-mb 5] [--messages 20000]
                                    [--small 50] [--stores faiss,qdrant] [--json out.json]

- ``hotlog``: `indexer watch` (a subprocess, FAISS) over a folder holding a ``--log-mb`` MB log that a writer
  opens, appends one line to and closes every 100 ms; ``--edits`` small notes edited one at a time, each timed
  from its save until a search in this process (filtered to the note) finds its new text: p50/p95/p99/max. Also
  what the watcher's trace said: the slow files it named (log) and its ``last_slow_batch`` (status).
- ``mbox``: a one-shot index of a folder holding a ``--messages``-message mbox and ``--small`` small files;
  this process searches for each small file's marker from the start: how many were searchable within 10 s,
  when the last one was, and when the index ended (the mailbox fully indexed). FAISS: `indexer index` in a
  subprocess; embedded Qdrant (one process per folder): ``Collection.index`` in a thread of this process.

Runs in a temporary data dir with the default embedding model. Run it under /work/shared/tools/quiet-run.
"""

from __future__ import annotations

import argparse
import json
import mailbox
import os
import subprocess
import sys
import tempfile
import threading
import time
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from freshness import append_forever, run_edits, wait_status, write_log  # noqa: E402

GOAL_SMALL_S = 10.0


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def q(p: float) -> float:
        return round(ordered[max(0, min(len(ordered) - 1, round(p * (len(ordered) - 1))))] * 1000, 1)

    return {"n": len(ordered), "p50_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99), "max_ms": q(1.0)}


def hotlog_case(args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    import indexer

    data_dir, root = tmp / "hot-data", tmp / "hot-root"
    (root / "logs").mkdir(parents=True)
    for i in range(20):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nA note about item {i} of the inventory.\n")
    log = root / "logs" / "app.log"
    write_log(log, args.log_mb)
    os.environ["INDEXER_DATA_DIR"] = str(data_dir)
    with indexer.open_collection("tails", store="faiss") as col:
        col.index([root])
        out = open(tmp / "watch.log", "w")  # noqa: SIM115
        watcher = subprocess.Popen([sys.executable, "-m", "indexer.cli", "watch", "--collection", "tails"],
                                   stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "INDEXER_DATA_DIR": str(data_dir)})  # fmt: skip
        stop = threading.Event()
        writer = threading.Thread(target=append_forever, args=(log, 0.1, stop), daemon=True)
        try:
            wait_status(data_dir, "tails", lambda s: s.get("running") and s.get("state") == "idle")
            writer.start()
            time.sleep(1.0)  # the log is changing before the first edit
            samples = run_edits(col, root, args.edits, "hot")
            status = wait_status(data_dir, "tails", lambda s: True)
        finally:
            stop.set()
            writer.join()
            watcher.terminate()
            watcher.wait(60)
            out.close()
    named = [line.strip() for line in (tmp / "watch.log").read_text().splitlines() if "held batch" in line]
    figures: dict[str, object] = {"latency": quantiles(samples), "log_mb": args.log_mb,
                                  "named_slow": named[:10], "last_slow_batch": status.get("last_slow_batch"),
                                  "batches": status.get("batches")}  # fmt: skip
    print("hot log:", figures["latency"], flush=True)
    for line in named[:10]:
        print("  watcher:", line[-220:], flush=True)
    return figures


def write_mbox(path: Path, messages: int) -> None:
    if path.exists():
        return
    part = path.with_suffix(".part")
    box = mailbox.mbox(str(part))
    box.lock()
    for i in range(messages):
        msg = EmailMessage()
        msg["Subject"] = f"Report {i}"
        msg["From"] = "ops@example.org"
        msg.set_content(f"Pump station {i} was inspected; valve {i * 7} replaced and filter {i * 3} cleaned.")
        box.add(msg)
    box.flush()
    box.unlock()
    box.close()
    part.rename(path)


def mbox_case(args: argparse.Namespace, tmp: Path, store: str, mbox: Path) -> dict[str, object]:
    import indexer

    data_dir, root = tmp / f"mbox-data-{store}", tmp / f"mbox-root-{store}"
    root.mkdir(parents=True)
    os.environ["INDEXER_DATA_DIR"] = str(data_dir)
    with indexer.open_collection("tails", store=store) as col:
        col.index([root])  # empty: the collection exists for the searches below
        os.link(mbox, root / "archive.mbox")
        markers = {}
        for i in range(args.small):
            marker = f"kestrel{i}x"
            path = root / f"note-{i:02}.md"
            path.write_text(f"# Field note {i}\n\nThe survey recorded {marker} near the ridge after the storm.\n")
            markers[str(path.resolve())] = marker
        started = time.perf_counter()
        ended: list[float] = []
        if store == "faiss":  # another process writes; this one searches
            proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "index", str(root), "--collection", "tails"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env={**os.environ, "INDEXER_DATA_DIR": str(data_dir)})  # fmt: skip
            waiter = threading.Thread(target=lambda: (proc.wait(), ended.append(time.perf_counter())), daemon=True)
        else:  # one process per embedded Qdrant folder: the index in a thread, searched from this one
            waiter = threading.Thread(target=lambda: (col.index([root]), ended.append(time.perf_counter())),
                                      daemon=True)  # fmt: skip
        waiter.start()
        found: dict[str, float] = {}
        while len(found) < len(markers) and time.perf_counter() - started < 1800:
            for path, marker in markers.items():
                if path in found:
                    continue
                hits = col.search("field note survey", k=3, path_prefix=path, rerank=False).hits
                if any(marker in h.text for h in hits):
                    found[path] = time.perf_counter() - started
            time.sleep(0.02)
        waiter.join()
    times = sorted(found.values())
    figures: dict[str, object] = {
        "store": store, "messages": args.messages, "small": args.small,
        "small_within_10s": sum(1 for t in times if t <= GOAL_SMALL_S),
        "last_small_s": round(times[-1], 1) if len(times) == len(markers) else None,
        "index_s": round(ended[0] - started, 1) if ended else None,
    }  # fmt: skip
    print(f"mbox ({store}):", figures, flush=True)
    return figures


def main() -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="hotlog,mbox")
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--log-mb", type=float, default=5.0)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--small", type=int, default=50)
    ap.add_argument("--stores", default="faiss,qdrant")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="tails-"))
    figures: dict[str, object] = {"load_at_start": os.getloadavg()[0]}
    if "hotlog" in cases:
        figures["hotlog"] = hotlog_case(args, tmp)
    if "mbox" in cases:
        mbox = Path(tempfile.gettempdir()) / f"indexer-tails-{args.messages}.mbox"
        write_mbox(mbox, args.messages)
        figures["mbox"] = [mbox_case(args, tmp, store, mbox) for store in args.stores.split(",")]
    figures["load_at_end"] = os.getloadavg()[0]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
