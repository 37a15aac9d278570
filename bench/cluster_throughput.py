"""Indexing throughput on a Ray cluster (issue 47) against one process, on the same documents in the same run.

Two folders: SciFact abstracts as Markdown (embedding-bound), and with ``--mixed N`` a mixed-format folder made
from the next N abstracts (a quarter each: scanned PDFs and PNG photos of the text, read by tesseract; DOCX made
by python-docx; Markdown), where parsing and OCR dominate. For each folder, runs into fresh data directories
(FAISS store, the default model):
  * ``alone``: today's single-process engine with 2 llama.cpp threads and 2 parse workers (no cluster);
  * ``ray-1x1``: a local Ray cluster (loopback, token authentication, a head without CPUs) with ONE worker node
    of 1 CPU, the writer beside it (its own context for small batches, 1 thread);
  * ``ray-2x1``: the same with TWO worker nodes of 1 CPU;
  * ``ceiling-faiss`` / ``ceiling-qdrant`` (SciFact only): the writer alone with every vector precomputed (a
    second collection in the ``ray-2x1`` data directory: all chunks come from the vector cache): chunks/s it can
    write, and from it how many worker cores one writer can feed.
For each: wall seconds, tokens/s and files/s of the run, the writer process's CPU seconds per wall second (its
share; ``writer_children_cpu_share``: its own parse workers, which OCR in the alone run), and the ratios the
issue's goals name (2x1 / 1x1 >= 1.6; 2x1 / alone >= 0.9). ``--part-chars`` / ``--step-tokens`` try other
part and embedding-step sizes (levers); tesseract runs with one thread (OMP_THREAD_LIMIT=1) everywhere, so a
1-CPU node uses one core.

Usage: python bench/cluster_throughput.py --beir PATH/corpus.jsonl [--docs 500] [--mixed 120] [--out results.json]
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
os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract: one thread per OCR (a 1-CPU node uses one core)


def abstracts(beir: Path, skip: int, n: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    with beir.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= skip:
                out.append(json.loads(line))
            if len(out) >= n:
                break
    return out


def write_docs(beir: Path, dest: Path, n: int) -> int:
    docs = abstracts(beir, 0, n)
    for doc in docs:
        (dest / f"{doc['_id']}.md").write_text(f"# {doc.get('title', '')}\n\n{doc['text']}\n", encoding="utf-8")
    return len(docs)


def write_mixed(beir: Path, dest: Path, skip: int, n: int) -> dict[str, int]:
    """N abstracts after the first ``skip``, a quarter each as a scanned PDF, a PNG photo, a DOCX, Markdown."""
    import sys
    import textwrap

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from docx import Document as Docx

    from tests.documents import render_page

    kinds = {"pdf": 0, "png": 0, "docx": 0, "md": 0}
    for i, doc in enumerate(abstracts(beir, skip, n)):
        title, text, stem = doc.get("title", "") or "Untitled", doc["text"], f"{doc['_id']}"
        kind = ("pdf", "png", "docx", "md")[i % 4]
        if kind in ("pdf", "png"):
            lines = [title[:60], "", *textwrap.wrap(text, 60)][:34]  # one A4 page at 150 dpi
            page = render_page(lines, dpi=150)
            if kind == "pdf":
                page.convert("RGB").save(dest / f"{stem}.pdf", "PDF", resolution=150)
            else:
                page.save(dest / f"{stem}.png")
        elif kind == "docx":
            d = Docx()
            d.add_heading(title, 1)
            for para in textwrap.wrap(text, 400):
                d.add_paragraph(para)
            d.save(str(dest / f"{stem}.docx"))
        else:
            (dest / f"{stem}.md").write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
        kinds[kind] += 1
    return kinds


LEVERS = ((4096, 4096), (2048, 16384), (8192, 16384))  # (characters per part, tokens per cluster embedding step)


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run(name: str, corpus: Path, data: Path, model: str, **overrides: Any) -> dict[str, Any]:
    from indexer.collection.facade import open_collection

    cpu0, kids0, t0 = cpu_seconds(), cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
    with open_collection(overrides.pop("collection", "bench"), data_dir=str(data), embed_model=model,
                         **overrides) as col:
        report = col.index([corpus])
    wall = time.perf_counter() - t0  # the collection closed: its parse workers ended (their CPU counted below)
    out = {"run": name, "wall_s": round(wall, 2), "files": report.files_indexed, "chunks": report.chunks_embedded,
           "reused": report.chunks_reused, "tokens": report.tokens_embedded, "failed": len(report.failed),
           "tokens_per_s": round(report.tokens_embedded / wall), "files_per_s": round(report.files_indexed / wall, 2),
           "chunks_per_s": round((report.chunks_embedded + report.chunks_reused) / wall, 1),
           "writer_cpu_share": round((cpu_seconds() - cpu0) / wall, 2),
           "writer_children_cpu_share": round((cpu_seconds(resource.RUSAGE_CHILDREN) - kids0) / wall, 2),
           "stages": {k: round(v, 2) for k, v in report.stages.items()}}
    if report.cluster:
        out["cluster"] = {k: report.cluster[k] for k in ("workers", "nodes", "local_texts", "per_node", "lost",
                                                          "reads_resent", "reads_given_back")}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--mixed", type=int, default=0, help="documents of the mixed-format folder (0: none)")
    parser.add_argument("--part-chars", type=int, help="characters per part sent to a worker (a lever)")
    parser.add_argument("--step-tokens", type=int, help="tokens per embedding step on the cluster (a lever)")
    parser.add_argument("--only-2x1", action="store_true", help="the 2x1 runs alone (a smoke test)")
    parser.add_argument("--levers", action="store_true", help="SciFact's 2x1 run again with other part and step sizes")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from ray.cluster_utils import Cluster

    from indexer.cluster import embedder as cluster_embedder
    from indexer.cluster.connect import disconnect
    from indexer.index import batching
    from indexer.models import ensure_model
    from indexer.models.native import machine_line

    if args.part_chars:
        cluster_embedder.PART_CHARS = args.part_chars
    if args.step_tokens:
        batching.CLUSTER_STEP_TOKENS = args.step_tokens
    print(machine_line(), flush=True)
    print(json.dumps({"load_start": os.getloadavg(), "part_chars": cluster_embedder.PART_CHARS,
                      "cluster_step_tokens": batching.CLUSTER_STEP_TOKENS}), flush=True)
    model = str(ensure_model())
    work = Path(tempfile.mkdtemp(prefix="indexer-cluster-bench-"))
    folders: dict[str, Path] = {}
    if args.docs:
        folders["scifact"] = work / "scifact"
        folders["scifact"].mkdir()
        n = write_docs(args.beir, folders["scifact"], args.docs)
        print(json.dumps({"folder": "scifact", "documents": n, "model": Path(model).name}), flush=True)
    if args.mixed:
        folders["mixed"] = work / "mixed"
        folders["mixed"].mkdir()
        kinds = write_mixed(args.beir, folders["mixed"], args.docs, args.mixed)
        print(json.dumps({"folder": "mixed", "documents": kinds}), flush=True)
    results: list[dict[str, Any]] = []
    if not args.only_2x1:
        for name, folder in folders.items():
            results.append({"folder": name, **run("alone", folder, work / f"{name}-alone", model, threads=2)})
    node = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 96 * 1024 * 1024,
        "node_ip_address": "127.0.0.1"})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        if not args.only_2x1:
            for name, folder in folders.items():
                results.append({"folder": name, **run("ray-1x1", folder, work / f"{name}-r1", model, threads=1,
                                                      cluster=cluster.address)})
                disconnect()  # the next run's embedder makes its pool anew
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        for name, folder in folders.items():
            results.append({"folder": name, **run("ray-2x1", folder, work / f"{name}-r2", model, threads=1,
                                                  cluster=cluster.address)})
            disconnect()
        for part, step in LEVERS if args.levers and "scifact" in folders else ():
            saved = cluster_embedder.PART_CHARS, batching.CLUSTER_STEP_TOKENS
            cluster_embedder.PART_CHARS, batching.CLUSTER_STEP_TOKENS = part, step
            try:
                results.append({"folder": "scifact", **run(f"ray-2x1 part {part} step {step}", folders["scifact"],
                                                           work / f"lever-{part}-{step}", model, threads=1,
                                                           cluster=cluster.address)})
            finally:
                cluster_embedder.PART_CHARS, batching.CLUSTER_STEP_TOKENS = saved
                disconnect()
    finally:
        disconnect()
        cluster.shutdown()
    if "scifact" in folders and not args.only_2x1:
        results.append({"folder": "scifact", **run("ceiling-faiss", folders["scifact"], work / "scifact-r2", model,
                                                   collection="ceiling", threads=2)})
        results.append({"folder": "scifact", **run("ceiling-qdrant", folders["scifact"], work / "scifact-r2", model,
                                                   collection="ceiling-q", store="qdrant", threads=2)})
    summary: dict[str, Any] = {"load_end": os.getloadavg()}
    base = next((r for r in results if r["run"] == "ray-2x1" and r["folder"] == "scifact"), None)
    for r in results:
        if r["run"].startswith("ray-2x1 part") and base:
            summary[f"{r['run']} over default 2x1"] = round(r["tokens_per_s"] / base["tokens_per_s"], 2)
    for name in folders:
        by = {r["run"]: r for r in results if r["folder"] == name}
        key = "tokens_per_s" if name == "scifact" else "files_per_s"
        if "ray-1x1" in by:
            summary[f"{name}_2x1_over_1x1"] = round(by["ray-2x1"][key] / by["ray-1x1"][key], 2)
        if "alone" in by:
            summary[f"{name}_2x1_over_alone"] = round(by["ray-2x1"][key] / by["alone"][key], 2)
        if "ceiling-faiss" in by and "ray-1x1" in by:
            ceiling = {"faiss": by["ceiling-faiss"]["chunks_per_s"], "qdrant": by["ceiling-qdrant"]["chunks_per_s"]}
            summary["writer_ceiling_chunks_per_s"] = ceiling
            per_core = by["ray-1x1"]["chunks_per_s"]  # one worker core's chunks/s (its run's rate)
            summary["worker_cores_one_writer_feeds"] = {k: round(v / per_core, 1) for k, v in ceiling.items()}
    print(json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "summary": summary}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
