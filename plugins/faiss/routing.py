"""A grouped order of IVF lists: which lists a query visits, when FAISS's own order (nearest centroids first) wastes
the visits (docs/benchmarks.md#recall-session-15).

Where chunks share boilerplate (every page of a manual carries the same sections), most of the data sits in a few
dense regions, and k-means spends many lists on each of them; the lists of one region rank together by the region's
score, not by what tells its chunks apart, while a query's true neighbours (the chunks least made of boilerplate)
are spread over several regions. Here the centroids themselves are grouped (a spherical k-means over them, about
one group per region) and a list is ranked by ``q . c - LAMBDA x`` the best ``q . c`` of its group: within a group
the order is FAISS's, and the lists of every group the query touches come earlier. Measured on the boilerplate
million (4,096 lists of pq codes, one thread, the product's index with its int8 reorder: bench/pq_list_order.py):
recall@10 0.969 at nprobe 512 in FAISS's order in 2.21 ms, 0.975 in this one in 1.85 ms. Whether it pays is
measured per collection: the recall tuning treats it as a lever (plugins/faiss/recall.py), taken when it gains
recall at no more time or more recall per millisecond than the others.

Only for inner-product indexes (cosine and dot collections): the order ranks scores, and FAISS's search of the
lists is handed their true ``q . c`` (the part of each score its residual codes leave out).
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np

LAMBDA = 0.3  # how far a group's best list lifts its other lists (0: FAISS's order; 1: every group's best first)
GROUPS = 40  # groups of centroids (a group per 16 lists below 640 lists, at least 2)
ITERATIONS = 20  # of the spherical k-means over the centroids (deterministic: seeded, numpy only)


class GroupedLists:
    """The grouped order over one trained IVF index's centroids (built once per index: 0.14 s at 4,096 lists)."""

    def __init__(self, centroids: np.ndarray) -> None:
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        n = len(self.centroids)
        groups = max(2, min(GROUPS, n // 16))
        unit = self.centroids / np.maximum(np.linalg.norm(self.centroids, axis=1, keepdims=True), 1e-12)
        means = unit[np.sort(np.random.default_rng(7).choice(n, size=groups, replace=False))]
        group = np.zeros(n, dtype=np.int64)
        for _ in range(ITERATIONS):
            group = np.argmax(unit @ means.T, axis=1)
            for g in range(groups):
                members = unit[group == g]
                if len(members):  # an empty group keeps its mean
                    total = members.sum(axis=0)
                    means[g] = total / max(float(np.linalg.norm(total)), 1e-12)
        self.group = group
        self.by_group = np.argsort(group, kind="stable")  # lists ordered by group, for a per-group maximum
        self.starts = np.flatnonzero(np.r_[True, np.diff(group[self.by_group]) != 0])
        self.present = group[self.by_group][self.starts]  # the group of each run (groups left empty have none)

    @classmethod
    def of(cls, index: Any) -> GroupedLists:
        ivf = faiss.extract_index_ivf(index)
        return cls(ivf.quantizer.reconstruct_n(0, ivf.nlist))

    def probe(self, q: np.ndarray, nprobe: int, lam: float = LAMBDA) -> tuple[np.ndarray, np.ndarray]:
        """(the ``nprobe`` lists to visit, best first, as a (1, nprobe) int64 array; their ``q . c`` as float32)."""
        scores = self.centroids @ q
        best = np.full(int(self.group.max()) + 1, -np.inf, dtype=np.float32)
        best[self.present] = np.maximum.reduceat(scores[self.by_group], self.starts)
        ranked = scores - np.float32(lam) * best[self.group]
        nprobe = max(1, min(nprobe, len(ranked)))
        lists = np.argpartition(-ranked, nprobe - 1)[:nprobe] if nprobe < len(ranked) else np.arange(len(ranked))
        lists = lists[np.argsort(-ranked[lists], kind="stable")]
        return lists.astype(np.int64).reshape(1, -1), scores[lists].astype(np.float32).reshape(1, -1)


def search_lists(
    index: Any, q: np.ndarray, k: int, lists: np.ndarray, coarse: np.ndarray, params: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """FAISS's search of the given lists only (``search_preassigned``; ``params`` carries nprobe and the selector):
    (distances, ids), each (1, k), -1 where fewer were found."""
    q = np.ascontiguousarray(q.reshape(1, -1), dtype=np.float32)
    lists = np.ascontiguousarray(lists, dtype=np.int64)
    coarse = np.ascontiguousarray(coarse, dtype=np.float32)
    dist = np.empty((1, k), dtype=np.float32)
    ids = np.empty((1, k), dtype=np.int64)
    params.nprobe = lists.shape[1]
    ivf: Any = faiss.extract_index_ivf(index)  # (the bundled stubs lack the C-pointer variant)
    ivf.search_preassigned_c(
        1, faiss.swig_ptr(q), k, faiss.swig_ptr(lists), faiss.swig_ptr(coarse), faiss.swig_ptr(dist),
        faiss.swig_ptr(ids), False, params, None)
    return dist, ids
