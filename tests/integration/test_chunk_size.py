"""The chunk size: the model's catalogue value for new collections (128 tokens for all-MiniLM-L6-v2), a setting
to choose another, recorded with the collection and kept (a differing setting is not applied to it)."""

from __future__ import annotations

import logging

import pytest

import indexer
from indexer.errors import ConfigError
from indexer.index.chunking import META_CHUNK_TOKENS
from tests.integration.corpus import write_many

pytestmark = pytest.mark.slow


def _max_chunk_tokens(col: indexer.Collection) -> int:
    db = col.state._db
    return int(db.execute("SELECT MAX(n_tokens) FROM chunks WHERE collection=?", (col.name,)).fetchone()[0])


def test_the_catalogue_model_chunks_at_128_tokens(tmp_path, embed_model_path):
    corpus = write_many(tmp_path / "corpus", 4, paragraphs=12)  # ~350 tokens per file
    with indexer.open_collection("catalogued", embed_model="all-MiniLM-L6-v2") as col:
        col.index([corpus])
        assert (col.store.collection_meta(col.name) or {})[META_CHUNK_TOKENS] == "128"
        assert 100 < _max_chunk_tokens(col) <= 128
        assert col.status()["chunk_tokens"] == 128
    with indexer.open_collection("by-path", embed_model=str(embed_model_path)) as col:  # no catalogue entry
        col.index([corpus])
        assert 128 < _max_chunk_tokens(col) <= 256


def test_a_chosen_size_is_recorded_and_kept(tmp_path, embed_model_path, caplog):
    corpus = write_many(tmp_path / "corpus", 3, paragraphs=8)
    with indexer.open_collection("small", chunk_tokens=64) as col:
        col.index([corpus])
        assert _max_chunk_tokens(col) <= 64
        first = col.status()["chunks"]
    more = write_many(tmp_path / "more", 2, paragraphs=8)
    with caplog.at_level(logging.WARNING), indexer.open_collection("small", chunk_tokens=200) as col:
        col.index([more])
        assert _max_chunk_tokens(col) <= 64  # the collection's size, not the new setting
        assert col.status()["chunks"] > first
    assert any("chunked at 64 tokens" in r.getMessage() for r in caplog.records)


def test_a_size_beyond_the_model_limit_is_refused(tmp_path, embed_model_path):
    corpus = write_many(tmp_path / "corpus", 1)
    with indexer.open_collection("huge", chunk_tokens=1000) as col, pytest.raises(ConfigError, match="at most 256"):
        col.index([corpus])
    with indexer.open_collection("huge") as col:
        assert col.record is None  # nothing half-made
