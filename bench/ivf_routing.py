"""Which IVF lists to visit: the store's order (nearest centroids first, a fixed ``nprobe``) against two other
routings of the same raw IVF-SQ8 index, measured by recall@10 against exact search **per point scanned** (a cost
that does not depend on the machine's load) and by time, one query at a time on one thread.

- ``order``: lists ranked by ``q . c`` (the store's), or by ``q . c + beta * R90`` where R90 is the 90th percentile
  of the list's residual norms: a list of spread-out points may hold a near point even when its centroid is not
  near (inner-product IVF ranks tight lists first); each row visits lists until a scan budget is spent.
- ``grouped``: the lists' centroids clustered into ``G`` groups (k-means on the centroids); lists ranked by
  ``q . c - lam * best(q . c in its group)``: every group's own best lists come early (near-duplicates sharing one
  dominant part, e.g. boilerplate sections, spread a query's neighbours over many groups whose best list is not
  among the query's nearest overall); ``lam`` 0 is the store's order.
- ``patience``: adaptive probing: lists in the store's order, in batches, stopping when the top 10 has not
  changed for ``patience`` batches (a query whose neighbours sit in its first lists stops early).

The vectors are one of bench/scale.py's sets around the real chunk embeddings of an indexer state database; the
index is IVF 4,096 lists with 8-bit codes trained as the store trains it (40 x lists sampled from the first
524,288 vectors). docs/benchmarks.md#recall-session-8 has what it found on boilerplate and versions.

    python bench/ivf_routing.py --state DATA/state.sqlite --queries queries.npy --vectors boilerplate \\
        --budgets 25000 50000 100000 --beta 0.2 0.3
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


def build(data: np.ndarray, lists: int, trained_on: int) -> faiss.Index:
    index = faiss.index_factory(data.shape[1], f"IVF{lists},SQ8", faiss.METRIC_INNER_PRODUCT)
    pool = min(trained_on, len(data))
    pick = np.random.default_rng(1234).choice(pool, size=min(pool, 40 * lists), replace=False)
    index.train(data[np.sort(pick)])
    index.add(data)
    return index


def list_stats(ivf: faiss.IndexIVF, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centroids, list sizes, R90: the 90th percentile of each list's residual norms)."""
    centroids = ivf.quantizer.reconstruct_n(0, ivf.nlist)
    sizes = np.array([ivf.invlists.list_size(i) for i in range(ivf.nlist)])
    owner = np.empty(len(data), np.int64)
    for i in range(ivf.nlist):
        if sizes[i]:
            owner[faiss.rev_swig_ptr(ivf.invlists.get_ids(i), int(sizes[i])).copy()] = i
    residual = np.linalg.norm(data - centroids[owner], axis=1)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(ivf.nlist + 1))
    r90 = np.array([np.percentile(residual[order[a:b]], 90) if b > a else 0.0
                    for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    return centroids, sizes, r90


def visit(ivf: faiss.IndexIVF, q: np.ndarray, lists: np.ndarray, scores: np.ndarray, k: int) -> tuple:
    ivf.nprobe = len(lists)
    return ivf.search_preassigned(q[None], k, np.ascontiguousarray(lists[None]), np.ascontiguousarray(scores[None]))


def by_order(ivf, queries, truth, qc, sizes, rank_scores, budget, label) -> None:
    rank = np.argsort(-rank_scores, axis=1)
    reach = (np.cumsum(sizes[rank], axis=1) < budget).sum(axis=1) + 1
    found, times = [], []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        lists = rank[i, : reach[i]]
        found.append(visit(ivf, q, lists, qc[i, lists], 10)[1][0])
        times.append(time.perf_counter() - t)
    print(f"  {label:<24} scan {budget:>9,}: recall@10 {recall_at_10(found, truth):.3f}, lists {reach.mean():.0f}, "
          f"p50 {np.median(times) * 1000:.2f} ms", flush=True)


def grouped_scores(centroids: np.ndarray, qc: np.ndarray, groups: int, lam: float) -> np.ndarray:
    km = faiss.Kmeans(centroids.shape[1], groups, niter=20, seed=1, spherical=True)
    km.train(np.ascontiguousarray(centroids, dtype=np.float32))
    _, owner = km.index.search(np.ascontiguousarray(centroids, dtype=np.float32), 1)
    owner = owner[:, 0]
    best = np.full((len(qc), groups), -np.inf, np.float32)
    for g in range(groups):
        members = owner == g
        if members.any():
            best[:, g] = qc[:, members].max(axis=1)
    return qc - lam * best[:, owner]


def by_patience(ivf, queries, truth, qc, sizes, first, batch, patience, cap) -> None:
    found, times, scanned = [], [], []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        rank = np.argsort(-qc[i])[:cap]
        best_d, best_i = np.zeros(0, np.float32), np.zeros(0, np.int64)
        start, still, previous = 0, 0, None
        while start < cap:
            stop = min(cap, start + (first if start == 0 else batch))
            d, ids = visit(ivf, q, rank[start:stop], qc[i, rank[start:stop]], 10)
            merged_d, merged_i = np.concatenate([best_d, d[0]]), np.concatenate([best_i, ids[0]])
            top = np.argsort(-merged_d)[:10]
            best_d, best_i, start = merged_d[top], merged_i[top], stop
            now = set(best_i.tolist())
            still = still + 1 if now == previous else 0
            previous = now
            if still >= patience:
                break
        found.append(best_i)
        times.append(time.perf_counter() - t)
        scanned.append(sizes[rank[:start]].sum())
    print(f"  patience {patience}, batches {first}/{batch}: recall@10 {recall_at_10(found, truth):.3f}, scanned mean "
          f"{np.mean(scanned):,.0f} (p90 {np.percentile(scanned, 90):,.0f}), p50 {np.median(times) * 1000:.2f} ms",
          flush=True)


def main() -> None:
    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data_options(ap, "boilerplate")
    ap.add_argument("--lists", type=int, default=4096)
    ap.add_argument("--budgets", type=int, nargs="+", default=[25_000, 50_000, 100_000], help="points scanned")
    ap.add_argument("--beta", type=float, nargs="*", default=[0.2, 0.3], help="weights of R90 in the list order")
    ap.add_argument("--patience", type=int, nargs="*", default=[1, 2], help="adaptive probing, batches of 32")
    ap.add_argument("--groups", type=int, nargs="*", default=[], help="grouped routing: groups of lists")
    ap.add_argument("--lam", type=float, nargs="*", default=[0.5, 1.0], help="grouped routing: weight of the "
                    "group's best score")
    args = ap.parse_args()

    real, queries, data, truth = load_set(args.state, args.queries, args.vectors, args.n, args.max_queries)
    t = time.perf_counter()
    index = build(data, args.lists, 524_288)
    print(f"{len(data):,} vectors ({args.vectors}, {len(real):,} real chunks), {len(queries)} queries; IVF{args.lists},"
          f"SQ8 built in {time.perf_counter() - t:.0f} s", flush=True)
    ivf = faiss.extract_index_ivf(index)
    centroids, sizes, r90 = list_stats(ivf, data)
    qc = queries @ centroids.T
    faiss.omp_set_num_threads(1)
    for budget in args.budgets:
        by_order(ivf, queries, truth, qc, sizes, qc, budget, "q.c (the store's)")
        for beta in args.beta:
            by_order(ivf, queries, truth, qc, sizes, qc + beta * r90, budget, f"q.c + {beta} R90")
        for groups in args.groups:
            for lam in args.lam:
                by_order(ivf, queries, truth, qc, sizes, grouped_scores(centroids, qc, groups, lam), budget,
                         f"grouped {groups}, lam {lam}")
    for patience in args.patience:
        by_patience(ivf, queries, truth, qc, sizes, 32, 32, patience, min(1024, ivf.nlist))


if __name__ == "__main__":
    main()
