"""Tiny JinaBERT v2 and jina-embeddings-v3 checkpoints and their reference outputs (one-off, not product).

Run with the bench Python (torch, tokenizers, sentencepiece), niced::

    nice -n 10 /work/benchvenv/bin/python tools/tiny_models/jina.py [jina-v2] [jina-v2-en] [jina-v3]

Writes ``tests/fixtures/families/jina-v2/`` (jina-embeddings-v2-base-zh's layout), ``jina-v2-en/`` (-base-en's:
the same model with a WordPiece tokenizer) and ``jina-v3/``: ``checkpoint/`` laid out
as the real models' folders are (config.json with their ``architectures`` / ``model_type`` / ``auto_map``,
model.safetensors with their tensor names, tokenizer.json, tokenizer_config.json, sentence-transformers
modules) and ``reference.json`` (see common.py). Seeds are fixed: a rerun writes the same files.

The reference implementation
----------------------------
Neither model's modeling code ships with transformers: both are ``trust_remote_code`` code on the model hub
(``jinaai/jina-bert-implementation`` and ``jinaai/xlm-roberta-flash-implementation``), which cannot be
reached here, and their public copies may not be committed. The forward passes below are therefore a
faithful **reimplementation** in torch, written from public material read for this purpose:

* JinaBERT v2: the public ports of ``jina-bert-implementation`` (candle's ``jina_bert.rs``, vLLM's
  ``jina_bert.py``, "adapted from jinaai/jina-bert-implementation") and llama.cpp's graph
  (src/models/bert.cpp, arch jina-bert-v2): BERT post-norm layers without position embeddings, symmetric
  ALiBi (bias ``-slope_h * |i - j|``, the ALiBi paper's slopes, also for a head count that is not a power of
  two), a GEGLU feed-forward ``mlp.gated_layers`` (no bias, 2 x intermediate rows) -> ``gelu(first half) *
  second half`` -> ``mlp.wo`` -> ``mlp.layernorm(out + residual)``; mean pooling.
* jina-embeddings-v3: ``xlm-roberta-flash-implementation``'s ``modeling_lora.py`` (read in a public copy:
  ``LoRAParametrization`` - a linear layer's weight becomes ``W + B[t] @ A[t] * alpha / rank``, an embedding's
  ``W + A[t] @ B[t] * alpha / rank``, on every nn.Linear and nn.Embedding; ``encode(task=...)`` prepends
  the task's instruction and selects adapter ``t``; no task: base weights, no prefix) and the XLM-RoBERTa
  flash model as llama.cpp's graph (arch jina-bert-v3) runs it: word + token-type embeddings -> ``emb_ln``,
  post-norm blocks ``norm1(x + out_proj(attn(Wqkv x)))``, ``norm2(h + fc2(gelu(fc1 h)))``, rotary positions
  (rotate-half / NeoX layout over the whole head, base ``rotary_emb_base``), no position embeddings; mean
  pooling, then L2 normalization.

Tokenizers are trained by the real libraries on local text: a ``tokenizers`` BPE with the ``Lowercase``
normalizer and the ``Whitespace`` pre-tokenizer, as jina-embeddings-v2-base-zh's tokenizer.json has
(RobertaTokenizer class, <s> ... </s>), a ``tokenizers`` WordPiece (BertNormalizer, BertPreTokenizer) as
-base-en has, and a ``sentencepiece`` unigram model turned into XLM-RoBERTa's
tokenizer.json the way transformers' XLMRobertaConverter does (fairseq ids, Precompiled charsmap + " {2,}"
replacement, Metaspace), which is what jina-embeddings-v3 ships (no sentencepiece.bpe.model in its folder).
The reference token ids are those tokenizers' (``tokenizers.Tokenizer``, what the models' fast tokenizers run).
"""

from __future__ import annotations

import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FIXTURES, TEXTS, training_text, write_reference  # noqa: E402

