"""The pq codes of FAISS's IVF lists (plugins/faiss/index.py): a fast scan over 4-bit product codes
(no residuals), PQ_WIDEN times its candidates reordered by int8 rows kept by id, the best 2 x k rescored with
the floats by the store. Real FAISS indexes, small sizes."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.types import Point
from plugins.faiss import FaissStore
from plugins.faiss.index import PQ_WIDEN, AutoParams, HnswParams, VectorIndex

DIM = 24
N = 3000


def _vectors(n: int, seed: int, unit: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, DIM))
    v = (centers[rng.integers(0, 30, n)] + 0.4 * rng.normal(size=(n, DIM))).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True) if unit else 3.0 * v


def _index(vectors: np.ndarray, ip: bool = True) -> VectorIndex:
    ids = np.arange(len(vectors), dtype=np.int64) * 7 + 3  # not positions: the rows are found by id
    auto = AutoParams(switch_at=1000, nprobe=64, codes="pq")
    return VectorIndex.build("auto", DIM, ip, HnswParams(), ids, vectors, auto=auto)


@pytest.mark.parametrize("ip", [True, False])
def test_pq_candidates_come_back_reordered_by_their_int8_rows_and_rank_like_exact_search(ip: bool) -> None:
    vectors = _vectors(N, 1, unit=ip)
    index = _index(vectors, ip)
    assert index.structure == "ivf" and index.codes == "pq" and index.rescore == 2
    ids = np.arange(N, dtype=np.int64) * 7 + 3
    overlap = []
    for q in vectors[::60]:
        dist, found = index.search(q, 10 * index.rescore, None)
        scanned = index.index.search(q.reshape(1, -1).astype(np.float32), 20 * PQ_WIDEN)[1][0]
        assert len(found) == 20 and set(found.tolist()) <= set(scanned.tolist())  # the best of a wider scan
        assert (np.diff(dist) <= 1e-6).all() if ip else (np.diff(dist) >= -1e-6).all()  # best first
        rows = vectors[(found - 3) // 7]
        true = rows @ q if ip else ((rows - q) ** 2).sum(axis=1)
        scale = 1.0 if ip else float((q**2).sum())
        assert np.abs(dist - true).max() < 0.05 * scale  # the int8 rows' scores, on the floats' scale
        exact = ids[np.argsort(-(vectors @ q) if ip else ((vectors - q) ** 2).sum(axis=1), kind="stable")[:10]]
        overlap.append(len(set(found[:10].tolist()) & set(exact.tolist())) / 10)
    assert np.mean(overlap) >= 0.9


def test_removal_replacement_selection_and_the_cache_keep_the_rows_in_step(tmp_path: Path) -> None:
    vectors = _vectors(N, 2)
    index = _index(vectors)
    ids = np.arange(N, dtype=np.int64) * 7 + 3
    q = vectors[5]
    assert index.search(q, 20, None)[1][0] == ids[5]
    index.apply(ids[:10], np.zeros(0, np.int64), np.zeros((0, DIM), np.float32))
    assert ids[5] not in index.search(q, 20, None)[1] and index.live == N - 10
    moved = _vectors(1, 9)[0]
    index.apply(ids[5:6], ids[5:6], moved[None])  # the same id, another vector: its row follows
    assert index.search(moved, 20, None)[1][0] == ids[5]
    allowed = ids[100:200]
    assert set(index.search(q, 50, allowed)[1].tolist()) <= set(allowed.tolist())
    path = tmp_path / "index.faiss"
    index.save(path)
    again = VectorIndex.load(path, "auto", DIM, True, HnswParams(), AutoParams(switch_at=1000, nprobe=64, codes="pq"))
    assert again is not None and again.codes == "pq" and again.live == index.live
    assert np.array_equal(again.search(moved, 40, None)[1], index.search(moved, 40, None)[1])
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # a damaged int8-row section: the cache is refused (rebuilt from the sidecar), not trusted
    path.write_bytes(bytes(raw))
    assert VectorIndex.load(path, "auto", DIM, True, HnswParams(), AutoParams(codes="pq")) is None


def test_the_store_with_pq_codes_finds_each_point_and_keeps_it_across_a_reopen(tmp_path: Path) -> None:
    vectors = _vectors(N, 3)
    store = FaissStore(tmp_path / "f", index="auto", auto_switch_at=1000, ivf_codes="pq")
    store.ensure_collection("c", DIM, {})
    points = [Point(id=str(uuid.UUID(int=i + 1)), vector=vectors[i], payload={"n": i}) for i in range(N)]
    store.upsert("c", points)
    try:
        for i in range(0, N, 150):
            assert store.search("c", vectors[i], 3)[0].payload["n"] == i
        store.delete("c", [points[0].id])
        assert all(h.payload["n"] != 0 for h in store.search("c", vectors[0], 5))
    finally:
        store.close()
    store = FaissStore(tmp_path / "f", index="auto", auto_switch_at=1000, ivf_codes="pq")
    try:
        assert store.search("c", vectors[300], 1)[0].payload["n"] == 300
    finally:
        store.close()


def test_the_scan_runs_faiss_reservoir_implementation_with_the_default_answer() -> None:
    """index.py sets FAISS's ``implem`` 11 (reservoir) for one query: faster (docs/benchmarks.md#recall-session-14),
    and the same candidates as FAISS's default choice (up to ties at the last place: the fast scan's distances are
    16-bit sums, so equal ones are common)."""
    vectors = _vectors(N, 5)
    index = _index(vectors)
    for q in vectors[::300]:
        dist, found = index.search(q, 20, None)
        assert index.index.implem == 11
        index.index.implem = 0
        d0, scanned = index.index.search(q.reshape(1, -1).astype(np.float32), 20 * PQ_WIDEN)
        index.index.implem = 11
        d1, again = index.index.search(q.reshape(1, -1).astype(np.float32), 20 * PQ_WIDEN)
        assert np.allclose(np.sort(d0[0]), np.sort(d1[0]), rtol=1e-5, atol=1e-5)  # the same best distances
        last = d0[0].min()
        assert set(scanned[0][d0[0] > last].tolist()) == set(again[0][d1[0] > last].tolist())  # above the tie
        assert set(found.tolist()) <= set(again[0].tolist())
