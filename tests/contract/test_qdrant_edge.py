"""Embedded Qdrant on qdrant-edge (what `--store qdrant` without a URL builds): one process per folder, crash
safety through the engine's write-ahead log, and a real HNSW index once the optimizer runs."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.core import registry
from indexer.errors import StoreError
from indexer.settings import load_settings
from indexer.types import Metric, Point
from plugins.qdrant.edge import EdgeStore

DIM = 8


def _open(path: Path, metric: Metric = Metric.COSINE):
    return registry.open_store("qdrant", {"path": str(path)}, metric, load_settings())


def _points(n: int, seed: int = 0) -> list[Point]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")), vecs[i],
                  {"path": f"/r/d{i % 3}/f{i}.md", "text": f"text {i}", "file_type": "md"}) for i in range(n)]


def test_the_embedded_store_is_qdrant_edge(tmp_path):
    store = _open(tmp_path / "q")
    try:
        assert isinstance(store, EdgeStore)
        store.ensure_collection("c", DIM, {"indexer.model_id": "m"})
        assert (tmp_path / "q" / "edge" / "c" / "edge_config.json").is_file()
        assert store.collection_meta("c")["indexer.model_id"] == "m"
    finally:
        store.close()


def test_a_second_process_gets_a_clear_error_and_the_folder_is_released_on_close(tmp_path):
    store = _open(tmp_path / "q")
    store.ensure_collection("c", DIM, {})
    code = (
        "import sys\n"
        "from indexer.core import registry\nfrom indexer.settings import load_settings\n"
        "from indexer.types import Metric\nfrom indexer.errors import StoreError\n"
        f"s = registry.open_store('qdrant', {{'path': {str(tmp_path / 'q')!r}}}, Metric.COSINE, load_settings())\n"
        "try:\n    s.count('c')\nexcept StoreError as exc:\n    print(exc)\n    sys.exit(3)\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "another process holds" in proc.stdout and "indexer serve" in proc.stdout
    finally:
        store.close()
    again = _open(tmp_path / "q")
    assert again.count("c") == 0
    again.close()


def test_points_written_survive_a_killed_process(tmp_path):
    code = (
        "import os, uuid, numpy as np\n"
        "from indexer.core import registry\nfrom indexer.settings import load_settings\n"
        "from indexer.types import Metric, Point\n"
        f"s = registry.open_store('qdrant', {{'path': {str(tmp_path / 'q')!r}}}, Metric.COSINE, load_settings())\n"
        f"s.ensure_collection('c', {DIM}, {{}})\n"
        f"v = np.eye({DIM}, dtype=np.float32)\n"
        f"s.upsert('c', [Point(str(uuid.uuid4()), v[i % {DIM}], {{'path': f'/r/{{i}}.md'}}) for i in range(100)])\n"
        "print('written', flush=True)\n"
        "os._exit(9)  # no close, no flush of our own\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "written" in proc.stdout and proc.returncode == 9, proc.stderr
    store = _open(tmp_path / "q")
    try:
        assert store.count("c") == 100
    finally:
        store.close()


def test_search_after_the_optimizer_built_its_index_matches_exact(tmp_path):
    store = _open(tmp_path / "q")
    try:
        store.ensure_collection("c", DIM, {})
        points = _points(3000)
        store.upsert("c", points)
        store._require("c").optimize()  # segments merged, the HNSW index built (as the engine does on its own)
        query = points[7].vector
        exact = np.argsort([-float(np.dot(query, p.vector)) for p in points])[:10]
        hits = store.search("c", query, 10)
        assert hits[0].id == points[7].id and hits[0].score == pytest.approx(1.0, abs=1e-5)
        overlap = len({h.id for h in hits} & {points[i].id for i in exact})
        assert overlap >= 9
        only_d1 = store.search("c", query, 10, where=registry_filter("/r/d1"))
        assert only_d1 and all(h.payload["path"].startswith("/r/d1/") for h in only_d1)
    finally:
        store.close()


def registry_filter(prefix: str):
    from indexer.types import Filter

    return Filter(path_prefix=prefix)


def test_a_missing_collection_is_a_store_error(tmp_path):
    store = _open(tmp_path / "q")
    try:
        assert store.collection_meta("nope") is None
        with pytest.raises(StoreError, match="does not exist"):
            store.count("nope")
    finally:
        store.close()