MAX_SEQ = 8192  # the models' own limit: the engine takes a long text whole up to it (the main context grows)
V3_TASKS = ["retrieval.query", "retrieval.passage", "separation", "classification", "text-matching"]
V3_INSTRUCTIONS = {
    "retrieval.query": "Represent the query for retrieving evidence documents: ",
    "retrieval.passage": "Represent the document for retrieval: ",
    "separation": "",
    "classification": "",
    "text-matching": "",
}


def _fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _st_files(folder: Path, normalize: bool, max_seq: int) -> None:
    """sentence-transformers modules: Transformer, mean Pooling (and Normalize)."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir()
    _write_json(folder / "modules.json", modules)
    (folder / "1_Pooling").mkdir()
    _write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": 0, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_seq, "do_lower_case": False})
    _write_json(folder / "config_sentence_transformers.json", {"similarity_fn_name": "cosine"})


def _encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    tok.enable_truncation(MAX_SEQ)
    return [tok.encode(t, add_special_tokens=True).ids for t in texts]


def _normalized(rows: list[torch.Tensor]) -> list[list[float]]:
    return [F.normalize(r.double(), dim=-1).tolist() for r in rows]


# ---------------------------------------------------------------------------------------------------------
# JinaBERT v2 (jina-embeddings-v2-base-zh layout)
# ---------------------------------------------------------------------------------------------------------

V2 = {"hidden": 48, "layers": 2, "heads": 6, "intermediate": 96, "eps": 1e-12, "type_vocab": 2}


def v2_tokenizer() -> Tokenizer:
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=False)
    tok.decoder = decoders.BPEDecoder()
    return tok


def alibi_slopes(n_heads: int) -> list[float]:
    """The ALiBi paper's head slopes (jina-bert-implementation's ``_get_alibi_head_slopes``)."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n_heads - closest]


