"""Embedded Qdrant: a collection whose lexical terms analyzer version 1 made (indexer 0.4) is rebuilt to the
current terms from its stored vectors and payloads (nothing re-embedded). A rebuild killed mid-way leaves the old
shard live, searched with the old terms, and the next run finishes it; a search during a rebuild answers at once,
with the old terms."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.search import lexical
from indexer.types import Metric, Point
from plugins.qdrant import edge
from plugins.qdrant.edge import EdgeStore

DIM = 8
N = 400  # points: several pages of the copy at the page size below

NOTES = {
    "/notes/zh.md": "今年的项目预算已经由财务总监批准了。",
    "/notes/ko.md": "데이터베이스는 매일 밤 자동으로 백업됩니다.",
    "/notes/en.md": "The quarterly budget was approved by the finance director.",
}

# The child rebuilds with pages of 50 points and stops (sleeps) after the second page: the test kills it there.
_CHILD = """
import sys, time
from pathlib import Path
from plugins.qdrant import edge
from plugins.qdrant.edge import EdgeStore
edge.LIST_PAGE = 50
pages = EdgeStore._pages
def slow(self, *args, **kwargs):
    for n, page in enumerate(pages(self, *args, **kwargs)):
        if n == 2:
            print("copying", flush=True)
            time.sleep(120)
        yield page
EdgeStore._pages = slow
EdgeStore(Path(sys.argv[1])).ensure_lexical("notes")
print("finished", flush=True)
"""


def _points() -> list[Point]:
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(N, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = list(NOTES.items()) + [(f"/filler/{i}.md", f"filler note number {i}") for i in range(N - len(NOTES))]
    return [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, path)), vecs[i], {"path": path, "file_type": "md", "text": text})
            for i, (path, text) in enumerate(texts)]


def _v1_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> EdgeStore:
    """An embedded Qdrant folder as indexer 0.4 left it: sparse vector ``bm25_v1``, version 1's terms."""
    store = EdgeStore(path, Metric.COSINE)
    monkeypatch.setattr(edge, "LEXICAL", lexical.sparse_name("1"))
    store.ensure_collection("notes", DIM, {"m": "1"})
    monkeypatch.undo()
    store.upsert("notes", _points())
    assert store.lexical_version("notes") == "1"
    return store


def _first(store: EdgeStore, query: str) -> str | None:
    hits = store.search_lexical("notes", query, 3)
    return str(hits[0].payload["path"]) if hits else None


def _dense(store: EdgeStore) -> dict[str, float]:
    return {h.id: h.score for h in store.search("notes", _points()[0].vector, 50)}


def test_a_rebuild_killed_mid_way_leaves_the_old_terms_and_the_next_run_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "q"
    store = _v1_store(folder, monkeypatch)
    before = _dense(store)
    store.close()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(folder)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "copying"
        assert (folder / "edge" / "notes.relex" / "edge_config.json").exists()  # the copy, part-filled
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL

    store = EdgeStore(folder, Metric.COSINE)
    try:
        assert store.lexical_version("notes") == "1"  # the old shard is live and complete
        assert store.count("notes") == N
        assert _first(store, "budget") == "/notes/en.md"
        assert _first(store, "预算") != "/notes/zh.md"  # old terms: the Chinese sentence is one word

        assert store.ensure_lexical("notes") is True  # the next run finishes the rebuild
        assert store.lexical_version("notes") == lexical.LEXICAL_VERSION
        left = sorted(p.name for p in (folder / "edge").iterdir())
        assert not [n for n in left if "relex" in n], left  # no copy left (the recall ring's file may sit beside)
        assert {"notes", "notes.meta.json"} <= set(left)
        assert _first(store, "预算") == "/notes/zh.md"
        assert _first(store, "데이터베이스") == "/notes/ko.md"
        assert _first(store, "budget") == "/notes/en.md"
        assert store.count("notes") == N
        after = _dense(store)
        assert after.keys() == before.keys()  # the stored vectors, not re-embedded
        for pid, score in before.items():
            assert after[pid] == pytest.approx(score, abs=1e-5)
        assert store.collection_meta("notes")["m"] == "1"  # type: ignore[index]
        assert store.ensure_lexical("notes") is False
    finally:
        store.close()
    reopened = EdgeStore(folder, Metric.COSINE)  # the rebuilt shard is what opens next time
    try:
        assert reopened.lexical_version("notes") == lexical.LEXICAL_VERSION
        assert _first(reopened, "预算") == "/notes/zh.md"
    finally:
        reopened.close()


def test_a_search_during_a_rebuild_answers_with_the_old_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _v1_store(tmp_path / "q", monkeypatch)
    seen: dict[str, Any] = {}
    pages = EdgeStore._pages

    def searching(self: EdgeStore, *args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        for n, page in enumerate(pages(self, *args, **kwargs)):
            if n == 1 and kwargs.get("with_vector"):  # mid-copy: another thread searches
                def search() -> None:
                    seen["version"] = store.lexical_version("notes")
                    seen["budget"] = _first(store, "budget")
                    seen["预算"] = _first(store, "预算")

                thread = threading.Thread(target=search)
                thread.start()
                thread.join(timeout=30)
                seen["answered"] = not thread.is_alive()
            yield page

    monkeypatch.setattr(edge, "LIST_PAGE", 50)
    monkeypatch.setattr(EdgeStore, "_pages", searching)
    try:
        assert store.ensure_lexical("notes") is True
        assert seen == {"answered": True, "version": "1", "budget": "/notes/en.md", "预算": seen["预算"]}
        assert seen["预算"] != "/notes/zh.md"  # the old terms, during the rebuild
        assert _first(store, "预算") == "/notes/zh.md"  # the new ones after it
    finally:
        store.close()
