"""A collection keeps the weight file its identity records when the default weight type changes."""

from __future__ import annotations

import pytest

import indexer
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow


def test_a_collection_built_with_f16_keeps_it_under_a_bf16_default(tmp_path, monkeypatch, embed_model_f16_path,
                                                                     embed_model_bf16_path):
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    root = write_corpus(tmp_path / "docs")
    with indexer.open_collection("old", embed_model=str(embed_model_f16_path)) as col:
        col.index([root])
        before = col.search("glaciers carve valleys", k=3).hits
    monkeypatch.setattr("indexer.models.native.chosen_quant", lambda: "bf16")
    # the default name now means bf16, yet it names the collection's recorded f16 file: no mismatch
    with indexer.open_collection("old", embed_model="all-MiniLM-L6-v2") as col:
        assert col.record is not None and col.record.model_path == str(embed_model_f16_path)
        after = col.search("glaciers carve valleys", k=3).hits
        assert [h.chunk_id for h in after] == [h.chunk_id for h in before]
        assert [round(h.score, 5) for h in after] == [round(h.score, 5) for h in before]
    # a new collection gets the new default
    with indexer.open_collection("new") as col:
        col.index([root])
        assert col.record is not None and col.record.model_path.endswith("all-MiniLM-L6-v2-bf16.gguf")
    # an explicit other weight type is still refused for the old collection
    with indexer.open_collection("old", embed_model="all-MiniLM-L6-v2:bf16") as col, pytest.raises(
        indexer.CollectionMismatchError
    ):
        col.search("glaciers", k=1)
