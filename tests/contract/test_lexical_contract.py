"""The lexical index contract: every store keeps BM25 search in step with its points (upsert, overwrite, delete,
filters), and builds it for a collection made before it had one, without touching the vectors."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from indexer.ports import LexicalSearch
from indexer.types import Filter, Metric, Point

from .conftest import StoreFactory

DIM = 8

TEXTS = {
    "/r/a/animals.md": "The quick brown fox jumps over the lazy dog.",
    "/r/a/error.md": "Quota checks raise ERR_QUOTA_7731 when the budget is exceeded.",
    "/r/b/night.txt": "Foxes are quick animals; a fox hunts at night.",
    "/r/b/garden.txt": "Tomatoes need sun, water and a warm garden.",
    "/r/c/kitchen.md": "Bake the bread at a high temperature for forty minutes.",
    "/r/c/config.py": "def parseHttpHeader(raw): return raw.split(':')",
}


def _point(path: str, text: str, seed: int) -> Point:
    vec = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    vec /= np.linalg.norm(vec)
    suffix = path.rsplit(".", 1)[-1]
    return Point(str(uuid.uuid5(uuid.NAMESPACE_URL, path)), vec, {"path": path, "file_type": suffix, "text": text})


def _lexical(store: object) -> LexicalSearch:
    if not isinstance(store, LexicalSearch):
        pytest.skip(f"{getattr(store, 'name', store)} keeps no lexical index (an optional port)")
    return store


def _filled(make_store: StoreFactory, collection: str) -> tuple[LexicalSearch, list[Point]]:
    store = make_store(Metric.COSINE)
    _lexical(store)
    store.ensure_collection(collection, DIM, {"m": "1"})
    points = [_point(p, t, i) for i, (p, t) in enumerate(TEXTS.items())]
    store.upsert(collection, points)
    assert isinstance(store, LexicalSearch)
    assert store.has_lexical(collection)
    return store, points


def _paths(store: LexicalSearch, collection: str, query: str, where: Filter | None = None) -> list[str]:
    return [str(h.payload["path"]) for h in store.search_lexical(collection, query, 10, where)]


def test_lexical_search_ranks_matching_points(make_store: StoreFactory, collection: str) -> None:
    store, _ = _filled(make_store, collection)
    assert _paths(store, collection, "ERR_QUOTA_7731") == ["/r/a/error.md"]
    assert _paths(store, collection, "what does parseHttpHeader do") == ["/r/c/config.py"]
    foxes = _paths(store, collection, "fox")
    assert set(foxes) == {"/r/a/animals.md", "/r/b/night.txt"}  # stemming: "Foxes" matches "fox"
    assert foxes[0] == "/r/b/night.txt"  # two occurrences beat one
    hits = store.search_lexical(collection, "fox", 10)
    assert hits[0].score > hits[1].score > 0
    assert hits[0].payload["text"] == TEXTS["/r/b/night.txt"]
    assert _paths(store, collection, "submarine") == []
    assert _paths(store, collection, "the of and") == []  # only stopwords: nothing to match


def test_lexical_search_applies_filters(make_store: StoreFactory, collection: str) -> None:
    store, _ = _filled(make_store, collection)
    assert _paths(store, collection, "fox", Filter(path_prefix="/r/a")) == ["/r/a/animals.md"]
    assert _paths(store, collection, "fox", Filter(file_types=("txt",))) == ["/r/b/night.txt"]
    assert _paths(store, collection, "fox", Filter(path_prefix="/r/c")) == []


def test_overwrite_and_delete_keep_the_lexical_index_in_step(make_store: StoreFactory, collection: str) -> None:
    store, points = _filled(make_store, collection)
    fox = next(p for p in points if p.payload["path"] == "/r/a/animals.md")
    store.upsert(collection, [Point(fox.id, fox.vector, {**fox.payload, "text": "A submarine dives deep."})])
    assert _paths(store, collection, "submarine") == ["/r/a/animals.md"]
    assert _paths(store, collection, "fox") == ["/r/b/night.txt"]
    store.delete(collection, [fox.id])
    assert _paths(store, collection, "submarine") == []
    store.delete(collection, [p.id for p in points])
    assert _paths(store, collection, "fox") == []
    assert store.count(collection) == 0  # type: ignore[attr-defined]


def test_ensure_lexical_is_a_no_op_on_a_current_collection(make_store: StoreFactory, collection: str) -> None:
    store, _ = _filled(make_store, collection)
    assert store.ensure_lexical(collection) is False
    assert _paths(store, collection, "ERR_QUOTA_7731") == ["/r/a/error.md"]


def test_a_collection_made_without_lexical_index_gets_one(
    make_store: StoreFactory, store_kind: str, collection: str
) -> None:
    store = make_store(Metric.COSINE)
    _lexical(store)
    points = [_point(p, t, i) for i, (p, t) in enumerate(TEXTS.items())]
    if store_kind == "qdrant" and not hasattr(store, "client"):
        _legacy_local_mode_folder_moves_onto_edge(store, collection, points)
        return
    _make_legacy(store, store_kind, collection, points)
    assert isinstance(store, LexicalSearch)
    assert not store.has_lexical(collection)
    before = {h.id: h.score for h in store.search(collection, points[0].vector, 10)}  # type: ignore[attr-defined]

    assert store.ensure_lexical(collection) is True
    assert store.has_lexical(collection)
    assert _paths(store, collection, "ERR_QUOTA_7731") == ["/r/a/error.md"]
    after = {h.id: h.score for h in store.search(collection, points[0].vector, 10)}  # type: ignore[attr-defined]
    assert after.keys() == before.keys()
    for pid, value in before.items():
        assert after[pid] == pytest.approx(value, abs=1e-5)
    assert store.collection_meta(collection)["m"] == "1"  # type: ignore[attr-defined,index]
    assert store.ensure_lexical(collection) is False


def _make_legacy(store: object, store_kind: str, collection: str, points: list[Point]) -> None:
    """A collection as an indexer version without lexical search left it."""
    if store_kind.startswith("faiss"):
        store.ensure_collection(collection, DIM, {"m": "1"})  # type: ignore[attr-defined]
        store.upsert(collection, points)  # type: ignore[attr-defined]
        coll = store._require(collection)  # type: ignore[attr-defined]
        with coll.sidecar.write():
            coll.sidecar.conn.execute("DROP TABLE lexical")
            coll.sidecar.conn.execute("DELETE FROM meta WHERE key = 'lexical'")
        return
    from qdrant_client import models as qm

    store.client.create_collection(  # type: ignore[attr-defined]
        collection,
        vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE),
        metadata={"m": "1", "dimensions": str(DIM), "metric": "cosine"},
    )
    store.upsert(collection, points)  # type: ignore[attr-defined]


def _legacy_local_mode_folder_moves_onto_edge(store: object, collection: str, points: list[Point]) -> None:
    """Embedded Qdrant runs on qdrant-edge: a collection an earlier version left in qdrant-client's local mode
    (without the lexical vector) moves onto the engine on first use, vectors kept, lexical vector added."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    path = store.path  # type: ignore[attr-defined]
    store.close()  # type: ignore[attr-defined]
    client = QdrantClient(path=str(path))
    client.create_collection(
        collection,
        vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE),
        metadata={"m": "1", "dimensions": str(DIM), "metric": "cosine"},
    )
    client.upsert(collection, [qm.PointStruct(id=p.id, vector=list(map(float, p.vector)), payload=p.payload)
                               for p in points])
    before = {str(h.id): h.score for h in client.query_points(collection, query=list(map(float, points[0].vector)),
                                                             limit=10).points}
    client.close()
    reopened = type(store)(path)  # type: ignore[call-arg]
    try:
        assert reopened.has_lexical(collection)
        assert reopened.count(collection) == len(points)
        assert _paths(reopened, collection, "ERR_QUOTA_7731") == ["/r/a/error.md"]
        after = {h.id: h.score for h in reopened.search(collection, points[0].vector, 10)}
        assert after.keys() == before.keys()
        for pid, value in before.items():
            assert after[pid] == pytest.approx(value, abs=1e-5)
        assert reopened.collection_meta(collection)["m"] == "1"
        assert reopened.ensure_lexical(collection) is False
    finally:
        reopened.close()
