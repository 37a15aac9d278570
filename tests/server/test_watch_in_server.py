"""The watcher runs inside the server: a file saved under a root becomes searchable over HTTP, a deleted one
disappears, and /status and /metrics show the watcher's state and freshness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, wait_for, write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def watching(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "watch-corpus").resolve()
    settings = make_settings(isolated_env / "watch-data", embed_model_path, None)
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False, watch=True)
    yield handle
    handle.stop()


def _top(handle: ServerHandle, query: str) -> str | None:
    with handle.client() as c:
        hits = c.post("/search", json={"query": query, "k": 1, "rerank": False}).json()["hits"]
    return hits[0]["path"] if hits else None


def _watch_state(handle: ServerHandle) -> dict:
    with handle.client() as c:
        return c.get("/status").json()["collections"][0].get("watch") or {}


def test_saved_file_becomes_searchable_and_deleted_one_disappears(watching: ServerHandle) -> None:
    wait_for(lambda: _watch_state(watching).get("state") == "idle", 120, "the reconciliation scan")
    new = watching.root / "notes" / "volcano.md"
    new.write_text("# Volcanoes\n\nMagma chambers under a volcano feed basalt lava flows during eruptions.\n")
    wait_for(lambda: _top(watching, "magma chamber basalt lava eruption") == str(new), 120, "the new file")
    state = _watch_state(watching)
    assert state["freshness"]["samples"] >= 1 and state["batches"] >= 1
    with watching.client() as c:
        status = c.get("/status").json()
        metrics = c.get("/metrics").text
    assert status["server"]["watchers"] == ["default"]
    assert 'indexer_freshness_lag_seconds{collection="default"}' in metrics

    new.unlink()
    wait_for(lambda: _top(watching, "magma chamber basalt lava eruption") != str(new), 120, "the deletion")
