"""JinaBERT v2 (jina-embeddings-v2-base-zh layout: ALiBi, GEGLU, the whitespace BPE tokenizer) and
jina-embeddings-v3 (rotary XLM-RoBERTa, unigram vocabulary, task LoRA adapters) through our converter and
engine, against the reference outputs of tools/tiny_models/jina.py (a torch reimplementation of both models'
remote code; see that script)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gguf
import pytest

from indexer.errors import ModelError
from tests.families import proof

V2, V2EN, V3 = "jina-v2", "jina-v2-en", "jina-v3"  # -base-zh's layout, -base-en's (WordPiece), v3
FAMILY_ARCH = {V2: "jina-bert-v2", V2EN: "jina-bert-v2", V3: "jina-bert-v3"}


def _convert(family: str, out_dir: Path, quant: str = "f16") -> Path:
    from indexer.models.convert import convert_checkpoint

    return convert_checkpoint(proof.checkpoint(family), out_dir / f"tiny-{family}-{quant}.gguf", quant,
                              source=f"test:{family}", name=f"tiny-{family}")


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("jina-gguf")


@pytest.fixture(scope="module", params=[V2, V2EN, V3])
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def converted(gguf_dir: Path) -> dict[str, Path]:
    return {f: _convert(f, gguf_dir) for f in (V2, V2EN, V3)}


@pytest.fixture(scope="module")
def model(family: str, converted: dict[str, Path]) -> Any:
    m = proof.open_model(converted[family])
    yield m
    m.close()


def test_metadata_as_llama_cpp_writes_it(family: str, converted: dict[str, Path]) -> None:
    reader = gguf.GGUFReader(str(converted[family]))

    def value(key: str) -> Any:
        field = reader.get_field(key)
        assert field is not None, key
        return field.contents()

    arch = FAMILY_ARCH[family]
    assert value("general.architecture") == arch
    assert value(f"{arch}.attention.causal") is False
    assert value(f"{arch}.pooling_type") == gguf.PoolingType.MEAN
    assert value("indexer.similarity") == "cosine"
    names = {t.name for t in reader.tensors}
    assert "position_embd.weight" not in names  # ALiBi / rotary: no learned positions
    if family == V2:
        assert value("tokenizer.ggml.model") == "whitespace" and value("tokenizer.ggml.pre") == "whitespace"
        assert value("tokenizer.ggml.normalizer.lowercase") is True
        assert len(value("tokenizer.ggml.merges")) > 1000
        up = next(t for t in reader.tensors if t.name == "blk.0.ffn_up.weight")
        assert int(up.shape[1]) == 2 * value(f"{arch}.feed_forward_length")  # GEGLU kept whole
    elif family == V2EN:
        assert value("tokenizer.ggml.model") == "bert" and value("tokenizer.ggml.pre") == "jina-v2-en"
    else:
        assert value("tokenizer.ggml.model") == "t5" and value("tokenizer.ggml.add_space_prefix") is True
        assert value(f"{arch}.rope.freq_base") == 20000.0
        assert value(f"{arch}.context_length") == 8192  # 8194 - (pad_token_id + 1)
        assert value("indexer.prompt.query").startswith("Represent the query")
        assert not any("lora" in n for n in names)


def _reference(family: str) -> dict[str, Any]:
    return proof.reference(family)


def test_token_ids(family: str, model: Any) -> None:
    """Every text, Korean, Arabic, Hindi, emoji and unseen glyphs among them: the WordPiece and whitespace BPE
    models through the definition stored in the GGUF, the unigram one through llama.cpp (exact there)."""
    proof.assert_token_ids(model, _reference(family))


def test_vectors_f16(family: str, model: Any) -> None:
    proof.assert_vectors(model, _reference(family))


def _hangul(text: str) -> bool:
    """Korean without Devanagari (whose vowel signs the fallback does not fix: only the reference does)."""
    return any("\uac00" <= ch <= "\ud7a3" for ch in text) and not any("\u0900" <= ch <= "\u097f" for ch in text)


def test_llama_cpp_wordpiece_loses_hangul_and_the_fix_restores_it(converted: dict[str, Path]) -> None:
    """llama.cpp's WordPiece strip_accents uses a one-codepoint NFD table: a Hangul syllable keeps only its
    leading consonant (the reason for the reference tokenizer). Without a definition in the file, the fallback
    decomposes Hangul before llama.cpp sees it, which restores the reference's ids."""
    from indexer.engine import tokenization

    ref = proof.reference(V2EN)
    case = {**ref, **{k: [v for t, v in zip(ref["texts"], ref[k], strict=True) if _hangul(t)]
                      for k in ("texts", "token_ids", "vectors")}}
    assert case["texts"]
    m = proof.open_model(converted[V2EN])
    try:
        assert m.use_tokenizer(tokenization.RUNTIME) == tokenization.RUNTIME
        with pytest.raises(AssertionError, match="token ids differ"):
            proof.assert_token_ids(m, case)
        assert m.use_tokenizer(tokenization.RUNTIME_FIXED) == tokenization.RUNTIME_FIXED
        proof.assert_token_ids(m, case)
    finally:
        m.close()


