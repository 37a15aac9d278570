"""The lexical contract over every registered store: the suite plugin authors import too
(indexer/plugin_api/testing/lexical_contract.py), collected here with the stores of tests/contract/conftest.py;
and, for the built-in stores, the upgrade of a collection an earlier version made without a lexical index."""

from __future__ import annotations

import pytest

from indexer.plugin_api.testing.fixtures import StoreFactory
from indexer.plugin_api.testing.lexical_contract import *  # noqa: F403 - the contract's tests, collected here
from indexer.plugin_api.testing.lexical_contract import (
    DIM,
    TEXTS,
    LexicalSearch,
    Metric,
    Point,
    _lexical,
    _paths,
    _point,
)


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
