"""The VectorStore contract: every registered store (FAISS flat and HNSW, Qdrant embedded and server, third-party
plugins) behaves the same.

Importable by a plugin's own tests (``from indexer.plugin_api.testing.store_contract import *`` in a test module,
with the ``make_store`` and ``collection`` fixtures of :mod:`indexer.plugin_api.testing.fixtures` in its
conftest): the suite this project runs on its own stores (tests/contract/) is this one."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from indexer.core.normalization import Normalization, normalize
from indexer.errors import CollectionMismatchError, ConfigError, InputError, StoreError
from indexer.plugin_api.testing.fixtures import StoreFactory
from indexer.ports import VectorStore
from indexer.types import Filter, Metric, Point

DIM = 16


def _unit(vectors: np.ndarray, metric: Metric = Metric.COSINE) -> np.ndarray:
    """What the pipeline hands a store: unit vectors for COSINE (stores check, never re-normalise)."""
    return normalize(vectors, Normalization.L2) if metric is Metric.COSINE else vectors.astype(np.float32)


def _query(rng: np.random.Generator, metric: Metric = Metric.COSINE, dim: int = DIM) -> np.ndarray:
    return _unit(rng.normal(size=dim).astype(np.float32), metric)


def _points(
    n: int, seed: int = 0, dim: int = DIM, paths: list[str] | None = None, metric: Metric = Metric.COSINE
) -> list[Point]:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng.normal(size=(n, dim)).astype(np.float32), metric)
    out = []
    for i in range(n):
        path = paths[i % len(paths)] if paths else f"/data/docs/file{i % 7}.md"
        payload = {"path": path, "file_type": path.rsplit(".", 1)[-1], "chunk": i, "text": f"chunk {i}"}
        out.append(Point(id=str(uuid.uuid4()), vector=vectors[i], payload=payload))
    return out


def _brute_force(points: list[Point], query: np.ndarray, metric: Metric, k: int) -> list[tuple[str, float]]:
    """Reference ranking with numpy; scores in the store's higher-is-better convention."""
    x = np.stack([p.vector for p in points]).astype(np.float64)
    q = query.astype(np.float64)
    if metric is Metric.COSINE:
        scores = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    elif metric is Metric.DOT:
        scores = x @ q
    elif metric is Metric.EUCLID:
        scores = -np.sqrt(((x - q) ** 2).sum(axis=1))
    else:
        scores = -np.abs(x - q).sum(axis=1)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(points[i].id, float(scores[i])) for i in order]


def test_is_a_vector_store(make_store: StoreFactory) -> None:
    store = make_store()
    assert isinstance(store, VectorStore)
    assert store.metric is Metric.COSINE


def test_create_and_meta_round_trip(make_store: StoreFactory, collection: str) -> None:
    store = make_store(Metric.DOT)
    assert store.collection_meta(collection) is None
    store.ensure_collection(collection, DIM, {"model_id": "m1", "normalize": "2"})
    meta = store.collection_meta(collection)
    assert meta == {"model_id": "m1", "normalize": "2", "dimensions": str(DIM), "metric": "dot"}
    # An existing collection is left as it is: new meta is not recorded.
    store.ensure_collection(collection, DIM, {"model_id": "other"})
    assert store.collection_meta(collection) == meta
    assert store.count(collection) == 0
    assert store.list_ids(collection) == set()


