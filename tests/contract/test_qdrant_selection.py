"""A large id selection on Qdrant (plugins/qdrant/selection.py): checked after a search without payloads, its hits are
the ``HasIdCondition``'s, on qdrant-edge and on qdrant-client's own engine (local mode, the code a Qdrant server's
store runs): ids, order, scores and payloads, dense and lexical, with a path prefix and hidden points beside it, and
when the selection's points are far from the query (the search then runs with the condition)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.types import Filter, Metric, Point
from plugins.qdrant import selection
from plugins.qdrant.client_store import QdrantStore
from plugins.qdrant.edge import EdgeStore

DIM = 8
N = 6000
WORDS = ["ice", "rings", "dust", "bread", "keys", "audit"]


def _points() -> list[Point]:
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(N, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"sel{i}")), vecs[i],
                  {"path": f"/r/d{i % 3}/f{i}.md", "file_type": "md",
                   "text": " ".join(WORDS[j] for j in range(len(WORDS)) if (i >> j) & 1) + f" n{i}" * (i % 4 + 1)})
            for i in range(N)]


@pytest.fixture(params=["edge", "local"])
def store(request, tmp_path: Path):
    s = EdgeStore(tmp_path / "edge") if request.param == "edge" else QdrantStore(path=tmp_path / "local")
    s.ensure_collection("c", DIM, {})
    points = _points()
    for start in range(0, N, 500):
        s.upsert("c", points[start:start + 500])
    yield s, points
    s.close()


def _run(s, side: str, where: Filter, limit: int = 25):
    if side == "dense":
        return s.search("c", np.ones(DIM, dtype=np.float32) / np.sqrt(DIM), limit, where)
    return s.search_lexical("c", "ice rings dust", limit, where)


def _same(got, want, where) -> None:
    """The same ranking: the same scores in the same order, and for each score the same points with the same
    payloads (BM25 ties: points of equal score come in either order; at the cut, either of them)."""
    assert [round(h.score, 5) for h in got] == [round(h.score, 5) for h in want], where
    groups: dict[float, tuple[set[str], set[str]]] = {}
    for mine, theirs in zip(got, want, strict=True):
        pair = groups.setdefault(round(mine.score, 5), (set(), set()))
        pair[0].add(mine.id)
        pair[1].add(theirs.id)
    last = round(got[-1].score, 5)
    assert all(a == b for score, (a, b) in groups.items() if score != last), where
    payloads = {h.id: h.payload for h in want}
    assert all(h.payload == payloads[h.id] for h in got if h.id in payloads), where


@pytest.mark.parametrize("side", ["dense", "lexical"])
def test_a_large_selection_checked_after_the_search_is_the_selection_searched(store, side, monkeypatch):
    s, points = store
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    by_distance = sorted(points, key=lambda p: -float(p.vector @ query))
    near_half = frozenset(p.id for p in by_distance[: N // 2])
    far_half = frozenset(p.id for p in by_distance[N // 2:])  # the dense side finds none of them first
    every_other = frozenset(p.id for p in points[::2])
    taken: list[bool] = []
    real = selection.checked_depth
    monkeypatch.setattr(selection, "checked_depth", lambda *a: taken.append(r := real(*a)) or r)
    for where in (Filter(ids=every_other), Filter(ids=near_half), Filter(ids=far_half),
                  Filter(path_prefix="/r/d1", ids=every_other), Filter(ids=every_other, hidden=frozenset(
                      p.id for p in points[:200]))):
        taken.clear()
        got = _run(s, side, where)
        assert taken and taken[0] is not None, where  # the checked route
        with monkeypatch.context() as m:
            m.setattr(selection, "CHECK_FROM", 10**9)
            want = _run(s, side, where)
        _same(got, want, where)
        assert len(got) == 25 and all(h.id in where.ids and h.id not in where.hidden for h in got)
        if where.path_prefix:
            assert all(h.payload["path"].startswith("/r/d1/") for h in got)


def test_a_small_or_narrow_selection_goes_to_the_search_whole(store, monkeypatch):
    s, points = store
    taken: list[object] = []
    real = selection.checked_depth
    monkeypatch.setattr(selection, "checked_depth", lambda *a: taken.append(r := real(*a)) or r)
    few = frozenset(p.id for p in points[:100])  # under CHECK_FROM: not even counted
    assert all(h.id in few for h in _run(s, "dense", Filter(ids=few))) and taken == []
    narrow = frozenset(p.id for p in points[: int(N * selection.CHECK_SHARE) - 50])
    assert len(narrow) >= selection.CHECK_FROM
    assert all(h.id in narrow for h in _run(s, "dense", Filter(ids=narrow))) and taken == [None]
    assert s.metric is Metric.COSINE
