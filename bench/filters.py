"""Filtered search: exactness and speed by selectivity, on FAISS and embedded Qdrant (issue: filters in the engine).

Builds a collection of ``--n`` generated chunks directly (state database rows with their fields, and the store's
points; no model: vectors are a mixture of 64 Gaussian clusters in 384 dimensions, unit length), then for filters
matching 1, 10, 100 chunks and 1 %, 10 %, 50 % of them, chosen at random, near the queries (the matches are the
chunks nearest the queries' centre) and far from them, runs 20 queries each through what a search does: the state
database's exact selection (``FieldIndex.select``), then the store's search among the matches. Reports, per store and
filter: hits returned vs min(k, matches), recall@10 against an exact filtered search (numpy brute force over the
matching vectors), and p50 of selection + search against the unfiltered search's p50 on the same store.

    python bench/filters.py --n 100000 [--stores faiss,qdrant]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384
K = 10
QUERIES = 20
KINDS = ("random", "near", "far")


def _vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.normal(size=(64, DIM)).astype(np.float32)
    v = centres[rng.integers(0, 64, n)] + 0.6 * rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _sizes(n: int) -> dict[str, int]:
    return {"1": 1, "10": 10, "100": 100, "1pct": n // 100, "10pct": n // 10, "50pct": n // 2}


def _selections(vectors: np.ndarray, centre: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = len(vectors)
    order = np.argsort(-(vectors @ centre))  # nearest the queries' centre first
    out = {}
    for label, size in _sizes(n).items():
        out[f"random_{label}"] = rng.choice(n, size, replace=False)
        out[f"near_{label}"] = order[:size]
        out[f"far_{label}"] = order[-size:]
    return out


def build(folder: Path, store_name: str, vectors: np.ndarray, selections: dict[str, np.ndarray]):
    from indexer.core import registry as plugins
    from indexer.core.normalization import Normalization
    from indexer.settings import Settings
    from indexer.state.database import ChunkRecord, CollectionRecord, FileRecord, FileUpdate, StateStore
    from indexer.types import Metric, Point

    settings = Settings(data_dir=folder, store=store_name)
    options = plugins.new_store_options(settings, "bench")
    store = plugins.open_store(store_name, options, Metric.COSINE, settings)
    store.ensure_collection("bench", DIM, {})
    state = StateStore(folder / "state.sqlite")
    state.create_collection(CollectionRecord("bench", store_name, options, "cosine", "m", "m", Normalization.L2, DIM))
    member: dict[int, list[tuple[str, str]]] = {}
    for name, idx in selections.items():
        for i in idx.tolist():
            member.setdefault(i, []).append((name, "y"))
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(len(vectors))]
    per_file = 10
    for start in range(0, len(vectors), 2000):
        stop = min(start + 2000, len(vectors))
        points, updates = [], []
        for f0 in range(start, stop, per_file):
            path = f"/bench/d{f0 // 10000}/f{f0}.txt"
            chunks = []
            for i in range(f0, min(f0 + per_file, stop)):
                payload = {"path": path, "file_type": "txt", "text": f"chunk {i}", "dirs": ["/bench"]}
                points.append(Point(ids[i], vectors[i], payload))
                chunks.append(ChunkRecord(ids[i], path, i - f0, f"h{i}", 8, tuple(member.get(i, ()))))
            rec = FileRecord(path, "/bench", 100, 1_700_000_000_000_000_000, f"f{f0}", "indexed", None, "text")
            updates.append(FileUpdate(rec, tuple(chunks)))
        store.upsert("bench", points)
        state.commit_files("bench", updates)
    return store, state, ids


def _filtered_search(store, fields, where, q):
    """What a search does with a filter (indexer.collection.reader.select, indexer.search.fusion.retrieve)."""
    from indexer.collection.reader import broad
    from indexer.search.fusion import kept
    from indexer.types import Filter

    total, fraction = fields.estimate(where)
    if broad(total, fraction):
        return kept(lambda n: store.search("bench", q, n), K, lambda ids: fields.among(where, ids), fraction)
    return store.search("bench", q, K, Filter(ids=frozenset(fields.select(where))))


def _p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def run(store_name: str, n: int, seed: int = 7) -> list[dict[str, object]]:
    from indexer.search import filters
    from indexer.state.fields import compile_where

    rng = np.random.default_rng(seed)
    vectors = _vectors(n, rng)
    centre = vectors[rng.integers(0, n)]
    queries = centre + 0.15 * rng.normal(size=(QUERIES, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    selections = _selections(vectors, centre, rng)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store, state, ids = build(Path(tmp), store_name, vectors, selections)
        print(f"{store_name}: built {n} points in {time.perf_counter() - t0:.0f} s", flush=True)
        for q in queries[:3]:
            store.search("bench", q, K)  # warm
        plain = []
        for q in queries:
            t = time.perf_counter()
            store.search("bench", q, K)
            plain.append(time.perf_counter() - t)
        base = _p50(plain)
        fields = state.fields
        for name, idx in selections.items():
            clause = filters.parse_clause(f"{name}=y")
            matching = vectors[idx]
            times, recalls, short = [], [], 0
            for q in queries:
                t = time.perf_counter()
                hits = _filtered_search(store, fields, compile_where("bench", [clause]), q)
                times.append(time.perf_counter() - t)
                truth = {ids[i] for i in idx[np.argsort(-(matching @ q))[:K]].tolist()}
                got = [h.id for h in hits]
                short += len(got) < min(K, len(idx))
                recalls.append(len(truth & set(got)) / len(truth))
            p50 = _p50(times)
            rows.append({"store": store_name, "filter": name, "matches": len(idx), "short": short,
                         "recall": statistics.mean(recalls), "p50_ms": p50, "unfiltered_ms": base,
                         "ratio": p50 / base})
            print(f"  {name:<13} matches {len(idx):>7}  short {short:>2}/{QUERIES}  recall@10 "
                  f"{statistics.mean(recalls):.3f}  p50 {p50:7.2f} ms  ({p50 / base:5.1f}x unfiltered "
                  f"{base:.2f} ms)", flush=True)
        store.close()
        state.close()
    return rows


def main() -> None:
    from indexer.models.native import machine_line

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--stores", default="faiss,qdrant")
    args = ap.parse_args()
    print(machine_line(), flush=True)  # every figure names its CPU
    for name in args.stores.split(","):
        run(name, args.n)


if __name__ == "__main__":
    main()
