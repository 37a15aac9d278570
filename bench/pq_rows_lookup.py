"""The pq reorder's row lookup (plugins/faiss/rows.py): FAISS's hash map against the previous version's binary search
of the sorted ids, in one process, on a pq store's own index (a ``index.faiss`` cache that bench/scale.py's ``--work``
keeps) at the levers its tuning chose.

The same ``VectorIndex`` searches with either lookup installed, one query at a time on one thread; the two ways
alternate per query and never search the same query twice in a row (the second would find its lists in the cache:
docs/benchmarks.md#recall-session-14), over several rounds. Also timed: the lookup alone right after a scan, each
way first on alternate queries, and the cost of reading and writing the rows (the cache file). The results of both
ways are checked equal first. docs/benchmarks.md#recall-session-16 has what it found.

    python bench/pq_rows_lookup.py DIR/faiss-int8/bench/index.faiss --queries queries.npy --nprobe 384 512
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexer.models.machine import machine_line  # noqa: E402
from plugins.faiss.index import AutoParams, HnswParams, VectorIndex  # noqa: E402
from plugins.faiss.rows import Int8Rows  # noqa: E402


class SortedIdRows:
    """The previous version's lookup (session 15): the live ids sorted, their slots beside them, a binary search of
    the candidates in sorted order. Read-only here: built from the rows under test."""

    def __init__(self, rows: Int8Rows) -> None:
        live = np.flatnonzero(rows.slot_id[: rows.used] >= 0)
        order = np.argsort(rows.slot_id[live], kind="stable")
        self.ids, self.slots, self.rows = rows.slot_id[live][order], live[order], rows.rows

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(ids, kind="stable")
        pos = np.empty(len(ids), dtype=np.int64)
        pos[order] = np.searchsorted(self.ids, ids[order])
        pos = np.minimum(pos, len(self.ids) - 1)
        there = self.ids[pos] == ids
        return self.rows[self.slots[pos[there]]], there


def main() -> None:
    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", type=Path, help="a pq store's index.faiss")
    ap.add_argument("--queries", type=Path, required=True, help=".npy of normalized query vectors")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--nprobe", type=int, nargs="+", default=[384, 512])
    ap.add_argument("--grouped", type=float, default=0.3, help="the grouped order's lambda (0: FAISS's order)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    faiss.omp_set_num_threads(1)  # as the store searches
    queries = np.load(args.queries).astype(np.float32)[: args.count]
    started = time.perf_counter()
    index = VectorIndex.load(args.cache, "auto", queries.shape[1], True, HnswParams(), AutoParams())
    if index is None or index.rows is None:
        sys.exit(f"{args.cache}: not a pq store's cache")
    print(f"read in {time.perf_counter() - started:.2f} s: {len(index.rows):,} rows", flush=True)
    new: Int8Rows = index.rows
    for _ in range(2):  # the first pass pays the page faults of fresh memory
        t = time.perf_counter()
        blob = new.to_bytes()
        wrote = time.perf_counter() - t
        t = time.perf_counter()
        Int8Rows.from_bytes(blob, index.dim)
        read = time.perf_counter() - t
    print(f"rows written in {wrote:.2f} s, read (the map built) in {read:.2f} s", flush=True)
    old = SortedIdRows(new)
    k, n, half = 20, len(queries), len(queries) // 2
    for nprobe in args.nprobe:
        index.tuned, index.grouped = nprobe, args.grouped
        for q in queries[:50]:
            index.rows = new
            a = index.search(q, k, None)
            index.rows = old  # type: ignore[assignment]
            b = index.search(q, k, None)
            assert np.array_equal(a[1], b[1]) and np.allclose(a[0], b[0]), "the two lookups disagree"
        times: dict[str, list[float]] = {"binary search": [], "hash map": []}
        for rnd in range(args.rounds):
            for i in range(n):
                pair = [("hash map", new, i), ("binary search", old, (i + half) % n)]
                for name, rows, qi in pair if (i + rnd) % 2 else pair[::-1]:
                    index.rows = rows  # type: ignore[assignment]
                    t = time.perf_counter()
                    index.search(queries[qi], k, None)
                    times[name].append(time.perf_counter() - t)
        alone: dict[str, list[float]] = {"binary search": [], "hash map": []}
        params: Any = faiss.SearchParametersIVF(nprobe=nprobe)
        for i in range(n):
            _d, labels = index.index.search(queries[i : i + 1], k * 16, params=params)
            found = labels[0][labels[0] >= 0]
            ways: list[tuple[str, Int8Rows | SortedIdRows]] = [("hash map", new), ("binary search", old)]
            for name, way in ways if i % 2 else ways[::-1]:
                t = time.perf_counter()
                way.get(found)
                alone[name].append(time.perf_counter() - t)
        index.rows = new
        for name in ("binary search", "hash map"):
            v = np.array(times[name]) * 1e3
            rounds = " / ".join(f"{np.median(v[r * n : (r + 1) * n]):.3f}" for r in range(args.rounds))
            g = np.array(alone[name]) * 1e3
            print(f"nprobe {nprobe}, {name}: search p50 {np.median(v):.3f} ms ({rounds}), p95 "
                  f"{np.percentile(v, 95):.3f} ms; the lookup right after a scan p50 {np.median(g):.3f} ms", flush=True)


if __name__ == "__main__":
    main()
