"""Filtered search: exactness and speed by selectivity, on FAISS and embedded Qdrant (issue: filters in the engine).

Builds a collection of ``--n`` generated chunks directly (state database rows with their fields, and the store's
points; no model: vectors are a mixture of 64 Gaussian clusters in 384 dimensions, unit length), then for filters
matching 1, 10, 100 chunks and 1 %, 10 %, 50 % of them, chosen at random, near the queries (the matches are the
chunks nearest the queries' centre) and far from them, runs 20 queries each through what a search does: the state
database's exact selection (``FieldIndex.select``), then the store's search among the matches. Reports, per store and
filter: hits returned vs min(k, matches), recall@10 against an exact filtered search (numpy brute force over the
matching vectors), and p50 of selection + search against the unfiltered search's p50 on the same store.

    python bench/filters.py --n 100000 [--stores faiss,qdrant]

``--served N`` (issue 42: a filtered search end to end, within 1.5x a plain one): a collection of a real folder
indexed through the pipeline (Markdown notes with front matter) and N generated chunks with metadata fields (team,
topic, n; vectors near the real model's embeddings of six topics), served by a real `indexer serve` process on
loopback; POST /search (default mode, no rerank) timed from the client for a plain query, narrow filters (50
chunks, 1 %), broad ones (50 %, and 1/6 of the chunks all far from the queries: the candidate check widens) and
with facets, interleaved query by query; then `indexer search` through that server (process start included):
plain, with --where and with --facet. Prints p50/p90 and each one's ratio to the plain search.

    python bench/filters.py --n 50000 --served 20000 [--stores faiss,qdrant] [--out r.json]
    python bench/filters.py --n 0 --served 20000        # the served part only
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
K = 10
QUERIES = 20
KINDS = ("random", "near", "far")


def _vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.normal(size=(64, DIM)).astype(np.float32)
    v = centres[rng.integers(0, 64, n)] + 0.6 * rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _sizes(n: int) -> dict[str, int]:
    return {"1": 1, "10": 10, "100": 100, "1pct": n // 100, "10pct": n // 10, "50pct": n // 2}


def _selections(vectors: np.ndarray, centre: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = len(vectors)
    order = np.argsort(-(vectors @ centre))  # nearest the queries' centre first
    out = {}
    for label, size in _sizes(n).items():
        out[f"random_{label}"] = rng.choice(n, size, replace=False)
        out[f"near_{label}"] = order[:size]
        out[f"far_{label}"] = order[-size:]
    return out


def build(folder: Path, store_name: str, vectors: np.ndarray, selections: dict[str, np.ndarray]):
    from indexer.core import registry as plugins
    from indexer.core.normalization import Normalization
    from indexer.settings import Settings
    from indexer.state.database import ChunkRecord, CollectionRecord, FileRecord, FileUpdate, StateStore
    from indexer.types import Metric, Point

    settings = Settings(data_dir=folder, store=store_name)
    options = plugins.new_store_options(settings, "bench")
    store = plugins.open_store(store_name, options, Metric.COSINE, settings)
    store.ensure_collection("bench", DIM, {})
    state = StateStore(folder / "state.sqlite")
    state.create_collection(CollectionRecord("bench", store_name, options, "cosine", "m", "m", Normalization.L2, DIM))
    member: dict[int, list[tuple[str, str]]] = {}
    for name, idx in selections.items():
        for i in idx.tolist():
            member.setdefault(i, []).append((name, "y"))
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(len(vectors))]
    per_file = 10
    for start in range(0, len(vectors), 2000):
        stop = min(start + 2000, len(vectors))
        points, updates = [], []
        for f0 in range(start, stop, per_file):
            path = f"/bench/d{f0 // 10000}/f{f0}.txt"
            chunks = []
            for i in range(f0, min(f0 + per_file, stop)):
                payload = {"path": path, "file_type": "txt", "text": f"chunk {i}", "dirs": ["/bench"]}
                points.append(Point(ids[i], vectors[i], payload))
                chunks.append(ChunkRecord(ids[i], path, i - f0, f"h{i}", 8, tuple(member.get(i, ()))))
            rec = FileRecord(path, "/bench", 100, 1_700_000_000_000_000_000, f"f{f0}", "indexed", None, "text")
            updates.append(FileUpdate(rec, tuple(chunks)))
        store.upsert("bench", points)
        state.commit_files("bench", updates)
    return store, state, ids


def _filtered_search(store, fields, where, q):
    """What a search does with a filter (indexer.collection.reader.select, indexer.search.fusion.retrieve)."""
    from indexer.collection.reader import broad
    from indexer.search.fusion import kept
    from indexer.types import Filter

    total, fraction = fields.estimate(where)
    if broad(total, fraction):
        return kept(lambda n: store.search("bench", q, n), K, lambda ids: fields.among(where, ids), fraction)
    return store.search("bench", q, K, Filter(ids=frozenset(fields.select(where))))


def _p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def run(store_name: str, n: int, seed: int = 7) -> list[dict[str, object]]:
    from indexer.search import filters
    from indexer.state.fields import compile_where

    rng = np.random.default_rng(seed)
    vectors = _vectors(n, rng)
    centre = vectors[rng.integers(0, n)]
    queries = centre + 0.15 * rng.normal(size=(QUERIES, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    selections = _selections(vectors, centre, rng)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store, state, ids = build(Path(tmp), store_name, vectors, selections)
        print(f"{store_name}: built {n} points in {time.perf_counter() - t0:.0f} s", flush=True)
        for q in queries[:3]:
            store.search("bench", q, K)  # warm
        plain = []
        for q in queries:
            t = time.perf_counter()
            store.search("bench", q, K)
            plain.append(time.perf_counter() - t)
        base = _p50(plain)
        fields = state.fields
        for name, idx in selections.items():
            clause = filters.parse_clause(f"{name}=y")
            matching = vectors[idx]
            times, recalls, short = [], [], 0
            for q in queries:
                t = time.perf_counter()
                hits = _filtered_search(store, fields, compile_where("bench", [clause]), q)
                times.append(time.perf_counter() - t)
                truth = {ids[i] for i in idx[np.argsort(-(matching @ q))[:K]].tolist()}
                got = [h.id for h in hits]
                short += len(got) < min(K, len(idx))
                recalls.append(len(truth & set(got)) / len(truth))
            p50 = _p50(times)
            rows.append({"store": store_name, "filter": name, "matches": len(idx), "short": short,
                         "recall": statistics.mean(recalls), "p50_ms": p50, "unfiltered_ms": base,
                         "ratio": p50 / base})
            print(f"  {name:<13} matches {len(idx):>7}  short {short:>2}/{QUERIES}  recall@10 "
                  f"{statistics.mean(recalls):.3f}  p50 {p50:7.2f} ms  ({p50 / base:5.1f}x unfiltered "
                  f"{base:.2f} ms)", flush=True)
        store.close()
        state.close()
    return rows


# -- end to end through a running server (--served) --------------------------------------------------------------
TOPICS = {
    "saturn": "the rings of Saturn are made of ice and dust",
    "bread": "sourdough bread needs a long slow rise overnight",
    "budget": "the quarterly budget review and travel expenses",
    "keys": "rotate the API keys before the security audit",
    "garden": "tomatoes in the garden need water twice a week",
    "kernel": "the kernel summit schedule and its talks",
}
SERVED_QUERIES = [  # none about bread: `topic=bread` keeps only chunks far from every query
    "what are Saturn's rings made of", "ice and dust around a planet", "moons of the outer planets",
    "quarterly budget review", "travel expenses for the team", "how much did we spend this year",
    "rotate the API keys", "security audit checklist", "signing key rotation schedule",
    "watering the tomatoes", "garden chores in summer", "when to prune the basil",
    "kernel summit talks", "conference schedule", "who speaks at the summit",
    "planet rings", "budget approval", "audit of the keys", "summer garden", "talks and schedule",
]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _served_filters(n: int) -> dict[str, dict[str, Any]]:
    """The request fields of each measured search (added to the query): plain, narrow, broad, with facets."""
    return {
        "plain": {},
        "narrow_50": {"where": ["team=red", "n<100"]},
        "narrow_1pct": {"where": [f"n<{n // 100}"]},
        "broad_50pct": {"where": ["team=red"]},
        "broad_far_17pct": {"where": ["topic=bread"]},
        "broad_2_clauses": {"where": ["team=red", "topic in (saturn, keys, garden)"]},
        "plain_facets": {"facets": ["type", "folder"]},
        "broad_facets": {"where": ["team=red"], "facets": ["type", "folder"]},
    }


def build_served(workdir: Path, store_name: str, n: int, model: str) -> Path:
    """A real folder indexed through the pipeline, then ``n`` generated chunks written through the state's and the
    store's own writes (as tests/integration/test_broad_filter.py does); returns the data folder."""
    import uuid

    from indexer.collection.facade import open_collection
    from indexer.settings import Settings
    from indexer.state.database import ChunkRecord, FileRecord, FileUpdate
    from indexer.types import Point

    data = workdir / f"data-{store_name}"
    root = workdir / "notes"
    names = list(TOPICS)
    for i in range(60):
        topic = names[i % len(names)]
        p = root / f"n{i:02d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"---\ntitle: Note {i}\nauthor: Ada Lovelace\ntags: [{topic}]\n---\n# {topic}\n\n"
                     f"{TOPICS[topic]}, note {i}.\n")
    settings = Settings(data_dir=data, embed_model=model, store=store_name)
    t0 = time.perf_counter()
    with open_collection("default", settings=settings) as col:
        col.index([root])
        parts = col.parts
        rec = parts.require_record()
        topic_vectors = parts.document_embedder.embed_batch(list(TOPICS.values()), rec.normalization)
        rng = np.random.default_rng(11)
        per_file = 10
        for start in range(0, n, 2000):
            stop = min(start + 2000, n)
            idx = np.arange(start, stop)
            vectors = topic_vectors[idx % len(names)] + 0.05 * rng.normal(size=(len(idx), DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            points, updates = [], []
            for f0 in range(start, stop, per_file):
                path = str(root / "gen" / f"d{f0 // 10000}" / f"g{f0}.md")
                chunks = []
                for i in range(f0, min(f0 + per_file, stop)):
                    fields = {"team": "red" if (i // per_file) % 2 == 0 else "blue", "topic": names[i % len(names)],
                              "n": str(i)}
                    pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-filters/{i}"))
                    text = f"Note {i}: {TOPICS[fields['topic']]}, item {i * 7919 % 10007}."
                    payload = {"path": path, "root": str(root), "rel_path": os.path.relpath(path, root),
                               "file_type": "md", "kind": "text", "chunk_index": i - f0, "text": text,
                               "start_line": i - f0 + 1, "end_line": i - f0 + 1, "heading": [], "metadata": fields}
                    points.append(Point(pid, vectors[i - start], payload))
                    chunks.append(ChunkRecord(pid, path, i - f0, f"gen{i}", 20, tuple(fields.items())))
                updates.append(FileUpdate(FileRecord(path, str(root), 1000, 1_750_000_000_000_000_000, f"g{f0}",
                                                     "indexed", None, "text"), tuple(chunks)))
            parts.store.upsert("default", points)
            parts.state.commit_files("default", updates)
        chunks_total = parts.store.count("default")
    print(f"{store_name}: built {chunks_total} chunks ({n} generated) in {time.perf_counter() - t0:.0f} s", flush=True)
    return data


def _serve(env: dict[str, str], data: Path) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    from indexer.server import announce

    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "serve", "--no-watch", "--port", "0"], env=env)
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


def served(store_name: str, n: int, rounds: int, cli_runs: int) -> dict[str, Any]:
    import httpx

    from indexer.models import ensure_model

    model = str(ensure_model())
    out: dict[str, Any] = {"store": store_name, "generated": n}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        data = build_served(workdir, store_name, n, model)
        env = dict(os.environ, INDEXER_DATA_DIR=str(data), INDEXER_CONFIG=str(workdir / "none.toml"),
                   INDEXER_EMBED_MODEL=model, INDEXER_STORE=store_name)
        env.pop("INDEXER_RERANK_MODEL", None)
        proc, url = _serve(env, data)
        try:
            kinds = _served_filters(n)
            with httpx.Client(base_url=url, timeout=300) as http:
                def ask(q: str, extra: dict[str, Any]) -> tuple[float, dict[str, Any]]:
                    t = time.perf_counter()
                    r = http.post("/search", json={"query": q, "k": 10, "rerank": False, **extra})
                    ms = (time.perf_counter() - t) * 1000
                    r.raise_for_status()
                    return ms, r.json()

                for q in SERVED_QUERIES[:5]:  # warm
                    for extra in kinds.values():
                        ask(q, extra)
                times: dict[str, list[float]] = {k: [] for k in kinds}
                stages: dict[str, list[float]] = {k: [] for k in kinds}
                short: dict[str, int] = {k: 0 for k in kinds}  # answers with fewer than k hits
                for _ in range(rounds):
                    for q in SERVED_QUERIES:
                        for name, extra in kinds.items():  # interleaved: every kind sees the same machine
                            ms, body = ask(q, extra)
                            times[name].append(ms)
                            stages[name].append(float(body["timings_ms"].get("filter", 0.0)))
                            short[name] += len(body["hits"]) < 10
            base50, base90 = _pct(times["plain"], 0.5), _pct(times["plain"], 0.9)
            print(f"{store_name}: POST /search through `indexer serve`, {len(times['plain'])} queries each, "
                  f"{n} generated chunks; client-side ms", flush=True)
            for name in kinds:
                p50, p90 = _pct(times[name], 0.5), _pct(times[name], 0.9)
                out[name] = {"p50_ms": p50, "p90_ms": p90, "ratio_p50": p50 / base50, "ratio_p90": p90 / base90,
                             "filter_stage_p50_ms": _pct(stages[name], 0.5), "short": short[name]}
                print(f"  {name:<16} p50 {p50:7.1f} ms  p90 {p90:7.1f} ms  ({p50 / base50:4.2f}x / "
                      f"{p90 / base90:4.2f}x plain)  filter stage p50 {_pct(stages[name], 0.5):6.1f} ms  "
                      f"short {short[name]}", flush=True)
            cli = {
                "plain": [],
                "where_narrow": ["--where", "team=red", "--where", "n<100"],
                "where_broad": ["--where", "team=red"],
                "facet": ["--facet", "type"],
            }
            cli_times: dict[str, list[float]] = {k: [] for k in cli}
            script = str(Path(sys.executable).with_name("indexer"))  # the console script: its fast path
            for i in range(cli_runs):
                for name, extra_args in cli.items():
                    args = [script, "search", SERVED_QUERIES[i % len(SERVED_QUERIES)], "--no-rerank", *extra_args]
                    t = time.perf_counter()
                    subprocess.run(args, env=env, check=True, capture_output=True)
                    cli_times[name].append((time.perf_counter() - t) * 1000)
            base = _pct(cli_times["plain"], 0.5)
            print(f"{store_name}: `indexer search` through the server (process start included), {cli_runs} runs each",
                  flush=True)
            for name, values in cli_times.items():
                p50 = _pct(values, 0.5)
                out["cli_" + name] = {"p50_ms": p50, "p90_ms": _pct(values, 0.9), "ratio_p50": p50 / base}
                print(f"  {name:<16} p50 {p50:7.0f} ms  p90 {_pct(values, 0.9):7.0f} ms  ({p50 / base:4.2f}x plain)",
                      flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    return out


def main() -> None:
    from indexer.models.native import machine_line

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000, help="generated chunks of the in-process table (0: skip it)")
    ap.add_argument("--stores", default="faiss,qdrant")
    ap.add_argument("--served", type=int, default=0, help="generated chunks of the end-to-end part (0: skip it)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the 20 queries per served search")
    ap.add_argument("--cli-runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    print(machine_line(), flush=True)  # every figure names its CPU
    res: dict[str, Any] = {"machine": machine_line(), "table": [], "served": []}
    for name in args.stores.split(","):
        if args.n:
            res["table"] += run(name, args.n)
        if args.served:
            res["served"].append(served(name, args.served, args.rounds, args.cli_runs))
        if args.out:
            args.out.write_text(json.dumps(res, indent=2))
    print(machine_line(), flush=True)  # the load at the end


if __name__ == "__main__":
    main()
