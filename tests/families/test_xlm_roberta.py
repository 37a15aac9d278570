"""XLM-RoBERTa (bge-m3, bge-reranker-v2-m3) through our converter and engine, against transformers.

Fixtures: ``tests/fixtures/families/xlm_roberta_embed`` (an ``XLMRobertaModel`` with bge-m3's CLS pooling and
Normalize) and ``xlm_roberta_rank`` (an ``XLMRobertaForSequenceClassification`` with one label), tiny random
weights and a SentencePiece unigram tokenizer, made by ``tools/tiny_models/xlm_roberta.py``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest

from indexer.errors import CollectionMismatchError, ModelError
from indexer.models.convert import convert_checkpoint
from indexer.models.profiles import profile_for
from tests.families import proof
from tests.twins import refused_here

EMBED, RANK = "xlm_roberta_embed", "xlm_roberta_rank"
NAMES = {EMBED: "tiny-bge-m3", RANK: "tiny-bge-reranker-v2-m3"}
RANK_POOLING = 4  # LLAMA_POOLING_TYPE_RANK


def _convert(family: str, out_dir: Path, quant: str = "f16") -> Path:
    """The family's GGUF, named as its profile expects (general.name)."""
    return proof.convert(family, out_dir, quant, name=NAMES[family])


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xlmr-models")


@pytest.fixture(scope="module")
def embed_gguf(models_dir: Path) -> Path:
    return _convert(EMBED, models_dir)


@pytest.fixture(scope="module")
def rank_gguf(models_dir: Path) -> Path:
    return _convert(RANK, models_dir)


@pytest.fixture(scope="module")
def embed_model(embed_gguf: Path) -> Iterator[object]:
    model = proof.open_model(embed_gguf)
    yield model
    model.close()


@pytest.fixture(scope="module")
def rank_model(rank_gguf: Path) -> Iterator[object]:
    model = proof.open_model(rank_gguf, pooling_type=RANK_POOLING)
    yield model
    model.close()


def _metadata(path: Path) -> dict[str, object]:
    reader = gguf.GGUFReader(str(path))
    out: dict[str, object] = {}
    for name, field in reader.fields.items():
        if name.startswith("tokenizer.ggml.") and name.endswith(("tokens", "scores", "token_type", "charsmap")):
            out[name] = len(field.data)
        elif field.types and field.types[0] != gguf.GGUFValueType.ARRAY:
            out[name] = field.contents()
    out["__tensors__"] = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    return out


# -- tokenizer -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", [EMBED, RANK])
def test_token_ids_equal_the_reference_tokenizer(family: str, embed_model, rank_model) -> None:
    """Every text (accents, CJK, emoji, NFKC forms, unknown glyphs, odd whitespace, very long) gets
    transformers' ids: llama.cpp's UGM tokenizer with the charsmap and whitespace rules we convert."""
    model = embed_model if family == EMBED else rank_model
    proof.assert_token_ids(model, proof.reference(family))


def test_gguf_metadata_is_what_llama_cpp_writes_for_xlm_roberta(embed_gguf: Path, rank_gguf: Path) -> None:
    meta = _metadata(embed_gguf)
    ref = proof.reference(EMBED)
    cfg = json.loads((proof.checkpoint(EMBED) / "config.json").read_text())
    assert meta["general.architecture"] == "bert" and meta["general.name"] == NAMES[EMBED]
    assert meta["tokenizer.ggml.model"] == "t5" and meta["tokenizer.ggml.pre"] == "default"
    assert meta["bert.context_length"] == cfg["max_position_embeddings"] - cfg["pad_token_id"] - 1 == 2048
    assert meta["__tensors__"]["position_embd.weight"] == (64, 2048)  # the first pad+1 rows dropped
    assert meta["bert.pooling_type"] == int(gguf.PoolingType.CLS)
    assert meta["tokenizer.ggml.token_type_count"] == 1
    assert meta["tokenizer.ggml.add_space_prefix"] is True
    assert meta["tokenizer.ggml.remove_extra_whitespaces"] is True
    assert meta["tokenizer.ggml.add_bos_token"] is True and meta["tokenizer.ggml.add_eos_token"] is True
    assert meta["tokenizer.ggml.add_sep_token"] is True  # pairs: <s> q </s></s> d </s>
    ids = {k: meta[f"tokenizer.ggml.{k}_token_id"] for k in ("bos", "padding", "eos", "unknown", "seperator", "mask")}
    assert ids == {"bos": 0, "padding": 1, "eos": 2, "unknown": 3, "seperator": 2, "mask": cfg["vocab_size"] - 1}
    assert meta["tokenizer.ggml.precompiled_charsmap"] > 1000
    assert meta["tokenizer.ggml.tokens"] == meta["tokenizer.ggml.scores"] == cfg["vocab_size"]
    assert meta["indexer.similarity"] == "cosine" and meta["indexer.max_seq_length"] == ref["max_seq_length"]
    assert not any(name.startswith("cls") for name in meta["__tensors__"])  # no pooler in an embedding model

    rank = _metadata(rank_gguf)
    assert rank["bert.pooling_type"] == int(gguf.PoolingType.RANK)
    assert {"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"} <= set(rank["__tensors__"])
    assert rank["__tensors__"]["cls.output.weight"] == (64, 1)
    assert "indexer.similarity" not in rank


