"""The rerank stage's latency budget on a real collection: a default search (hybrid + rerank sized by
``rerank_budget_ms``) for real queries, p50/p95 of the whole search and how many candidates were reranked, for
several budgets. Validates the default budget (the issue: a default search with a reranker stays inside it).

    python bench/rerank_budget.py --data-dir DATA --collection bench --queries scifact/queries.jsonl \\
        --rerank-model tests/fixtures/models/test-reranker-q8_0.gguf [--budgets 500 1000 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import indexer

RERANKER = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "models" / "test-reranker-q8_0.gguf"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--collection", default="bench")
    ap.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl")
    ap.add_argument("--rerank-model", default=str(RERANKER))
    ap.add_argument("--budgets", type=float, nargs="*", default=[500.0, 1000.0, 2000.0])
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    queries = [json.loads(line)["text"] for line in args.queries.read_text().splitlines() if line][: args.n + 5]
    for budget in args.budgets:
        with indexer.open_collection(args.collection, data_dir=args.data_dir, rerank_model=args.rerank_model,
                                     rerank_budget_ms=budget) as col:
            for q in queries[:5]:  # warm up: models loaded, the pace measured
                col.search(q, k=10)
            lat, counts = [], []
            for q in queries[5:]:
                t0 = time.perf_counter()
                result = col.search(q, k=10)
                lat.append((time.perf_counter() - t0) * 1000)
                counts.append(result.rerank_count)
        inside = sum(v <= budget for v in lat) / len(lat)
        print(f"rerank_budget_ms {budget:g}: search p50 {pct(lat, 0.5):.0f} ms, p95 {pct(lat, 0.95):.0f} ms, "
              f"max {max(lat):.0f} ms, {inside:.0%} inside the budget; reranked {min(counts)}-{max(counts)} "
              f"candidates (median {statistics.median(counts):.0f})", flush=True)


if __name__ == "__main__":
    main()
