"""The numpy+gguf converter against a numpy reference forward pass of tiny random BERT checkpoints (no torch).

A tiny ``BertForSequenceClassification`` (cross-encoder) and a tiny ``BertModel`` (MEAN pooling) are written
as safetensors with numpy, converted to GGUF, run through llama.cpp, and compared with the same weights
evaluated in numpy: embeddings + LayerNorm, self-attention, GELU FFN, then pooler tanh + classifier (RANK)
or mean pooling.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import gguf
import llama_cpp
import numpy as np
import pytest

from indexer.errors import ModelError
from indexer.models import convert_checkpoint
from indexer.models.safetensors import write_safetensors
from tests.probe import load_llama, pooled_outputs

HIDDEN, HEADS, LAYERS, FFN, MAX_POS = 64, 4, 2, 128, 64
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORD_TEXT = ("the a cat dog sat on mat fish swim river blue sky runs fast slow red green house tree bird "
              "flies over under water is are what where how why who when big small")
WORDS = _WORD_TEXT.split()
VOCAB = SPECIALS + WORDS + ["##s", "##ing", "##ed"]
IDS = {w: i for i, w in enumerate(VOCAB)}
CLS, SEP = IDS["[CLS]"], IDS["[SEP]"]

PAIRS = [
    ("what is the sky", "the sky is blue"),
    ("where do fish swim", "fish swim in the river water"),
    ("how fast runs the dog", "a big red house under a green tree"),
    ("who sat on the mat", "the cat sat on the mat"),
    ("why", "birds fly over the water"),
]


def _words(text: str) -> list[int]:
    out = []
    for word in text.split():
        if word in IDS:
            out.append(IDS[word])
        else:  # one-level WordPiece split for the test words: "birds" -> bird ##s
            for suffix in ("s", "ing", "ed"):
                if word.endswith(suffix) and word[: -len(suffix)] in IDS:
                    out += [IDS[word[: -len(suffix)]], IDS["##" + suffix]]
                    break
            else:
                out.append(IDS["[UNK]"])
    return out


def _tiny_weights(rng: np.random.Generator, rank: bool) -> dict[str, np.ndarray]:
    def mat(rows: int, cols: int, scale: float = 0.15) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def vec(n: int, center: float = 0.0, scale: float = 0.05) -> np.ndarray:
        return (center + rng.standard_normal(n) * scale).astype(np.float32)

    prefix = "bert." if rank else ""
    w: dict[str, np.ndarray] = {
        f"{prefix}embeddings.word_embeddings.weight": mat(len(VOCAB), HIDDEN, 0.5),
        f"{prefix}embeddings.position_embeddings.weight": mat(MAX_POS, HIDDEN, 0.2),
        f"{prefix}embeddings.token_type_embeddings.weight": mat(2, HIDDEN, 0.2),
        f"{prefix}embeddings.LayerNorm.weight": vec(HIDDEN, 1.0),
        f"{prefix}embeddings.LayerNorm.bias": vec(HIDDEN),
        f"{prefix}embeddings.position_ids": np.arange(MAX_POS, dtype=np.int64)[None, :],
    }
    for i in range(LAYERS):
        p = f"{prefix}encoder.layer.{i}."
        for part in ("query", "key", "value"):
            w[f"{p}attention.self.{part}.weight"] = mat(HIDDEN, HIDDEN)
            w[f"{p}attention.self.{part}.bias"] = vec(HIDDEN)
        w[f"{p}attention.output.dense.weight"] = mat(HIDDEN, HIDDEN)
        w[f"{p}attention.output.dense.bias"] = vec(HIDDEN)
        w[f"{p}attention.output.LayerNorm.weight"] = vec(HIDDEN, 1.0)
        w[f"{p}attention.output.LayerNorm.bias"] = vec(HIDDEN)
        w[f"{p}intermediate.dense.weight"] = mat(FFN, HIDDEN)
        w[f"{p}intermediate.dense.bias"] = vec(FFN)
        w[f"{p}output.dense.weight"] = mat(HIDDEN, FFN)
        w[f"{p}output.dense.bias"] = vec(HIDDEN)
        w[f"{p}output.LayerNorm.weight"] = vec(HIDDEN, 1.0)
        w[f"{p}output.LayerNorm.bias"] = vec(HIDDEN)
    w[f"{prefix}pooler.dense.weight"] = mat(HIDDEN, HIDDEN, 0.3)
    w[f"{prefix}pooler.dense.bias"] = vec(HIDDEN, 0.0, 0.1)
    if rank:
        w["classifier.weight"] = mat(1, HIDDEN, 0.5)
        w["classifier.bias"] = vec(1, 0.0, 0.5)
    return w


def _write_checkpoint(root: Path, rank: bool, seed: int = 0) -> dict[str, np.ndarray]:
    root.mkdir(parents=True, exist_ok=True)
    weights = _tiny_weights(np.random.default_rng(seed), rank)
    write_safetensors(root / "model.safetensors", weights)
    config = {
        "architectures": ["BertForSequenceClassification" if rank else "BertModel"],
        "model_type": "bert", "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
        "intermediate_size": FFN, "max_position_embeddings": MAX_POS, "type_vocab_size": 2,
        "vocab_size": len(VOCAB), "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
    }
    if rank:
        config.update(num_labels=1, id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    (root / "config.json").write_text(json.dumps(config))
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (root / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    if not rank:
        (root / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]))
        (root / "1_Pooling").mkdir()
        (root / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}))
        (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 48}))
    return {k.removeprefix("bert."): v.astype(np.float64) for k, v in weights.items()}


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * g + b


def _simd_gelu() -> bool:
    """Whether the installed ggml computes GELU on SIMD registers in f32 (indexer/engine/llama_cpp_patches/01-vec-simd:
    the function is then exported) rather than through its f16 table."""
    import llama_cpp

    libs = sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*"))
    return any(b"ggml_vec_gelu_f32" in p.read_bytes() for p in libs)


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU as ggml's CPU backend computes it: tanh form, in f32 with the speed patches (make setup), else looked
    up in an f16 table (input and output f16).

    Hugging Face's exact erf form differs from this by up to ~1e-3, enough to blur a tight comparison.
    """
    if _simd_gelu():
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    h = x.astype(np.float16).astype(np.float64)
    y = (0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))).astype(np.float16)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y.astype(np.float64)))