def _layer_norm(x: torch.Tensor, w: dict[str, torch.Tensor], name: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"], eps)


def _linear(x: torch.Tensor, w: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    return F.linear(x, w[f"{name}.weight"], w.get(f"{name}.bias"))


def v2_weights(vocab: int, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    h, n_ff = V2["hidden"], V2["intermediate"]

    def rnd(*shape: int, std: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * std

    w: dict[str, torch.Tensor] = {
        "embeddings.word_embeddings.weight": rnd(vocab, h, std=0.5),
        "embeddings.token_type_embeddings.weight": rnd(V2["type_vocab"], h, std=0.5),
        "embeddings.LayerNorm.weight": 1 + rnd(h, std=0.1),
        "embeddings.LayerNorm.bias": rnd(h, std=0.1),
    }
    for i in range(V2["layers"]):
        p = f"encoder.layer.{i}"
        for part in ("query", "key", "value"):
            w[f"{p}.attention.self.{part}.weight"] = rnd(h, h, std=0.3)
            w[f"{p}.attention.self.{part}.bias"] = rnd(h, std=0.1)
        w[f"{p}.attention.output.dense.weight"] = rnd(h, h)
        w[f"{p}.attention.output.dense.bias"] = rnd(h, std=0.1)
        w[f"{p}.attention.output.LayerNorm.weight"] = 1 + rnd(h, std=0.1)
        w[f"{p}.attention.output.LayerNorm.bias"] = rnd(h, std=0.1)
        w[f"{p}.mlp.gated_layers.weight"] = rnd(2 * n_ff, h)
        w[f"{p}.mlp.wo.weight"] = rnd(h, n_ff)
        w[f"{p}.mlp.wo.bias"] = rnd(h, std=0.1)
        w[f"{p}.mlp.layernorm.weight"] = 1 + rnd(h, std=0.1)
        w[f"{p}.mlp.layernorm.bias"] = rnd(h, std=0.1)
    w["pooler.dense.weight"] = rnd(h, h)  # BertPooler: in the checkpoint, unused by mean pooling
    w["pooler.dense.bias"] = rnd(h, std=0.1)
    return w


def v2_forward(w: dict[str, torch.Tensor], ids: list[int]) -> torch.Tensor:
    """Token states of one unpadded sequence (1 x n): JinaBertModel's forward."""
    eps, n_heads = V2["eps"], V2["heads"]
    x = w["embeddings.word_embeddings.weight"][torch.tensor(ids)] + w["embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w, "embeddings.LayerNorm", eps)
    n, h = x.shape
    d = h // n_heads
    pos = torch.arange(n)
    distance = (pos[None, :] - pos[:, None]).abs().float()
    alibi = -torch.tensor(alibi_slopes(n_heads))[:, None, None] * distance  # (heads, n, n)
    for i in range(V2["layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (_linear(x, w, f"{p}.attention.self.{part}").view(n, n_heads, d).transpose(0, 1)
                   for part in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + alibi
        ctx = (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, h)
        x = _layer_norm(_linear(ctx, w, f"{p}.attention.output.dense") + x, w, f"{p}.attention.output.LayerNorm", eps)
        gated = _linear(x, w, f"{p}.mlp.gated_layers")
        act = F.gelu(gated[:, : V2["intermediate"]]) * gated[:, V2["intermediate"]:]
        x = _layer_norm(_linear(act, w, f"{p}.mlp.wo") + x, w, f"{p}.mlp.layernorm", eps)
    return x


def v2_en_tokenizer() -> Tokenizer:
    """jina-embeddings-v2-base-en's kind: BERT WordPiece, lowercasing BertNormalizer, [CLS] ... [SEP]."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=4000, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.decoder = decoders.WordPiece()
    return tok


def build_v2(family: str = "jina-v2") -> None:
    """jina-embeddings-v2-base-zh's layout ("jina-v2"), or -base-en's ("jina-v2-en": WordPiece)."""
    english = family == "jina-v2-en"
    folder = _fresh(FIXTURES / family / "checkpoint")
    tok = v2_en_tokenizer() if english else v2_tokenizer()
    tok.save(str(folder / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    config = {
        "_name_or_path": f"jinaai/jina-embeddings-v2-base-{'en' if english else 'zh'}",
        "architectures": ["JinaBertForMaskedLM"],
        "attention_probs_dropout_prob": 0.0,
        "attn_implementation": "torch",
        "auto_map": {
            "AutoConfig": "jinaai/jina-bert-implementation--configuration_bert.JinaBertConfig",
            "AutoModel": "jinaai/jina-bert-implementation--modeling_bert.JinaBertModel",
            "AutoModelForMaskedLM": "jinaai/jina-bert-implementation--modeling_bert.JinaBertForMaskedLM",
        },
        "classifier_dropout": None,
        "emb_pooler": "mean",
        "feed_forward_type": "geglu",
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": V2["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": V2["intermediate"],
        "layer_norm_eps": V2["eps"],
        "max_position_embeddings": 8192,
        "model_max_length": 8192,
        "model_type": "bert",
        "num_attention_heads": V2["heads"],
        "num_hidden_layers": V2["layers"],
        "pad_token_id": 0 if english else 1,
        "position_embedding_type": "alibi",
        "torch_dtype": "float32",
        "transformers_version": "4.36.2",
        "type_vocab_size": V2["type_vocab"],
        "use_cache": True,
        "vocab_size": vocab,
    }
    _write_json(folder / "config.json", config)
    if english:
        specials = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
                    "unk_token": "[UNK]"}
        tok_cfg = {**specials, "clean_up_tokenization_spaces": True, "do_lower_case": True,
                   "model_max_length": 2147483648, "strip_accents": None, "tokenize_chinese_chars": True,
                   "tokenizer_class": "BertTokenizer"}
        words = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
        (folder / "vocab.txt").write_text("".join(f"{w}\n" for w, _ in words), encoding="utf-8")
    else:
        specials = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
                    "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
        tok_cfg = {**specials, "add_prefix_space": False, "clean_up_tokenization_spaces": True, "errors": "replace",
                   "model_max_length": 8192, "tokenizer_class": "RobertaTokenizer", "trim_offsets": True}
    _write_json(folder / "special_tokens_map.json", specials)
    _write_json(folder / "tokenizer_config.json", tok_cfg)
    _st_files(folder, normalize=False, max_seq=8192)
    w = v2_weights(vocab, seed=3 if english else 1)
    save_file({k: v.contiguous() for k, v in w.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})

    ids = _encode(tok, TEXTS)
    with torch.no_grad():
        vectors = [v2_forward(w, t).mean(0) for t in ids]
    path = write_reference(family, {
        "architecture": "JinaBertForMaskedLM", "max_seq_length": MAX_SEQ, "texts": TEXTS, "token_ids": ids,
        "vectors": _normalized(vectors),
        "reference": "reimplementation (torch) of jina-bert-implementation; see tools/tiny_models/jina.py"})
    print(f"{family}: vocab {vocab}, {sum(len(t) for t in ids)} tokens -> {path}")


# ---------------------------------------------------------------------------------------------------------
# jina-embeddings-v3 (XLM-RoBERTa flash with rotary positions and task LoRA)
# ---------------------------------------------------------------------------------------------------------

V3 = {"hidden": 64, "layers": 2, "heads": 4, "intermediate": 128, "eps": 1e-5, "rank": 4, "alpha": 1.0,
      "rope_base": 20000.0}


def _proto_fields(data: bytes) -> dict[int, list[object]]:
    """Fields of a protobuf message by number (the bench Python has no protobuf package)."""
    out: dict[int, list[object]] = {}
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        value: object
        if wire == 0:
            value = varint()
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            n = varint()
            value, i = data[i:i + n], i + n
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


def v3_tokenizer() -> Tokenizer:
    """sentencepiece unigram -> XLM-RoBERTa tokenizer.json, as transformers' XLMRobertaConverter builds it."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_text()), model_writer=buf, vocab_size=4000, model_type="unigram",
        character_coverage=1.0, num_threads=1, shuffle_input_sentence=False, max_sentence_length=100000,
        minloglevel=2)
    proto = buf.getvalue()
    normalizer_spec = _proto_fields(proto)[3][0]
    assert isinstance(normalizer_spec, bytes)
    charsmap = _proto_fields(normalizer_spec)[2][0]
    assert isinstance(charsmap, bytes) and charsmap
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(3, sp.get_piece_size())]
    vocab += [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return tok


_V3_LORA_LINEARS = ("mixer.Wqkv", "mixer.out_proj", "mlp.fc1", "mlp.fc2")


def v3_weights(vocab: int, seed: int = 2) -> dict[str, torch.Tensor]:
    """The checkpoint as XLMRobertaLoRA saves it: parametrized weights (``.parametrizations.weight.original``
    plus ``.0.lora_A`` / ``.0.lora_B`` stacked over the tasks) for every Linear and Embedding."""
    g = torch.Generator().manual_seed(seed)
    h, n_ff, r, n_tasks = V3["hidden"], V3["intermediate"], V3["rank"], len(V3_TASKS)

    def rnd(*shape: int, std: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * std

    w: dict[str, torch.Tensor] = {}

    def embedding(name: str, rows: int, std: float) -> None:
        w[f"{name}.parametrizations.weight.original"] = rnd(rows, h, std=std)
        w[f"{name}.parametrizations.weight.0.lora_A"] = rnd(n_tasks, rows, r, std=0.5)  # (tasks, fan_in, rank)
        w[f"{name}.parametrizations.weight.0.lora_B"] = rnd(n_tasks, r, h, std=0.5)  # (tasks, rank, fan_out)

    def linear(name: str, fan_out: int, fan_in: int) -> None:
        w[f"{name}.parametrizations.weight.original"] = rnd(fan_out, fan_in)
        w[f"{name}.bias"] = rnd(fan_out, std=0.1)
        w[f"{name}.parametrizations.weight.0.lora_A"] = rnd(n_tasks, r, fan_in, std=0.3)
        w[f"{name}.parametrizations.weight.0.lora_B"] = rnd(n_tasks, fan_out, r, std=0.3)

    embedding("roberta.embeddings.word_embeddings", vocab, 0.5)
    embedding("roberta.embeddings.token_type_embeddings", 1, 0.5)
    w["roberta.emb_ln.weight"] = 1 + rnd(h, std=0.1)
    w["roberta.emb_ln.bias"] = rnd(h, std=0.1)
    for i in range(V3["layers"]):
        p = f"roberta.encoder.layers.{i}"
        linear(f"{p}.mixer.Wqkv", 3 * h, h)
        linear(f"{p}.mixer.out_proj", h, h)
        linear(f"{p}.mlp.fc1", n_ff, h)
        linear(f"{p}.mlp.fc2", h, n_ff)
        for norm in ("norm1", "norm2"):
            w[f"{p}.{norm}.weight"] = 1 + rnd(h, std=0.1)
            w[f"{p}.{norm}.bias"] = rnd(h, std=0.1)
    linear("roberta.pooler.dense", h, h)
    return w


def v3_effective(w: dict[str, torch.Tensor], task: int | None) -> dict[str, torch.Tensor]:
    """Plain weights with task ``task``'s LoRA merged as LoRAParametrization.lora_forward does (None: base)."""
    scaling = V3["alpha"] / V3["rank"]
    out: dict[str, torch.Tensor] = {}
    for name, value in w.items():
        if name.endswith(".parametrizations.weight.original"):
            base = name[: -len(".parametrizations.weight.original")]
            weight = value
            if task is not None:
                a = w[f"{base}.parametrizations.weight.0.lora_A"][task]
                b = w[f"{base}.parametrizations.weight.0.lora_B"][task]
                embedding = base.endswith("_embeddings")
                weight = value + (a @ b if embedding else b @ a) * scaling
            out[f"{base}.weight"] = weight
        elif ".parametrizations." not in name:
            out[name] = value
    return out


def _rotary(x: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate-half (non-interleaved) rotary embedding of (heads, n, d) at positions 0..n-1."""
    n, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def v3_forward(w: dict[str, torch.Tensor], ids: list[int]) -> torch.Tensor:
    eps, n_heads = V3["eps"], V3["heads"]
    x = w["roberta.embeddings.word_embeddings.weight"][torch.tensor(ids)]
    x = x + w["roberta.embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w, "roberta.emb_ln", eps)
    n, h = x.shape
    d = h // n_heads
    for i in range(V3["layers"]):
        p = f"roberta.encoder.layers.{i}"
        qkv = _linear(x, w, f"{p}.mixer.Wqkv").view(n, 3, n_heads, d)
        q, k, v = (qkv[:, j].transpose(0, 1) for j in range(3))
        q, k = _rotary(q, V3["rope_base"]), _rotary(k, V3["rope_base"])
        ctx = ((q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v).transpose(0, 1).reshape(n, h)
        x = _layer_norm(x + _linear(ctx, w, f"{p}.mixer.out_proj"), w, f"{p}.norm1", eps)
        x = _layer_norm(x + _linear(F.gelu(_linear(x, w, f"{p}.mlp.fc1")), w, f"{p}.mlp.fc2"), w, f"{p}.norm2", eps)
    return x


def build_v3() -> None:
    family = "jina-v3"
    folder = _fresh(FIXTURES / family / "checkpoint")
    tok = v3_tokenizer()
    tok.save(str(folder / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    config = {
        "_name_or_path": "jinaai/jina-embeddings-v3",
        "architectures": ["XLMRobertaModel"],
        "attention_probs_dropout_prob": 0.0,
        "auto_map": {
            "AutoConfig": "jinaai/xlm-roberta-flash-implementation--configuration_xlm_roberta.XLMRobertaFlashConfig",
            "AutoModel": "jinaai/xlm-roberta-flash-implementation--modeling_lora.XLMRobertaLoRA",
            "AutoModelForPreTraining":
                "jinaai/xlm-roberta-flash-implementation--modeling_xlm_roberta.XLMRobertaForPreTraining",
        },
        "bos_token_id": 0,
        "classifier_dropout": None,
        "emb_pooler": None,
        "eos_token_id": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": V3["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": V3["intermediate"],
        "layer_norm_eps": V3["eps"],
        "load_trained_adapters": True,
        "lora_adaptations": V3_TASKS,
        "lora_alpha": V3["alpha"],
        "lora_dropout_p": 0.0,
        "lora_main_params_trainable": False,
        "lora_rank": V3["rank"],
        "matryoshka_dimensions": [16, 32, 64],
        "max_position_embeddings": 8194,
        "model_type": "xlm-roberta",
        "num_attention_heads": V3["heads"],
        "num_hidden_layers": V3["layers"],
        "output_past": True,
        "pad_token_id": 1,
        "position_embedding_type": "rotary",
        "rotary_emb_base": V3["rope_base"],
        "task_instructions": V3_INSTRUCTIONS,
        "torch_dtype": "float32",
        "transformers_version": "4.43.4",
        "truncate_dim": None,
        "type_vocab_size": 1,
        "use_cache": True,
        "use_flash_attn": False,
        "use_reentrant": False,
        "vocab_size": vocab,
    }
    _write_json(folder / "config.json", config)
    specials = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
                "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    _write_json(folder / "special_tokens_map.json", specials)
    _write_json(folder / "tokenizer_config.json", {
        **specials, "clean_up_tokenization_spaces": True, "model_max_length": 8194,
        "tokenizer_class": "XLMRobertaTokenizer"})
    _st_files(folder, normalize=True, max_seq=8194)
    w = v3_weights(vocab)
    save_file({k: v.contiguous() for k, v in w.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})

    ids = _encode(tok, TEXTS)
    adapters = {}
    with torch.no_grad():
        base = v3_effective(w, None)
        vectors = [v3_forward(base, t).mean(0) for t in ids]
        for task in ("retrieval.query", "retrieval.passage"):
            merged = v3_effective(w, V3_TASKS.index(task))
            prefixed = [V3_INSTRUCTIONS[task] + t for t in TEXTS]
            task_ids = _encode(tok, prefixed)
            adapters[task] = {"prefix": V3_INSTRUCTIONS[task], "token_ids": task_ids,
                              "vectors": _normalized([v3_forward(merged, t).mean(0) for t in task_ids])}
    path = write_reference(family, {
        "architecture": "XLMRobertaModel (jina-embeddings-v3, XLMRobertaLoRA)", "max_seq_length": MAX_SEQ,
        "texts": TEXTS, "token_ids": ids, "vectors": _normalized(vectors), "adapters": adapters,
        "reference": "reimplementation (torch) of xlm-roberta-flash-implementation with modeling_lora's "
                     "LoRA; see tools/tiny_models/jina.py"})
    print(f"{family}: vocab {vocab}, {sum(len(t) for t in ids)} tokens -> {path}")


def main(argv: list[str]) -> None:
    torch.manual_seed(0)
    np.random.seed(0)
    wanted = argv or ["jina-v2", "jina-v2-en", "jina-v3"]
    for family in wanted:
        if family.startswith("jina-v2"):
            build_v2(family)
        else:
            {"jina-v3": build_v3}[family]()


if __name__ == "__main__":
    main(sys.argv[1:])
