"""The fast GGUF header reader (indexer.models.gguf_header) agrees with gguf-py's full reader on real models,
and refuses what is not GGUF or is cut short."""

from __future__ import annotations

import gguf
import pytest

from indexer.errors import ModelError
from indexer.models import native
from indexer.models.cache import KEY_CONVERTER_VERSION
from indexer.models.gguf_header import read_header


def test_tensor_table_and_values_equal_gguf_py(embed_model_path, reranker_model_path):
    for path in (embed_model_path, reranker_model_path):
        full = gguf.GGUFReader(str(path))
        keys = ["general.architecture", "general.name", KEY_CONVERTER_VERSION, "bert.context_length"]
        header = read_header(path, keys)
        assert header.tensors == [
            (tuple(int(d) for d in t.shape), int(t.tensor_type)) for t in full.tensors
        ]
        for key in keys:
            field = full.fields.get(key)
            assert header.values.get(key) == (None if field is None else field.contents()), key


def test_not_gguf_or_truncated_is_a_clear_error(tmp_path, embed_model_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_header(text)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(embed_model_path.read_bytes()[:5000])  # inside the vocabulary
    with pytest.raises(ValueError, match="truncated"):
        read_header(cut)
    with pytest.raises(ModelError, match="not a readable GGUF file"):
        native.weight_types(cut)
