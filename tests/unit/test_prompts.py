"""Prompt resolution order and the prompted embedder (fake inner embedder: our own logic only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from indexer.core.normalization import Normalization
from indexer.index.prompts import GGUF_DOCUMENT, GGUF_QUERY, PromptedEmbedder, Prompts, recorded, resolve, with_prompt


class _Echo:
    model_id = "m-1"
    dimensions = 2
    similarity = "cosine"
    max_tokens = 8
    media_kinds = ()  # text only

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed_batch(self, texts: Sequence[str], normalize: object) -> np.ndarray:
        self.seen.extend(texts)
        return np.zeros((len(texts), 2), dtype=np.float32)


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


def test_prompted_embedder_prefixes_counts_and_texts_and_keys_its_cache() -> None:
    inner = _Echo()
    emb = PromptedEmbedder(inner, "query: ")
    assert emb.count_tokens("a b") == 3
    emb.embed_batch(["a", "b"], Normalization.L2)
    assert inner.seen == ["query: a", "query: b"]
    assert emb.model_id.startswith("m-1+prompt-") and emb.model_id != PromptedEmbedder(inner, "passage: ").model_id
    assert with_prompt(inner, "") is inner
