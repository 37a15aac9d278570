"""Prompt resolution order (our own logic only; the model handle that applies them: test_model_handle.py)."""

from __future__ import annotations

from indexer.index.prompts import GGUF_DOCUMENT, GGUF_QUERY, Prompts, recorded, resolve


def test_settings_win_then_gguf_then_catalogue() -> None:
    gguf = {GGUF_QUERY: "search_query: ", GGUF_DOCUMENT: "search_document: "}
    assert resolve(query_setting="q: ", document_setting=None, gguf_metadata=gguf) == Prompts("q: ", "", "settings")
    assert resolve(query_setting=None, document_setting=None, gguf_metadata=gguf) == Prompts(
        "search_query: ", "search_document: ", "gguf"
    )
    got = resolve(
        query_setting=None, document_setting=None, gguf_metadata={}, catalogue_query="query: ",
        catalogue_document="passage: ",
    )
    assert got == Prompts("query: ", "passage: ", "catalogue")
    assert resolve(query_setting=None, document_setting=None, gguf_metadata={}) == Prompts()


def test_recorded_prompts_default_to_none_for_old_collections() -> None:
    assert recorded({}) == Prompts("", "", "collection")
    assert recorded(Prompts("query: ", "passage: ").meta()) == Prompts("query: ", "passage: ", "collection")
