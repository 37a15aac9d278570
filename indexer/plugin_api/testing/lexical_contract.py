"""The lexical index contract: every store keeps BM25 search in step with its points (upsert, overwrite, delete,
filters), and builds it for a collection made before it had one, without touching the vectors.

Importable by a plugin's own tests (``from indexer.plugin_api.testing.lexical_contract import *`` in a test module,
with the ``make_store`` and ``collection`` fixtures of :mod:`indexer.plugin_api.testing.fixtures` in its
conftest): the suite this project runs on its own stores (tests/contract/) is this one."""

from __future__ import annotations

import uuid
from typing import Protocol, cast

import numpy as np
import pytest

from indexer.plugin_api.testing.fixtures import StoreFactory
from indexer.ports import LexicalSearch, VectorStore, lexical_index
from indexer.search.lexical import LEXICAL_VERSION
from indexer.types import Filter, Metric, Point

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


class LexicalStore(VectorStore, LexicalSearch, Protocol):
    """A vector store that keeps a lexical index (both ports)."""


def _lexical(store: VectorStore) -> LexicalStore:
    if lexical_index(store) is None:
        pytest.skip(f"{store.name} keeps no lexical index (an optional port)")
    return cast(LexicalStore, store)


def _filled(make_store: StoreFactory, collection: str) -> tuple[LexicalStore, list[Point]]:
    store = _lexical(make_store(Metric.COSINE))
    store.ensure_collection(collection, DIM, {"m": "1"})
    points = [_point(p, t, i) for i, (p, t) in enumerate(TEXTS.items())]
    store.upsert(collection, points)
    assert store.has_lexical(collection)
    assert store.lexical_version(collection) == LEXICAL_VERSION  # a new collection: the current analyzer's terms
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
    assert store.count(collection) == 0


def test_ensure_lexical_is_a_no_op_on_a_current_collection(make_store: StoreFactory, collection: str) -> None:
    store, _ = _filled(make_store, collection)
    assert store.ensure_lexical(collection) is False
    assert _paths(store, collection, "ERR_QUOTA_7731") == ["/r/a/error.md"]