def test_profiles_recognise_the_converted_models(embed_model, rank_model) -> None:
    embed_profile = profile_for(embed_model.metadata)
    rank_profile = profile_for(rank_model.metadata)
    assert embed_profile is not None and embed_profile.family == "bge-m3"
    assert rank_profile is not None and rank_profile.family == "bge-reranker-v2-m3"


# -- numerics ------------------------------------------------------------------------------------------------


def test_vectors_match_the_reference(embed_model) -> None:
    proof.assert_vectors(embed_model, proof.reference(EMBED), min_cosine=0.999)


def test_a_long_text_embeds_whole_in_one_grown_micro_batch(embed_gguf: Path) -> None:
    """bge-m3 reads long inputs: our engine's limit is the model's positions (2048 here, 8192 for bge-m3),
    the main context grows to the longest input (a non-causal sequence must fit one micro-batch) and only
    as far as needed; the long text's vector matches transformers' over all 2048 tokens."""
    ref = proof.reference(EMBED)
    long_ids = [ids for ids in ref["token_ids"] if len(ids) > 512]
    assert long_ids and max(len(i) for i in long_ids) == ref["max_seq_length"] == 2048
    model = proof.open_model(embed_gguf, parallel_contexts=2)  # the grown context and a 512-token one
    try:
        assert model.max_tokens == 2048 and model.batch_tokens == 512 and model.parallel_contexts == 2
        model.embed(["short text", "冰川"])
        assert model.batch_tokens == 512  # short inputs do not grow it
        middle = [ids for ids in long_ids if len(ids) < 1024]
        if middle:
            model.embed(middle)
            assert model.batch_tokens == 1024
        ours = np.asarray(model.embed(long_ids), dtype=np.float64)
        assert model.batch_tokens == model.n_ubatch_eff == 2048
        for ids, vec in zip(long_ids, ours, strict=True):
            theirs = np.asarray(ref["vectors"][ref["token_ids"].index(ids)], dtype=np.float64)
            cos = float(vec @ theirs / np.linalg.norm(vec) / np.linalg.norm(theirs))
            assert cos >= 0.999, (len(ids), cos)
        # long and short inputs in one call: the long ones on the grown context, the rest side by side
        mixed = np.asarray(model.embed(ref["token_ids"]), dtype=np.float64)
        theirs = np.asarray(ref["vectors"], dtype=np.float64)
        cos = np.sum(mixed * theirs, axis=1) / np.linalg.norm(mixed, axis=1) / np.linalg.norm(theirs, axis=1)
        assert cos.min() >= 0.999, cos
        with pytest.raises(ValueError, match="exceed"):
            model.embed([[5] * 2049], truncate=False)
    finally:
        model.close()


def test_rerank_scores_match_the_reference(rank_model) -> None:
    """Pairs are built as the tokenizer builds them (llama.cpp: BOS, query, EOS, SEP because the vocab's
    add-SEP flag is set, document, EOS) and score within 0.02 of transformers' logits, in the same order."""
    ref = proof.reference(RANK)
    case = ref["rerank"]
    assert all(ids[:1] == [0] and ids.count(2) == 3 for ids in case["token_ids"])  # <s> q </s></s> d </s>
    proof.assert_rerank_sequences(rank_model, ref)
    proof.assert_rerank(rank_model, ref, tolerance=0.02)


def test_q8_0_stays_close(models_dir: Path) -> None:
    path = _convert(EMBED, models_dir, "q8_0")
    if refused_here(path):  # this machine's llama.cpp cannot run q8_0: refused, never run
        return
    model = proof.open_model(path)
    try:
        assert proof.cosines(model, proof.reference(EMBED)).min() >= 0.99
    finally:
        model.close()


# -- refusals ------------------------------------------------------------------------------------------------


def _copy_checkpoint(tmp_path: Path, family: str = EMBED) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(proof.checkpoint(family), dst)
    return dst


