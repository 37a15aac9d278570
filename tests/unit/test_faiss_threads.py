"""The OpenMP threads of one FAISS query (plugins/faiss/threads.py): the idle-core count read from the kernel, FAISS
loaded with passive OpenMP waits and the environment restored, and a pq store's query split over two threads only
when a core is idle, with the same answer either way. Real FAISS, real stores on disk."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import faiss
import numpy as np
import pytest

import plugins.faiss.recall as faiss_recall
from indexer.types import Point
from plugins.faiss import FaissStore
from plugins.faiss.index import VectorIndex
from plugins.faiss.threads import SPLIT_MAX, idle_threads

ROOT = Path(__file__).resolve().parents[2]


def _loadavg(tmp_path: Path, text: str) -> str:
    path = tmp_path / "loadavg"
    path.write_text(text)
    return str(path)


def test_idle_threads_count_the_idle_cores_the_caller_included(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert idle_threads(2, _loadavg(tmp_path, "0.10 0.20 0.30 1/300 4242\n")) == 2  # only the caller runs
    assert idle_threads(8, _loadavg(tmp_path, "0.10 0.20 0.30 1/300 4242\n")) == 4  # every core, at most
    assert idle_threads(8, _loadavg(tmp_path, "3.9 3.0 2.0 3/300 4242\n")) == 2
    assert idle_threads(2, _loadavg(tmp_path, "3.9 3.0 2.0 4/300 4242\n")) == 1  # every core busy
    assert idle_threads(2, _loadavg(tmp_path, "9.0 9.0 9.0 40/300 4242\n")) == 1  # more tasks than cores


def test_idle_threads_is_one_when_the_count_cannot_be_read(tmp_path: Path) -> None:
    assert idle_threads(2, str(tmp_path / "missing")) == 1
    assert idle_threads(2, _loadavg(tmp_path, "")) == 1
    assert idle_threads(2, _loadavg(tmp_path, "0.1 0.2 0.3 x/y 1\n")) == 1


def _run(code: str, env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True,
                         text=True, timeout=120, check=True)
    return out.stdout.strip()


def test_faiss_is_loaded_with_passive_waits_and_the_environment_is_restored() -> None:
    """The policy is set only while FAISS's OpenMP runtime loads (it reads it then), never left for others; a policy
    the user named is kept."""
    probe = ("import os, sys\n"
             "seen = []\n"
             "import builtins\n"
             "real = builtins.__import__\n"
             "def spy(name, *a, **k):\n"
             "    if name == 'faiss' and 'faiss' not in sys.modules:\n"
             "        seen.append(os.environ.get('OMP_WAIT_POLICY'))\n"
             "    return real(name, *a, **k)\n"
             "builtins.__import__ = spy\n"
             "import plugins.faiss\n"
             "builtins.__import__ = real\n"
             "print(seen[0] if seen else 'not-imported', os.environ.get('OMP_WAIT_POLICY'))\n")
    assert _run(probe, {}) == "PASSIVE None"
    assert _run(probe, {"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE ACTIVE"
    assert _run(probe, {"GOMP_SPINCOUNT": "1000"}) == "None None"


def _pq_store(tmp_path: Path) -> tuple[FaissStore, np.ndarray]:
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(40, 32))
    vectors = centers[rng.integers(0, 40, 6000)] + 0.4 * rng.normal(size=(6000, 32))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    store = FaissStore(tmp_path, auto_switch_at=2000, ivf_codes="pq", ivf_nprobe=16)
    store.ensure_collection("c", 32, {})
    store.upsert("c", [Point(str(uuid.uuid4()), v, {"path": f"/d/{i}.md"}) for i, v in enumerate(vectors)])
    return store, vectors


def test_a_pq_query_takes_the_idle_core_and_one_thread_on_a_busy_machine(tmp_path: Path, monkeypatch) -> None:
    store, vectors = _pq_store(tmp_path)
    try:
        store.search("c", vectors[0], 5)
        assert store._require("c").index.splits_a_query()  # pq codes
        seen: list[tuple[int, int]] = []
        search = VectorIndex._search_pq

        def spy(self, *args, **kwargs):
            out = search(self, *args, **kwargs)
            seen.append((faiss.omp_get_max_threads(), int(self.index.implem)))
            return out

        monkeypatch.setattr(VectorIndex, "_search_pq", spy)
        before = faiss.omp_get_max_threads()
        answers = {}
        for idle in (SPLIT_MAX, 1):
            monkeypatch.setattr(faiss_recall, "idle_threads", lambda idle=idle: idle)
            answers[idle] = [[(h.id, round(h.score, 5)) for h in store.search("c", q, 10)] for q in vectors[:40:4]]
        assert seen[0] == (SPLIT_MAX, 15) and seen[-1] == (1, 11)  # split when idle, FAISS's reservoir on one
        assert answers[SPLIT_MAX] == answers[1]  # the same answer either way
        assert faiss.omp_get_max_threads() == before  # the process-wide setting restored
    finally:
        store.close()


def test_flat_and_int8_queries_keep_one_thread_on_an_idle_machine(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(3000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = FaissStore(tmp_path, auto_switch_at=2000)
    try:
        store.ensure_collection("c", 16, {})
        store.upsert("c", [Point(str(uuid.uuid4()), v, {"path": f"/d/{i}.md"}) for i, v in enumerate(vectors)])
        store.search("c", vectors[0], 5)
        assert not store._require("c").index.splits_a_query()  # int8 codes
        monkeypatch.setattr(faiss_recall, "idle_threads", lambda: pytest.fail("asked for idle cores"))
        seen = []
        search = VectorIndex.search

        def spy(self, *args, **kwargs):
            seen.append(faiss.omp_get_max_threads())
            return search(self, *args, **kwargs)

        monkeypatch.setattr(VectorIndex, "search", spy)
        assert len(store.search("c", vectors[1], 5)) == 5
        assert seen and set(seen) == {1}
    finally:
        store.close()
