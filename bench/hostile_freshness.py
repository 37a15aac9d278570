"""Freshness under `indexer serve` (the watcher inside the server) with hostile files landing beside the edits:
time from saving a small Markdown file to a search over HTTP finding its new text, p50/p95 over N edits, first
with nothing else happening ("idle"), then with a failing PNG, a PDF holding one 20,000 x 20,000 image and a
billion-laughs .docx dropped into the same folder just before each edit ("hostile": fresh copies each time, so
every edit lands while they are being read). Also the peak RSS of the server process and of its parse workers.

    python bench/hostile_freshness.py [--edits 20] [--store faiss] [--model PATH] [--json out.json]

Runs in a temporary data dir with the server in this process (uvicorn on a loopback port, as `indexer serve`).
The model defaults to the default embedding model (all-MiniLM-L6-v2, built offline as the tests do).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def quantile(data: list[float], q: float) -> float:
    ordered = sorted(data)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": round(quantile(samples, 0.5) * 1000, 1),
        "p95_ms": round(quantile(samples, 0.95) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "mean_ms": round(statistics.mean(samples) * 1000, 1),
    }


class Server:
    """`indexer serve` in this process: the app on a loopback port, the watcher inside."""

    def __init__(self, settings: Any) -> None:
        import uvicorn

        from indexer.server.app import create_app
        from indexer.server.run import bind

        sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.app = create_app(settings, mcp=False, watch=True)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 180
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)


def measure(
    client: Any, root: Path, edits: int, hostile: dict[str, bytes] | None, tag: str, timeout: float = 60.0
) -> list[float]:
    target = root / "notes" / "edited.md"
    samples: list[float] = []
    for i in range(edits):
        if hostile is not None:  # fresh copies: each edit lands while they are being read
            for ext, data in hostile.items():
                (root / "drop" / f"{tag}-{i}.{ext}").write_bytes(data)
        marker = f"zq{tag}{i}x{os.getpid()}"
        started = time.monotonic()
        target.write_text(f"# Edited\n\nThe marker {marker} was written in edit {i}.\n")
        body = {"query": marker, "k": 1, "rerank": False, "mode": "lexical", "path_prefix": str(target)}
        while True:
            hits = client.post("/search", json=body).json().get("hits") or []
            if hits and marker in hits[0].get("text", ""):
                break
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"edit {i} not searchable after {timeout} s")
            time.sleep(0.01)
        samples.append(time.monotonic() - started)
        time.sleep(0.3)  # the next edit is a new change, not part of this one's batch
    return samples


def _rss_mb(pid: int | str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[str]:
    out: list[str] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += (task / "children").read_text().split()
    return out


class RssSampler:
    """Samples every 50 ms the RSS of this process (the server) and of each of its child processes (the parse
    workers); keeps the peaks."""

    def __init__(self) -> None:
        self.main_mb = 0.0
        self.worker_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.05):
            self.main_mb = max(self.main_mb, _rss_mb(me))
            for child in _children(me):
                self.worker_mb = max(self.worker_mb, _rss_mb(child))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--store", default="faiss")
    parser.add_argument("--model", default=None)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()

    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    import httpx

    from indexer.collection.facade import open_collection
    from indexer.models import ensure_model
    from indexer.models.native import machine_line
    from indexer.settings import Settings
    from tests.documents import hostile_files

    print(machine_line(), file=sys.stderr, flush=True)  # every figure names its CPU (stdout: the JSON)

    model = args.model or str(ensure_model())
    tmp = Path(tempfile.mkdtemp(prefix="hostile-freshness-"))
    os.environ["INDEXER_CONFIG"] = str(tmp / "no-config.toml")
    try:
        root = tmp / "root"
        (root / "notes").mkdir(parents=True)
        (root / "drop").mkdir()
        for i in range(20):
            (root / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nA short note number {i} about the harbor.\n")
        (root / "notes" / "edited.md").write_text("# Edited\n\nNot edited yet.\n")
        settings = Settings(data_dir=tmp / "data", embed_model=model, store=args.store, threads=2)
        with open_collection("default", settings=settings) as col:
            col.index([root])
        hostile = hostile_files(tmp)
        server = Server(settings)
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                deadline = time.monotonic() + 120
                while (client.get("/status").json()["collections"][0].get("watch") or {}).get("state") != "idle":
                    if time.monotonic() > deadline:
                        raise TimeoutError("the reconciliation scan did not end")
                    time.sleep(0.05)
                time.sleep(1.0)
                rss_idle = _rss_mb(os.getpid())  # the server with its model loaded, idle
                idle = measure(client, root, args.edits, None, "idle")
                sampler = RssSampler().start()
                beside = measure(client, root, args.edits, hostile, "hostile")
                sampler.stop()
                watch = client.get("/status").json()["collections"][0].get("watch") or {}
        finally:
            server.stop()
        result = {
            "store": args.store,
            "model": Path(model).name,
            "cpus": os.cpu_count(),
            "load": os.getloadavg(),
            "idle": summary(idle),
            "hostile": summary(beside),
            "hostile_samples_ms": [round(s * 1000) for s in beside],
            "rss_mb": {
                "server_idle": round(rss_idle),
                "server_peak_hostile": round(sampler.main_mb),
                "server_margin": round(sampler.main_mb - rss_idle),
                "parse_worker_peak": round(sampler.worker_mb),
                "parse_memory_mb": settings.parse_memory_mb,
            },
            "watch_errors": len(watch.get("last_error") or "") > 0,
        }
        print(json.dumps(result, indent=2))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
