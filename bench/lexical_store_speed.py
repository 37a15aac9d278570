"""English lexical cost at the store: upsert throughput and lexical query p50 of SciFact train's 5,183 abstracts
(random unit vectors, 384 dims, batches of 64; title = the abstract's title) into a fresh FAISS or embedded-Qdrant
collection, twice. Run it from two checkouts to compare analyzers (docs/benchmarks.md#multilingual-lexical-search):

  (cd CHECKOUT && .venv/bin/python bench/lexical_store_speed.py faiss|qdrant [BEIR_DIR])
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from indexer.core import registry
from indexer.ports import lexical_index
from indexer.settings import Settings
from indexer.types import Metric, Point


def _lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    kind = sys.argv[1]
    root = Path(sys.argv[2] if len(sys.argv) > 2 else "../shared/eval/scifact-train")
    docs = _lines(root / "corpus.jsonl")
    queries = [q["text"] for q in _lines(root / "queries.jsonl")][:400]
    vecs = np.random.default_rng(0).normal(size=(len(docs), 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    points = [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, str(d["_id"]))), vecs[i],
                    {"path": f"/s/{d['_id']}.md", "heading": [d.get("title", "")], "text": d["text"],
                     "file_type": "md"}) for i, d in enumerate(docs)]  # fmt: skip
    out: dict[str, list[float]] = {}
    for _ in range(2):
        settings = Settings(data_dir=Path(tempfile.mkdtemp()), store=kind)
        store = registry.open_store(kind, registry.new_store_options(settings, "c"), Metric.COSINE, settings)
        store.ensure_collection("c", 384, {})
        t0 = time.perf_counter()
        for start in range(0, len(points), 64):
            store.upsert("c", points[start : start + 64])
        seconds = time.perf_counter() - t0
        lex = lexical_index(store)
        assert lex is not None
        times = []
        for q in queries:
            t1 = time.perf_counter()
            lex.search_lexical("c", q, 50)
            times.append(time.perf_counter() - t1)
        out.setdefault("upsert_docs_per_s", []).append(round(len(points) / seconds, 1))
        out.setdefault("lexical_p50_ms", []).append(round(1000 * statistics.median(times), 2))
        store.close()
    print(kind, out)


if __name__ == "__main__":
    main()
