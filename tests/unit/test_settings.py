import pytest

from indexer.errors import ConfigError
from indexer.settings import load_settings


def test_precedence_flags_over_env_over_config_file(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('store = "qdrant"\ncandidates = 30\ntop_k = 7\nrerank_model = "/models/r.gguf"\n')
    monkeypatch.setenv("INDEXER_CONFIG", str(config))
    monkeypatch.setenv("INDEXER_CANDIDATES", "40")
    s = load_settings(top_k=3, store=None)  # None = flag not given: falls through
    assert (s.store, s.candidates, s.top_k, s.rerank_model) == ("qdrant", 40, 3, "/models/r.gguf")
    assert "top_k" in s.model_fields_set


def test_defaults_without_config(tmp_path, monkeypatch):
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "missing.toml"))
    s = load_settings()
    assert (s.store, s.metric, s.collection, s.top_k, s.candidates, s.rerank_model) == (
        "faiss", "cosine", "default", 10, 50, None,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("collection", "../etc", "collection names"), ("store", "mongo", "store"), ("top_k", 0, "top_k")],
)
def test_invalid_settings_are_config_errors_naming_the_field(field, value, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(**{field: value})


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"store": "mongo"}, "invalid setting store='mongo': unknown store 'mongo'; registered stores: "),
        ({"top_k": 0}, "invalid setting top_k=0: must be at least 1"),
        ({"metric": "jaccard"}, "invalid setting metric='jaccard': use 'cosine', 'dot'"),
    ],
)
def test_invalid_settings_read_as_one_plain_line_without_pydantic_wording(overrides, expected):
    with pytest.raises(ConfigError) as exc:
        load_settings(**overrides)
    text = str(exc.value)
    assert text.startswith(expected) and "\n" not in text
    assert "pydantic" not in text and "Value error" not in text and "validation error" not in text
