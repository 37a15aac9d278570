"""HTTP API latency and throughput against a real `indexer serve` process, with in-process references measured
in the same run (the machine is shared and noisy: compare ratios, not absolute figures).

Measures:
  * /search p50/p95/p99 without rerank and with rerank of 20 candidates, at 1 and 8 concurrent clients, over a
    collection of ~10,000 chunks; reference: Collection.search in-process on the same queries;
  * /v1/embeddings throughput (tokens/s, batches of 32 texts) vs LlamaEmbedding.embed called directly;
  * `indexer search` end to end (process start included) against the running server, and with --local.

The collection: --real small files (one chunk each, paragraphs of this repo's docs) indexed through the pipeline,
padded with synthetic points (random unit vectors, filler text) added to the store up to --chunks points. It is
built once in --workdir and reused.

Usage: python bench/api_latency.py [--real 300] [--chunks 10000] [--workdir DIR] [--quick] [--out r.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
RERANKER = REPO / "tests" / "fixtures" / "models" / "test-reranker-q8_0.gguf"
QUERIES = [
    "how are unchanged files skipped on the second run",
    "which store is the embedded default and why",
    "normalization for cosine similarity",
    "what happens when indexing crashes halfway",
    "rotate the api keys",
    "reranking latency budget",
    "qdrant server with an api key",
    "PDF page numbers in search hits",
    "token aware chunking with overlap",
    "how to search only markdown files",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": pct(ms, 0.5), "p95": pct(ms, 0.95), "p99": pct(ms, 0.99), "mean": statistics.mean(ms)}


def paragraphs() -> list[str]:
    """Distinct paragraphs: the repo's docs and README split on blank lines, plus numbered variants."""
    texts: list[str] = []
    for p in sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]:
        texts += [t.strip() for t in p.read_text(encoding="utf-8").split("\n\n") if len(t.strip()) > 80]
    rng = random.Random(7)
    out = []
    for i in range(400):
        base = texts[i % len(texts)]
        words = base.split()
        rng.shuffle(words) if i >= len(texts) else None
        out.append(" ".join(words[:180]))
    return out


def build(workdir: Path, n_real: int, n_chunks: int, settings: Any, env: dict[str, str]) -> None:
    """Index ``n_real`` real files through the pipeline (`indexer index`), then add synthetic points (random unit
    vectors, filler text under /synthetic/) straight to the store until it holds ``n_chunks`` points. Indexing
    10,000 real files takes too long on a shared 2-core machine; search latency depends on the store's size,
    which is what the padding gives."""
    marker = workdir / f"built-{n_real}-{n_chunks}"
    if marker.exists():
        return
    import numpy as np

    from indexer.collection.facade import open_collection
    from indexer.types import Point

    corpus = workdir / "corpus"
    paras = paragraphs()
    for i in range(n_real):
        (corpus / f"d{i // 100:02d}").mkdir(parents=True, exist_ok=True)
        (corpus / f"d{i // 100:02d}" / f"f{i:05d}.md").write_text(f"# Note {i}\n\n{paras[i % len(paras)]}\n")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "indexer.cli", "index", str(corpus)], env=env, check=True)
    print(f"indexed {n_real} files in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    rng = np.random.default_rng(7)
    with open_collection("default", settings=settings) as col:
        have = col.store.count("default")
        dims = col.record.dimensions if col.record else 384
        for start in range(have, n_chunks, 1000):
            n = min(1000, n_chunks - start)
            vecs = rng.standard_normal((n, dims)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            points = [
                Point(
                    f"00000000-0000-4000-8000-{start + i:012d}",
                    vecs[i],
                    {
                        "path": f"/synthetic/s{start + i}.md",
                        "root": "/synthetic",
                        "rel_path": f"s{start + i}.md",
                        "file_type": "md",
                        "kind": "markdown",
                        "chunk_index": 0,
                        "text": paras[(start + i) % len(paras)],
                        "start_line": 1,
                        "end_line": 3,
                        "start_byte": 0,
                        "end_byte": 100,
                        "heading": [],
                        "dirs": ["/synthetic"],
                    },
                )
                for i in range(n)
            ]
            col.store.upsert("default", points)
        print(f"store holds {col.store.count('default')} points", file=sys.stderr)
    marker.touch()


def start_server(env: dict[str, str], data: Path) -> tuple[subprocess.Popen[bytes], str]:
    from indexer.server import announce

    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "serve", "--no-watch"], env=env)
    deadline = time.monotonic() + 300
    while True:
        ann = announce.read(data)
        if ann is not None:
            try:
                if httpx.get(ann.url + "/readyz", timeout=10).status_code == 200:
                    return proc, ann.url
            except httpx.HTTPError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the server did not become ready")
        time.sleep(0.2)


