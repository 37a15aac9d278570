"""Query and document prompts reach the model, are recorded with the collection, and a change is refused."""

from __future__ import annotations

import numpy as np
import pytest

import indexer
from indexer.core.normalization import Normalization
from indexer.errors import CollectionMismatchError
from indexer.index.prompts import META_DOCUMENT, META_QUERY
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

DOC = "Plant tomato seedlings after the last frost and water them deeply twice a week."
QUERY = "when should tomatoes go in the ground"


def _cos(col: indexer.Collection, a: str, b: str) -> float:
    va, vb = col.embedder.embed_batch([a, b], Normalization.L2)
    return float(np.dot(va, vb))


def test_prompts_are_applied_recorded_and_enforced(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", {"garden.txt": DOC + "\n"})
    with indexer.open_collection("prompted", query_prompt="query: ", document_prompt="passage: ") as col:
        col.index([corpus])
        meta = col.store.collection_meta("prompted") or {}
        assert (meta[META_QUERY], meta[META_DOCUMENT]) == ("query: ", "passage: ")
        assert col.status()["prompts"] == {"query": "query: ", "document": "passage: "}
        hit = col.search(QUERY, k=1, mode="dense").hits[0]
        assert hit.text == DOC
        with_prompts = _cos(col, "query: " + QUERY, "passage: " + DOC)
        without = _cos(col, QUERY, DOC)
        assert abs(with_prompts - without) > 1e-3  # the prompts change the vectors measurably
        assert hit.score == pytest.approx(with_prompts, abs=1e-4)

    with indexer.open_collection("prompted") as col:  # no prompt settings: the recorded ones are used
        assert col.search(QUERY, k=1, mode="dense").hits[0].score == pytest.approx(with_prompts, abs=1e-4)
    with (
        indexer.open_collection("prompted", query_prompt="search_query: ") as col,
        pytest.raises(CollectionMismatchError, match="query_prompt"),
    ):
        col.search(QUERY, k=1)


def test_the_default_model_uses_no_prompts(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", {"garden.txt": DOC + "\n"})
    with indexer.open_collection("plain") as col:
        col.index([corpus])
        meta = col.store.collection_meta("plain") or {}
        assert (meta[META_QUERY], meta[META_DOCUMENT]) == ("", "")
        hit = col.search(QUERY, k=1, mode="dense").hits[0]
        assert hit.score == pytest.approx(_cos(col, QUERY, DOC), abs=1e-4)
