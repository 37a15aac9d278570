"""indexer.core.location (standard library only, for the fast `indexer search`) gives the data directory and
collection that the full settings give, in every precedence case."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.core.location import data_dir_and_collection
from indexer.errors import ConfigError
from indexer.settings import load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for key in ("INDEXER_DATA_DIR", "INDEXER_COLLECTION", "indexer_data_dir", "indexer_collection"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


def _same(flag: str | None = None) -> tuple[Path, str]:
    light = data_dir_and_collection(flag)
    full = load_settings(collection=flag)
    assert light == (full.data_dir, full.collection)
    return light


def test_defaults(tmp_path):
    assert _same() == (tmp_path / "xdg-data" / "indexer", "default")


def test_config_file_then_environment_then_flag(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text(f'data_dir = "{tmp_path / "from-toml"}"\ncollection = "notes"\n')
    assert _same() == (tmp_path / "from-toml", "notes")
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "from-env"))
    assert _same() == (tmp_path / "from-env", "notes")
    monkeypatch.setenv("INDEXER_COLLECTION", "papers")
    assert _same() == (tmp_path / "from-env", "papers")
    assert _same("flagged") == (tmp_path / "from-env", "flagged")


def test_environment_names_are_case_insensitive(tmp_path, monkeypatch):
    monkeypatch.setenv("indexer_data_dir", str(tmp_path / "lower"))
    assert _same() == (tmp_path / "lower", "default")


@pytest.mark.parametrize("bad", ["", ".hidden", "has space", "a/b"])
def test_an_invalid_collection_is_left_to_the_settings_to_explain(bad):
    assert data_dir_and_collection(bad) is None
    with pytest.raises(ConfigError):
        load_settings(collection=bad)


def test_a_broken_config_file_is_left_to_the_settings_to_explain(tmp_path):
    (tmp_path / "config.toml").write_text("data_dir = [unclosed\n")
    assert data_dir_and_collection() is None
    with pytest.raises(ConfigError):
        load_settings()


@pytest.mark.parametrize(
    ("name", "ok"),
    [("notes", True), ("qdrant.wiki", True), ("a-b_c.1", True), ("x" * 200, True), ("café", False),
     (".hidden", False), ("-x", False), ("_x", False), ("a b", False), ("a/b", False), ("", False), ("x" * 201, False)],
)
def test_one_collection_name_rule_for_settings_the_http_schema_and_the_stores(name, ok):
    """The rule is written once (indexer.core.location): settings, the HTTP API's schema and the FAISS store's
    folder names agree on every name ("café" passed the settings and failed the schema before)."""
    import re

    from pydantic import ValidationError

    from indexer.core.location import COLLECTION_PATTERN, valid_collection_name
    from indexer.server.schemas import SearchBody
    from plugins.faiss.faiss_store import _NAME

    assert valid_collection_name(name) is ok
    assert (re.fullmatch(COLLECTION_PATTERN, name) is not None) is ok
    assert (_NAME.fullmatch(name) is not None) is ok
    try:
        SearchBody(query="q", collection=name)
        schema_ok = True
    except ValidationError:
        schema_ok = False
    assert schema_ok is ok
