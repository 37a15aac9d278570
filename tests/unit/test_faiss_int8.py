"""The int8 codes of FAISS's IVF lists (plugins/faiss/index.py): one scale for every dimension, integer queries;
scores close to the float ones, clipping instead of wrapping, the scale kept in the cache file, SQ8 on request and
an SQ8 cache still read. Real FAISS indexes, small sizes."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.errors import ConfigError
from indexer.types import Point
from plugins.faiss import FaissStore
from plugins.faiss.index import AutoParams, HnswParams, VectorIndex

DIM = 24
N = 1500


def _vectors(n: int, seed: int, unit: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, DIM))
    v = (centers[rng.integers(0, 30, n)] + 0.4 * rng.normal(size=(n, DIM))).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True) if unit else 3.0 * v


def _index(vectors: np.ndarray, ip: bool = True, codes: str = "int8") -> VectorIndex:
    ids = np.arange(len(vectors), dtype=np.int64)
    auto = AutoParams(switch_at=1000, nprobe=64, codes=codes)  # every list visited: only the codes differ
    return VectorIndex.build("auto", DIM, ip, HnswParams(), ids, vectors, auto=auto)


@pytest.mark.parametrize("ip", [True, False])
def test_int8_codes_score_close_to_the_floats_and_rank_like_exact_search(ip: bool) -> None:
    vectors = _vectors(N, 1, unit=ip)
    index = _index(vectors, ip)
    assert index.structure == "ivf" and index.codes == "int8"
    assert index.scale == pytest.approx(127.0 / np.abs(vectors).max(), rel=1e-6)
    overlap = []
    for q in vectors[::50]:
        dist, ids = index.search(q, 10, None)
        true = vectors[ids] @ q if ip else ((vectors[ids] - q) ** 2).sum(axis=1)
        scale = 1.0 if ip else float((q**2).sum())
        assert np.abs(dist - true).max() < 0.03 * scale  # the stored integers, back on the floats' scale
        exact = np.argsort(-(vectors @ q) if ip else ((vectors - q) ** 2).sum(axis=1), kind="stable")[:10]
        overlap.append(len(set(ids.tolist()) & set(exact.tolist())) / 10)
        assert ids[0] == exact[0]
    assert np.mean(overlap) >= 0.9


def test_a_component_past_the_trained_range_is_clipped_not_wrapped() -> None:
    """The scale comes from the training sample; a later vector with a larger component saturates at 127 (a
    wrapped byte would turn it negative and the vector would no longer find itself)."""
    vectors = _vectors(N, 2)
    index = _index(vectors)
    spike = np.zeros(DIM, dtype=np.float32)
    spike[3] = 1.0  # far past the sample's largest component (~0.6)
    assert spike[3] * index.scale > 127
    index.apply(np.zeros(0, np.int64), np.array([10**12], dtype=np.int64), spike[None])
    _, ids = index.search(spike, 1, None)
    assert ids[0] == 10**12


def test_a_zero_query_and_an_empty_selection_answer_without_error() -> None:
    index = _index(_vectors(N, 3))
    dist, ids = index.search(np.zeros(DIM, dtype=np.float32), 5, None)
    assert len(ids) == 5 and np.all(np.isfinite(dist))
    assert len(index.search(_vectors(1, 4)[0], 5, np.zeros(0, np.int64))[1]) == 0


def test_the_cache_file_keeps_the_scale_and_refuses_a_broken_one(tmp_path: Path) -> None:
    vectors = _vectors(N, 5)
    index = _index(vectors)
    path = tmp_path / "c.faiss"
    index.save(path)
    again = VectorIndex.load(path, "auto", DIM, True, HnswParams())
    assert again is not None and again.codes == "int8" and again.scale == index.scale
    q = vectors[7]
    assert again.search(q, 5, None)[1].tolist() == index.search(q, 5, None)[1].tolist()
    data = bytearray(path.read_bytes())
    data[-8:] = struct.pack("<d", float("nan"))  # the scale is the file's last 8 bytes, inside the checksum
    path.write_bytes(bytes(data))
    assert VectorIndex.load(path, "auto", DIM, True, HnswParams()) is None  # rebuilt from the sidecar instead


def test_sq8_on_request_and_an_sq8_cache_is_still_read(tmp_path: Path) -> None:
    """``ivf_codes="sq8"`` trains FAISS's SQ8; a cache written with SQ8 (every index before the int8 codes) loads as
    SQ8 whatever the store now asks, and keeps answering until its next training."""
    vectors = _vectors(N, 6)
    sq8 = _index(vectors, codes="sq8")
    assert sq8.codes == "sq8" and sq8.scale == 0.0
    sq8.save(tmp_path / "c.faiss")
    loaded = VectorIndex.load(tmp_path / "c.faiss", "auto", DIM, True, HnswParams(), AutoParams(codes="int8"))
    assert loaded is not None and loaded.codes == "sq8"
    assert loaded.search(vectors[9], 1, None)[1][0] == 9

    store = FaissStore(tmp_path / "s", index="auto", auto_switch_at=1000, ivf_codes="sq8")
    store.ensure_collection("c", DIM, {})
    store.upsert("c", [Point(str(uuid.uuid4()), v, {"path": f"/d/{i}.md"}) for i, v in enumerate(vectors)])
    built = store._collections["c"].index
    assert built is not None and built.codes == "sq8"
    store.close()
    with pytest.raises(ConfigError, match="int8, sq8, pq"):
        FaissStore(tmp_path / "t", ivf_codes="pq4")


def test_int8_codes_are_rescored_2_x_k_until_the_tuning_chooses(tmp_path: Path) -> None:
    """Untuned searches (no measurement yet, the tuning off, or an explicit nprobe) over int8 codes rescore 2 x k
    candidates with the float vectors, and the tuning's climb starts there: the defaults find at least what SQ8's
    did without rescoring (docs/benchmarks.md#int8-codes). SQ8 codes keep no rescoring by default."""
    vectors = _vectors(N, 8)
    points = [Point(str(uuid.uuid4()), v, {"path": f"/d/{i}.md"}) for i, v in enumerate(vectors)]
    depths = {}
    for codes in ("int8", "sq8"):
        store = FaissStore(tmp_path / codes, index="auto", auto_switch_at=1000, ivf_codes=codes)
        store.ensure_collection("c", DIM, {})
        store.upsert("c", points)
        index = store._collections["c"].index
        assert index is not None and index.codes == codes
        assert store._tuned("c", index) == (None, index.rescore, 1)  # (nprobe, depth, list order)
        default = store.measure_recall("c", 50, False)
        assert default.source == "default" and default.rescore == index.rescore
        tuned = store.measure_recall("c", 50, True)
        assert tuned.trials and tuple(tuned.trials[0][:2]) == (64, index.rescore)  # where the climb starts
        depths[codes] = index.rescore
        store.close()
    assert depths == {"int8": 2, "sq8": 1}


@pytest.mark.parametrize("ip", [True, False])
def test_huge_finite_components_saturate_without_error(ip: bool) -> None:
    """A vector a million times larger than the trained ones, added after training and used as a query: its codes
    saturate at +-127 (no wrap, no overflow in the rounding), every score stays finite, and the index keeps answering
    the others."""
    vectors = _vectors(N, 9, unit=ip)
    index = _index(vectors, ip)
    huge = np.full(DIM, 1e6, dtype=np.float32)
    huge[::2] = -1e6
    index.apply(np.zeros(0, np.int64), np.array([7 * 10**12], dtype=np.int64), huge[None])
    dist, ids = index.search(huge, 5, None)
    assert len(ids) == 5 and np.all(np.isfinite(dist))
    assert index.search(vectors[11], 1, None)[1][0] == 11