def test_sentencepiece_model_alone_is_refused_with_the_fix(tmp_path: Path) -> None:
    src = _copy_checkpoint(tmp_path)
    (src / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match=r"tokenizer\.json.*save_pretrained"):
        convert_checkpoint(src, tmp_path / "out.gguf", "f16")
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"position_embedding_type": "rotary", "lora_adaptations": ["retrieval.query"]}, "jina-embeddings-v3"),
    ({"hidden_act": "relu"}, "hidden_act"),
    ({"architectures": ["XLMRobertaForSequenceClassification"], "num_labels": 3,
      "id2label": {"0": "a", "1": "b", "2": "c"}}, "3 labels"),
    ({"architectures": ["XLMRobertaForTokenClassification"]}, "not supported"),
])
def test_unsupported_variants_are_refused_before_writing(tmp_path: Path, change: dict, message: str) -> None:
    src = _copy_checkpoint(tmp_path)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(ModelError, match=message):
        convert_checkpoint(src, tmp_path / "out.gguf", "f16")
    assert not (tmp_path / "out.gguf").exists()


def test_a_tokenizer_llama_cpp_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    src = _copy_checkpoint(tmp_path)
    tok = json.loads((src / "tokenizer.json").read_text())
    tok["normalizer"]["normalizers"].append({"type": "Lowercase"})
    (src / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(ModelError, match="Lowercase"):
        convert_checkpoint(src, tmp_path / "out.gguf", "f16")


def test_a_reranker_without_its_head_is_refused(tmp_path: Path) -> None:
    src = _copy_checkpoint(tmp_path, EMBED)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "architectures": ["XLMRobertaForSequenceClassification"],
                                                 "num_labels": 1}))
    with pytest.raises(ModelError, match="classifier"):
        convert_checkpoint(src, tmp_path / "out.gguf", "f16")


# -- the product ---------------------------------------------------------------------------------------------


def _index_small_corpus(tmp_path: Path, model: Path) -> object:
    from indexer.collection.facade import open_collection
    from tests.server.conftest import make_settings, write_corpus

    root = write_corpus(tmp_path / "corpus")
    settings = make_settings(tmp_path / "data", model, None)
    with open_collection("swap", settings=settings) as col:
        assert col.index([root]).files_indexed > 0
    return settings


@pytest.mark.parametrize("built_with", ["bert", "xlm_roberta"])
def test_a_model_swap_between_families_is_refused_without_a_reindex(
    built_with: str, tmp_path: Path, embed_model_path: Path, embed_gguf: Path
) -> None:
    from indexer.collection.facade import open_collection

    first, other = (embed_model_path, embed_gguf) if built_with == "bert" else (embed_gguf, embed_model_path)
    settings = _index_small_corpus(tmp_path, first)
    swapped = settings.model_copy(update={"embed_model": str(other)})
    with open_collection("swap", settings=swapped) as col, pytest.raises(CollectionMismatchError, match="reindex"):
        col.search("rotate the API keys", k=3)


@pytest.mark.slow
def test_pipeline(embed_gguf: Path, rank_gguf: Path, tmp_path: Path) -> None:
    proof.assert_pipeline(embed_gguf, tmp_path, rank_gguf)


@pytest.mark.slow
def test_long_chunks_are_cut_by_the_model_tokenizer_and_embedded_whole(embed_gguf: Path, tmp_path: Path) -> None:
    """A collection chunked at 1,500 tokens (above the 512 a context starts with): chunks are counted by the
    model's own tokenizer, stay within the size, and embed whole (the main context grows to 2,048, the next
    power of two); the default for a bge-m3 model is its profile's 512 tokens, with no growth."""
    from indexer.collection.facade import open_collection
    from tests.server.conftest import make_settings

    root = tmp_path / "corpus"
    root.mkdir()
    ref = proof.reference(EMBED)
    (root / "long.txt").write_text("\n".join(ref["texts"][-1].split(" 第")), encoding="utf-8")
    (root / "glaciers.txt").write_text(ref["texts"][12], encoding="utf-8")

    default = make_settings(tmp_path / "data-default", embed_gguf, None)
    with open_collection("plain", settings=default) as col:
        col.index([root])
        assert col.chunk_tokens == 512  # the bge-m3 profile
        assert col.embedder.engine.engine.batch_tokens == 512  # type: ignore[attr-defined]

    settings = make_settings(tmp_path / "data", embed_gguf, None, chunk_tokens=1500)
    with open_collection("long", settings=settings) as col:
        report = col.index([root])
        assert report.files_indexed == 2 and col.chunk_tokens == 1500
        embedder = col.embedder.engine
        hits = col.search("glaciers rivers valleys", k=10, mode="dense").hits
        counts = [embedder.count_tokens(h.text) for h in hits]
        assert max(counts) > 1024 and all(n <= 1500 for n in counts), counts
        assert embedder.engine.batch_tokens == 2048
