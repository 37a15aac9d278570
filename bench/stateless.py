"""A stateless search worker against its writer, on the same embedded Qdrant store (docs/deploy.md#stateless-workers):
search p50 and p95 of the writer's state route and of the worker (no state database), unfiltered and filtered,
dense and hybrid, with metadata facets or none, after a warm-up; and whether the two return the same ids in the same
order (and the same facets).

    python bench/stateless.py --files 2000 --searches 200

A synthetic corpus of Markdown notes with front matter (author, date, pages) is indexed once into embedded
Qdrant (the default model); the writer answers, closes, then a worker with an empty data directory opens the
same store read-only and answers the same searches. Run under /work/shared/tools/quiet-run on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = ["budget", "review", "travel", "expenses", "sourdough", "bread", "rise", "saturn", "rings", "ice", "api",
         "keys", "audit", "rotate", "tomatoes", "water", "summer", "garden", "roses", "backup", "policy", "deploy",
         "cluster", "shard", "replica", "index", "search", "filter", "worker"]
SEARCHES: list[tuple[str, list[str], list[str]]] = [  # (mode, where, facets)
    ("dense", [], []), ("hybrid", [], []), ("dense", ["author=lovelace"], []), ("hybrid", ["date>=2025-06"], []),
    ("hybrid", ["pages>20", "type=md"], []), ("dense", ["path~d1/*.md"], []),
    ("hybrid", ["modified>=2024-01-01"], []),
    ("hybrid", [], ["author", "date"]), ("dense", ["pages>20"], ["author", "folder"]),  # metadata facets
]


def corpus(folder: Path, files: int) -> None:
    import random

    rnd = random.Random(7)
    for i in range(files):
        path = folder / f"d{i % 20}" / f"n{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(rnd.choice(WORDS) for _ in range(120))
        path.write_text(f"---\nauthor: {rnd.choice(['Ada Lovelace', 'Grace Hopper', 'Linus'])}\n"
                        f"date: 2025-{1 + i % 12:02d}-0{1 + i % 9}\npages: {i % 40}\n---\n\n# Note {i}\n\n{body}\n")


def timed(search, queries: list[str]) -> tuple[dict[str, list[float]], dict[str, list[object]]]:
    """p50 inputs and answers (ids in order, and the facets asked) of every search."""
    times: dict[str, list[float]] = {}
    ids: dict[str, list[object]] = {}
    for mode, where, facets in SEARCHES:
        label = f"{mode} {' '.join(where) or '(no filter)'}" + (f" facets {','.join(facets)}" if facets else "")
        for q in queries[:5]:  # warm-up
            search(q, mode, where, facets)
        for q in queries:
            started = time.perf_counter()
            res = search(q, mode, where, facets)
            times.setdefault(label, []).append((time.perf_counter() - started) * 1000)
            ids.setdefault(label, []).append(([h.chunk_id for h in res.hits], res.facets))
    return times, ids


def main() -> None:
    import indexer
    from indexer.collection.facade import open_reader
    from indexer.models.native import machine_line
    from indexer.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    print(machine_line(), flush=True)  # every figure names its CPU
    rnd_queries = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3)) for i in range(args.searches)]
    with tempfile.TemporaryDirectory() as tmp:
        root, data, empty = Path(tmp) / "corpus", Path(tmp) / "writer", Path(tmp) / "worker"
        corpus(root, args.files)
        empty.mkdir()
        writer = Settings(data_dir=data, store="qdrant")
        with indexer.open_collection("bench", settings=writer) as col:
            report = col.index([root])
            print(f"indexed {report.files_indexed} files, {report.points_upserted} points", flush=True)

            def on_writer(q: str, mode: str, where: list[str], facets: list[str]):
                return col.search(q, k=10, mode=mode, where=where, rerank=False, facets=facets)

            w_times, w_ids = timed(on_writer, rnd_queries)
        worker = Settings(data_dir=empty, store="qdrant", stateless=True,
                          store_options={"path": str(data / "qdrant" / "bench")})
        reader = open_reader("bench", worker)
        try:
            def on_worker(q: str, mode: str, where: list[str], facets: list[str]):
                return reader.search(q, k=10, mode=mode, where=where, rerank=False, facets=facets)

            s_times, s_ids = timed(on_worker, rnd_queries)
        finally:
            reader.close()
        assert not os.listdir(empty), "the worker wrote into its data directory"
    rows = []
    for label in w_times:
        w50, s50 = statistics.median(w_times[label]), statistics.median(s_times[label])
        w95 = statistics.quantiles(w_times[label], n=20)[18]
        s95 = statistics.quantiles(s_times[label], n=20)[18]
        same = sum(a == b for a, b in zip(w_ids[label], s_ids[label], strict=True))
        rows.append({"search": label, "writer_p50_ms": round(w50, 2), "worker_p50_ms": round(s50, 2),
                     "ratio_p50": round(s50 / w50, 2), "writer_p95_ms": round(w95, 2), "worker_p95_ms": round(s95, 2),
                     "same_ids_and_order": f"{same}/{len(w_ids[label])}"})
        print(f"{label:40s} writer p50 {w50:7.2f} ms  worker p50 {s50:7.2f} ms  x{s50 / w50:4.2f}  "
              f"(p95 {w95:.2f} / {s95:.2f})  same {same}/{len(w_ids[label])}", flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
