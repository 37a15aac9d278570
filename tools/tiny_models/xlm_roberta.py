"""Tiny XLM-RoBERTa checkpoints shaped like bge-m3 (embedding) and bge-reranker-v2-m3 (cross-encoder).

Run once with a Python that has torch, transformers, sentence-transformers, tokenizers and sentencepiece::

    nice -n 10 /work/benchvenv/bin/python tools/tiny_models/xlm_roberta.py

What it makes, the way real XLM-R checkpoints are made:

* a SentencePiece **unigram** model trained by the sentencepiece library on :func:`common.training_text`
  (``sentencepiece.bpe.model``: XLM-R's file name, although the model is unigram, with the default
  ``nmt_nfkc`` normalization rule compiled into its precompiled charsmap);
* ``tokenizer.json`` built with the tokenizers library as transformers' ``XLMRobertaConverter`` lays it out:
  the fairseq id offset (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, then SentencePiece piece ``i`` at
  ``i + 1`` for ``i >= 3``, ``<mask>`` last), a Unigram model with the pieces' scores, the ``Precompiled``
  normalizer carrying the charsmap plus the ``" {2,}" -> " "`` replacement, a ``Metaspace`` pre-tokenizer
  (prepend always) and the ``<s> $A </s>`` / ``<s> $A </s> </s> $B </s>`` template;
* ``xlm_roberta_embed/checkpoint``: an ``XLMRobertaModel`` (random weights, 2 layers, hidden 64) with
  ``max_position_embeddings`` 2050 (2048 usable positions after the padding offset: long inputs are
  exercised; real bge-m3 has 8194) and bge-m3's sentence-transformers modules (CLS pooling, Normalize);
* ``xlm_roberta_rank/checkpoint``: an ``XLMRobertaForSequenceClassification`` with ``num_labels=1``
  (bge-reranker-v2-m3's head: ``classifier.dense`` + tanh + ``classifier.out_proj``).

References (``reference.json``, see :mod:`common`) come from transformers: the tokenizer's ids with special
tokens (cross-checked against the tokenizers library on ``tokenizer.json`` and against sentencepiece itself),
CLS-pooled L2-normalized vectors (sentence-transformers, cross-checked against the bare model), and the
reranker's logits for (query, document) pairs encoded as the tokenizer encodes pairs. Weights are rounded to
float16 before the reference is computed and saved as float16, so the reference is exactly the saved model.
Biases and LayerNorm parameters are random too (not HF's zeros and ones), so a mis-mapped tensor shows.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SEED = 0
SPM_VOCAB = 4000
HIDDEN, HEADS, LAYERS, FFN = 64, 4, 2, 128
MAX_POSITIONS = 2050  # padding_idx (1) + 1 + 2048 usable positions
MAX_SEQ = MAX_POSITIONS - 2
INIT_STD = 0.2  # larger than HF's 0.02 so that different texts get clearly different vectors

# Texts beyond common.TEXTS that exercise the SentencePiece normalizer: leading/trailing and repeated spaces,
# NFKC (full-width letters and digits, a ligature, circled digits, a unit sign), characters the vocabulary
# lacks (runs of unknowns are merged into one <unk>), and a long text of mixed scripts.
EXTRA_TEXTS = [
    "   leading and   trailing spaces   ",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and the ﬁ ligature, ① ② and ㎏",
    " ".join(f"第{i}段：冰川 carves 山谷 über Jahrtausende, ça va? 🌊" for i in range(120)),
]

OUT_EMBED = common.FIXTURES / "xlm_roberta_embed"
OUT_RANK = common.FIXTURES / "xlm_roberta_rank"


def train_sentencepiece() -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(common.training_text()), model_writer=buf, vocab_size=SPM_VOCAB,
        model_type="unigram", character_coverage=0.9995, normalization_rule_name="nmt_nfkc",
        input_sentence_size=0, shuffle_input_sentence=False, num_threads=1, seed_sentencepiece_size=200000,
        max_sentence_length=100000, minloglevel=2,
    )
    return buf.getvalue()


def _proto_fields(data: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message (benchvenv has no protobuf package)."""
    out: list[tuple[int, int, object]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, wire, varint()))
        elif wire == 1:
            out.append((field, wire, data[i:i + 8]))
            i += 8
        elif wire == 2:
            n = varint()
            out.append((field, wire, data[i:i + n]))
            i += n
        elif wire == 5:
            out.append((field, wire, data[i:i + 4]))
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def sentencepiece_specs(model_proto: bytes) -> tuple[int, dict[int, object]]:
    """(trainer model_type, normalizer_spec fields) of a SentencePiece ModelProto."""
    fields = _proto_fields(model_proto)
    trainer = next(v for f, w, v in fields if f == 2 and w == 2)
    normalizer = next(v for f, w, v in fields if f == 3 and w == 2)
    model_type = next((int(v) for f, w, v in _proto_fields(trainer) if f == 3 and w == 0), 1)  # type: ignore[call-overload]
    return model_type, {f: v for f, _, v in _proto_fields(normalizer)}  # type: ignore[arg-type]


