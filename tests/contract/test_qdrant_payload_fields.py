"""The payload-filter port of embedded Qdrant (plugins/qdrant/edge_fields.py), as the writer drives it
(indexer/index/payloads.py): a point upserted with the ``uncommitted`` marker is unseen by a worker's search until
its file commits; a crash between commit and unmark is repaired by the next run's recovery; a touch's ``stat`` is
set without a write of the point; points written before the keys get them by the resumable backfill; payload
indexes are made once, for at most MAX_FIELD_INDEXES metadata fields; a read-only store refuses writes."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from indexer.errors import StoreError
from indexer.index.payloads import PayloadKeeper, backfill, index_keys
from indexer.state.payload_fields import MAX_FIELD_INDEXES
from indexer.types import Chunk, Filter, Point, SourceRef
from plugins.qdrant.edge import EdgeStore

DIM = 4
ROOT = "/r"


def _vec(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = 0.5
    return v / np.linalg.norm(v)


def _prepared(path: str, mtime_ns: int = 10**18, size: int = 100) -> SimpleNamespace:
    return SimpleNamespace(ref=SourceRef(ROOT, path, size, mtime_ns), doc=SimpleNamespace(kind="text"))


def _chunk(path: str, meta: tuple[tuple[str, object], ...] = ()) -> Chunk:
    return Chunk(path, 0, "text", 0, 0, 1, 1, 1, metadata=meta)


def _point(i: int, keeper: PayloadKeeper | None, meta: tuple[tuple[str, object], ...] = ()) -> Point:
    path = f"{ROOT}/f{i}.md"
    payload: dict[str, object] = {"path": path, "root": ROOT, "file_type": "md", "text": f"t{i}",
                                  "metadata": dict(meta)}
    if keeper is not None:
        payload = keeper.add(payload, _prepared(path), _chunk(path, meta))
    return Point(str(uuid.UUID(int=i + 1)), _vec(i), payload)


@pytest.fixture
def store(tmp_path: Path):
    s = EdgeStore(tmp_path / "edge")
    s.ensure_collection("c", DIM, {})
    yield s
    s.close()


def _seen(store: EdgeStore, where: Filter | None = None) -> set[str]:
    return {h.id for h in store.search("c", _vec(0), 50, where or Filter(committed=True))}


def test_an_uncommitted_point_is_unseen_by_a_worker_until_its_file_commits(store):
    keeper = PayloadKeeper(store, "c")
    points = [_point(i, keeper) for i in range(4)]
    store.upsert("c", points)
    assert _seen(store) == set()  # written, not committed
    assert len(_seen(store, Filter())) == 4  # the writer's own search asks the state instead
    keeper.committed([p.id for p in points[:2]])
    assert _seen(store) == {points[0].id, points[1].id}
    keeper.recover()  # a crash between the commit and the unmark: every marker left is a committed point's
    assert _seen(store) == {p.id for p in points}
    assert store.count_where("c", Filter(committed=True)) == 4


def test_a_touch_sets_stat_on_the_points_without_writing_them(store):
    keeper = PayloadKeeper(store, "c")
    points = [_point(i, keeper) for i in range(3)]
    store.upsert("c", points)
    keeper.committed([p.id for p in points])
    from indexer.search.filters import parse

    newer = parse(["modified>=2040-01-01"])
    assert store.count_where("c", Filter(clauses=newer, committed=True)) == 0
    touched = SourceRef(ROOT, f"{ROOT}/f1.md", 100, 2_300_000_000 * 10**9)
    keeper.restat([(touched, [points[1].id])])
    assert {h.id for h in store.search("c", _vec(0), 10, Filter(clauses=newer, committed=True))} == {points[1].id}


def test_points_written_before_the_keys_get_them_resumably(store):
    store.upsert("c", [_point(i, None, (("author", f"a{i}"),)) for i in range(5)])
    assert not store.filled("c")
    files = {f"{ROOT}/f{i}.md": SimpleNamespace(path=f"{ROOT}/f{i}.md", root=ROOT, mtime_ns=10**18, size=7)
             for i in range(4)}  # f4: no file owns it (the sync's orphan removal deletes it)
    assert backfill(store, "c", lambda paths: {p: files[p] for p in paths if p in files}) == 4
    assert not store.filled("c")  # the orphan
    store.delete("c", [str(uuid.UUID(int=5))])
    assert store.filled("c") and backfill(store, "c", lambda paths: {}) == 0
    from indexer.search.filters import parse

    assert store.count_where("c", Filter(clauses=parse(["author=a3"]), committed=True)) == 1


def test_metadata_fields_get_payload_indexes_up_to_the_cap(store):
    names = [f"field{i}" for i in range(MAX_FIELD_INDEXES + 3)]
    store.ensure_field_indexes("c", index_keys(names))
    store.ensure_field_indexes("c", index_keys(names))  # again: nothing new
    with store._lock:
        have = set(store._require("c").info().payload_schema)
    indexed = {k.split(".")[2] for k in have if k.startswith("filter.t.")}
    assert len(indexed) == MAX_FIELD_INDEXES and {"filter.names", "stat.s", "uncommitted"} <= have


def test_a_read_only_store_refuses_writes_and_writes_nothing(store, tmp_path):
    store.upsert("c", [_point(0, None)])
    store.close()
    worker = EdgeStore(tmp_path / "edge", read_only=True)
    try:
        assert worker.count("c") == 1
        with pytest.raises(StoreError, match="read-only"):
            worker.upsert("c", [_point(1, None)])
    finally:
        worker.close()
    with pytest.raises(StoreError, match="no embedded Qdrant store"):
        EdgeStore(tmp_path / "nothing", read_only=True)


def test_points_of_an_older_filter_payload_are_filled_again_with_the_month_keys(store):
    """Points written by the first version of the filter payload (no ``v``, no date months ``m``) are listed by
    the backfill and given the current one: a worker's date facet then counts them too."""
    keeper = PayloadKeeper(store, "c")
    points = [_point(i, keeper, (("date", f"2025-0{1 + i}-15"),)) for i in range(3)]
    for p in points:  # as the first version wrote them
        p.payload["filter"].pop("v")
        p.payload["filter"].pop("m")
    store.upsert("c", points)
    keeper.committed([p.id for p in points])
    assert not store.filled("c")
    files = {p.payload["path"]: SimpleNamespace(path=p.payload["path"], root=ROOT, mtime_ns=10**18, size=7)
             for p in points}
    assert backfill(store, "c", lambda paths: {q: files[q] for q in paths if q in files}) == 3
    assert store.filled("c")
    months = store.facet("c", "filter.m.date", Filter(committed=True), 10)
    assert sorted(months or []) == [("2025-01", 1), ("2025-02", 1), ("2025-03", 1)]
