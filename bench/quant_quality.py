"""The weight types of the default embedding model (f32, f16, bf16, q8_0 and llama.cpp's k-quants): retrieval
quality, closeness to f32, speed and size on a BEIR set, same run.

A short retrieval eval: the first ``--queries`` queries that have judgments, against a corpus of their relevant
documents plus ``--distractors`` other documents (deterministic sample), each document (title + text) cut at
256 tokens as MTEB does; brute-force cosine; nDCG@10 and recall@10 from the qrels. The models embed the same
texts, interleaved, so the tokens/s ratio is measured under the same machine load.

    .venv/bin/python bench/quant_quality.py ../shared/eval/scifact-train [--queries 300] [--distractors 700]
        [--quants f32,f16,bf16,q8_0,q4_K_M,q5_K_M,q6_K]

Each type's line names the file's real mix of matrix types (a k-quant file of MiniLM's 384 widths is mostly
q5_0/q8_0: llama.cpp falls back where rows are not multiples of 256), its size, nDCG@10, the minimum cosine of
its document vectors to the first type's (f32 when listed first) and its tokens/s against q8_0's.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load_beir(root: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    corpus: dict[str, str] = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            corpus[str(d["_id"])] = f"{d.get('title', '')}\n\n{d.get('text', '')}".strip()
    queries: dict[str, str] = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = str(q["text"])
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels.tsv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return corpus, queries, qrels


def ndcg_at_10(ranked: list[str], rels: dict[str, int]) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def type_mix(path: Path) -> str:
    """The file's matrices by type, commonest first: "q5_0 x24, q8_0 x13"."""
    from gguf import GGMLQuantizationType

    from indexer.models.gguf_header import read_header
    from indexer.models.quantize import canonical

    counts: dict[str, int] = {}
    for dims, kind in read_header(path).tensors:
        if len(dims) >= 2 and int(dims[1]) > 1:
            name = canonical(GGMLQuantizationType(kind).name)
            counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("beir", type=Path, help="BEIR folder with corpus.jsonl, queries.jsonl, qrels.tsv")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--distractors", type=int, default=700)
    ap.add_argument("--quants", default="f16,q8_0")
    args = ap.parse_args()

    from indexer.engine.llama_embedding import LlamaEmbedding
    from indexer.models import ensure_model

    corpus, queries, qrels = load_beir(args.beir)
    qids = [q for q in queries if q in qrels][: args.queries]
    relevant = sorted({d for q in qids for d in qrels[q] if d in corpus})
    others = sorted(set(corpus) - set(relevant))
    random.Random(13).shuffle(others)
    doc_ids = relevant + others[: args.distractors]
    quants = args.quants.split(",")
    files = {q: ensure_model(quant=q) for q in quants}
    engines = {q: LlamaEmbedding(str(files[q]), verbose=False) for q in quants}
    first = engines[quants[0]]
    docs = []
    for d in doc_ids:  # cut at 256 tokens (the model's max_seq_length) with the GGUF tokenizer
        toks = first.tokenize(corpus[d].encode("utf-8"), add_bos=False)[:254]
        docs.append(first.detokenize(toks).decode("utf-8", errors="ignore"))
    qtexts = [queries[q] for q in qids]
    n_tokens = sum(len(first.tokenize(t.encode("utf-8"))) for t in docs)
    vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seconds: dict[str, list[float]] = {q: [] for q in quants}
    for start in range(0, len(docs), 100):  # interleaved slices: both models see the same machine load
        part = docs[start:start + 100]
        for q, e in engines.items():
            t0 = time.perf_counter()
            vecs, _ = e.embed_arrays(part)
            seconds[q].append(time.perf_counter() - t0)
            prev = vectors.get(q, (np.zeros((0, 384)), np.zeros((0, 384))))[0]
            vectors[q] = (np.vstack([prev, np.asarray(vecs)]), np.zeros((0, 384)))
    print(f"{len(qids)} queries, {len(doc_ids)} documents ({len(relevant)} relevant), {n_tokens:,} document tokens")
    base_rate = None
    rates: dict[str, float] = {}
    rows = []
    for q, e in engines.items():
        qv = np.asarray(e.embed_arrays(qtexts)[0])
        dv = vectors[q][0]
        scores = qv @ dv.T
        ndcgs, recalls = [], []
        for i, qid in enumerate(qids):
            top = [doc_ids[j] for j in np.argsort(-scores[i])[:10]]
            rels = {d: r for d, r in qrels[qid].items() if d in corpus}
            ndcgs.append(ndcg_at_10(top, rels))
            recalls.append(len(set(top) & set(rels)) / len(rels))
        rate = n_tokens / sum(seconds[q])
        base_rate = base_rate or rate
        per_slice = [a / b for a, b in zip(seconds[quants[0]], seconds[q], strict=True)]
        rates[q] = rate
        cos = np.sum(vectors[quants[0]][0] * dv, axis=1)
        print(f"{q}: nDCG@10 {np.mean(ndcgs):.4f}, recall@10 {np.mean(recalls):.4f}, {rate:,.0f} tok/s "
              f"({rate / base_rate:.2f}x {quants[0]}; per-slice ratios {min(per_slice):.2f}-{max(per_slice):.2f}); "
              f"min cosine to {quants[0]} {cos.min():.5f}; {files[q].stat().st_size / 1e6:.1f} MB; "
              f"{type_mix(files[q])}",
              flush=True)
        rows.append((q, type_mix(files[q]), files[q].stat().st_size / 1e6, float(np.mean(ndcgs)), float(cos.min()),
                     rate))
    ref = rates.get("q8_0")
    print(f"\n| type | matrices (real mix) | size | nDCG@10 | min cosine to {quants[0]} | tok/s | vs q8_0 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for q, mix, size, ndcg, cmin, rate in rows:
        against = f"{rate / ref:.2f}x" if ref else "-"
        print(f"| {q} | {mix} | {size:.1f} MB | {ndcg:.4f} | {cmin:.5f} | {rate:,.0f} | {against} |")
    for e in engines.values():
        e.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
