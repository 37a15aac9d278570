"""Recall that holds, end to end (docs/stores.md#recall-that-holds): indexing measures the store's recall in the
background, `status` (and so `--json` and /metrics) shows it with its sample size, and the next runs within
`recall_interval` do not measure again."""

from __future__ import annotations

import pytest

import indexer
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow


def _mailbox(n: int) -> dict[str, str]:
    return {f"thread{i % 4}/m{i}.txt": f"Re: quarterly report, message {i}. The quarterly report for thread {i % 4} "
            f"is due on Friday; see the figures quoted below.\n" for i in range(n)}


def test_indexing_measures_the_recall_and_status_shows_it(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", _mailbox(30))
    with indexer.open_collection("mail", store="qdrant") as col:
        col.index([corpus])
    with indexer.open_collection("mail", store="qdrant") as col:  # the writer waited for it when it closed
        recall = col.status()["recall"]
        estimate = recall["estimate"]
        assert estimate is not None and estimate["param"] == "hnsw_ef" and estimate["points"] == 30
        assert estimate["sample"] > 0 and estimate["source"] == "tuned" and 0 <= estimate["recall"] <= 1
        assert recall["floor"] == 0.97 and f"on {estimate['sample']} sampled queries" in recall["text"]
        first = estimate["measured_at"]
        (corpus / "thread0" / "m0.txt").write_text("Re: a different subject entirely.\n")
        col.index([corpus])
    with indexer.open_collection("mail", store="qdrant") as col:
        assert col.status()["recall"]["estimate"]["measured_at"] == first  # within recall_interval: not again


def test_a_small_faiss_collection_is_exact(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", _mailbox(5))
    with indexer.open_collection("small") as col:
        col.index([corpus])
    with indexer.open_collection("small") as col:
        recall = col.status()["recall"]
        assert recall["estimate"]["source"] == "exact" and recall["estimate"]["sample"] == 0
        assert "exact search over 5 points" in recall["text"] and recall["below_floor"] is False
