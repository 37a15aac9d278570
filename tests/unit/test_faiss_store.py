"""FAISS store internals the contract suite does not reach: the cache file, replay, HNSW tombstones."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.core.normalization import Normalization, normalize
from indexer.core.vectors import ancestor_dirs
from indexer.errors import ConfigError, StoreError
from indexer.types import Filter, Metric, Point
from plugins.faiss import FaissStore
from plugins.faiss.faiss_store import CACHE, point_iid
from plugins.faiss.index import HnswParams, VectorIndex

DIM = 12


def _points(n: int, seed: int = 0, prefix: str = "/d") -> list[Point]:
    rng = np.random.default_rng(seed)
    vectors = normalize(rng.normal(size=(n, DIM)), Normalization.L2)  # cosine stores take unit vectors
    return [
        Point(str(uuid.uuid4()), vectors[i], {"path": f"{prefix}/f{i % 9}.md", "file_type": "md"}) for i in range(n)
    ]


def _ranking(store: FaissStore, query: np.ndarray, k: int = 10) -> list[str]:
    return [h.id for h in store.search("c", query, k)]


def test_unsupported_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Manhattan"):
        FaissStore(tmp_path, metric=Metric.MANHATTAN)
    with pytest.raises(ConfigError, match="flat, hnsw"):
        FaissStore(tmp_path, index="ivf")


def test_ids_and_dirs_are_deterministic() -> None:
    uid = "0b7c6f9e-2a51-4f1e-9d1a-3c5b7e9f1a2b"
    assert point_iid(uid) == point_iid(uid)
    assert 0 <= point_iid(uid) < 2**63
    assert point_iid(uid) != point_iid(str(uuid.uuid4()))
    assert ancestor_dirs("/a/b/c.txt") == ["/", "/a", "/a/b"]
    assert ancestor_dirs("/top.txt") == ["/"]


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated"])
def test_a_missing_or_corrupt_cache_is_rebuilt_from_the_sidecar(tmp_path: Path, damage: str) -> None:
    store = FaissStore(tmp_path)
    store.ensure_collection("c", DIM, {})
    points = _points(80)
    store.upsert("c", points)
    query = points[3].vector
    before = _ranking(store, query)
    store.close()
    cache = tmp_path / "c" / CACHE
    assert cache.exists()
    if damage == "missing":
        cache.unlink()
    elif damage == "garbage":
        cache.write_bytes(b"\0" * 4096)
    else:
        cache.write_bytes(cache.read_bytes()[:-100])
    reopened = FaissStore(tmp_path)
    assert _ranking(reopened, query) == before
    assert reopened.count("c") == 80
    reopened.close()
    assert VectorIndex.cached_seq(cache) == 80  # saved again on close


def test_ops_after_the_cache_are_replayed(tmp_path: Path) -> None:
    writer = FaissStore(tmp_path, save_every=10**9)
    writer.ensure_collection("c", DIM, {})
    first, second = _points(30, seed=1), _points(30, seed=2)
    writer.upsert("c", first)
    writer.flush()
    writer.upsert("c", second)
    writer.delete("c", [first[0].id])
    assert VectorIndex.cached_seq(tmp_path / "c" / CACHE) == 30  # the cache is behind the sidecar
    # A second store (as after a crash: the writer never closed) replays the 31 newer ops.
    other = FaissStore(tmp_path)
    assert other.count("c") == 59
    assert _ranking(other, second[5].vector, 1) == [second[5].id]
    assert first[0].id not in _ranking(other, first[0].vector, 59)
    other.close()
    writer.close()


def test_readers_behind_pruned_ops_reload_from_the_cache(tmp_path: Path) -> None:
    reader = FaissStore(tmp_path)
    writer = FaissStore(tmp_path, save_every=25)
    writer.ensure_collection("c", DIM, {})
    batches = [_points(20, seed=s) for s in range(6)]
    writer.upsert("c", batches[0])
    assert reader.count("c") == 20
    assert _ranking(reader, batches[0][0].vector, 1) == [batches[0][0].id]
    for batch in batches[1:]:  # several saves: the ops the reader last saw are pruned
        writer.upsert("c", batch)
    for batch in batches:
        assert _ranking(reader, batch[7].vector, 1) == [batch[7].id]
    assert reader.count("c") == 120
    writer.close()
    reader.close()


def test_a_collection_dropped_by_another_store_is_gone(tmp_path: Path) -> None:
    a, b = FaissStore(tmp_path), FaissStore(tmp_path)
    a.ensure_collection("c", DIM, {})
    a.upsert("c", _points(5))
    assert b.count("c") == 5
    a.drop("c")
    assert b.collection_meta("c") is None
    with pytest.raises(StoreError, match="does not exist"):
        b.search("c", normalize(np.ones(DIM), Normalization.L2), 3)
    a.ensure_collection("c", DIM, {"model_id": "new"})
    assert b.count("c") == 0
    assert b.collection_meta("c")["model_id"] == "new"  # type: ignore[index]
    a.close()
    b.close()


def test_hnsw_graph_search_with_tombstones_and_filters(tmp_path: Path) -> None:
    store = FaissStore(tmp_path, index="hnsw")
    store.hnsw = HnswParams(exact_below=0)  # force the graph (and selector) path on a small index
    store.ensure_collection("c", DIM, {})
    points = _points(400, seed=3) + _points(40, seed=4, prefix="/e")
    store.upsert("c", points)
    rng = np.random.default_rng(5)
    moved = [Point(p.id, normalize(rng.normal(size=DIM), Normalization.L2), p.payload) for p in points[:150]]
    store.upsert("c", moved)  # 150 tombstones
    store.delete("c", [p.id for p in points[150:170]])
    live = {p.id: p for p in [*moved, *points[170:]]}
    assert store.count("c") == len(live)
    for p in list(live.values())[::40]:
        hits = store.search("c", p.vector, 5)
        assert hits[0].id == p.id
        assert len({h.id for h in hits}) == 5
    hits = store.search("c", points[-1].vector, 5, Filter(path_prefix="/e"))
    assert hits[0].id == points[-1].id
    assert all(h.payload["path"].startswith("/e/") for h in hits)


def test_hnsw_compacts_when_tombstones_pile_up(tmp_path: Path) -> None:
    store = FaissStore(tmp_path, index="hnsw")
    store.ensure_collection("c", DIM, {})
    points = _points(300, seed=6)
    for _ in range(6):  # 1800 slots written for 300 live points
        store.upsert("c", points)
    index = store._collections["c"].index
    assert index is not None
    assert index.dead <= max(1000, 0.25 * index.index.ntotal)
    assert index.live == 300
    store.close()
    reopened = FaissStore(tmp_path, index="hnsw")
    assert _ranking(reopened, points[9].vector, 1) == [points[9].id]
    reopened.close()


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = FaissStore(tmp_path)
    store.ensure_collection("c", DIM, {})
    errors: list[BaseException] = []
    batches = [_points(25, seed=s) for s in range(8)]

    def write(batch: list[Point]) -> None:
        try:
            store.upsert("c", batch)
            store.search("c", batch[0].vector, 5)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count("c") == 200
    for batch in batches:
        assert _ranking(store, batch[0].vector, 1) == [batch[0].id]
    store.close()
