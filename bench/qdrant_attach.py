"""Cost of attaching to a foreign Qdrant collection, against our own Qdrant collection in the same run.

Embedded Qdrant, the default model. A "foreign" collection in LangChain's layout holds N points (their texts
embedded with the same model); the same folder of Markdown notes is indexed into it (attach) and into our own
Qdrant collection (reference, fresh state each: no shared vector cache). Search is compared with the same
embedder plus qdrant-client's query_points called by hand on the same collection. Reported: inspect + probe
time, index time, search p50/p95 (no rerank), and the ratios. Ratios matter: the machine is shared and noisy.

    .venv/bin/python bench/qdrant_attach.py [--foreign 2000] [--files 60] [--queries 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--foreign", type=int, default=2000, help="points already in the foreign collection")
    ap.add_argument("--files", type=int, default=60, help="Markdown files to index")
    ap.add_argument("--queries", type=int, default=30)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="attach-bench-"))
    os.environ["INDEXER_DATA_DIR"] = str(work / "data")
    os.environ["INDEXER_CONFIG"] = str(work / "none.toml")

    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    import indexer
    from indexer.core.normalization import Normalization
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.models import ensure_model
    from plugins.qdrant_attach import attach
    from tests.integration.corpus import write_many

    emb = LlamaEmbedder(ensure_model())
    notes = write_many(work / "notes", args.files)
    folder = work / "qdrant"
    client = QdrantClient(path=str(folder))
    client.create_collection("wiki", vectors_config=qm.VectorParams(size=emb.dimensions, distance=qm.Distance.COSINE))
    texts = [f"Foreign passage {i}: item {i % 97} of catalogue {i % 13}, filed under shelf {i % 7}." for i in
             range(args.foreign)]
    for start in range(0, len(texts), 256):
        part = texts[start : start + 256]
        vectors = emb.embed_batch(part, Normalization.L2)
        client.upsert("wiki", [
            qm.PointStruct(id=start + i + 1, vector=v.tolist(),
                           payload={"page_content": t, "metadata": {"source": f"/wiki/{start + i}.md"}})
            for i, (t, v) in enumerate(zip(part, vectors, strict=True))
        ])
    client.close()
    queries = [f"observation about {w} over seasons" for w in ("rivers", "glaciers", "violins", "compilers",
                                                                 "orchards", "volcanoes")] * (args.queries // 6 + 1)
    queries = queries[: args.queries]

    # indexing: our own embedded Qdrant collection vs the attached one, each with a fresh state (no vector cache)
    own_settings = indexer.load_settings(data_dir=work / "data-own", store="qdrant")
    with indexer.open_collection("own", settings=own_settings) as own:
        t2 = time.perf_counter()
        rep_own = own.index([notes])
        t_index_own = time.perf_counter() - t2

    t0 = time.perf_counter()
    attach_settings = indexer.load_settings(data_dir=work / "data-attach")
    with attach("wiki", path=folder, embedder=emb, settings=attach_settings) as col:
        col.check()
        t_inspect = time.perf_counter() - t0
        t1 = time.perf_counter()
        rep_attach = col.index([notes])
        t_index_attach = time.perf_counter() - t1
        # reference: the same embedder and qdrant-client's query_points by hand, interleaved with ours
        def raw(q: str) -> None:
            col.client.query_points("wiki", query=emb.embed_batch([q], Normalization.L2)[0].tolist(), limit=10)

        lat_attach, lat_raw = [], []
        for _ in range(2):
            lat_raw += _latencies(raw, queries)
            lat_attach += _latencies(lambda q: col.search(q, k=10), queries)

    p = _percentiles
    print(f"foreign points {args.foreign}, files {args.files} ({rep_attach.points_upserted} chunks attach, "
          f"{rep_own.points_upserted} own), queries {len(queries)}")
    print(f"attach: inspect + compatibility + probe {t_inspect * 1000:.0f} ms")
    print(f"index: attach {t_index_attach:.2f} s, own {t_index_own:.2f} s, ratio {t_index_attach / t_index_own:.2f}")
    (a50, a95), (r50, r95) = p(lat_attach), p(lat_raw)
    print(f"search p50/p95 ms (k=10, no rerank): attach {a50:.1f}/{a95:.1f}, raw qdrant-client + same embedder "
          f"{r50:.1f}/{r95:.1f}, p50 ratio {a50 / r50:.2f}")


def _latencies(fn, queries: list[str]) -> list[float]:
    fn(queries[0])  # warm
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _percentiles(values: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(values, n=20)
    return statistics.median(values), qs[18]


if __name__ == "__main__":
    main()