def test_existing_collection_with_other_dimensions_is_refused(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    with pytest.raises(CollectionMismatchError, match="dimension"):
        store.ensure_collection(collection, DIM * 2, {})


def test_upsert_overwrites_without_duplicates(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    points = _points(60)
    store.upsert(collection, points)
    assert store.count(collection) == 60
    rng = np.random.default_rng(99)
    replaced = [Point(p.id, _query(rng), {**p.payload, "text": "new"}) for p in points[:10]]
    store.upsert(collection, replaced)
    store.upsert(collection, replaced[:3])  # idempotent
    assert store.count(collection) == 60
    assert store.list_ids(collection) == {p.id for p in points}
    hits = store.search(collection, replaced[0].vector, 60)
    assert len(hits) == 60
    assert len({h.id for h in hits}) == 60, "an overwritten point must not appear twice"
    assert hits[0].id == replaced[0].id
    assert hits[0].payload["text"] == "new"
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_last_duplicate_in_one_batch_wins(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    first, second = _points(2, seed=5)
    store.upsert(collection, [first, Point(first.id, second.vector, {"text": "second"})])
    assert store.count(collection) == 1
    hits = store.search(collection, second.vector, 5)
    assert [h.id for h in hits] == [first.id]
    assert hits[0].payload["text"] == "second"


def test_delete(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    points = _points(40)
    store.upsert(collection, points)
    gone = [p.id for p in points[:15]]
    store.delete(collection, [*gone, str(uuid.uuid4())])  # unknown ids are ignored
    store.delete(collection, gone[:2])  # deleting twice is harmless
    assert store.count(collection) == 25
    assert store.list_ids(collection) == {p.id for p in points[15:]}
    hits = store.search(collection, points[0].vector, 40)
    assert not {h.id for h in hits} & set(gone)
    assert len(hits) == 25


# The metrics a store refuses, by store (or variant) name; a store not listed supports every metric. A
# third-party store that lacks one lists itself here, as the built-ins do.
REFUSED_METRICS: dict[str, frozenset[Metric]] = {
    "faiss": frozenset({Metric.MANHATTAN}),  # FAISS has no L1 index
    "faiss-hnsw": frozenset({Metric.MANHATTAN}),
}


@pytest.mark.parametrize("metric", list(Metric), ids=lambda m: m.value)
def test_search_order_matches_brute_force(
    make_store: StoreFactory, store_kind: str, collection: str, metric: Metric
) -> None:
    refused = REFUSED_METRICS.get(store_kind, frozenset())
    if metric in refused:  # declared: it must say so on open, naming the ones it has
        with pytest.raises(ConfigError, match="choose cosine, dot or euclid"):
            make_store(metric)
        return
    store = make_store(metric)  # any other refusal is a regression (a store gains metrics only by declaring)
    store.ensure_collection(collection, DIM, {})
    points = _points(150, seed=1, metric=metric)
    store.upsert(collection, points)
    assert (store.collection_meta(collection) or {})["metric"] == metric.value
    rng = np.random.default_rng(2)
    for _ in range(5):
        query = _query(rng, metric)
        expected = _brute_force(points, query, metric, 10)
        hits = store.search(collection, query, 10)
        assert [h.id for h in hits] == [e[0] for e in expected]
        np.testing.assert_allclose([h.score for h in hits], [e[1] for e in expected], rtol=1e-4, atol=1e-4)
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))


def test_hits_carry_the_payload(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    point = Point(
        str(uuid.uuid4()),
        _unit(np.ones(DIM, dtype=np.float32)),
        {"path": "/r/a/x.md", "file_type": "md", "start_line": 3, "heading": ["A", "B"], "text": "héllo"},
    )
    store.upsert(collection, [point])
    (hit,) = store.search(collection, _unit(np.ones(DIM, dtype=np.float32)), 5)
    assert hit.id == point.id
    for key, value in point.payload.items():
        assert hit.payload[key] == value
    assert hit.payload["dirs"] == ["/", "/r", "/r/a"]


PATHS = ["/r/a/x.md", "/r/a/sub/y.py", "/r/ab/z.md", "/r/a", "/r/b/w.txt", "/q/a/v.md"]
OTHERS = [f"/other/f{i}.rst" for i in range(30)]
ALL = set(PATHS + OTHERS)
FILTER_CASES = [
    (Filter(path_prefix="/r/a"), {"/r/a/x.md", "/r/a/sub/y.py", "/r/a"}),  # not /r/ab
    (Filter(path_prefix="/r/a/"), {"/r/a/x.md", "/r/a/sub/y.py", "/r/a"}),
    (Filter(path_prefix="/r/a/x.md"), {"/r/a/x.md"}),
    (Filter(path_prefix="/r"), {p for p in PATHS if p.startswith("/r/")}),
    (Filter(path_prefix="/"), ALL),
    (Filter(path_prefix="/nowhere"), set()),
    (Filter(file_types=("md",)), {"/r/a/x.md", "/r/ab/z.md", "/q/a/v.md"}),
    (Filter(file_types=("py", "txt")), {"/r/a/sub/y.py", "/r/b/w.txt"}),
    (Filter(path_prefix="/r", file_types=("md",)), {"/r/a/x.md", "/r/ab/z.md"}),
    (Filter(), ALL),
]


def test_filters_return_the_true_top_k_of_matching_points(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    # Few matching points among many: a store that post-filters a small candidate list would miss them.
    points = _points(len(PATHS + OTHERS) * 9, seed=3, paths=PATHS + OTHERS)
    store.upsert(collection, points)
    rng = np.random.default_rng(4)
    for where, allowed in FILTER_CASES:
        query = _query(rng)
        matching = [p for p in points if p.payload["path"] in allowed]
        expected = _brute_force(matching, query, Metric.COSINE, 8) if matching else []
        hits = store.search(collection, query, 8, where)
        assert [h.id for h in hits] == [e[0] for e in expected], where
        assert all(h.payload["path"] in allowed for h in hits), where


def test_count_and_list_ids(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    points = _points(300, seed=6)  # more than one upsert batch
    store.upsert(collection, points)
    assert store.count(collection) == 300
    assert store.list_ids(collection) == {p.id for p in points}


def test_drop(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {"model_id": "m1"})
    store.upsert(collection, _points(10))
    store.drop(collection)
    assert store.collection_meta(collection) is None
    with pytest.raises(StoreError):
        store.search(collection, _unit(np.ones(DIM, dtype=np.float32)), 5)
    store.drop(collection)  # dropping a missing collection is a no-op
    store.ensure_collection(collection, DIM * 2, {"model_id": "m2"})
    assert store.count(collection) == 0
    assert (store.collection_meta(collection) or {})["model_id"] == "m2"


def test_reopen_after_close_keeps_everything(make_store: StoreFactory, collection: str) -> None:
    store = make_store(Metric.EUCLID)
    store.ensure_collection(collection, DIM, {"model_id": "m1"})
    points = _points(120, seed=7, metric=Metric.EUCLID)
    store.upsert(collection, points)
    store.delete(collection, [points[0].id])
    query = points[5].vector
    before = store.search(collection, query, 10)
    store.close()

    reopened = make_store(Metric.COSINE)  # the recorded metric wins over the store's default
    assert reopened.collection_meta(collection) == {
        "model_id": "m1",
        "dimensions": str(DIM),
        "metric": "euclid",
    }
    assert reopened.count(collection) == 119
    after = reopened.search(collection, query, 10)
    assert [h.id for h in after] == [h.id for h in before]
    assert after[0].id == points[5].id
    assert after[0].score == pytest.approx(0.0, abs=1e-3)


def test_dimension_mismatch_is_an_error(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    store.upsert(collection, _points(3))
    with pytest.raises(CollectionMismatchError, match="dimensions"):
        store.upsert(collection, _points(2, dim=DIM + 1))
    with pytest.raises(CollectionMismatchError, match="dimensions"):
        store.search(collection, _unit(np.ones(DIM - 1, dtype=np.float32)), 5)
    assert store.count(collection) == 3


def test_missing_collection_and_bad_ids(make_store: StoreFactory, collection: str) -> None:
    store = make_store()
    with pytest.raises(StoreError, match="does not exist"):
        store.upsert(collection, _points(1))
    with pytest.raises(StoreError, match="does not exist"):
        store.search(collection, _unit(np.ones(DIM, dtype=np.float32)), 5)
    store.ensure_collection(collection, DIM, {})
    with pytest.raises(InputError, match="UUID"):
        store.upsert(collection, [Point("not-a-uuid", _unit(np.ones(DIM, dtype=np.float32)), {})])
    assert store.search(collection, _unit(np.ones(DIM, dtype=np.float32)), 5) == []


def test_cosine_takes_unit_vectors_and_refuses_others(make_store: StoreFactory, collection: str) -> None:
    """Normalization is decided once (indexer.core.normalization); a cosine store checks it and never re-normalises."""
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    good = _points(3, seed=8)
    store.upsert(collection, good)
    raw = Point(str(uuid.uuid4()), np.full(DIM, 3.0, dtype=np.float32), {"text": "raw"})
    with pytest.raises(InputError, match="unit-length"):
        store.upsert(collection, [raw])
    with pytest.raises(InputError, match="unit-length"):
        store.search(collection, np.full(DIM, 3.0, dtype=np.float32), 5)
    assert store.count(collection) == 3 and store.list_ids(collection) == {p.id for p in good}
    zero = Point(str(uuid.uuid4()), np.zeros(DIM, dtype=np.float32), {"text": "empty"})
    store.upsert(collection, [zero])  # an empty text embeds as zeros: accepted
    assert store.count(collection) == 4


def test_hidden_points_are_never_returned_filtered_or_not(make_store: StoreFactory, collection: str) -> None:
    """Filter.hidden (points written but not committed: a large file mid-write) is excluded inside the search:
    the top k are the true top k of the other points, with or without other clauses."""
    store = make_store()
    store.ensure_collection(collection, DIM, {})
    points = _points(len(PATHS + OTHERS) * 9, seed=5, paths=PATHS + OTHERS)
    store.upsert(collection, points)
    rng = np.random.default_rng(6)
    hidden = frozenset(p.id for p in points if p.payload["path"] in ("/r/a/x.md", "/other/f3.rst") or
                       p.payload["chunk"] % 3 == 0)  # fmt: skip
    for where, allowed in [(Filter(hidden=hidden), ALL), (Filter(path_prefix="/r/a", hidden=hidden),
                                                          {"/r/a/x.md", "/r/a/sub/y.py", "/r/a"})]:  # fmt: skip
        query = _query(rng)
        visible = [p for p in points if p.id not in hidden and p.payload["path"] in allowed]
        expected = _brute_force(visible, query, Metric.COSINE, 8)
        hits = store.search(collection, query, 8, where)
        assert [h.id for h in hits] == [e[0] for e in expected], where.path_prefix
        assert not {h.id for h in hits} & hidden
