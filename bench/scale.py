"""The FAISS index at a million chunks: the auto index (IVF lists, 8-bit codes) against exact search.

Vectors: the real chunk embeddings cached in an indexer state database (``--state``, e.g. a data directory
that indexed BEIR SciFact with the default model), plus generated vectors around them up to ``--n``: each is
``normalize(w * a + (1 - w) * b + 0.35 * g)`` for two random real vectors a, b, w ~ U(0.5, 1) and gaussian
noise g of unit expected norm, so the generated points live where real chunks do rather than uniformly on
the sphere. Queries: real query embeddings (``--queries``, BEIR queries.jsonl) embedded by the default model.

Reported, all in one run on one machine: build time; single-query latency p50/p95 of the index alone (one
thread, as the store searches) for exact flat and auto/IVF; recall@10 of IVF against exact; bytes per chunk;
and, when ``--qrels`` is given, nDCG@10 of exact vs IVF over the same million (generated points count as
non-relevant), so an approximate index that loses quality shows it.

    python bench/scale.py --state DATA/state.sqlite --queries scifact/queries.jsonl --qrels scifact/qrels.tsv
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plugins.faiss.index import AutoParams, HnswParams, VectorIndex  # noqa: E402


def real_vectors(state: Path) -> tuple[np.ndarray, list[str]]:
    """Cached chunk vectors of the largest model key, with the document id (file stem) of each."""
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    key = db.execute("SELECT model_key FROM vector_cache GROUP BY 1 ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
    rows = db.execute(
        "SELECT c.path, v.vector FROM chunks c JOIN vector_cache v ON v.content_hash = c.content_hash"
        " WHERE v.model_key = ?",
        (key,),
    ).fetchall()
    docs = [Path(p).stem for p, _ in rows]
    vectors = np.stack([np.frombuffer(b, dtype=np.float32) for _, b in rows])
    return vectors, docs


def generated(real: np.ndarray, n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        m = min(step, n - start)
        a = real[rng.integers(0, len(real), m)]
        b = real[rng.integers(0, len(real), m)]
        w = rng.uniform(0.5, 1.0, size=(m, 1)).astype(np.float32)
        g = rng.normal(size=(m, real.shape[1])).astype(np.float32) / math.sqrt(real.shape[1])
        v = w * a + (1 - w) * b + 0.35 * g
        out[start : start + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def embed_queries(path: Path, limit: int) -> tuple[np.ndarray, list[str]]:
    from indexer.core.normalization import Normalization
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.models import ensure_model

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:limit]
    emb = LlamaEmbedder(ensure_model())
    try:
        vectors = emb.embed_batch([r["text"] for r in rows], Normalization.L2)
    finally:
        emb.close()
    return np.asarray(vectors, dtype=np.float32), [str(r["_id"]) for r in rows]


def latencies(index: VectorIndex, queries: np.ndarray, k: int) -> tuple[list[float], np.ndarray]:
    faiss.omp_set_num_threads(1)
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        _, ids = index.search(q, k, None)
        times.append((time.perf_counter() - t) * 1000)
        found.append(np.pad(ids[:k], (0, k - len(ids[:k])), constant_values=-1))
    return times, np.stack(found)


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def ndcg10(ranked_docs: list[list[str]], qids: list[str], qrels: dict[str, dict[str, int]]) -> float:
    scores = []
    for qid, docs in zip(qids, ranked_docs, strict=True):
        rel = qrels.get(qid)
        if not rel:
            continue
        dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(docs[:10]))
        ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
        scores.append(dcg / ideal if ideal else 0.0)
    return statistics.fmean(scores)


def doc_ranking(ids: np.ndarray, docs: list[str], n_real: int) -> list[list[str]]:
    """Documents in hit order (a document's best chunk), generated points as anonymous non-relevant entries."""
    out = []
    for row in ids:
        seen: list[str] = []
        for i in row:
            d = docs[i] if 0 <= i < n_real else f"gen-{i}"
            if d not in seen:
                seen.append(d)
        out.append(seen)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="state.sqlite whose vector cache holds real chunks")
    ap.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl")
    ap.add_argument("--qrels", type=Path, help="BEIR qrels.tsv (for nDCG@10 exact vs approximate)")
    ap.add_argument("--n", type=int, default=1_000_000, help="total vectors")
    ap.add_argument("--max-queries", type=int, default=400)
    ap.add_argument("--nprobe", type=int, nargs="*", default=[AutoParams.nprobe])
    args = ap.parse_args()

    real, docs = real_vectors(args.state)
    queries, qids = embed_queries(args.queries, args.max_queries)
    n_real = len(real)
    data = np.concatenate([real, generated(real, max(0, args.n - n_real))])
    ids = np.arange(len(data), dtype=np.int64)
    print(f"{len(data):,} vectors ({n_real:,} real chunks), {len(queries)} real queries, dim {data.shape[1]}")

    faiss.omp_set_num_threads(2)
    k = 100
    t = time.perf_counter()
    flat = VectorIndex.build("flat", data.shape[1], True, HnswParams(), ids, data)
    flat_build = time.perf_counter() - t
    flat_ms, truth = latencies(flat, queries[:100], k)  # the exact index is slow: 100 queries suffice for timing
    exact = faiss.IndexFlatIP(data.shape[1])
    exact.add(data)
    faiss.omp_set_num_threads(2)
    _, truth = exact.search(queries, k)
    flat_bytes = flat.memory_bytes() / len(data)
    del exact
    print(f"exact flat: build {flat_build:.1f}s, p50 {pct(flat_ms, 50):.1f} ms, p95 {pct(flat_ms, 95):.1f} ms, "
          f"{flat_bytes:,.0f} bytes/chunk")
    del flat

    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    auto = VectorIndex.build("auto", data.shape[1], True, HnswParams(), ids, data, auto=AutoParams())
    build = time.perf_counter() - t
    print(f"auto -> {auto.structure}: build {build:.1f}s, {auto.memory_bytes() / len(data):,.0f} bytes/chunk")
    qrels: dict[str, dict[str, int]] = {}
    if args.qrels:
        for line in args.qrels.read_text().splitlines()[1:]:
            q, d, s = line.split("\t")
            qrels.setdefault(q, {})[d] = int(s)
        print(f"nDCG@10 exact over {len(data):,}: {ndcg10(doc_ranking(truth, docs, n_real), qids, qrels):.4f}")
    for nprobe in args.nprobe:
        auto.auto = AutoParams(nprobe=nprobe)
        ms, found = latencies(auto, queries, k)
        recall = statistics.fmean(len(set(f[:10]) & set(g[:10])) / 10 for f, g in zip(found, truth, strict=True))
        line = f"IVF nprobe {nprobe}: p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms, recall@10 {recall:.3f}"
        if args.qrels:
            line += f", nDCG@10 {ndcg10(doc_ranking(found, docs, n_real), qids, qrels):.4f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