def test_llama_cpp_whitespace_bpe_drops_unknown_characters(converted: dict[str, Path]) -> None:
    """jina-v2-zh's whitespace BPE in llama.cpp drops characters the reference maps to <unk>; the reference
    tokenizer keeps them."""
    from indexer.engine import tokenization

    ref = proof.reference(V2)
    i = next(i for i, t in enumerate(ref["texts"]) if "ꙮ" in t)
    case = {**ref, "texts": [ref["texts"][i]], "token_ids": [ref["token_ids"][i]]}
    m = proof.open_model(converted[V2])
    try:
        assert m.tokenizer_mode == tokenization.REFERENCE
        proof.assert_token_ids(m, case)
        m.use_tokenizer(tokenization.RUNTIME)
        got = m.tokenize(case["texts"][0].encode("utf-8"))
        assert len(got) < len(case["token_ids"][0])
    finally:
        m.close()


def test_profile_from_metadata(family: str, model: Any) -> None:
    from indexer.models.profiles import profile_for

    profile = profile_for(model.metadata)
    assert profile is not None
    assert profile.family == {V2: "jina-embeddings-v2", V2EN: "jina-embeddings-v2", V3: "jina-embeddings-v3"}[family]


@pytest.mark.parametrize("task", ["retrieval.passage", "retrieval.query"])
def test_v3_task_adapter_through_llama_cpp(task: str, converted: dict[str, Path]) -> None:
    """A task's LoRA as a GGUF adapter (llama_adapter_lora_init via lora_path) gives the reference's vectors
    for that task (instruction prefix + adapter), the token-type adapter included (folded into token_embd)."""
    from indexer.models.convert.jina_v3 import write_task_adapters
    from indexer.models.profiles import profile_for

    base = converted[V3]
    path = write_task_adapters(proof.checkpoint(V3), base, [task])[task]
    reader = gguf.GGUFReader(str(path))
    prefix = reader.get_field("adapter.lora.prompt_prefix").contents()  # type: ignore[union-attr]
    assert reader.get_field("general.type").contents() == "adapter"  # type: ignore[union-attr]
    ref = proof.reference(V3)["adapters"][task]
    assert prefix == ref["prefix"]
    m = proof.open_model(base, lora_path=str(path))
    try:
        profile = profile_for(m.metadata)
        assert profile is not None
        assert prefix == (profile.query_prompt if task == "retrieval.query" else profile.document_prompt)
        texts = [prefix + t for t in proof.reference(V3)["texts"]]
        case = {"texts": texts, "token_ids": ref["token_ids"], "vectors": ref["vectors"],
                "max_seq_length": proof.reference(V3)["max_seq_length"]}
        proof.assert_token_ids(m, case)
        proof.assert_vectors(m, case)
        # the adapter changes the vectors: the base reference is far from them
        assert proof.cosines(m, {**case, "vectors": proof.reference(V3)["vectors"]}).min() < 0.95
    finally:
        m.close()


# -- refusals: validated in prepare, before anything is written -----------------------------------------


def _variant(tmp_path: Path, family: str, **changes: Any) -> Path:
    folder = tmp_path / f"{family}-variant"
    shutil.copytree(proof.checkpoint(family), folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("family", "changes", "message"), [
    (V2, {"feed_forward_type": "reglu"}, "GEGLU only"),
    (V2, {"position_embedding_type": "absolute"}, "ALiBi"),
    (V3, {"position_embedding_type": "absolute"}, "rotary"),
    (V3, {"lora_adaptations": "retrieval.query"}, "non-empty list"),
])
def test_unsupported_variants_refused(tmp_path: Path, family: str, changes: dict[str, Any], message: str) -> None:
    from indexer.models.convert import convert_checkpoint

    out = tmp_path / "out.gguf"
    with pytest.raises(ModelError, match=message):
        convert_checkpoint(_variant(tmp_path, family, **changes), out, "f16")
    assert not out.exists()


def test_v2_byte_level_bpe_refused(tmp_path: Path) -> None:
    from indexer.models.convert import convert_checkpoint

    folder = _variant(tmp_path, V2)
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tok["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    (folder / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    with pytest.raises(ModelError, match="Whitespace pre-tokenizer only"):
        convert_checkpoint(folder, tmp_path / "out.gguf", "f16")


def test_unknown_task_refused(converted: dict[str, Path]) -> None:
    from indexer.models.convert.jina_v3 import write_task_adapters

    with pytest.raises(ModelError, match="unknown task"):
        write_task_adapters(proof.checkpoint(V3), converted[V3], ["summarization"])


# -- the whole pipeline, once per family ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("family", [V2, V3])
def test_pipeline(family: str, converted: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "unused-data"))
    proof.assert_pipeline(converted[family], tmp_path)
