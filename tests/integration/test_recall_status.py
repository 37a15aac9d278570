"""Recall that holds, end to end (docs/stores.md#recall-that-holds): indexing measures the store's recall in the
background, `status` (and so `--json` and /metrics) shows it with its sample size, and the next runs within
`recall_interval` do not measure again; users' searches are kept (their vectors, never their text) and the next
measurement samples them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
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
        assert recall["floor"] == 0.97 and f"on {estimate['sample']} chunks as queries" in recall["text"]
        assert (estimate["sample_kind"], estimate["searches"]) == ("chunks", 0)  # nobody searched yet
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


def test_searches_are_kept_as_vectors_and_the_next_measurement_samples_them(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", _mailbox(30))
    queries = ["quarterly report due Friday", "figures quoted below", "a different subject"]
    with indexer.open_collection("mail", store="qdrant", recall_interval=0) as col:
        col.index([corpus])
        for text in queries:
            col.search(text)
    rings = list(Path(os.environ["INDEXER_DATA_DIR"]).rglob("mail.recent_queries.npz"))
    assert len(rings) == 1, rings
    with np.load(rings[0], allow_pickle=False) as data:  # vectors and times only: no text anywhere
        assert sorted(data.files) == ["times", "vectors"] and data["vectors"].shape == (3, 384)
    assert not any(q.encode() in rings[0].read_bytes() for q in queries)
    with indexer.open_collection("mail", store="qdrant", recall_interval=0) as col:  # a restart
        (corpus / "thread1" / "m1.txt").write_text("Re: something else, a new message.\n")
        col.index([corpus])  # a write: measured again (interval 0), after the restart, on the kept searches
    with indexer.open_collection("mail", store="qdrant") as col:
        estimate = col.status()["recall"]["estimate"]
        assert (estimate["sample_kind"], estimate["searches"]) == ("searches+chunks", 3), estimate
        assert "on 3 recent searches + " in col.status()["recall"]["text"]


def test_a_collection_only_searched_is_measured_again_on_its_new_searches(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus", _mailbox(30))
    with indexer.open_collection("mail", store="qdrant") as col:
        col.index([corpus])  # measured after the write, on chunks (nobody searched yet)
    with indexer.open_collection("mail", store="qdrant") as col:
        first = col.status()["recall"]["estimate"]
    assert first["sample_kind"] == "chunks"
    texts = ["quarterly report due Friday", "figures quoted below", "thread two", "a new subject", "Re: Re: Fwd"]
    with indexer.open_collection("mail", store="qdrant", recall_sample=5) as col:
        for text in texts[:4]:
            col.search(text)
        assert col.status()["recall"]["estimate"]["measured_at"] == first["measured_at"]  # 4 of 5: not yet
    with indexer.open_collection("mail", store="qdrant", recall_sample=5, recall_interval=0) as col:
        for text in texts:  # another process (a server): its own 5 searches since the estimate, no write
            col.search(text)
    with indexer.open_collection("mail", store="qdrant") as col:  # the closing reader waited for it
        again = col.status()["recall"]["estimate"]
    assert again["measured_at"] > first["measured_at"], (first, again)
    assert (again["sample_kind"], again["searches"]) == ("searches", 5), again
