"""The proof every model family's test runs (issue: every family of the seed's table).

A family's fixture (``tests/fixtures/families/<family>/``, made by ``tools/tiny_models/<family>.py``) holds a
tiny random-weight checkpoint of the family's architecture with a tokenizer trained by the real tokenizer
library, and ``reference.json``: the reference implementation's (transformers') token ids, pooled normalized
vectors and reranker scores. These helpers convert the checkpoint with our converter and check our engine,
chunker, stores and server against it; no torch is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.server.conftest import CORPUS, make_settings, start_server, write_corpus

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"


def reference(family: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FAMILIES / family / "reference.json").read_text(encoding="utf-8"))
    return data


def checkpoint(family: str) -> Path:
    return FAMILIES / family / "checkpoint"


def convert(family: str, out_dir: Path, quant: str = "f16", name: str = "") -> Path:
    """The family's checkpoint converted by the product's converter (``name``: its general.name, which its
    profile is recognised by; default the folder's name)."""
    from indexer.models.convert import convert_checkpoint

    return convert_checkpoint(checkpoint(family), out_dir / f"{family}-{quant}.gguf", quant, source=f"test:{family}",
                              name=name)


def open_model(path: Path, **kwargs: Any) -> Any:
    from indexer.engine.llama_embedding import LlamaEmbedding

    return LlamaEmbedding(str(path), verbose=False, n_threads=2, **kwargs)


def assert_token_ids(model: Any, ref: dict[str, Any]) -> None:
    """Our tokenizer (llama.cpp's, from the converted vocabulary) gives the reference tokenizer's ids."""
    limit = int(ref.get("max_seq_length") or 0)
    for text, expected in zip(ref["texts"], ref["token_ids"], strict=True):
        got = model.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if limit and len(expected) >= limit:  # the reference cut a long text: compare the common prefix
            got = got[: len(expected) - 1]
            expected = expected[: len(expected) - 1]
        assert got == expected, f"token ids differ for {text[:40]!r}:\n ours {got[:40]}\n ref  {expected[:40]}"


def cosines(model: Any, ref: dict[str, Any]) -> np.ndarray:
    ours = np.asarray(model.embed(ref["texts"]), dtype=np.float64)
    theirs = np.asarray(ref["vectors"], dtype=np.float64)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return np.sum(ours * theirs, axis=1)


def assert_vectors(model: Any, ref: dict[str, Any], min_cosine: float = 0.999) -> None:
    cos = cosines(model, ref)
    worst = int(np.argmin(cos))
    assert cos.min() >= min_cosine, f"cosine {cos.min():.6f} < {min_cosine} for {ref['texts'][worst][:40]!r}"


def assert_rerank(model: Any, ref: dict[str, Any], tolerance: float = 0.02) -> None:
    case = ref["rerank"]
    ours = np.asarray(model.rank(case["query"], case["documents"]), dtype=np.float64)
    theirs = np.asarray(case["scores"], dtype=np.float64)
    assert list(np.argsort(-ours)) == list(np.argsort(-theirs)), (ours, theirs)
    assert np.max(np.abs(ours - theirs)) <= tolerance, (ours, theirs)


def assert_rerank_sequences(model: Any, ref: dict[str, Any]) -> None:
    """The token sequences our reranker decodes (its rerank template filled and tokenized by llama.cpp) are the
    reference tokenizer's for the same prompts (``ref["rerank"]["token_ids"]``)."""
    case = ref["rerank"]
    got = model.rank_sequences(case["query"], case["documents"])
    for doc, ours, theirs in zip(case["documents"], got, case["token_ids"], strict=True):
        assert ours == theirs, f"rerank tokens differ for {doc[:40]!r}:\n ours {ours[-40:]}\n ref  {theirs[-40:]}"


def assert_pipeline(embed_path: Path, tmp_path: Path, rerank_path: Path | None = None,
                    store: str = "faiss") -> None:
    """Index a small corpus, search it hybrid (with the rerank stage when a reranker is given), and call
    /v1/embeddings and /v1/rerank on a real server over the same models. Random weights prove plumbing and
    numerics, not retrieval quality: the checks are on shapes, counts and agreement, not on which hit wins."""
    from indexer.collection.facade import open_collection

    root = write_corpus(tmp_path / "corpus")
    settings = make_settings(tmp_path / "data", embed_path, rerank_path, store=store)
    with open_collection("family", settings=settings) as col:
        report = col.index([root])
        assert report.files_indexed == len(CORPUS), report.to_dict()
        result = col.search("rotate the API keys", k=3)
        assert len(result.hits) == 3
        assert any(h.path.endswith("keys.md") for h in col.search("vault rotate", k=5).hits)  # the lexical half
        if rerank_path is not None:
            assert result.rerank_count and result.rerank_count >= 3
    handle = start_server(settings, root)
    try:
        with handle.client() as http:
            emb = http.post("/v1/embeddings", json={"input": ["first text", "冰川"], "model": str(embed_path)})
            assert emb.status_code == 200, emb.text
            vectors = np.asarray([d["embedding"] for d in emb.json()["data"]])
            assert vectors.shape[0] == 2 and np.all(np.isfinite(vectors))
            if rerank_path is not None:
                docs = ["rain falls from clouds", "stocks fell", "冰川"]
                rr = http.post("/v1/rerank", json={"query": "rain", "documents": docs, "model": str(rerank_path)})
                assert rr.status_code == 200, rr.text
                assert sorted(r["index"] for r in rr.json()["results"]) == [0, 1, 2]
    finally:
        handle.stop()
