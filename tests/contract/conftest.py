"""Store factories for the VectorStore contract suite: every registered store passes the same tests.

The suite runs over every ``indexer.stores`` entry point (built-ins and third-party plugins alike: registering is
all a store needs to be tested), each built the way the core builds it (``indexer.core.registry.new_store_options`` and
``open_store``), plus variants of the built-ins chosen by settings (FAISS HNSW, a Qdrant server).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.core import registry as plugins
from indexer.errors import ConfigError
from indexer.plugin_api.testing import fixtures
from indexer.plugin_api.testing.fixtures import StoreFactory
from indexer.ports import VectorStore
from indexer.settings import Settings
from indexer.types import Metric

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


# Where the attached store knowingly differs from the contract (strict xfail: a test that starts to pass fails,
# so the list stays true). Found when the contract first ran against it (it was skipped whole before).
ATTACH_DIFFERS = {
    "test_create_and_meta_round_trip": "an attachment's meta is recorded when it is attached, not by the store",
    "test_drop": "drop deletes our points; the attachment (and its meta) stays until `indexer qdrant detach`",
    "test_reopen_after_close_keeps_everything": "meta is the attachment's, not what ensure_collection was given",
    "test_missing_collection_and_bad_ids": "one attachment is one collection: any name maps to it",
    "test_hits_carry_the_payload": "payloads are mapped into the foreign layout; 'dirs' does not come back",
}


def _attached_store(location: Path, metric: Metric, marker: str, dimensions: int) -> VectorStore:
    """The qdrant_attach store (it never creates collections) over a foreign collection made for the test: a
    named vector of the test module's size and the asked metric, LangChain's payload layout."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    distance = {
        Metric.COSINE: qm.Distance.COSINE, Metric.DOT: qm.Distance.DOT, Metric.EUCLID: qm.Distance.EUCLID,
        Metric.MANHATTAN: qm.Distance.MANHATTAN,
    }[metric]  # fmt: skip
    folder, name = location / "theirs-qdrant", f"theirs_{metric.value}"
    client = QdrantClient(path=str(folder))  # "their" client makes the collection, then lets go of the folder
    try:
        if not client.collection_exists(name):
            vectors = {"dense": qm.VectorParams(size=dimensions, distance=distance)}
            client.create_collection(name, vectors_config=vectors)
    finally:
        client.close()
    options = {
        "qdrant_path": str(folder),
        "collection": name,
        "vector": "dense",
        "layout": {"kind": "langchain", "text_field": "page_content", "metadata_field": "metadata",
                   "source_field": "metadata.source"},
        "marker": marker,
        "meta": {"dimensions": str(dimensions)},
    }  # fmt: skip
    factory = plugins.store_factory("qdrant_attach")
    store: VectorStore = factory.from_options(options, metric, Settings(data_dir=location, store="qdrant_attach"))
    return store


def _make(kind: str, location: Path, metric: Metric, collection: str = "contract", dims: int = 16) -> VectorStore:
    if kind == "qdrant_attach":
        return _attached_store(location, metric, collection, dims)
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


collection = fixtures.collection  # a fresh collection name per test (the suites' fixture)


@pytest.fixture
def make_store(
    store_kind: str, tmp_path: Path, collection: str, request: pytest.FixtureRequest
) -> Iterator[StoreFactory]:
    """``make_store(metric=...)`` opens a store on this test's location; each is closed (and dropped) after."""
    opened: list[VectorStore] = []
    if store_kind == "qdrant_attach" and request.node.originalname in ATTACH_DIFFERS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=ATTACH_DIFFERS[request.node.originalname]))

    def factory(metric: Metric = Metric.COSINE) -> VectorStore:
        store = _make(store_kind, tmp_path, metric, collection, getattr(request.module, "DIM", 16))
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        try:
            if store_kind in SERVER_VARIANTS:
                store.drop(collection)
        finally:
            store.close()
