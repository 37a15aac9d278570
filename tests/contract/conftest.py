"""Store factories for the VectorStore contract suite: every registered store passes the same tests.

The suite runs over every ``indexer.stores`` entry point (built-ins and third-party plugins alike: registering is
all a store needs to be tested), each built the way the core builds it (``indexer.core.registry.new_store_options`` and
``open_store``), plus variants of the built-ins chosen by settings (FAISS HNSW, a Qdrant server).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.core import registry as plugins
from indexer.errors import ConfigError
from indexer.ports import VectorStore
from indexer.settings import Settings
from indexer.types import Metric

StoreFactory = Callable[..., VectorStore]

# Variant id -> (registered store, settings that select the variant).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "faiss-hnsw": ("faiss", {"faiss_index": "hnsw"}),
    "qdrant-server": (
        "qdrant",
        {"qdrant_url": os.environ.get("QDRANT_URL"), "qdrant_api_key": os.environ.get("QDRANT_API_KEY")},
    ),
}
SERVER_VARIANTS = {"qdrant-server"}


def _params() -> list[Any]:
    params: list[Any] = list(plugins.names(plugins.STORES))
    for variant in VARIANTS:
        if variant in SERVER_VARIANTS:
            params.append(
                pytest.param(
                    variant,
                    marks=[
                        pytest.mark.qdrant_server,
                        pytest.mark.skipif(
                            not os.environ.get("QDRANT_URL"),
                            reason="QDRANT_URL is not set (no Qdrant server to test)",
                        ),
                    ],
                )
            )
        else:
            params.append(variant)
    return params


def _make(kind: str, location: Path, metric: Metric) -> VectorStore:
    store, overrides = VARIANTS.get(kind, (kind, {}))
    settings = Settings(data_dir=location, store=store, **overrides)
    try:
        options = plugins.new_store_options(settings, "contract")
    except ConfigError as exc:  # e.g. qdrant_attach: it only attaches to collections made elsewhere
        pytest.skip(f"{store} cannot create a collection from settings: {exc}")
    return plugins.open_store(store, options, metric, settings)


@pytest.fixture(params=_params())
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
            if store_kind in SERVER_VARIANTS:
                store.drop(collection)
        finally:
            store.close()
