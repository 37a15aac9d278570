"""The committed test reranker, run through real llama.cpp.

The fixture (tests/fixtures/models/test-reranker-q8_0.gguf) is a small cross-encoder distilled from
all-MiniLM-L6-v2 by tools/train_test_reranker.py; test-reranker-scores.json holds the PyTorch model's
logits on fixed (query, document) pairs. These tests check that llama.cpp, fed the GGUF our converter
wrote, reproduces those logits and that the ranking API behaves.

Measured on this fixture (x86-64 CPU, llama-cpp-python 0.3.36): q8_0 vs PyTorch, one pair per decode, max
|diff| 0.039 (mean 0.014), within the 0.05 asked for; the same checkpoint converted to f16 / f32 matches within
0.004, so the rest is q8_0 weight quantization, not the conversion (a wrong conversion, e.g. a dropped pooler,
is off by whole logits). Packing several pairs in one decode batch moves q8_0 scores by up to 0.03 more (f16:
0.001), so packed scores are held to 0.1 (measured max 0.065).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_RERANKER

MODELS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "models"
SCORES: dict[str, Any] = json.loads((MODELS_DIR / "test-reranker-scores.json").read_text(encoding="utf-8"))
PAIRS: list[dict[str, Any]] = SCORES["pairs"]
QUERIES: list[str] = list(dict.fromkeys(p["query"] for p in PAIRS))
RANK = 4  # LLAMA_POOLING_TYPE_RANK
TOLERANCE = 0.05  # q8_0, one pair per decode, vs the float32 PyTorch model (measured max 0.039)
PACKED_TOLERANCE = 0.1  # q8_0, many pairs per decode, vs PyTorch (measured max 0.065; see the module docstring)
BATCH_TOLERANCE = 0.05  # packed vs one-pair-per-decode, q8_0 (measured max 0.030)


def _docs(query: str) -> list[dict[str, Any]]:
    return [p for p in PAIRS if p["query"] == query]


@pytest.fixture(scope="module")
def reranker(reranker_model_path: Path) -> Iterator[Any]:
    from indexer.engine.llama_embedding import LlamaEmbedding

    llm = LlamaEmbedding(str(reranker_model_path), pooling_type=RANK, verbose=False)
    try:
        yield llm
    finally:
        llm.close()


def test_fixture_matches_committed_sha256() -> None:
    """The committed file (the q8_0 one, also where the tests use its f16 twin) is the one SHA256SUMS names."""
    reranker_model_path = TEST_RERANKER
    sums = {}
    for line in (MODELS_DIR / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.lstrip("*")] = digest
    h = hashlib.sha256()
    with reranker_model_path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    assert h.hexdigest() == sums[reranker_model_path.name], (
        "test-reranker-q8_0.gguf changed; if regenerated on purpose, update SHA256SUMS, "
        "test-reranker-scores.json and the README together"
    )


def test_committed_scores_file_is_consistent() -> None:
    # Guards the reference data itself: at least 3 queries, each with relevant and irrelevant documents.
    assert len(QUERIES) >= 3
    for query in QUERIES:
        kinds = {p["relevant"] for p in _docs(query)}
        assert kinds == {True, False}, query


@pytest.mark.slow
def test_rank_returns_one_float_per_document(reranker: Any) -> None:
    for query in QUERIES:
        docs = [p["document"] for p in _docs(query)]
        scores = reranker.rank(query, docs)
        assert isinstance(scores, list)
        assert len(scores) == len(docs)
        assert all(type(s) is float for s in scores)


@pytest.mark.slow
def test_single_document_gives_one_element_list(reranker: Any) -> None:
    scores = reranker.rank(QUERIES[0], [PAIRS[0]["document"]])
    assert isinstance(scores, list) and len(scores) == 1 and isinstance(scores[0], float)


@pytest.mark.slow
def test_relevant_documents_rank_above_irrelevant(reranker: Any) -> None:
    for query in QUERIES:
        items = _docs(query)
        scores = reranker.rank(query, [p["document"] for p in items])
        relevant = [s for s, p in zip(scores, items, strict=True) if p["relevant"]]
        irrelevant = [s for s, p in zip(scores, items, strict=True) if not p["relevant"]]
        assert min(relevant) - max(irrelevant) >= 2.0, (query, scores)


@pytest.mark.slow
def test_scores_match_pytorch_reference(reranker: Any) -> None:
    single = [abs(reranker.rank(p["query"], [p["document"]])[0] - p["score"]) for p in PAIRS]
    assert max(single) <= TOLERANCE, f"max |llama.cpp - PyTorch| = {max(single):.4f} (one pair per decode)"
    packed = []
    for query in QUERIES:
        items = _docs(query)
        scores = reranker.rank(query, [p["document"] for p in items])
        packed += [abs(s - p["score"]) for s, p in zip(scores, items, strict=True)]
    assert len(packed) == len(PAIRS)
    assert max(packed) <= PACKED_TOLERANCE, f"max |llama.cpp - PyTorch| = {max(packed):.4f} (packed)"


@pytest.mark.slow
def test_batched_ranking_equals_one_by_one(reranker: Any, reranker_model_path: Path) -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding

    query = QUERIES[0]
    docs = [p["document"] for p in PAIRS]  # all 12 documents, so several sequences share a decode batch
    one_by_one = [reranker.rank(query, [d])[0] for d in docs]
    packed = reranker.rank(query, docs)  # default n_seq_max packs many pairs per batch
    assert packed == pytest.approx(one_by_one, abs=BATCH_TOLERANCE)
    serial = LlamaEmbedding(str(reranker_model_path), pooling_type=RANK, n_seq_max=1, verbose=False)
    try:
        assert serial.rank(query, docs) == pytest.approx(one_by_one, abs=1e-4)  # same decode shapes
    finally:
        serial.close()
    reordered = reranker.rank(query, docs[::-1])
    assert reordered[::-1] == pytest.approx(packed, abs=BATCH_TOLERANCE)


@pytest.mark.slow
def test_empty_document_list_gives_empty_list(reranker: Any) -> None:
    assert reranker.rank(QUERIES[0], []) == []


@pytest.mark.slow
def test_rank_refuses_a_model_loaded_without_rank_pooling(reranker_model_path: Path) -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding

    llm = LlamaEmbedding(str(reranker_model_path), pooling_type=1, verbose=False)  # MEAN
    try:
        with pytest.raises(ValueError, match="RANK"):
            llm.rank(QUERIES[0], [PAIRS[0]["document"]])
    finally:
        llm.close()


@pytest.mark.slow
def test_llama_reranker_port_scores_like_the_reference(reranker_model_path: Path) -> None:
    from indexer.engine.adapters import LlamaReranker
    from indexer.ports import Reranker

    port = LlamaReranker(reranker_model_path)
    try:
        assert isinstance(port, Reranker)
        assert isinstance(port.model_id, str) and port.model_id
        for query in QUERIES:
            items = _docs(query)
            scores = port.rerank(query, [p["document"] for p in items])
            assert len(scores) == len(items)
            assert max(abs(s - p["score"]) for s, p in zip(scores, items, strict=True)) <= PACKED_TOLERANCE
        assert port.rerank(QUERIES[0], []) == []
    finally:
        port.close()


@pytest.mark.slow
def test_llama_reranker_refuses_use_after_close(reranker_model_path: Path) -> None:
    from indexer.engine.adapters import LlamaReranker
    from indexer.errors import ModelError

    port = LlamaReranker(reranker_model_path)
    port.close()
    port.close()  # idempotent
    with pytest.raises(ModelError, match="closed"):
        port.rerank(QUERIES[0], [PAIRS[0]["document"]])
