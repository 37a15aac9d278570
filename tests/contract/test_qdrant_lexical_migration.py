"""Adding the lexical vector to an old Qdrant collection survives being interrupted at any step."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import models as qm

from indexer.types import Point
from plugins.qdrant import QdrantStore
from plugins.qdrant.client_store import MIGRATE_SUFFIX

DIM = 8


class Killed(Exception):
    pass


def _legacy(store: QdrantStore, n: int = 120) -> list[Point]:
    store.client.create_collection(
        "old", vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE), metadata={"m": "1"}
    )
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    points = [
        Point(
            str(uuid.uuid4()),
            vectors[i],
            {"path": f"/d/f{i}.md", "text": f"word{i} common"},
        )
        for i in range(n)
    ]
    store.upsert("old", points)
    return points


def _check_complete(store: QdrantStore, points: list[Point]) -> None:
    assert store.has_lexical("old")
    assert not store.client.collection_exists("old" + MIGRATE_SUFFIX)
    assert store.list_ids("old") == {p.id for p in points}
    assert [h.payload["path"] for h in store.search_lexical("old", "word77", 1)] == ["/d/f77.md"]
    hit = store.search("old", points[7].vector, 1)[0]
    assert hit.id == points[7].id and hit.score == pytest.approx(1.0, abs=1e-5)
    assert store.collection_meta("old")["m"] == "1"  # type: ignore[index]


@pytest.mark.parametrize("step", ["copy_out", "after_drop", "copy_back"])
def test_interrupted_migration_finishes_on_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    store = QdrantStore(path=tmp_path / "q")
    try:
        points = _legacy(store)
        real_copy, real_recreate = QdrantStore._copy, QdrantStore._recreate_from
        calls = {"copy": 0}

        def copy(self: QdrantStore, source: str, target: str) -> None:
            calls["copy"] += 1
            if step == "copy_out" and calls["copy"] == 1:
                real_copy(self, source, target)
                raise Killed  # the copy is complete but the original not dropped yet
            if step == "copy_back" and target == "old":
                raise Killed  # the new collection exists but is empty
            real_copy(self, source, target)

        def recreate(self: QdrantStore, tmp: str, collection: str) -> None:
            if step == "after_drop":
                raise Killed
            real_recreate(self, tmp, collection)

        monkeypatch.setattr(QdrantStore, "_copy", copy)
        monkeypatch.setattr(QdrantStore, "_recreate_from", recreate)
        with pytest.raises(Killed):
            store.ensure_lexical("old")
        monkeypatch.setattr(QdrantStore, "_copy", real_copy)
        monkeypatch.setattr(QdrantStore, "_recreate_from", real_recreate)

        assert store.ensure_lexical("old") is True
        _check_complete(store, points)
        assert store.ensure_lexical("old") is False
    finally:
        store.close()
