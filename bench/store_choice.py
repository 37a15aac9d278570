"""Which embedded vector store should be the default? Measures, for ~20k x 384 normalised vectors:

upsert throughput, search latency (top 50, p50/p95), reopen time (open + first search), and whether a
second process can search while another process writes — for FAISS flat, FAISS HNSW (our FaissStore),
qdrant-client local mode (QdrantStore(path=...), earlier versions' embedded store), our embedded store on
qdrant-edge (EdgeStore: what `--store qdrant` builds) and qdrant-edge-py's raw API.

Run alone, niced:  nice -n 10 .venv/bin/python bench/store_choice.py [--n 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DIM = 384
BATCH = 256
TOP_K = 50
KINDS = ("faiss-flat", "faiss-hnsw", "qdrant-local", "qdrant-embedded", "qdrant-edge")


def vectors(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def payload(i: int) -> dict[str, Any]:
    return {"path": f"/corpus/dir{i % 50}/file{i}.md", "file_type": "md", "text": f"chunk {i} " * 20}


class Adapter:
    """A thin uniform face over our stores and qdrant-edge-py for this benchmark."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self.path = path
        self.store: Any = None
        self.shard: Any = None

    def open(self) -> None:
        if self.kind.startswith("faiss"):
            from plugins.faiss import FaissStore

            self.store = FaissStore(self.path, index=self.kind.split("-")[1])
        elif self.kind == "qdrant-local":
            from plugins.qdrant import QdrantStore

            self.store = QdrantStore(path=self.path)
        elif self.kind == "qdrant-embedded":  # what `--store qdrant` builds today: our EdgeStore (qdrant-edge)
            from plugins.qdrant.edge import EdgeStore

            self.store = EdgeStore(self.path)
        else:
            import qdrant_edge as qe

            if (self.path / "wal").exists() or any(self.path.glob("*")):
                self.shard = qe.EdgeShard.load(str(self.path))
            else:
                cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine))
                self.shard = qe.EdgeShard.create(str(self.path), cfg)

    def create(self) -> None:
        if self.store is not None:
            self.store.ensure_collection("bench", DIM, {"model_id": "bench"})

    def upsert(self, ids: list[str], x: np.ndarray, start: int) -> None:
        if self.store is not None:
            from indexer.types import Point

            self.store.upsert("bench", [Point(ids[i], x[i], payload(start + i)) for i in range(len(ids))])
        else:
            import qdrant_edge as qe

            pts = [qe.Point(ids[i], x[i].tolist(), payload(start + i)) for i in range(len(ids))]
            self.shard.update(qe.UpdateOperation.upsert_points(pts))
            self.shard.flush()  # durable when it returns, like the others

    def search(self, q: np.ndarray) -> int:
        if self.store is not None:
            return len(self.store.search("bench", q, TOP_K))
        import qdrant_edge as qe

        req = qe.QueryRequest(query=qe.Query.Nearest(q.tolist()), limit=TOP_K, with_payload=True)
        return len(self.shard.query(req))

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        if self.shard is not None:
            self.shard.flush()
            self.shard.close()
        self.store = self.shard = None


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def writer_main(kind: str, path: str) -> None:
    """Child process: keep upserting new batches until stdin closes; report after the first one."""
    a = Adapter(kind, Path(path))
    a.open()
    a.create()
    x = vectors(BATCH * 200, seed=99)
    for b in range(200):
        ids = [str(uuid.uuid4()) for _ in range(BATCH)]
        a.upsert(ids, x[b * BATCH : (b + 1) * BATCH], 10**6 + b * BATCH)
        if b == 0:
            print("WRITING", flush=True)
    a.close()


def concurrent_read(kind: str, path: Path, queries: np.ndarray) -> str:
    child = subprocess.Popen(
        [sys.executable, __file__, "--writer", kind, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "WRITING":
        child.kill()
        return f"writer failed: {child.stderr.read()[-300:] if child.stderr else ''}"
    try:
        reader = Adapter(kind, path)
        reader.open()
        lat = []
        for q in queries[:30]:
            t = time.perf_counter()
            reader.search(q)
            lat.append(time.perf_counter() - t)
        alive = child.poll() is None
        reader.close()
        return f"yes ({len(lat)} searches while writing={alive}, p50 {np.median(lat) * 1e3:.1f} ms)"
    except Exception as exc:
        return f"no: {type(exc).__name__}: {str(exc)[:160]}"
    finally:
        child.kill()
        child.wait()


def bench(kind: str, n: int, base: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
        path = Path(tmp) / "store"
        a = Adapter(kind, path)
        a.open()
        a.create()
        ids = [str(uuid.uuid4()) for _ in range(n)]
        t = time.perf_counter()
        for s in range(0, n, BATCH):
            a.upsert(ids[s : s + BATCH], base[s : s + BATCH], s)
        upsert_s = time.perf_counter() - t
        lat = []
        for q in queries:
            t = time.perf_counter()
            got = a.search(q)
            lat.append(time.perf_counter() - t)
        assert got == TOP_K, f"{kind}: got {got} hits"
        close_s = timed(a.close)
        b = Adapter(kind, path)

        def reopen() -> None:
            b.open()
            b.search(queries[0])

        reopen_s = timed(reopen)
        b.close()
        result = {
            "store": kind,
            "points": n,
            "upsert_points_per_s": round(n / upsert_s),
            "upsert_total_s": round(upsert_s, 2),
            "search_p50_ms": round(float(np.percentile(lat, 50)) * 1e3, 2),
            "search_p95_ms": round(float(np.percentile(lat, 95)) * 1e3, 2),
            "close_s": round(close_s, 2),
            "reopen_first_search_s": round(reopen_s, 2),
            "concurrent_reader": concurrent_read(kind, path, queries),
        }
        print(json.dumps(result), flush=True)
        return result


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", default=",".join(KINDS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--writer", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer_main(*args.writer)
        return
    base = vectors(args.n, seed=1)
    queries = vectors(args.queries, seed=2)
    results = []
    for kind in args.stores.split(","):
        if kind == "qdrant-edge":
            try:
                import qdrant_edge  # noqa: F401
            except ImportError:
                print("qdrant-edge: skipped (pip install qdrant-edge-py)", flush=True)
                continue
        try:
            results.append(bench(kind, args.n, base, queries))
        except Exception as exc:  # one unusable store must not hide the others' figures
            print(f"{kind}: failed: {type(exc).__name__}: {exc}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
