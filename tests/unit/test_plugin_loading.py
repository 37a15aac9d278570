"""Plugins are found and built through entry points only (the real importlib.metadata mechanism).

The third-party distribution in tests/fixtures/plugins is on sys.path for the session (tests/conftest.py), as pip
would install it; the broken ones below are written to tmp dirs and put on sys.path the same way.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from indexer.core import registry as plugins
from indexer.errors import ConfigError
from indexer.ports import StoreFactory, VectorStore
from indexer.settings import Settings, load_settings
from indexer.types import Metric
from plugins.filesystem import FilesystemSource


def _install(site: Path, name: str, entry_points: str, module: str) -> None:
    """Write a distribution the way pip lays one out: a module plus <name>-1.0.dist-info with entry_points.txt."""
    (site / f"{name}.py").write_text(module)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    yield path
    monkeypatch.undo()
    plugins.refresh()


def test_built_in_and_third_party_plugins_are_registered() -> None:
    assert {"faiss", "qdrant", "tiny"} <= set(plugins.names(plugins.STORES))
    assert "filesystem" in plugins.names(plugins.SOURCES)
    kinds = [r.kind for r in plugins.load_readers()]
    assert {"text", "markdown", "rst", "code", "html", "pdf", "tiny"} <= set(kinds)
    assert kinds[-1] == "tiny", "third-party readers come after ours, so they win an extension both claim"


def test_a_registered_reader_is_used_by_the_filesystem_source(tmp_path: Path) -> None:
    (tmp_path / "notes.tiny").write_text("; a comment the tiny reader drops\nkept line\n")
    source = FilesystemSource([tmp_path])  # no readers given: every registered one
    (ref,) = list(source.scan())
    doc = source.read(ref)
    assert doc.kind == "tiny" and doc.text == "kept line\n"


def test_stores_are_built_generically_from_recorded_options(tmp_path: Path) -> None:
    for name in ("faiss", "qdrant", "tiny"):
        settings = Settings(data_dir=tmp_path, store=name)
        options = plugins.new_store_options(settings, "notes")
        assert str(tmp_path) in options["path"]
        store = plugins.open_store(name, options, Metric.DOT, settings)
        try:
            assert isinstance(store, VectorStore) and store.metric is Metric.DOT
        finally:
            store.close()
    settings = Settings(data_dir=tmp_path, store="faiss", store_options={"index": "hnsw", "save_every": 5})
    options = plugins.new_store_options(settings, "notes")
    assert options["index"] == "hnsw" and options["save_every"] == 5  # store_options are laid over the defaults
    store = plugins.open_store("faiss", options, Metric.COSINE, settings)
    assert store.index_kind == "hnsw" and store.save_every == 5  # type: ignore[attr-defined]
    store.close()


def test_bad_store_options_are_a_config_error_naming_them(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with pytest.raises(ConfigError, match="colour"):
        plugins.open_store("faiss", {"path": str(tmp_path / "f"), "colour": "red"}, Metric.COSINE, settings)


def test_an_unknown_store_is_refused_listing_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown store 'mongo'; registered stores: .*faiss, qdrant") as exc:
        load_settings(store="mongo")
    assert "tiny" in str(exc.value) and "install its package" in str(exc.value)
    with pytest.raises(ConfigError, match="unknown source 'ftp'; registered sources: filesystem"):
        load_settings(source="ftp")
    assert load_settings(store="tiny").store == "tiny"


def test_a_store_plugin_without_the_factory_methods_is_refused(site: Path) -> None:
    _install(site, "halfstore", "[indexer.stores]\nhalf = halfstore:Half\n", "class Half:\n    name = 'half'\n")
    plugins.refresh()
    assert "half" in plugins.names(plugins.STORES)
    with pytest.raises(ConfigError, match="half.*default_options/from_options.*docs/plugins.md"):
        plugins.store_factory("half")
    assert isinstance(plugins.store_factory("tiny"), StoreFactory)


def test_a_broken_reader_plugin_is_skipped_and_the_others_still_load(site: Path, caplog) -> None:
    _install(site, "brokenreader", "[indexer.readers]\nbroken = brokenreader:Reader\n", "raise ImportError('no lib')\n")
    plugins.refresh()
    with caplog.at_level(logging.WARNING, logger="indexer.core.registry"):
        kinds = {r.kind for r in plugins.load_readers()}
    assert {"markdown", "tiny"} <= kinds
    assert "broken" in caplog.text and "no lib" in caplog.text


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_a_qdrant_server_gets_its_key_and_shards_from_settings_never_from_recorded_options(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, store="qdrant", qdrant_url="http://127.0.0.1:9", qdrant_api_key="secret",
        qdrant_shard_number=3,
    )  # fmt: skip
    options = plugins.new_store_options(settings, "c")
    assert options == {"url": "http://127.0.0.1:9"}  # what the state database records: no key
    store = plugins.open_store("qdrant", options, Metric.COSINE, settings)
    try:
        assert store.distribution == {"shard_number": 3}  # type: ignore[attr-defined]
    finally:
        store.close()
