"""FAISS's pq lists visited in FAISS's order or in the grouped order (plugins/faiss/routing.py), on the product's own
index (``VectorIndex`` with pq codes: the fast scan, the int8 reorder of 16 x the candidates) and the float top 10
the store's rescoring makes, one query at a time on one thread. Measured **cold**: configurations outer and queries
inner, rounds in alternating order (a query's ~20 MB of lists have left the L3 cache when it comes back: searching
one query with every configuration in a row measured the cache, docs/benchmarks.md#recall-session-14).

The vectors are one of bench/scale.py's sets around the real chunk embeddings of an indexer state database; recall@10
against exact search. docs/benchmarks.md#recall-session-15 has what it found on boilerplate.

    python bench/pq_list_order.py --state DATA/state.sqlite --queries queries.npy --vectors boilerplate \\
        --runs 1024:FAISS:192 1024:FAISS:224 4096:FAISS:512 4096:grouped:448 4096:grouped:512
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ivf_levers import data_options, load_set, recall_at_10  # noqa: E402

from indexer.models.machine import machine_line  # noqa: E402
from plugins.faiss.index import AutoParams, HnswParams, VectorIndex  # noqa: E402
from plugins.faiss.routing import LAMBDA  # noqa: E402


def build(data: np.ndarray, lists: int) -> VectorIndex:
    auto = AutoParams(switch_at=1, codes="pq", lists=lists)
    return VectorIndex.build("auto", data.shape[1], True, HnswParams(), np.arange(len(data), dtype=np.int64), data,
                             auto=auto)


def main() -> None:
    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data_options(ap, "boilerplate")
    ap.add_argument("--runs", nargs="+", default=["1024:FAISS:192", "4096:FAISS:512", "4096:grouped:448"],
                    help="LISTS:ORDER:NPROBE, ORDER FAISS or grouped")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    real, queries, data, truth = load_set(args.state, args.queries, args.vectors, args.n, args.max_queries)
    print(f"{len(data):,} vectors ({args.vectors}, {len(real):,} real chunks), {len(queries)} queries", flush=True)
    indexes: dict[int, VectorIndex] = {}
    runs = []
    for run in args.runs:
        lists, order, nprobe = run.split(":")
        if int(lists) not in indexes:
            t = time.perf_counter()
            indexes[int(lists)] = build(data, int(lists))
            print(f"IVF{lists} pq codes built in {time.perf_counter() - t:.0f} s", flush=True)
        runs.append((int(lists), order, int(nprobe)))
    faiss.omp_set_num_threads(1)
    times: dict[tuple[int, str, int], list[float]] = {r: [] for r in runs}
    found: dict[tuple[int, str, int], list[np.ndarray]] = {r: [] for r in runs}
    for rnd in range(args.rounds):
        for run in runs if rnd % 2 == 0 else runs[::-1]:
            index = indexes[run[0]]
            index.tuned, index.grouped = run[2], LAMBDA if run[1] == "grouped" else 0.0
            for q in queries:
                start = time.perf_counter()
                _raw, ids = index.search(q, 20, None)
                top = ids[np.argsort(-(data[ids] @ q), kind="stable")[:10]]  # the store's float rescoring
                times[run].append(time.perf_counter() - start)
                if rnd == 0:
                    found[run].append(top)
    for run in runs:
        t = np.array(times[run]).reshape(args.rounds, -1) * 1000
        rounds = " / ".join(f"{np.median(r):.2f}" for r in t)
        print(f"IVF{run[0]} pq, {run[1]} order, nprobe {run[2]}: recall@10 {recall_at_10(found[run], truth):.3f}, "
              f"p50 {np.median(t):.2f} ms (rounds {rounds}), p95 {np.percentile(t, 95):.2f} ms", flush=True)


if __name__ == "__main__":
    main()
