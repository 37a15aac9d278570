"""Indexing throughput on a Ray cluster (issue 47) against one process, on the same documents in the same run.

Runs, each into a fresh data directory (FAISS store, the default model; a Markdown file per document):
  * ``alone``: today's single-process engine with 2 llama.cpp threads (no cluster);
  * ``ray-1x1``: a local Ray cluster (loopback, token authentication, a head without CPUs) with ONE worker node
    of 1 CPU, the writer beside it (its own context for small batches, 1 thread);
  * ``ray-2x1``: the same with TWO worker nodes of 1 CPU;
  * ``ceiling-faiss`` / ``ceiling-qdrant``: the writer alone with every vector precomputed (a second collection
    in the ``ray-2x1`` data directory: all chunks come from the vector cache): chunks/s it can write, and from it
    how many worker cores one writer can feed.
For each: wall seconds, tokens/s of the run (tokens embedded / wall), the writer process's CPU seconds per wall
second (its share), and the ratios the issue's goals name (2x1 / 1x1 >= 1.6; 2x1 / alone >= 0.9).

Usage: python bench/cluster_throughput.py --beir PATH/corpus.jsonl [--docs 600] [--out results.json]
Run it under ../shared/tools/quiet-run; on a 2-core machine the two 1-CPU nodes and the writer share 2 cores, so
the 2x1 run measures the price of distribution more than its gain (docs/benchmarks.md says how to read it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_AUTH_MODE", "token")  # before Ray is imported (indexer.cluster.connect)
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def write_docs(beir: Path, dest: Path, n: int) -> int:
    count = 0
    with beir.open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            (dest / f"{doc['_id']}.md").write_text(f"# {doc.get('title', '')}\n\n{doc['text']}\n", encoding="utf-8")
            count += 1
            if count >= n:
                break
    return count


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(name: str, corpus: Path, data: Path, model: str, **overrides: Any) -> dict[str, Any]:
    from indexer.collection.facade import open_collection

    cpu0, t0 = cpu_seconds(), time.perf_counter()
    with open_collection(overrides.pop("collection", "bench"), data_dir=str(data), embed_model=model,
                         **overrides) as col:
        report = col.index([corpus])
    wall = time.perf_counter() - t0
    out = {"run": name, "wall_s": round(wall, 2), "files": report.files_indexed, "chunks": report.chunks_embedded,
           "reused": report.chunks_reused, "tokens": report.tokens_embedded,
           "tokens_per_s": round(report.tokens_embedded / wall), "chunks_per_s": round(
               (report.chunks_embedded + report.chunks_reused) / wall, 1),
           "writer_cpu_share": round((cpu_seconds() - cpu0) / wall, 2)}
    if report.cluster:
        out["cluster"] = {k: report.cluster[k] for k in ("workers", "nodes", "local_texts", "per_node", "lost")}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from ray.cluster_utils import Cluster

    from indexer.cluster.connect import disconnect
    from indexer.models import ensure_model
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)
    model = str(ensure_model())
    work = Path(tempfile.mkdtemp(prefix="indexer-cluster-bench-"))
    corpus = work / "corpus"
    corpus.mkdir()
    n = write_docs(args.beir, corpus, args.docs)
    print(json.dumps({"documents": n, "model": Path(model).name}), flush=True)
    results = [run("alone", corpus, work / "alone", model, threads=2)]
    node = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 96 * 1024 * 1024,
        "node_ip_address": "127.0.0.1"})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        results.append(run("ray-1x1", corpus, work / "r1", model, threads=1, cluster=cluster.address))
        disconnect()  # the next run's embedder makes its pool anew, over both nodes
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        results.append(run("ray-2x1", corpus, work / "r2", model, threads=1, cluster=cluster.address))
    finally:
        disconnect()
        cluster.shutdown()
    results.append(run("ceiling-faiss", corpus, work / "r2", model, collection="ceiling", threads=2))
    results.append(run("ceiling-qdrant", corpus, work / "r2", model, collection="ceiling-q", store="qdrant",
                       threads=2))
    by = {r["run"]: r for r in results}
    summary = {
        "2x1_over_1x1": round(by["ray-2x1"]["tokens_per_s"] / by["ray-1x1"]["tokens_per_s"], 2),
        "2x1_over_alone": round(by["ray-2x1"]["tokens_per_s"] / by["alone"]["tokens_per_s"], 2),
        "writer_ceiling_chunks_per_s": {"faiss": by["ceiling-faiss"]["chunks_per_s"],
                                        "qdrant": by["ceiling-qdrant"]["chunks_per_s"]},
    }
    per_core = by["ray-1x1"]["chunks_per_s"]  # one worker core's chunks/s (its run's rate)
    summary["worker_cores_one_writer_feeds"] = {k: round(v / per_core, 1) for k, v in
                                                summary["writer_ceiling_chunks_per_s"].items()}
    print(json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "summary": summary}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
