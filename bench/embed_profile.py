"""Where embedding time goes: run the product's embedder on one shape of text for a fixed amount of work, for
``perf record`` to sample (ggml's kernels, attention, the thread barrier, Python).

    perf record -F 499 -g -o /tmp/embed.perf -- python bench/embed_profile.py --shape uniform --texts 600
    perf report -i /tmp/embed.perf --no-children --sort dso,symbol --stdio | head -60

Shapes: ``uniform`` (SciFact abstracts cut to ~196 tokens, the chunk size of a real collection) and ``short``
(SciFact queries). Prints tokens/s, so a profile is tied to the throughput it explains.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from indexer.core.normalization import Normalization
from indexer.engine.adapters import LlamaEmbedder
from indexer.models import ensure_model

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "eval" / "scifact-train"


def texts_for(shape: str, n: int, embedder: LlamaEmbedder) -> list[str]:
    if shape == "short":
        rows = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").read_text().splitlines() if line]
        return (rows * (n // len(rows) + 1))[:n]
    out = []
    with (SCIFACT / "corpus.jsonl").open() as fh:
        for line in fh:
            text = json.loads(line)["text"]
            words = text.split()
            while len(words) > 40 and embedder.count_tokens(" ".join(words)) > 196:
                words = words[: int(len(words) * 0.9)]
            if embedder.count_tokens(" ".join(words)) >= 150:
                out.append(" ".join(words))
            if len(out) >= n:
                break
    return out


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["uniform", "short"], default="uniform")
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--quant", default=None, help="weight type (default: this CPU's)")
    args = ap.parse_args()
    embedder = LlamaEmbedder(ensure_model(quant=args.quant) if args.quant else ensure_model())
    texts = texts_for(args.shape, args.texts, embedder)
    tokens = sum(embedder.count_tokens(t) for t in texts)
    embedder.embed_batch(texts[:32], Normalization.L2)  # warm up
    t0 = time.perf_counter()
    for i in range(0, len(texts), 256):
        embedder.embed_batch(texts[i : i + 256], Normalization.L2)
    seconds = time.perf_counter() - t0
    print(f"{args.shape}: {len(texts)} texts, {tokens:,} tokens in {seconds:.2f}s = {tokens / seconds:,.0f} tok/s")
    embedder.close()


if __name__ == "__main__":
    main()
