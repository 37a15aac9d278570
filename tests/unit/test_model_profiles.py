"""Model profiles recognised from GGUF metadata, and the prompts and chunk size they give a new collection."""

from __future__ import annotations

import pytest

from indexer.index.prompts import resolve
from indexer.models.profiles import QWEN3_EMBEDDING_QUERY, profile_for


@pytest.mark.parametrize(
    ("metadata", "family"),
    [
        ({"general.architecture": "qwen3", "general.name": "Qwen3-Embedding-0.6B"}, "qwen3-embedding"),
        ({"general.architecture": "qwen3", "general.basename": "Qwen3-Reranker"}, "qwen3-reranker"),
        ({"general.architecture": "bert", "general.name": "bge-m3"}, "bge-m3"),
        ({"general.architecture": "bert", "general.name": "BGE Reranker v2 M3"}, "bge-reranker-v2-m3"),
        ({"general.architecture": "jina-bert-v3", "general.name": "jina-embeddings-v3"}, "jina-embeddings-v3"),
        ({"general.architecture": "jina-bert-v2", "general.name": "jina-embeddings-v2-base-zh"},
         "jina-embeddings-v2"),
    ],
)
def test_each_family_of_the_seed_table_is_recognised(metadata, family):
    profile = profile_for(metadata)
    assert profile is not None and profile.family == family


def test_unknown_models_get_no_profile():
    assert profile_for({"general.architecture": "bert", "general.name": "all-MiniLM-L6-v2"}) is None
    assert profile_for({"general.architecture": "qwen3", "general.name": "Qwen3-8B"}) is None  # a chat model
    assert profile_for({}) is None


def test_a_profile_prompts_only_queries_for_qwen3_embedding_and_settings_win():
    profile = profile_for({"general.architecture": "qwen3", "general.name": "Qwen3-Embedding-4B"})
    assert profile is not None
    prompts = resolve(query_setting=None, document_setting=None, gguf_metadata={},
                      profile_query=profile.query_prompt, profile_document=profile.document_prompt)
    assert prompts.query == QWEN3_EMBEDDING_QUERY and prompts.document == "" and prompts.source == "profile"
    mine = resolve(query_setting="q: ", document_setting=None, gguf_metadata={},
                   profile_query=profile.query_prompt)
    assert mine.query == "q: " and mine.source == "settings"
    # prompts the GGUF itself records win over the family's
    own = resolve(query_setting=None, document_setting=None, gguf_metadata={"indexer.prompt.query": "x: "},
                  profile_query=profile.query_prompt)
    assert own.source == "gguf"
