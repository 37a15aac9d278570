"""Qwen3 (byte-level BPE, causal attention) in both forms the seed serves, against transformers' outputs.

Fixtures made by ``tools/tiny_models/qwen3.py``: ``qwen3-embedding`` (as Qwen3-Embedding: LAST pooling, the
tokenizer appends <|endoftext|>, an instruction before queries only; reference: sentence-transformers) and
``qwen3-reranker`` (as Qwen3-Reranker: a causal LM whose "yes"/"no" rows of the output matrix become a two-output
head, llama.cpp's rerank template; reference: P(yes) = softmax(yes, no)[0] at the last position, the first output
of llama.cpp's qwen3 RANK head, computed in transformers from the same rows).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from indexer.errors import ModelError
from indexer.models.convert import prepare_checkpoint
from indexer.models.convert.qwen3 import RERANK_TEMPLATE
from indexer.models.profiles import QWEN3_EMBEDDING_QUERY, profile_for
from tests.families import proof
from tests.twins import refused_here

EMBED, RERANK = "qwen3-embedding", "qwen3-reranker"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    out = tmp_path_factory.mktemp("qwen3")
    return {(family, quant): proof.convert(family, out, quant, name=f"tiny-{family}")
            for family in (EMBED, RERANK) for quant in ("f16", "q8_0")}


@pytest.fixture(scope="module")
def embedder(built: dict[tuple[str, str], Path]) -> Any:
    model = proof.open_model(built[EMBED, "f16"])
    yield model
    model.close()


@pytest.fixture(scope="module")
def reranker(built: dict[tuple[str, str], Path]) -> Any:
    model = proof.open_model(built[RERANK, "f16"])
    yield model
    model.close()


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.ggml.") or
            k in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.add_eos_token",
                  "tokenizer.ggml.add_bos_token", "tokenizer.ggml.eos_token_id")} | {
        "tensors": {t.name: [int(n) for n in t.shape] for t in reader.tensors}}


# -- conversion ------------------------------------------------------------------------------------------------


def test_the_embedding_form_is_written_as_llama_cpp_writes_qwen3(built):
    meta = _fields(built[EMBED, "f16"])
    assert meta["general.architecture"] == "qwen3"
    assert meta["qwen3.pooling_type"] == int(gguf.PoolingType.LAST)
    assert meta["qwen3.attention.key_length"] == meta["qwen3.attention.value_length"] == 32  # head_dim
    assert meta["qwen3.attention.head_count"] == 4 and meta["qwen3.attention.head_count_kv"] == 2
    assert meta["qwen3.rope.freq_base"] == 1e6
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "qwen2"
    assert meta["tokenizer.ggml.add_eos_token"] is True  # <|endoftext|> appended, the token LAST pools
    assert meta["indexer.prompt.query"] == QWEN3_EMBEDDING_QUERY
    assert "indexer.prompt.document" not in meta  # empty: gguf writes no empty string, read back as ""
    assert meta["indexer.similarity"] == "cosine" and meta["indexer.max_seq_length"] == 512
    assert "cls.output.weight" not in meta["tensors"] and "output.weight" not in meta["tensors"]  # tied


def test_the_reranker_form_gets_a_yes_no_head_labels_and_the_rerank_template(built):
    meta = _fields(built[RERANK, "f16"])
    assert meta["qwen3.pooling_type"] == int(gguf.PoolingType.RANK)
    assert meta["qwen3.classifier.output_labels"] == ["yes", "no"]
    assert meta["tokenizer.chat_template.rerank"] == RERANK_TEMPLATE
    assert meta["tensors"]["cls.output.weight"] == [64, 2]
    assert meta["tokenizer.ggml.add_eos_token"] is False and meta["tokenizer.ggml.add_bos_token"] is False


def test_the_head_is_the_yes_and_no_rows_of_the_tied_embeddings(built):
    from indexer.models.safetensors import read_checkpoint_tensors

    embed = dict(read_checkpoint_tensors(proof.checkpoint(RERANK)))["model.embed_tokens.weight"]
    vocab = json.loads((proof.checkpoint(RERANK) / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    reader = gguf.GGUFReader(built[RERANK, "f16"])
    head = next(t for t in reader.tensors if t.name == "cls.output.weight")
    rows = np.asarray(head.data, dtype=np.float32).reshape(2, -1)
    assert np.array_equal(rows, np.asarray(embed[[vocab["yes"], vocab["no"]]], dtype=np.float32))


def _copy(family: str, dest: Path) -> Path:
    shutil.copytree(proof.checkpoint(family), dest)
    return dest


def test_the_reranker_is_recognised_by_its_folder_name_as_llama_cpp_does(tmp_path):
    src = _copy(RERANK, tmp_path / "Qwen3-Reranker-tiny")
    (src / "README.md").unlink()
    assert prepare_checkpoint(src).family == "qwen3-reranker"


def test_an_embedding_folder_without_sentence_transformers_files_gets_last_pooling_by_its_name(tmp_path):
    from indexer.models.convert import convert_checkpoint

    src = _copy(EMBED, tmp_path / "Qwen3-Embedding-tiny")
    for name in ("modules.json", "README.md", "config_sentence_transformers.json"):
        (src / name).unlink()
    shutil.rmtree(src / "1_Pooling")
    out = convert_checkpoint(src, tmp_path / "out.gguf", "f16")
    assert _fields(out)["qwen3.pooling_type"] == int(gguf.PoolingType.LAST)


def test_a_plain_qwen3_language_model_is_refused_before_anything_is_written(tmp_path):
    from indexer.models.convert import convert_checkpoint

    src = _copy(RERANK, tmp_path / "some-qwen3-chat-model")
    (src / "README.md").write_text("# A chat model\n", encoding="utf-8")
    out = tmp_path / "out.gguf"
    with pytest.raises(ModelError, match="Qwen3-Embedding .*Qwen3-Reranker"):
        convert_checkpoint(src, out, "f16")
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(("change", "message"), [
    ({"architectures": ["Qwen3ForSequenceClassification"]}, "not supported; supported: .*Qwen3ForCausalLM"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_act": "gelu"}, "SiLU"),
    ({"use_sliding_window": True}, "sliding_window"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}}, "RoPE scaling 'yarn'"),
])
def test_unsupported_qwen3_variants_are_refused_clearly(tmp_path, change, message):
    src = _copy(EMBED, tmp_path / "ckpt")
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    (src / "config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
    with pytest.raises(ModelError, match=message):
        prepare_checkpoint(src)


def test_another_pre_tokenizer_is_refused(tmp_path):
    src = _copy(EMBED, tmp_path / "ckpt")
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    tok["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    (src / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    with pytest.raises(ModelError, match="qwen2"):
        prepare_checkpoint(src)


def test_models_build_from_a_folder_makes_the_reranker(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from indexer.cli.main import app

    monkeypatch.setenv("INDEXER_MODELS_DIR", str(tmp_path / "models"))
    result = CliRunner().invoke(app, ["models", "build", "--from", str(proof.checkpoint(RERANK)),
                                      "--name", "tiny-qwen3-reranker", "--quant", "f16"])
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip().splitlines()[-1])
    assert path == tmp_path / "models" / "tiny-qwen3-reranker-f16.gguf"
    assert _fields(path)["qwen3.pooling_type"] == int(gguf.PoolingType.RANK)


# -- our engine against the reference --------------------------------------------------------------------------


@pytest.mark.parametrize("family", [EMBED, RERANK])
def test_token_ids_equal_the_reference_tokenizer(built, family):
    model = proof.open_model(built[family, "f16"])
    try:
        proof.assert_token_ids(model, proof.reference(family))
    finally:
        model.close()


def test_vectors_match_sentence_transformers(embedder):
    proof.assert_vectors(embedder, proof.reference(EMBED), min_cosine=0.999)


def test_q8_0_vectors_stay_close(built):
    if refused_here(built[EMBED, "q8_0"]):  # this machine's llama.cpp cannot run q8_0: refused, never run
        return
    model = proof.open_model(built[EMBED, "q8_0"])
    try:
        proof.assert_vectors(model, proof.reference(EMBED), min_cosine=0.99)
    finally:
        model.close()


def test_a_query_with_the_instruction_matches_sentence_transformers_query_prompt(embedder):
    case = proof.reference(EMBED)["queries"]
    assert case["prompt"] == QWEN3_EMBEDDING_QUERY
    ours = np.asarray(embedder.embed([case["prompt"] + q for q in case["texts"]]))
    cos = np.sum(ours * np.asarray(case["vectors"]), axis=1)
    assert cos.min() >= 0.999, cos


def test_the_truncation_rule_keeps_a_final_eos_only_when_asked():
    from indexer.engine.plan import apply_token_limit

    assert apply_token_limit([5, 6, 7, 8, 9], 3, True, keep_final=9) == [5, 6, 9]
    assert apply_token_limit([5, 6, 7, 8, 9], 3, True) == [5, 6, 7]
    assert apply_token_limit([5, 6, 7, 8], 3, True, keep_final=9) == [5, 6, 7]  # no EOS at the end: a plain cut
    assert apply_token_limit([5, 9], 3, True, keep_final=9) == [5, 9]


def test_a_cut_text_keeps_the_eos_it_is_pooled_at(embedder):
    long_text = proof.reference(EMBED)["texts"][-1]
    ids = embedder._prepare(long_text, True, None)[0][0]
    assert len(ids) == embedder.max_tokens and ids[-1] == embedder.vocab_specials().eos


def test_packed_sequences_do_not_attend_to_each_other(embedder):
    texts = proof.reference(EMBED)["texts"]
    together = np.asarray(embedder.embed(texts))
    alone = np.asarray([embedder.embed(t) for t in texts])
    # the same vectors up to f16 rounding (flash attention's kernels differ with the batch; measured min 0.999997),
    # where one text attending to another gives a different vector (cosine about -0.2 here)
    assert np.sum(together * alone, axis=1).min() >= 0.99999
    again = np.asarray(embedder.embed(texts))  # nothing is left in the KV memory between calls
    # not bit for bit: a short decode runs on one thread or the whole team as the cores allow (engine/plan.py
    # ThreadChooser), which changes the sums' order (cosine >= 0.99999); a leftover in the KV memory gives ~ -0.2
    assert np.sum(together * again, axis=1).min() >= 0.99999


def test_a_causal_model_keeps_kv_memory_for_one_batch_only(embedder):
    assert embedder.causal and embedder.n_ctx() == embedder.n_batch_eff == embedder.max_tokens


def test_rerank_prompts_are_tokenized_as_the_reference_does(reranker):
    assert reranker.rerank_template() == RERANK_TEMPLATE
    proof.assert_rerank_sequences(reranker, proof.reference(RERANK))


def test_rerank_scores_are_the_first_output_of_the_yes_no_head(reranker):
    ref = proof.reference(RERANK)
    proof.assert_rerank(reranker, ref, tolerance=0.02)
    # two outputs per pair, "yes" first; llama.cpp's qwen3 head ends in a softmax, so they sum to 1
    seqs = reranker.rank_sequences(ref["rerank"]["query"], ref["rerank"]["documents"])
    raw = reranker.embed_tokens_raw(seqs)
    assert all(r is not None and r.shape == (2,) and abs(float(r.sum()) - 1) < 1e-3 for r in raw)


def test_q8_0_rerank_keeps_the_order(built):
    if refused_here(built[RERANK, "q8_0"]):
        return
    model = proof.open_model(built[RERANK, "q8_0"])
    try:
        proof.assert_rerank(model, proof.reference(RERANK), tolerance=0.05)
    finally:
        model.close()


# -- profile and pipeline --------------------------------------------------------------------------------------


def test_the_tiny_models_get_their_family_profiles(built):
    for family in (EMBED, RERANK):
        meta = {"general.architecture": "qwen3", "general.name": f"tiny-{family}"}
        profile = profile_for(meta)
        assert profile is not None and profile.family == family
    assert profile_for({"general.architecture": "qwen3", "general.name": f"tiny-{EMBED}"}).query_prompt == (
        QWEN3_EMBEDDING_QUERY)


@pytest.mark.slow
def test_pipeline_with_both_models_and_the_instruction_on_queries_only(built, tmp_path, monkeypatch):
    from indexer.engine.adapters import LlamaEmbedder

    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "unused-data"))
    # a GGUF without our prompt keys (a downloaded Qwen3-Embedding GGUF): the instruction comes from the profile
    src = _copy(EMBED, tmp_path / "ckpt")
    (src / "config_sentence_transformers.json").unlink()
    from indexer.models.convert import convert_checkpoint

    embed_path = convert_checkpoint(src, tmp_path / "tiny-qwen3-embedding-f16.gguf", "f16",
                                    name="tiny-qwen3-embedding")
    assert "indexer.prompt.query" not in _fields(embed_path)

    seen: list[str] = []
    original = LlamaEmbedder.embed_batch

    def spy(self: LlamaEmbedder, texts: Any, normalize: Any) -> Any:
        seen.extend(texts)
        return original(self, texts, normalize)

    monkeypatch.setattr(LlamaEmbedder, "embed_batch", spy)
    proof.assert_pipeline(embed_path, tmp_path / "run", built[RERANK, "f16"])
    queries = [t for t in seen if t.startswith(QWEN3_EMBEDDING_QUERY)]
    documents = [t for t in seen if not t.startswith(QWEN3_EMBEDDING_QUERY)]
    assert QWEN3_EMBEDDING_QUERY + "rotate the API keys" in queries
    assert QWEN3_EMBEDDING_QUERY + "vault rotate" in queries
    assert documents and not any("Instruct:" in d for d in documents)
    assert len(queries) == 2  # the two searches; the chunks never get the instruction
