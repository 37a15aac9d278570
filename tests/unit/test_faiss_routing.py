"""The grouped order of IVF lists (plugins/faiss/routing.py): which lists a query visits, and FAISS's search of
exactly those. Real FAISS indexes, small sizes."""

from __future__ import annotations

import faiss
import numpy as np

from plugins.faiss.index import AutoParams, HnswParams, VectorIndex
from plugins.faiss.routing import LAMBDA, GroupedLists, search_lists

DIM = 32


def _boilerplate(n: int, seed: int = 3) -> np.ndarray:
    """Chunks mostly one of 8 shared sections plus their own topic (bench/scale.py's boilerplate set, small)."""
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((500, DIM)).astype(np.float32)
    a = rng.uniform(0.5, 0.95, (n, 1)).astype(np.float32)
    v = a * pool[rng.integers(0, 8, n)] + (1 - a) * pool[rng.integers(8, 500, n)]
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _pq_index(vectors: np.ndarray) -> VectorIndex:
    ids = np.arange(len(vectors), dtype=np.int64) * 5 + 1
    auto = AutoParams(switch_at=1000, nprobe=16, codes="pq")
    return VectorIndex.build("auto", DIM, True, HnswParams(), ids, vectors, auto=auto)


def test_at_lambda_zero_the_order_is_faiss_own_and_its_search_returns_the_same_answer() -> None:
    vectors = _boilerplate(8000)
    index = _pq_index(vectors)
    groups = GroupedLists.of(index.index)
    params = faiss.SearchParametersIVF(nprobe=16)
    for q in vectors[::400]:
        lists, coarse = groups.probe(q, 16, lam=0.0)
        nearest = np.argsort(-(groups.centroids @ q), kind="stable")[:16]
        assert lists.shape == (1, 16) and set(lists[0].tolist()) == set(nearest.tolist())
        assert np.allclose(coarse[0], groups.centroids[lists[0]] @ q, atol=1e-6)  # the true q . c handed to FAISS
        index.index.implem = 11
        own = index.index.search(q.reshape(1, -1), 40, params=params)[1][0]
        routed = search_lists(index.index, q, 40, lists, coarse, faiss.SearchParametersIVF(nprobe=16))[1][0]
        assert set(routed.tolist()) == set(own.tolist())


def test_a_group_best_list_lifts_the_rest_of_its_group_and_the_groups_are_deterministic() -> None:
    vectors = _boilerplate(8000)
    index = _pq_index(vectors)
    groups = GroupedLists.of(index.index)
    again = GroupedLists.of(index.index)
    assert (groups.group == again.group).all()  # seeded: every process computes the same groups
    assert 2 <= len(set(groups.group.tolist())) <= len(groups.centroids) // 2
    q = vectors[17]
    scores = groups.centroids @ q
    every = len(scores)
    lists = groups.probe(q, every, lam=1.0)[0][0]
    # at lambda 1 every group's best list scores 0, the best a list can: they come first, one per group
    first = lists[: len(groups.present)]
    assert sorted(groups.group[first].tolist()) == sorted(groups.present.tolist())
    # in between, within a group the order stays FAISS's (by q . c)
    mid = groups.probe(q, every, lam=LAMBDA)[0][0]
    for g in groups.present.tolist():
        members = [c for c in mid.tolist() if groups.group[c] == g]
        assert members == sorted(members, key=lambda c: -scores[c])


def test_the_grouped_order_searches_with_a_filter_and_over_every_list_finds_what_faiss_order_finds() -> None:
    vectors = _boilerplate(8000)
    index = _pq_index(vectors)
    ids = np.arange(len(vectors), dtype=np.int64) * 5 + 1
    allowed = ids[::3]
    lists = index.lists()
    for q in vectors[5::500]:
        index.tuned, index.grouped = lists, 0.0
        plain = index.search(q, 10, None)[1]
        index.grouped = LAMBDA
        routed = index.search(q, 10, None)[1]
        assert set(routed.tolist()) == set(plain.tolist())  # every list visited: the order changes nothing
        index.tuned = 8
        filtered = index.search(q, 10, allowed)[1]
        assert len(filtered) == 10 and set(filtered.tolist()) <= set(allowed.tolist())