def build_tokenizer(model_proto: bytes) -> Tokenizer:
    """tokenizer.json as transformers' XLMRobertaConverter writes it for xlm-roberta / bge-m3."""
    model_type, normalizer_spec = sentencepiece_specs(model_proto)
    assert model_type == 1, model_type  # UNIGRAM
    charsmap = normalizer_spec[2]
    assert isinstance(charsmap, bytes) and charsmap
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), sp.get_score(i)) for i in range(3, sp.get_piece_size())]
    vocab += [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(charsmap),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return tok


def tokenizer_config() -> dict:
    def added(content: str, lstrip: bool = False) -> dict:
        return {"content": content, "lstrip": lstrip, "normalized": False, "rstrip": False,
                "single_word": False, "special": True}

    return {
        "added_tokens_decoder": {"0": added("<s>"), "1": added("<pad>"), "2": added("</s>"), "3": added("<unk>"),
                                 str(SPM_VOCAB + 1): added("<mask>", lstrip=True)},
        "bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>", "eos_token": "</s>",
        "mask_token": "<mask>", "model_max_length": MAX_SEQ, "pad_token": "<pad>", "sep_token": "</s>",
        "sp_model_kwargs": {}, "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>",
    }


def write_tokenizer(folder: Path, model_proto: bytes, tok: Tokenizer) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sentencepiece.bpe.model").write_bytes(model_proto)
    tok.save(str(folder / "tokenizer.json"), pretty=False)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    special = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
               "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def model_config(vocab_size: int, rank: bool):
    from transformers import XLMRobertaConfig

    cfg = XLMRobertaConfig(
        vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, hidden_act="gelu", max_position_embeddings=MAX_POSITIONS, type_vocab_size=1,
        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, initializer_range=INIT_STD,
        position_embedding_type="absolute", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    )
    if rank:
        cfg.num_labels = 1
        cfg.id2label = {0: "LABEL_0"}
        cfg.label2id = {"LABEL_0": 0}
        cfg.architectures = ["XLMRobertaForSequenceClassification"]
    else:
        cfg.architectures = ["XLMRobertaModel"]
    return cfg


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Random biases and LayerNorm parameters (HF initialises them to 0 and 1), then round to float16."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            p.copy_(p.half().float())


def save_model(model: torch.nn.Module, folder: Path) -> None:
    half = type(model)(model.config)
    half.load_state_dict(model.state_dict())
    half = half.to(torch.float16)
    half.save_pretrained(str(folder), safe_serialization=True)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop("transformers_version", None)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def write_st_modules(folder: Path) -> None:
    """bge-m3's sentence-transformers layout: Transformer, CLS Pooling, Normalize."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (folder / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
               "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2) + "\n")
    (folder / "2_Normalize").mkdir(exist_ok=True)
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": MAX_SEQ, "do_lower_case": False}, indent=2) + "\n")
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2) + "\n")


def check_token_ids(hf_tok, raw: Tokenizer, sp: spm.SentencePieceProcessor, texts: list[str]) -> list[list[int]]:
    """transformers' ids (truncated at MAX_SEQ, special tokens added), which must equal sentencepiece's own
    (fairseq offset applied). The tokenizers library on tokenizer.json (the older layout real checkpoints
    ship) differs only where trailing spaces leave a final "▁" token; those texts are printed."""
    out: list[list[int]] = []
    for text in texts:
        ids = hf_tok(text, add_special_tokens=True, truncation=True, max_length=MAX_SEQ)["input_ids"]
        full = hf_tok(text, add_special_tokens=True)["input_ids"]
        sp_ids = [0, *(i + 1 if i >= 3 else 3 for i in sp.encode(text)), 2]
        assert full == sp_ids, f"transformers and sentencepiece differ on {text[:30]!r}"
        raw_ids = raw.encode(text).ids
        if raw_ids != full:
            print(f"note: tokenizer.json via tokenizers differs on {text[:30]!r}: {raw.encode(text).tokens[-3:]}")
        assert ids[0] == 0 and ids[-1] == 2
        out.append(ids)
    return out


def main() -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, XLMRobertaForSequenceClassification, XLMRobertaModel

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    proto = train_sentencepiece()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    raw = build_tokenizer(proto)
    vocab_size = raw.get_vocab_size()
    assert vocab_size == SPM_VOCAB + 2, vocab_size
    for out in (OUT_EMBED, OUT_RANK):
        shutil.rmtree(out, ignore_errors=True)
        write_tokenizer(out / "checkpoint", proto, raw)
    texts = [*common.TEXTS, *EXTRA_TEXTS]

    # --- bge-m3 shape: XLMRobertaModel + CLS pooling + Normalize
    embed_dir = OUT_EMBED / "checkpoint"
    torch.manual_seed(SEED)
    embed = XLMRobertaModel(model_config(vocab_size, rank=False), add_pooling_layer=True).eval()
    randomize(embed, SEED + 1)
    save_model(embed, embed_dir)
    write_st_modules(embed_dir)
    hf_tok = AutoTokenizer.from_pretrained(str(embed_dir))
    token_ids = check_token_ids(hf_tok, raw, sp, texts)

    # the saved float16 weights loaded as float32: the same numbers as ``embed``
    st = SentenceTransformer(str(embed_dir), device="cpu", model_kwargs={"dtype": torch.float32})
    assert st.max_seq_length == MAX_SEQ, st.max_seq_length
    vectors = st.encode(texts, batch_size=4, normalize_embeddings=False, convert_to_numpy=True).astype(np.float64)
    with torch.no_grad():  # the same by hand: the <s> token's hidden state, L2-normalized
        for text, ids, vec in zip(texts, token_ids, vectors, strict=True):
            hidden = embed(input_ids=torch.tensor([ids])).last_hidden_state[0, 0].double().numpy()
            hidden /= np.linalg.norm(hidden)
            assert np.allclose(hidden, vec, atol=2e-5), text[:30]
    cos = vectors @ vectors.T
    off = cos[~np.eye(len(texts), dtype=bool)]
    print(f"embed: {len(texts)} texts, pairwise cosine of different texts max {off.max():.3f} "
          f"mean {off.mean():.3f}; long text {len(token_ids[len(common.TEXTS) - 1])} tokens")
    common.write_reference("xlm_roberta_embed", {
        "architecture": "XLMRobertaModel", "max_seq_length": MAX_SEQ, "pooling": "cls",
        "texts": texts, "token_ids": token_ids, "vectors": vectors.tolist(),
    })

    # --- bge-reranker-v2-m3 shape: XLMRobertaForSequenceClassification, one label
    rank_dir = OUT_RANK / "checkpoint"
    torch.manual_seed(SEED + 10)
    ranker = XLMRobertaForSequenceClassification(model_config(vocab_size, rank=True)).eval()
    randomize(ranker, SEED + 11)
    save_model(ranker, rank_dir)
    rank_tok = AutoTokenizer.from_pretrained(str(rank_dir))
    query, docs = common.RERANK["query"], list(common.RERANK["documents"])
    pairs = rank_tok([query] * len(docs), docs, add_special_tokens=True)["input_ids"]
    q_ids = rank_tok(query, add_special_tokens=False)["input_ids"]
    for doc, ids in zip(docs, pairs, strict=True):  # <s> q </s></s> d </s>
        d_ids = rank_tok(doc, add_special_tokens=False)["input_ids"]
        assert ids == [0, *q_ids, 2, 2, *d_ids, 2], ids
    with torch.no_grad():
        scores = [float(ranker(input_ids=torch.tensor([ids])).logits[0, 0]) for ids in pairs]
    print(f"rank: scores {np.round(scores, 4).tolist()}")
    rank_token_ids = check_token_ids(rank_tok, raw, sp, texts)
    common.write_reference("xlm_roberta_rank", {
        "architecture": "XLMRobertaForSequenceClassification", "max_seq_length": MAX_SEQ,
        "texts": texts, "token_ids": rank_token_ids,
        "rerank": {"query": query, "documents": docs, "scores": scores, "token_ids": pairs},
    })
    for out in (OUT_EMBED, OUT_RANK):
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"{out.relative_to(common.ROOT)}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
