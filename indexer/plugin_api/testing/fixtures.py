"""The fixtures the contract suites take: ``make_store(metric)`` and a fresh ``collection`` name; the plugin's
conftest adds ``store_kind`` (its entry point's name). Stores are built the way the core builds them: the
plugin's ``default_options`` for a new collection, then ``from_options`` (indexer.core.registry)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.core import registry
from indexer.ports import VectorStore
from indexer.settings import Settings
from indexer.types import Metric

StoreFactory = Callable[..., VectorStore]


def open_store(kind: str, location: Path, metric: Metric = Metric.COSINE, **settings: Any) -> VectorStore:
    """Store plugin ``kind`` for a new collection in the data directory ``location`` (``settings``: fields of
    :class:`~indexer.settings.Settings`, such as a server's URL)."""
    config = Settings(data_dir=location, store=kind, **settings)
    options = registry.new_store_options(config, "contract")
    return registry.open_store(kind, options, metric, config)


@pytest.fixture
def collection() -> str:
    """A fresh collection name per test (a shared server keeps collections between tests)."""
    return f"contract_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """``make_store(metric=...)`` opens the plugin's store on this test's folder; each is closed after."""
    opened: list[VectorStore] = []

    def factory(metric: Metric = Metric.COSINE) -> VectorStore:
        store = open_store(store_kind, tmp_path, metric)
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        store.close()
