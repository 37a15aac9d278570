"""Settings validation errors become one ConfigError line with the field, the bad value and what is allowed;
pydantic's own wording never reaches the user."""

from __future__ import annotations

import pytest

from indexer.errors import ConfigError
from indexer.settings import load_settings


def _message(**overrides) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(**overrides)
    text = str(info.value)
    assert "\n" not in text
    assert "Input should" not in text and "pydantic" not in text and "Value error," not in text
    return text


def test_a_bad_choice_names_field_value_and_choices():
    text = _message(metric="cosin")
    assert "metric='cosin'" in text and "'cosine'" in text and "'euclid'" in text and "INDEXER_METRIC" in text


def test_a_number_out_of_range_or_not_a_number():
    assert "top_k=0" in _message(top_k=0) and "at least 1" in _message(top_k=0)
    assert "whole number" in _message(candidates="lots")


def test_several_problems_in_one_line():
    text = _message(metric="x", top_k=-1)
    assert "metric" in text and "top_k" in text and ";" in text


def test_a_validator_message_is_kept(monkeypatch):
    text = _message(collection="../etc")
    assert "collection='../etc'" in text and "letters" in text


def test_a_bad_environment_variable_and_config_file(monkeypatch, tmp_path):
    monkeypatch.setenv("INDEXER_TOP_K", "ten")
    assert "top_k='ten'" in _message()
    monkeypatch.delenv("INDEXER_TOP_K")
    config = tmp_path / "config.toml"
    config.write_text("top_k = [\n", encoding="utf-8")
    monkeypatch.setenv("INDEXER_CONFIG", str(config))
    text = _message()
    assert str(config) in text and "TOML" in text
