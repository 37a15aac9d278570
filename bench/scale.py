"""The stores at a million chunks: FAISS's auto index (IVF lists, 8-bit codes) and embedded Qdrant (qdrant-edge,
our EdgeStore with its background HNSW build) against exact search, in one run.

Vectors: the real chunk embeddings cached in an indexer state database (``--state``, e.g. a data directory
that indexed BEIR SciFact with the default model), plus generated vectors around them up to ``--n``: each is
``normalize(w * a + (1 - w) * b + 0.35 * g)`` for two random real vectors a, b, w ~ U(0.5, 1) and gaussian
noise g of unit expected norm, so the generated points live where real chunks do rather than uniformly on
the sphere. Queries: real query embeddings (``--queries``, BEIR queries.jsonl) embedded by the default model.

Reported, all in one run on one machine: build time; single-query latency p50/p95 of the index alone (one
thread, as the store searches) for exact flat and auto/IVF; recall@10 of IVF against exact; bytes per chunk;
and, when ``--qrels`` is given, nDCG@10 of exact vs IVF over the same million (generated points count as
non-relevant), so an approximate index that loses quality shows it.

Embedded Qdrant (``--stores faiss,qdrant``; ``qdrant-local`` adds qdrant-client's old local mode, sensible at
100k at most): upsert throughput through the store port, the background HNSW build's time with search
p50/p95 and write latency measured while it runs, open time of the built folder, search p50/p95 without and
with a selective filter (1 % of the points), recall@10 against exact (filtered: against exact over the same
subset), resident memory and bytes on disk per chunk, and recall/latency for several ``hnsw_ef``.

Recall that holds (docs/stores.md#recall-that-holds): both stores through their port report their own recall
estimate at the defaults and after their self-tuning, beside the recall@10 measured here with the real queries.
``--vectors mailbox`` replaces the generated points with a mailbox of threads (near-duplicates: every reply quotes
its thread), where fixed parameters lose neighbours; ``--switch-at`` makes FAISS use IVF lists below 100k.

    python bench/scale.py --state DATA/state.sqlite --queries scifact/queries.jsonl --qrels scifact/qrels.tsv
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
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
        " WHERE v.model_key = ? GROUP BY c.content_hash",  # one per distinct chunk (several collections share them)
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


def mailbox(real: np.ndarray, n: int, seed: int = 11) -> np.ndarray:
    """A generated mailbox of threads, full of near-duplicates: each thread starts from a real chunk and every reply
    quotes it (the thread's vector, plus a little of another real chunk: the new lines, plus noise), 2 to 40
    messages a thread, so a reply's nearest neighbours are its thread's other messages, close together."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    done = 0
    while done < n:
        size = min(int(rng.integers(2, 41)), n - done)
        base = real[rng.integers(0, len(real))]
        new = real[rng.integers(0, len(real), size)]
        w = rng.uniform(0.02, 0.25, size=(size, 1)).astype(np.float32)
        g = rng.normal(size=(size, real.shape[1])).astype(np.float32) / math.sqrt(real.shape[1])
        v = base + w * new + 0.05 * g
        out[done : done + size] = v / np.linalg.norm(v, axis=1, keepdims=True)
        done += size
    return out


def versions(real: np.ndarray, n: int, seed: int = 13) -> np.ndarray:
    """Versions of documents: each document is 3-30 chunks (real chunks), saved in 2-12 versions; a version keeps
    most chunks nearly as they were (a few words changed: tiny noise), edits some (a little of another chunk mixed
    in) and rewrites a few (a new real chunk), so most chunks have a near-duplicate in every other version."""
    rng = np.random.default_rng(seed)
    dim = real.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    done = 0
    while done < n:
        doc = real[rng.integers(0, len(real), int(rng.integers(3, 31)))].copy()
        for _ in range(int(rng.integers(2, 13))):
            if done >= n:
                break
            change = rng.random(len(doc))
            edited = change < 0.25
            doc[edited] += rng.uniform(0.05, 0.3, (int(edited.sum()), 1)) * real[rng.integers(0, len(real),
                                                                                               int(edited.sum()))]
            rewritten = change > 0.95
            doc[rewritten] = real[rng.integers(0, len(real), int(rewritten.sum()))]
            v = doc + 0.02 * rng.normal(size=doc.shape).astype(np.float32) / math.sqrt(dim)
            v = v[: n - done]
            out[done : done + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
            done += len(v)
    return out


def boilerplate(real: np.ndarray, n: int, seed: int = 17) -> np.ndarray:
    """Man-page-like pages: each page is 2-20 chunks about its own topic (a real chunk), and every chunk is mostly
    one of 40 boilerplate sections shared by all pages (SYNOPSIS, OPTIONS, SEE ALSO, AUTHOR, COPYRIGHT... : 40
    real chunks), weighted 0.5-0.95, so chunks of different pages are near-duplicates through their boilerplate."""
    rng = np.random.default_rng(seed)
    dim = real.shape[1]
    sections = real[rng.choice(len(real), 40, replace=False)]
    out = np.empty((n, dim), dtype=np.float32)
    done = 0
    while done < n:
        size = min(int(rng.integers(2, 21)), n - done)
        topic = real[rng.integers(0, len(real))]
        own = real[rng.integers(0, len(real), size)]
        a = rng.uniform(0.5, 0.95, (size, 1)).astype(np.float32)
        v = a * sections[rng.integers(0, 40, size)] + (1 - a) * (0.7 * topic + 0.3 * own)
        v += 0.03 * rng.normal(size=v.shape).astype(np.float32) / math.sqrt(dim)
        out[done : done + size] = v / np.linalg.norm(v, axis=1, keepdims=True)
        done += size
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


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def disk_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def points_for(data: np.ndarray, start: int, stop: int) -> list:
    from indexer.types import Point

    return [Point(str(uuid.UUID(int=i + 1)), data[i], {"path": f"/r/d{i % 100}/f{i}.txt", "file_type": "txt",
                                                      "root": "/r"}) for i in range(start, stop)]


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return statistics.fmean(len(set(f[:10]) & set(g[:10].tolist())) / 10 for f, g in zip(found, truth, strict=True))


def edge_search(store, queries: np.ndarray, limit: int = 10, where=None) -> tuple[list[float], list[list[int]]]:
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        hits = store.search("bench", q, limit, where)
        times.append((time.perf_counter() - t) * 1000)
        found.append([uuid.UUID(h.id).int - 1 for h in hits])
    return times, found


def bench_edge(folder: Path, data: np.ndarray, queries: np.ndarray, truth: np.ndarray, efs: list[int]) -> None:
    """Our embedded Qdrant store (EdgeStore) at the size of ``data``."""
    from indexer.types import Filter, Metric, Point
    from plugins.qdrant import edge_build
    from plugins.qdrant.edge import EdgeStore

    shutil.rmtree(folder, ignore_errors=True)
    store = EdgeStore(folder, Metric.COSINE)
    store.builder.threshold = 10**12  # the build is started below, timed on its own
    store.ensure_collection("bench", data.shape[1], {})
    t = time.perf_counter()
    for start in range(0, len(data), 2000):
        store.upsert("bench", points_for(data, start, min(len(data), start + 2000)))
    upsert = time.perf_counter() - t
    print(f"qdrant-edge: upsert {len(data):,} points in {upsert:.1f}s = {len(data) / upsert:,.0f} points/s")
    exact_ms, _ = edge_search(store, queries[:50])
    print(f"qdrant-edge before its index (exact scan): p50 {pct(exact_ms, 50):.1f} ms, p95 {pct(exact_ms, 95):.1f} ms")

    store.builder.threshold = 1
    extra = np.roll(data[:2000], 1, axis=1)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    t = time.perf_counter()
    store.builder.maybe_start("bench", store._require("bench"), store._dir("bench"), store._swap_built)
    store.builder.threshold = edge_build.INDEX_THRESHOLD  # the writes below must not start a second build
    during, writes, i = [], [], 0
    while store.builder.building("bench"):
        q = queries[i % len(queries)]
        t1 = time.perf_counter()
        store.search("bench", q, 10)
        during.append((time.perf_counter() - t1) * 1000)
        if i % 10 == 0 and i // 10 < 40:  # the watcher's batches: 50 points at a time
            t1 = time.perf_counter()
            k = i // 10
            store.upsert("bench", [Point(str(uuid.UUID(int=10**12 + k * 50 + j)), extra[k * 50 + j],
                                         {"path": f"/r/new/{k}-{j}.txt"}) for j in range(50)])
            writes.append((time.perf_counter() - t1) * 1000)
        i += 1
        time.sleep(0.02)
    build = time.perf_counter() - t
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in store.builder.completed[-1][2].items())
    print(f"qdrant-edge background build: {build:.1f}s ({steps}); during it "
          f"{len(during)} searches p50 {pct(during, 50):.1f} ms p95 {pct(during, 95):.1f} ms max {max(during):.0f} ms, "
          f"{len(writes)} writes of 50 p95 {pct(writes, 95):.1f} ms max {max(writes):.0f} ms")
    store.close()

    before = rss_mb()
    t = time.perf_counter()
    store = EdgeStore(folder, Metric.COSINE)
    n = store.count("bench")
    opened = time.perf_counter() - t
    store.search("bench", queries[0], 10)
    first = time.perf_counter() - t
    print(f"qdrant-edge open: {opened:.2f}s to count {n:,} points, {first:.2f}s to the first search; "
          f"{disk_bytes(folder) / n:,.0f} bytes/chunk on disk")
    for ef in efs:
        store.fixed_ef = ef  # as an explicit setting (qdrant_hnsw_ef)
        ms, found = edge_search(store, queries)
        print(f"qdrant-edge hnsw_ef {ef}: p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms, "
              f"recall@10 {recall(found, truth):.3f}", flush=True)
    store.fixed_ef = None
    self_tuning("qdrant-edge", store, "bench", queries, truth)
    for _ in range(4):  # each tuning may choose a denser graph (edge_recall.py: the floor missed, or too slow)
        if not store.builder.building("bench"):
            break
        during, i, t = [], 0, time.perf_counter()
        while store.builder.building("bench") and time.perf_counter() - t < REBUILD_WAIT:
            t1 = time.perf_counter()
            store.search("bench", queries[i % len(queries)], 10)
            during.append((time.perf_counter() - t1) * 1000)
            i += 1
            time.sleep(0.02)
        choice = store.graph_choice("bench") or {}
        if store.builder.building("bench"):
            store.builder.cancel()
            seen = (f"p50 {pct(during, 50):.2f} ms p95 {pct(during, 95):.2f} ms max {max(during):.0f} ms" if during
                    else "")
            print(f"qdrant-edge graph rebuild with m {choice.get('m')}, ef_construct {choice.get('ef_construct')} "
                  f"({choice.get('why')}) cancelled after {time.perf_counter() - t:.0f}s (--rebuild-wait); during it "
                  f"{len(during)} searches {seen}")
            break
        else:
            print(f"qdrant-edge graph rebuilt with m {choice.get('m')}, ef_construct {choice.get('ef_construct')} in "
                  f"{time.perf_counter() - t:.1f}s in the background; during it {len(during)} searches (the previous "
                  f"graph answering) p50 {pct(during, 50):.2f} ms p95 {pct(during, 95):.2f} ms "
                  f"max {max(during):.0f} ms")
            self_tuning("qdrant-edge after the graph rebuild", store, "bench", queries, truth)
    subset = np.flatnonzero(np.arange(len(data)) % 100 == 7)
    sub_truth = subset[np.argsort(-(queries @ data[subset].T), axis=1)[:, :10]]
    ms, found = edge_search(store, queries, where=Filter(path_prefix="/r/d7"))
    print(f"qdrant-edge with a 1 % filter: p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms, "
          f"recall@10 {recall(found, sub_truth):.3f}")
    print(f"qdrant-edge resident memory after open + searches: {rss_mb() - before:,.0f} MB "
          f"({(rss_mb() - before) * 2**20 / n:,.0f} bytes/chunk)")
    grow(store, data, queries)
    store.close()


def live_load(folder: Path, data: np.ndarray, queries: np.ndarray, rate: float = 0) -> None:
    """A bulk load as indexing makes it: the builder at its threshold, so builds run in the background while
    points keep coming (``rate`` points a second, as an embedder delivers them; 0: as fast as the store takes
    them); a search after every batch is answered by what exists (the segments already indexed, HNSW, plus an
    exact scan of the points not yet indexed), never by a scan of everything."""
    from plugins.qdrant.edge import EdgeStore
    from plugins.qdrant.edge_build import unindexed

    shutil.rmtree(folder, ignore_errors=True)
    store = EdgeStore(folder)
    store.ensure_collection("bench", data.shape[1], {})
    building, idle, tail = [], [], []
    t = time.perf_counter()
    for start in range(0, len(data), 1000):
        store.upsert("bench", points_for(data, start, min(len(data), start + 1000)))
        for j in range(3):
            t1 = time.perf_counter()
            store.search("bench", queries[(start // 1000 * 3 + j) % len(queries)], 10)
            (building if store.builder.building("bench") else idle).append((time.perf_counter() - t1) * 1000)
        if start % 20_000 == 0:
            with store._lock:
                tail.append(unindexed(store._require("bench")))
            if start % 100_000 == 0:
                print(f"  {start:,} written at {time.perf_counter() - t:.0f}s: {tail[-1]:,} unindexed, searches "
                      f"during builds so far p95 {pct(building or [0], 95):.1f} ms", flush=True)
        if rate:
            time.sleep(max(0.0, t + (start + 1000) / rate - time.perf_counter()))
    loaded = time.perf_counter() - t
    print(f"qdrant-edge live load: written at {len(data) / loaded:,.0f} points/s (asked {rate or 'unpaced'}); "
          f"unindexed points, sampled every 20,000 written: p50 {pct(tail, 50):,.0f}, max {max(tail):,}", flush=True)
    while store.builder.building("bench"):
        t1 = time.perf_counter()
        store.search("bench", queries[len(building) % len(queries)], 10)
        building.append((time.perf_counter() - t1) * 1000)
        time.sleep(0.02)
    print(f"qdrant-edge live load of {len(data):,} points: {loaded:.1f}s written, all indexed at "
          f"{time.perf_counter() - t:.1f}s, {len(store.builder.completed)} background builds; searches during builds "
          f"{len(building)}: p50 {pct(building, 50):.1f} ms p95 {pct(building, 95):.1f} ms max {max(building):.0f} ms; "
          f"between builds {len(idle)}: p50 {pct(idle, 50):.1f} ms p95 {pct(idle, 95):.1f} ms", flush=True)
    store.close()
    shutil.rmtree(folder, ignore_errors=True)


def grow(store, data: np.ndarray, queries: np.ndarray, new: int = 20_000) -> None:
    """What a collection that grows meets: ``new`` more points (the builder's threshold) start a background
    build on the indexed shard; searches and the watcher's writes go on meanwhile."""
    from indexer.types import Point

    more = np.roll(data[:new], 5, axis=1)
    more /= np.linalg.norm(more, axis=1, keepdims=True)
    t = time.perf_counter()
    for start in range(0, new, 2000):
        store.upsert("bench", [Point(str(uuid.UUID(int=2 * 10**12 + i)), more[i], {"path": f"/r/grow/{i}.txt"})
                               for i in range(start, min(new, start + 2000))])
    upsert = time.perf_counter() - t
    during, writes, i = [], [], 0
    t = time.perf_counter()
    while store.builder.building("bench"):
        t1 = time.perf_counter()
        store.search("bench", queries[i % len(queries)], 10)
        during.append((time.perf_counter() - t1) * 1000)
        if i % 10 == 0:
            t1 = time.perf_counter()
            store.upsert("bench", [Point(str(uuid.UUID(int=3 * 10**12 + i * 10 + j)), more[(i * 10 + j) % new],
                                         {"path": f"/r/grow2/{i}-{j}.txt"}) for j in range(10)])
            writes.append((time.perf_counter() - t1) * 1000)
        i += 1
        time.sleep(0.02)
    build = time.perf_counter() - t
    if not during or not store.builder.completed:
        print(f"qdrant-edge growth by {new:,}: no background build ran")
        return
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in store.builder.completed[-1][2].items())
    print(f"qdrant-edge growth by {new:,} points ({upsert:.1f}s): background build {build:.1f}s ({steps}); during it "
          f"{len(during)} searches p50 {pct(during, 50):.1f} ms p95 {pct(during, 95):.1f} ms max {max(during):.0f} ms, "
          f"{len(writes)} writes of 10 p50 {pct(writes, 50):.1f} ms max {max(writes):.0f} ms")
    ms, _ = edge_search(store, queries[:200])
    print(f"qdrant-edge after it: p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms")


RECENT: np.ndarray = np.zeros((0, 0), np.float32)  # users' recent searches: other real queries than the measured
SAMPLE = 0  # queries per estimate (--sample; 0: the store's default)
REBUILD_WAIT = float("inf")  # the longest wait for a denser graph the tuning chose (--rebuild-wait)


def self_tuning(label: str, store, collection: str, queries: np.ndarray, truth: np.ndarray) -> None:
    """The store's own recall estimate at its defaults and after its self-tuning, each beside the recall@10 and
    latency measured here with the real queries against exact search (the estimate should be within 0.02). The
    store samples its recent searches: before each measurement its ring holds only ``RECENT`` (other real queries
    than the measured ones, searched through the store as a user would), or nothing with ``--recent 0`` (it then
    samples its own chunks)."""
    from indexer.search import recall as estimates

    for tune in (False, True):
        store.recent_queries(collection).clear()
        for q in RECENT:
            store.search(collection, q, 10)
        t = time.perf_counter()
        est = store.measure_recall(collection, SAMPLE or estimates.SAMPLE, tune, 0.97, 5.0)
        took = time.perf_counter() - t
        ms, found = edge_search(store, queries)  # any store: the points are named as points_for names them
        print(f"{label} {'self-tuned' if tune else 'defaults'}: estimate {est.recall:.3f} on {est.sample} queries "
              f"({est.sample_kind}: {est.searches} recent searches; {est.param} {est.value}, rescore {est.rescore}, "
              f"graph {est.graph}, "
              f"measured in {took:.1f}s); measured recall@10 {recall(found, truth):.3f} on {len(queries)} other "
              f"queries, p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms", flush=True)
        if est.trials:
            print(f"{label} tuning steps (value, depth[, list order], recall +- standard error, median ms): "
                  + "; ".join(" ".join(f"{v:g}" for v in levers) + f" {r:.3f}+-{e:.3f} {m:.2f}"
                              for *levers, r, m, e in est.trials), flush=True)


def bench_faiss_store(folder: Path, data: np.ndarray, queries: np.ndarray, truth: np.ndarray, switch_at: int,
                      codes: str = "int8", keep: bool = False) -> None:
    """FAISS through the store port (sidecar, IVF from ``switch_at`` points, ``codes`` in its lists), with its
    self-tuning; ``keep``: the store's files stay (``--work``), for a later look at the same million."""
    from indexer.types import Metric
    from plugins.faiss import FaissStore

    shutil.rmtree(folder, ignore_errors=True)
    store = FaissStore(folder, Metric.COSINE, index="auto", auto_switch_at=switch_at, save_every=10**9,
                       ivf_codes=codes)
    print(f"faiss store: IVF codes {codes}", flush=True)
    store.ensure_collection("bench", data.shape[1], {})
    t = time.perf_counter()
    during: list[float] = []  # searches while a structure switch is trained in the background (rebuild.py)
    for start in range(0, len(data), 5000):
        store.upsert("bench", points_for(data, start, min(len(data), start + 5000)))
        while store._building and len(during) < 10_000:
            t1 = time.perf_counter()
            store.search("bench", queries[len(during) % len(queries)], 10)
            during.append((time.perf_counter() - t1) * 1000)
            time.sleep(0.01)
    store.wait_rebuilds()
    store.search("bench", queries[0], 10)  # puts the last one in place
    print(f"faiss store: {len(data):,} points written and indexed in {time.perf_counter() - t:.1f}s")
    for name, structure, vectors, seconds in store.rebuilds:
        print(f"faiss store: {name} -> {structure} over {vectors:,} vectors trained in the background in "
              f"{seconds:.1f}s")
    if during:
        print(f"faiss store: {len(during)} searches during the background training (the previous index "
              f"answering): p50 {pct(during, 50):.2f} ms, p95 {pct(during, 95):.2f} ms, max {max(during):.0f} ms")
    self_tuning("faiss store (auto)", store, "bench", queries, truth)
    if store._building:  # the tuning chose other codes (int8 below the floor: pq), trained at once in the background
        choice = store.lists_choice("bench") or {}
        during, t = [], time.perf_counter()
        while store._building:
            t1 = time.perf_counter()
            store.search("bench", queries[len(during) % len(queries)], 10)
            during.append((time.perf_counter() - t1) * 1000)
            time.sleep(0.02)
        store.wait_rebuilds()
        store.search("bench", queries[0], 10)  # puts it in place
        print(f"faiss store: {choice.get('codes')} codes over {choice.get('lists')} lists ({choice.get('why')}) "
              f"trained in {time.perf_counter() - t:.1f}s in the background; during it {len(during)} searches (the "
              f"previous index answering) p50 {pct(during, 50):.2f} ms p95 {pct(during, 95):.2f} ms "
              f"max {max(during):.0f} ms", flush=True)
        self_tuning(f"faiss store ({choice.get('codes')} codes)", store, "bench", queries, truth)
    store.close()
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)


def bench_local(folder: Path, data: np.ndarray, queries: np.ndarray, truth: np.ndarray) -> None:
    """qdrant-client's local mode (what `--store qdrant` used before qdrant-edge), through its own client."""
    from qdrant_client import QdrantClient, models

    shutil.rmtree(folder, ignore_errors=True)
    client = QdrantClient(path=str(folder))
    client.create_collection("bench", vectors_config=models.VectorParams(size=data.shape[1],
                                                                         distance=models.Distance.COSINE))
    t = time.perf_counter()
    for start in range(0, len(data), 2000):
        stop = min(len(data), start + 2000)
        client.upsert("bench", [models.PointStruct(id=i, vector=data[i].tolist(), payload={"path": f"/r/{i}"})
                                for i in range(start, stop)])
    upsert = time.perf_counter() - t
    client.close()
    t = time.perf_counter()
    client = QdrantClient(path=str(folder))
    opened = time.perf_counter() - t
    times, found = [], []
    for q in queries[:50]:
        t = time.perf_counter()
        hits = client.query_points("bench", query=q.tolist(), limit=10).points
        times.append((time.perf_counter() - t) * 1000)
        found.append([int(h.id) for h in hits])
    client.close()
    print(f"qdrant local mode: upsert {len(data) / upsert:,.0f} points/s, open {opened:.1f}s, "
          f"search p50 {pct(times, 50):.1f} ms p95 {pct(times, 95):.1f} ms, recall@10 {recall(found, truth[:50]):.3f}")


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
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="state.sqlite whose vector cache holds real chunks")
    ap.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl")
    ap.add_argument("--qrels", type=Path, help="BEIR qrels.tsv (for nDCG@10 exact vs approximate)")
    ap.add_argument("--n", type=int, default=1_000_000, help="total vectors")
    ap.add_argument("--max-queries", type=int, default=400)
    ap.add_argument("--nprobe", type=int, nargs="*", default=[AutoParams.nprobe])
    ap.add_argument("--stores", default="faiss,qdrant", help="comma list of faiss, qdrant, qdrant-local")
    ap.add_argument("--ef", type=int, nargs="*", default=[64, 128, 256])
    ap.add_argument("--m", type=int, help="HNSW m of the embedded Qdrant shard (default: the store's)")
    ap.add_argument("--ef-construct", type=int, help="HNSW ef_construct (default: the store's)")
    ap.add_argument("--vectors", choices=["scifact", "mailbox", "versions", "boilerplate"], default="scifact",
                    help="scifact: generated around the real chunks; mailbox: threads of near-duplicates; versions: "
                         "versions of documents; boilerplate: man-page-like pages sharing their sections")
    ap.add_argument("--recent", type=int, default=200,
                    help="more real queries searched through the stores first, as users' recent searches, which "
                         "their recall estimate samples (0: none; the estimate then samples chunks)")
    ap.add_argument("--live", action="store_true", help="embedded Qdrant: also a bulk load with the builder on, "
                    "searches during its background builds")
    ap.add_argument("--live-only", action="store_true", help="embedded Qdrant: only the bulk load with the builder on")
    ap.add_argument("--live-rate", type=float, default=0,
                    help="points a second the bulk load writes (an embedder's pace; 0: as fast as the store takes)")
    ap.add_argument("--sample", type=int, default=0, help="queries per recall estimate (0: the store's default)")
    ap.add_argument("--rebuild-wait", type=float, default=float("inf"),
                    help="embedded Qdrant: the longest wait (s) for a denser graph its tuning chose, then cancelled")
    ap.add_argument("--switch-at", type=int, default=AutoParams.switch_at, help="FAISS auto: IVF from this size")
    ap.add_argument("--faiss-codes", nargs="+", choices=["int8", "sq8", "pq"], default=[AutoParams.codes],
                    help="codes of the FAISS store's IVF lists; several: one store each, in this order")
    ap.add_argument("--work", type=Path, help="folder for the store files (default: a temporary one)")
    args = ap.parse_args()
    stores = set(args.stores.split(","))

    real, docs = real_vectors(args.state)
    global RECENT, SAMPLE, REBUILD_WAIT
    SAMPLE, REBUILD_WAIT = args.sample, args.rebuild_wait
    queries, qids = embed_queries(args.queries, args.max_queries + args.recent)
    RECENT, queries, qids = queries[args.max_queries :], queries[: args.max_queries], qids[: args.max_queries]
    n_real = len(real)
    sets = {"mailbox": mailbox, "versions": versions, "boilerplate": boilerplate}
    if args.vectors in sets:  # every point generated: the real chunks only seed them
        data, n_real = sets[args.vectors](real, args.n), 0
    else:
        data = np.concatenate([real, generated(real, max(0, args.n - n_real))])
    ids = np.arange(len(data), dtype=np.int64)
    print(f"{len(data):,} vectors ({args.vectors}: {n_real:,} real chunks), {len(queries)} real queries "
          f"(+ {len(RECENT)} as recent searches), "
          f"dim {data.shape[1]}")

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

    if "qdrant" in stores or "qdrant-local" in stores:
        work = Path(args.work or tempfile.mkdtemp(prefix="scale-"))
        if "qdrant" in stores:
            from plugins.qdrant import edge

            edge.HNSW_M = args.m or edge.HNSW_M
            edge.HNSW_EF_CONSTRUCT = args.ef_construct or edge.HNSW_EF_CONSTRUCT
            print(f"qdrant-edge HNSW m {edge.HNSW_M}, ef_construct {edge.HNSW_EF_CONSTRUCT}")
            if not args.live_only:
                bench_edge(work / "edge", data, queries, truth, args.ef)
            if args.live or args.live_only:
                live_load(work / "live", data, queries, args.live_rate)
        if "qdrant-local" in stores:
            bench_local(work / "local", data, queries, truth)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if "faiss" not in stores:
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="scale-"))
    for codes in args.faiss_codes:
        bench_faiss_store(work / f"faiss-{codes}", data, queries, truth, args.switch_at, codes, keep=bool(args.work))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)

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