def http_search(url: str, clients: int, n: int, body: dict[str, Any]) -> dict[str, float]:
    lat: list[float] = []
    lock = threading.Lock()
    per = max(1, n // clients)

    def run(c: int) -> None:
        with httpx.Client(base_url=url, timeout=300) as http:
            for i in range(per):
                q = QUERIES[(c * per + i) % len(QUERIES)]
                t = time.perf_counter()
                r = http.post("/search", json={**body, "query": q})
                dt = (time.perf_counter() - t) * 1000
                r.raise_for_status()
                with lock:
                    lat.append(dt)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    wall = time.perf_counter() - t0
    return {**summary(lat), "qps": len(lat) / wall}


def direct_search(settings: Any, n: int, **opts: Any) -> dict[str, float]:
    from indexer.collection.facade import open_collection

    lat = []
    with open_collection("default", settings=settings) as col:
        col.search(QUERIES[0], **opts)  # load models
        for i in range(n):
            t = time.perf_counter()
            col.search(QUERIES[i % len(QUERIES)], **opts)
            lat.append((time.perf_counter() - t) * 1000)
    return summary(lat)


def embeddings(url: str, model_path: str, rounds: int) -> dict[str, float]:
    """/v1/embeddings vs LlamaEmbedding.embed in this process, interleaved (3 turns of ``rounds`` calls each, both
    warmed up first), so both see the same machine; the median turn's ratio is reported."""
    from indexer.engine.llama_embedding import LlamaEmbedding

    emb = LlamaEmbedding(model_path, verbose=False)
    # chunk-sized texts the model takes whole (the API refuses an input over the model's 256 tokens)
    texts = [t for t in (p[:600] for p in paragraphs()) if len(emb.tokenize(t.encode())) <= 250][:32]
    turns: list[tuple[float, float]] = []
    try:
        with httpx.Client(base_url=url, timeout=300) as http:
            http.post("/v1/embeddings", json={"input": texts[:2]}).raise_for_status()
            emb.embed(texts[:2])
            for _ in range(3):
                t, tokens = time.perf_counter(), 0
                for _ in range(rounds):
                    r = http.post("/v1/embeddings", json={"input": texts, "encoding_format": "base64"})
                    r.raise_for_status()
                    tokens += r.json()["usage"]["total_tokens"]
                http_tps = tokens / (time.perf_counter() - t)
                t, tokens = time.perf_counter(), 0
                for _ in range(rounds):
                    tokens += emb.embed(texts, return_count=True)[1]
                turns.append((http_tps, tokens / (time.perf_counter() - t)))
    finally:
        emb.close()
    http_tps, direct_tps = sorted(turns, key=lambda x: x[0] / x[1])[1]
    return {"http_tokens_per_s": http_tps, "direct_tokens_per_s": direct_tps, "ratio": http_tps / direct_tps}


def cli_search(env: dict[str, str], n: int, local: bool | None) -> dict[str, float]:
    """`indexer search` as users run it (the console script); local=None times a bare `python -c pass` instead,
    the floor every command pays."""
    lat = []
    script = Path(sys.executable).parent / "indexer"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "indexer"]
    args = [*command, "search", QUERIES[0], "-k", "5", "--no-rerank", "--json"]
    if local:
        args.append("--local")
    if local is None:
        args = [sys.executable, "-c", "pass"]
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(args, env=env, check=True, capture_output=True)
        lat.append((time.perf_counter() - t) * 1000)
    return summary(lat)


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", type=int, default=300, help="real files indexed through the pipeline")
    ap.add_argument("--chunks", type=int, default=10000, help="points in the store (padded with synthetic ones)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/indexer-api-bench"))
    ap.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from indexer.models import ensure_model
    from indexer.settings import Settings

    model = str(ensure_model())
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = args.workdir / "data"
    env = dict(os.environ, INDEXER_DATA_DIR=str(data), INDEXER_CONFIG=str(args.workdir / "none.toml"))
    # queue_timeout: 8 clients each asking for a rerank of 20 pairs on a busy 2-core machine would otherwise get
    # 503s by design (a job waiting > 30 s is dropped); the bench measures latency, so it lets them wait.
    env.update(INDEXER_RERANK_MODEL=str(RERANKER), INDEXER_SERVER_PORT="0", INDEXER_QUEUE_TIMEOUT="600")
    settings = Settings(data_dir=data, rerank_model=str(RERANKER))
    build(args.workdir, args.real, args.chunks, settings, env)
    scale = 4 if args.quick else 1
    res: dict[str, Any] = {"real_files": args.real}

    def save() -> None:
        if args.out:
            args.out.write_text(json.dumps(res, indent=2))

    # in-process references first (no server running: the cores are the reference's alone)
    res["direct_search"] = direct_search(settings, 100 // scale, rerank=False)
    save()
    res["direct_search_rerank20"] = direct_search(settings, 12 // scale, rerank=True, candidates=20)
    save()
    res["cli_local"] = cli_search(env, 3, local=True)
    save()
    proc, url = start_server(env, data)
    try:
        status = httpx.get(url + "/status", timeout=60).json()["collections"][0]
        res["points"] = status["points"]
        save()
        http_search(url, 1, 20, {"rerank": False})  # warm
        res["http_search_1"] = http_search(url, 1, 100 // scale, {"rerank": False})
        save()
        res["http_search_8"] = http_search(url, 8, 200 // scale, {"rerank": False})
        save()
        res["http_rerank20_1"] = http_search(url, 1, 12 // scale, {"rerank": True, "candidates": 20})
        save()
        res["http_rerank20_8"] = http_search(url, 8, 16 // scale, {"rerank": True, "candidates": 20})
        save()
        res["embeddings"] = embeddings(url, model, 10 // scale)
        save()
        res["python_start"] = cli_search(env, 10, local=None)
        res["cli_server"] = cli_search(env, 10, local=False)
        save()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    res["http_overhead_p50_ms"] = res["http_search_1"]["p50"] - res["direct_search"]["p50"]
    res["http_vs_direct_p50"] = res["http_search_1"]["p50"] / res["direct_search"]["p50"]
    print(json.dumps(res, indent=2))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
