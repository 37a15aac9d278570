"""Shared fixtures: the real models every integration test uses.

The tests never use the user's model cache: for the whole session ``INDEXER_MODELS_DIR`` points at a test
cache keyed by the converter version (``<user cache>/indexer-tests/models-<version>``, or
``$INDEXER_TEST_MODELS_DIR``). The default embedding model is built there once per machine and converter
version (fetched from the package index, converted by this commit's converter); a file written by another
converter version is rebuilt (indexer.models.cache checks ``indexer.converter_version``).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TEST_RERANKER = FIXTURES / "models" / "test-reranker-q8_0.gguf"
TEST_MODELS_ENV = "INDEXER_TEST_MODELS_DIR"
USER_MODELS_DIR = os.environ.get("INDEXER_MODELS_DIR")  # as the user set it (never used by the tests)
THIRD_PARTY_PLUGINS = FIXTURES / "plugins"  # a third-party plugin distribution (see its README.md)


def _install_third_party_plugin() -> None:
    """Install the test's third-party plugin the way pip does: its package and dist-info folder on sys.path.

    ``importlib.metadata`` then finds its entry points like those of any installed distribution. Done when this
    conftest is imported, before any test module or nested conftest (the contract suite's parameters) asks."""
    if str(THIRD_PARTY_PLUGINS) not in sys.path:
        sys.path.insert(0, str(THIRD_PARTY_PLUGINS))
        importlib.invalidate_caches()
    from indexer.core import registry as plugins

    plugins.refresh()


_install_third_party_plugin()


def models_dir_for_tests() -> Path:
    """Where the tests keep their models: ``$INDEXER_TEST_MODELS_DIR``, else a per-machine cache folder
    keyed by the converter version (a changed converter gets a fresh folder and rebuilds)."""
    explicit = os.environ.get(TEST_MODELS_ENV)
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_cache_dir

    from indexer.models.convert import CONVERTER_VERSION

    return Path(user_cache_dir("indexer-tests")) / f"models-{CONVERTER_VERSION}"


def pytest_configure(config: pytest.Config) -> None:
    # for the whole session, subprocesses (CLI tests) included
    os.environ["INDEXER_MODELS_DIR"] = str(models_dir_for_tests())


@pytest.fixture(scope="session")
def embed_model_path() -> Path:
    """The default embedding model (all-MiniLM-L6-v2 at this CPU's default weight type: bf16 where the CPU has
    native bf16, else f16), built offline from the PyPI wheel."""
    from indexer.models import ensure_model

    return ensure_model()


@pytest.fixture(scope="session")
def embed_model_f16_path() -> Path:
    from indexer.models import ensure_model

    return ensure_model(quant="f16")


@pytest.fixture(scope="session")
def embed_model_bf16_path() -> Path:
    from indexer.models import ensure_model

    return ensure_model(quant="bf16")


@pytest.fixture(scope="session")
def embed_model_q8_path() -> Path:
    from indexer.models import ensure_model

    return ensure_model(quant="q8_0")


@pytest.fixture(scope="session")
def q8_runs() -> bool:
    """Whether this machine's llama.cpp runs q8_0 weights (the native probe's verdict: llama-cpp-python 0.3.36
    built natively on an AMX CPU without the fix of tools/build_llama_cpp.py dies on them)."""
    from indexer.models import native

    return native.probe().runs("q8_0")


@pytest.fixture(scope="session")
def embed_model_alt_path(q8_runs: bool) -> Path:
    """A build of the default model at another weight type than the default one, runnable here (q8_0 where it
    runs and is not the default, else f16 or bf16): what the reindex and model-mismatch tests switch to."""
    from indexer.models import default_quant, ensure_model

    default = default_quant()
    alt = next(q for q in ("q8_0", "f16", "bf16") if q != default and (q8_runs or q != "q8_0"))
    return ensure_model(quant=alt)


@pytest.fixture(scope="session")
def reranker_model_path(q8_runs: bool) -> Path:
    """The committed test reranker (distilled from all-MiniLM-L6-v2; a fixture, not a product default); its f16
    twin (tests/twins.py) where this machine cannot run q8_0."""
    assert TEST_RERANKER.exists(), f"missing test fixture {TEST_RERANKER}"
    if q8_runs:
        return TEST_RERANKER
    from tests.twins import f16_twin

    return f16_twin(TEST_RERANKER, models_dir_for_tests() / "test-reranker-f16.gguf")


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path_factory, monkeypatch):
    """No test reads the user's config file or writes to the user's data directory."""
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path_factory.getbasetemp() / "no-config.toml"))
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    for var in ("INDEXER_COLLECTION", "INDEXER_STORE", "INDEXER_METRIC", "INDEXER_RERANK_MODEL", "INDEXER_EMBED_MODEL"):
        monkeypatch.delenv(var, raising=False)
