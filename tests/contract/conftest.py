"""Store factories for the VectorStore contract suite: every store passes the same tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from indexer.ports import VectorStore
from indexer.types import Metric

StoreFactory = Callable[..., VectorStore]

STORES = [
    "faiss-flat",
    "faiss-hnsw",
    "qdrant-embedded",
    pytest.param(
        "qdrant-server",
        marks=[
            pytest.mark.qdrant_server,
            pytest.mark.skipif(
                not os.environ.get("QDRANT_URL"), reason="QDRANT_URL is not set (no Qdrant server to test)"
            ),
        ],
    ),
]


def _make(kind: str, location: Path, metric: Metric) -> VectorStore:
    if kind == "faiss-flat":
        from plugins.faiss import FaissStore

        return FaissStore(location / "faiss", metric=metric, index="flat")
    if kind == "faiss-hnsw":
        from plugins.faiss import FaissStore

        return FaissStore(location / "faiss", metric=metric, index="hnsw")
    from plugins.qdrant import QdrantStore

    if kind == "qdrant-embedded":
        return QdrantStore(path=location / "qdrant", metric=metric)
    return QdrantStore(url=os.environ["QDRANT_URL"], api_key=os.environ.get("QDRANT_API_KEY"), metric=metric)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def collection() -> str:
    """A fresh collection name per test (a shared server keeps collections between tests)."""
    return f"contract_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, collection: str) -> Iterator[StoreFactory]:
    """``make_store(metric=...)`` opens a store on this test's location; each is closed (and dropped) after."""
    opened: list[VectorStore] = []

    def factory(metric: Metric = Metric.COSINE) -> VectorStore:
        store = _make(store_kind, tmp_path, metric)
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        try:
            if store_kind == "qdrant-server":
                store.drop(collection)
        finally:
            store.close()