def _encode(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Hidden states of the last layer (token types all 0, as llama.cpp's BERT graph does)."""
    n = len(ids)
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    d = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def lin(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin(x, f"attention.self.{s}").reshape(n, HEADS, d).transpose(1, 0, 2)
                   for s in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
        x = _layer_norm(x + lin(ctx, "attention.output.dense"),
                        w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
        x = _layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return x


def _rank_score(w: dict[str, np.ndarray], ids: list[int]) -> float:
    cls = _encode(w, ids)[0]
    pooled = np.tanh(w["pooler.dense.weight"] @ cls + w["pooler.dense.bias"])
    return float((w["classifier.weight"] @ pooled + w["classifier.bias"])[0])


def _fields(path: Path) -> dict[str, object]:
    reader = gguf.GGUFReader(path)
    return {name: reader.fields[name].contents() for name in reader.fields
            if not name.startswith(("tokenizer.ggml.tokens", "tokenizer.ggml.token_type\0"))}


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("tiny-ce")
    weights = _write_checkpoint(root / "ckpt", rank=True)
    out = convert_checkpoint(root / "ckpt", root / "tiny-ce-f32.gguf", "f32", source="test:tiny-ce")
    return out, weights


def test_cross_encoder_gguf_layout(cross_encoder: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = cross_encoder
    fields = _fields(path)
    assert fields["bert.pooling_type"] == gguf.PoolingType.RANK
    assert fields["tokenizer.ggml.model"] == "bert"
    assert fields["tokenizer.ggml.bos_token_id"] == CLS
    assert fields["tokenizer.ggml.eos_token_id"] == SEP
    assert fields["indexer.source"] == "test:tiny-ce"
    assert "indexer.similarity" not in fields  # a cross-encoder has no embedding similarity
    names = {t.name for t in gguf.GGUFReader(path).tensors}
    assert {"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"} <= names
    assert not any("position_ids" in n or n.startswith("pooler") for n in names)


def test_cross_encoder_scores_match_numpy_forward(cross_encoder: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, weights = cross_encoder
    llm = load_llama(path, pooling_type=gguf.PoolingType.RANK, n_ctx=MAX_POS)
    try:
        # the GGUF vocabulary tokenizes like the Hugging Face WordPiece would
        assert llm.tokenize(b"The cat SAT on the mat", add_bos=True, special=False) == (
            [CLS] + _words("the cat sat on the mat") + [SEP])
        assert llama_cpp.llama_model_n_cls_out(llm._model.model) == 1
        seqs = [[CLS] + _words(q) + [SEP] + _words(d) + [SEP] for q, d in PAIRS]
        got = pooled_outputs(llm, seqs, 1)[:, 0]
    finally:
        llm.close()
    expected = np.array([_rank_score(weights, s) for s in seqs])
    assert np.ptp(expected) > 0.5  # the pairs' scores differ, so the comparison can fail
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=0)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("tiny-bert")
    weights = _write_checkpoint(root / "ckpt", rank=False, seed=1)
    return root / "ckpt", weights


def test_bert_mean_pooling_matches_numpy_forward(tiny_bert: tuple[Path, dict[str, np.ndarray]],
                                                 tmp_path: Path) -> None:
    ckpt, weights = tiny_bert
    path = convert_checkpoint(ckpt, tmp_path / "tiny-f32.gguf", "f32")
    fields = _fields(path)
    assert fields["bert.pooling_type"] == gguf.PoolingType.MEAN
    assert fields["indexer.similarity"] == "dot"  # no Normalize module
    assert fields["indexer.max_seq_length"] == 48
    names = {t.name for t in gguf.GGUFReader(path).tensors}
    assert not any(n.startswith("cls") for n in names)  # BertModel's pooler is not used for embeddings
    seqs = [[CLS] + _words(text) + [SEP] for text, _ in PAIRS]
    llm = load_llama(path, pooling_type=gguf.PoolingType.MEAN, n_ctx=MAX_POS)
    try:
        got = pooled_outputs(llm, seqs, HIDDEN)
    finally:
        llm.close()
    expected = np.array([_encode(weights, s).mean(axis=0) for s in seqs])
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=0)


@pytest.mark.parametrize(("quant", "matrix_type"), [
    ("f16", gguf.GGMLQuantizationType.F16), ("q8_0", gguf.GGMLQuantizationType.Q8_0)])
def test_quantized_tensor_types(tiny_bert: tuple[Path, dict[str, np.ndarray]], tmp_path: Path, quant: str,
                                matrix_type: gguf.GGMLQuantizationType) -> None:
    ckpt, _ = tiny_bert
    path = convert_checkpoint(ckpt, tmp_path / f"tiny-{quant}.gguf", quant)
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(path).tensors}
    assert types["blk.0.attn_q.weight"] == matrix_type
    assert types["token_embd.weight"] == matrix_type
    assert types["blk.0.attn_q.bias"] == gguf.GGMLQuantizationType.F32
    assert types["token_embd_norm.weight"] == gguf.GGMLQuantizationType.F32
    assert types["position_embd.weight"] == gguf.GGMLQuantizationType.F32
    assert types["token_types.weight"] == gguf.GGMLQuantizationType.F32


def test_unsupported_architecture_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    _write_checkpoint(ckpt, rank=False)
    (ckpt / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    with pytest.raises(ModelError, match="not supported"):
        convert_checkpoint(ckpt, tmp_path / "x.gguf", "f16")
    assert not (tmp_path / "x.gguf").exists()
    assert not list(tmp_path.glob(".x.gguf.*"))  # no temp file left behind


def test_unknown_quant_is_refused(tiny_bert: tuple[Path, dict[str, np.ndarray]], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="q4_k"):
        convert_checkpoint(tiny_bert[0], tmp_path / "x.gguf", "q4_k")
