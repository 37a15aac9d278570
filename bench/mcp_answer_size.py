"""How many characters an assistant pays for an MCP search answer: the compact default against `full=true`,
for 10 hits per query on real documents (BEIR SciFact abstracts; not a speed figure, so no quiet machine needed).

The documents relevant to the first ``--queries`` queries plus random others up to ``--docs`` are written one per
Markdown file (``# title``, blank line, abstract) as bench/retrieval_quality.py does, indexed with the Collection
API (default model) in a temporary data directory, and each query's answer is encoded exactly as the MCP tool
encodes it (indexer.codec: compact JSON, no indentation).

Usage: python bench/mcp_answer_size.py [BEIR_DIR] [--docs 1000] [--queries 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_quality import load_beir, write_corpus  # noqa: E402

import indexer  # noqa: E402
from indexer.codec import compact_result_json, result_json  # noqa: E402
from indexer.models.native import machine_line  # noqa: E402


def encoded(data: dict) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("beir", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared/eval/scifact-train"))
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(machine_line(), file=sys.stderr, flush=True)  # every figure names its CPU (stdout: the JSON)

    corpus, queries, qrels = load_beir(Path(args.beir))
    chosen = list(queries.items())[: args.queries]
    wanted = {d for q, _ in chosen for d in qrels.get(q, ())}
    rest = [d for d in corpus if d["_id"] not in wanted]
    random.Random(7).shuffle(rest)
    docs = [d for d in corpus if d["_id"] in wanted] + rest[: max(0, args.docs - len(wanted))]

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        write_corpus(docs, folder)
        with indexer.open_collection("mcp-size", data_dir=Path(tmp) / "data") as col:
            report = col.index([folder])
            compact, full = [], []
            for _, text in chosen:
                result = col.search(text, k=10)
                compact.append(encoded(compact_result_json(result, "mcp-size")))
                full.append(encoded(result_json(result, "mcp-size")))

    def summary(sizes: list[int]) -> dict[str, float]:
        ordered = sorted(sizes)
        return {"mean": round(statistics.mean(sizes)), "p95": ordered[int(0.95 * (len(ordered) - 1))],
                "max": ordered[-1]}

    out = {"docs": len(docs), "chunks": report.chunks_embedded + report.chunks_reused, "queries": len(chosen),
           "k": 10, "compact": summary(compact), "full": summary(full),
           "over_3000": sum(1 for s in compact if s >= 3000)}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
