"""Tiny Qwen3 checkpoints (random weights) in the two forms the seed serves, with their reference outputs.

Run with a Python that has torch, transformers, sentence-transformers and tokenizers::

    nice -n 10 /work/benchvenv/bin/python tools/tiny_models/qwen3.py

Writes ``tests/fixtures/families/qwen3-embedding/`` and ``tests/fixtures/families/qwen3-reranker/``
(``checkpoint/`` plus ``reference.json``, see :mod:`common`). Both share one byte-level BPE tokenizer trained with
the ``tokenizers`` library on :func:`common.training_text` with Qwen2/Qwen3's pre-tokenizer (NFC, the Qwen2
split regex, ByteLevel without its own regex), Qwen's special tokens after the learned vocabulary
(``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, and ``<think>`` / ``</think>`` as non-special added tokens),
wrapped as ``Qwen2TokenizerFast``.

* ``qwen3-embedding``: as Qwen3-Embedding is published: weights saved from ``Qwen3Model`` (no lm_head, tied
  embeddings) with ``architectures: ["Qwen3ForCausalLM"]``; the tokenizer appends ``<|endoftext|>`` (a
  TemplateProcessing post-processor), pads on the left; sentence-transformers modules Transformer ->
  Pooling(lasttoken) -> Normalize, the query prompt in ``config_sentence_transformers.json``. The reference is
  sentence-transformers' ``encode(..., normalize_embeddings=True)``.
* ``qwen3-reranker``: as Qwen3-Reranker is published: a ``Qwen3ForCausalLM`` with tied embeddings, a plain
  Qwen tokenizer (nothing appended), a README whose title names Qwen3-Reranker (how llama.cpp's converter
  recognises it). The reference score is the first output of the head llama.cpp's converter builds from the
  "yes" and "no" rows of the output matrix, computed in transformers: llama.cpp's RANK pooling takes the last
  token's hidden state (after the final norm), multiplies it by the [yes, no] rows and, for qwen3, applies a
  softmax (llama-graph.cpp, ``build_pooling``), so the first output is P(yes) = softmax(yes, no)[0], which is
  also Qwen3-Reranker's own published score. The prompt is llama.cpp's ``rerank`` template.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FIXTURES, RERANK, TEXTS, training_text, write_reference  # noqa: E402

PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
VOCAB = 4000
CONFIG_VOCAB = 4096  # config.json's vocab_size is larger than the tokenizer, as Qwen3's is (151936 > 151669)
MAX_SEQ = 512
SEED = 1234
INIT_RANGE = 0.1  # larger than Qwen3's 0.02 so that random weights give distinct vectors and scores

QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
# llama.cpp's converter (conversion/qwen.py, Qwen3Model.set_gguf_parameters) writes this as the rerank template.
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
    "<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)


def train_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # "yes" and "no" (no leading space: they follow "\n\n" in the template) must be single tokens
    lines = training_text() + ["yes", "no", "\n\nyes", "\n\nno"] * 200 + [RERANK_TEMPLATE] * 20
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    for word in ("yes", "no"):
        assert tok.token_to_id(word) is not None, f"{word!r} is not a single token"
    return tok


def save_tokenizer(tok: Tokenizer, out: Path, append_eos: bool) -> None:
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer.from_str(tok.to_str())
    if append_eos:  # Qwen3-Embedding's tokenizer appends <|endoftext|> to every text
        eos = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(
            single="$A:0 <|endoftext|>:0", pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
            special_tokens=[("<|endoftext|>", eos)])
    wrapped = Qwen2TokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                 pad_token="<|endoftext|>", unk_token=None, add_prefix_space=False,
                                 padding_side="left" if append_eos else "right", model_max_length=131072)
    wrapped.save_pretrained(out)


def config(arch: str, tok: Tokenizer, eos: str) -> object:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=CONFIG_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,  # head_dim * heads != hidden, as in Qwen3-0.6B
        max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        initializer_range=INIT_RANGE, bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id(eos),
        architectures=[arch], use_sliding_window=False, attention_bias=False, hidden_act="silu",
    )


def build_embedding(tok: Tokenizer) -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, Qwen3Model

    family = "qwen3-embedding"
    root = FIXTURES / family
    out = root / "checkpoint"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    torch.manual_seed(SEED)
    model = Qwen3Model(config("Qwen3ForCausalLM", tok, "<|endoftext|>")).eval()
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    cfg = json.loads((out / "config.json").read_text())
    cfg["architectures"] = ["Qwen3ForCausalLM"]  # what Qwen3-Embedding's config.json names (saved from Qwen3Model)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_tokenizer(tok, out, append_eos=True)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=2) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True,
    }, indent=2) + "\n")
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": MAX_SEQ, "do_lower_case": False}))
    (out / "config_sentence_transformers.json").write_text(json.dumps({
        "prompts": {"query": QUERY_PROMPT, "document": ""}, "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }, indent=2) + "\n")
    (out / "README.md").write_text("# tiny Qwen3-Embedding\n\nRandom weights, for tests only "
                                   "(tools/tiny_models/qwen3.py).\n")

    reference_tok = AutoTokenizer.from_pretrained(out)
    st = SentenceTransformer(str(out), device="cpu", model_kwargs={"dtype": torch.float32})
    assert st.max_seq_length == MAX_SEQ, st.max_seq_length
    token_ids = [reference_tok(t, truncation=True, max_length=MAX_SEQ)["input_ids"] for t in TEXTS]
    for text, ids in zip(TEXTS, token_ids, strict=True):  # sentence-transformers tokenizes the same way
        feats = st.tokenize([text])
        assert feats["input_ids"][0][feats["attention_mask"][0].bool()].tolist() == ids, text[:40]
    vectors = st.encode(TEXTS, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    # queries as sentence-transformers embeds them for retrieval: the "query" prompt before the text
    queries = [RERANK["query"], "glaciers carve valleys", "冰川"]
    query_vectors = st.encode(queries, prompt_name="query", normalize_embeddings=True, convert_to_numpy=True)
    write_reference(family, {
        "architecture": "Qwen3ForCausalLM", "max_seq_length": MAX_SEQ, "texts": TEXTS, "token_ids": token_ids,
        "vectors": vectors.astype(float).tolist(),
        "queries": {"prompt": QUERY_PROMPT, "texts": queries, "vectors": query_vectors.astype(float).tolist()},
    })


def build_reranker(tok: Tokenizer) -> None:
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    family = "qwen3-reranker"
    root = FIXTURES / family
    out = root / "checkpoint"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    torch.manual_seed(SEED + 1)
    model = Qwen3ForCausalLM(config("Qwen3ForCausalLM", tok, "<|im_end|>")).eval()
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    save_tokenizer(tok, out, append_eos=False)
    (out / "README.md").write_text("# Qwen3-Reranker (tiny)\n\nRandom weights, for tests only "
                                   "(tools/tiny_models/qwen3.py).\n")

    reference_tok = AutoTokenizer.from_pretrained(out)
    model = Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    yes, no = reference_tok.convert_tokens_to_ids("yes"), reference_tok.convert_tokens_to_ids("no")
    token_ids = [reference_tok(t, truncation=True, max_length=MAX_SEQ)["input_ids"] for t in TEXTS]
    pairs, scores, logits_yes_no = [], [], []
    with torch.no_grad():
        for doc in RERANK["documents"]:
            prompt = RERANK_TEMPLATE.replace("{query}", RERANK["query"]).replace("{document}", doc)
            ids = reference_tok(prompt, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([ids])).logits[0, -1]
            pair = torch.stack([logits[yes], logits[no]])  # the head's two outputs: the [yes, no] rows
            pairs.append(ids)
            logits_yes_no.append(pair.tolist())
            scores.append(float(torch.softmax(pair, dim=0)[0]))
    write_reference(family, {
        "architecture": "Qwen3ForCausalLM", "max_seq_length": MAX_SEQ, "texts": TEXTS, "token_ids": token_ids,
        "rerank": {**RERANK, "scores": scores, "template": RERANK_TEMPLATE, "token_ids": pairs,
                   "logits_yes_no": logits_yes_no, "labels": ["yes", "no"]},
    })


def main() -> None:
    torch.manual_seed(SEED)
    tok = train_tokenizer()
    build_embedding(tok)
    build_reranker(tok)
    for family in ("qwen3-embedding", "qwen3-reranker"):
        size = sum(p.stat().st_size for p in (FIXTURES / family).rglob("*") if p.is_file())
        print(f"{family}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
