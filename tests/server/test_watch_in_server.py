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
    # the page's overview says it in words: the watcher inside the server runs, and how fresh the index is
    with watching.client() as c:
        watcher = c.get("/overview").json()["watcher"]
    assert watcher["running"] is True and watcher["state"] == "idle"
    assert watcher["freshness_ms"]["last"] is not None and "change->searchable last" in watcher["line"]

    new.unlink()
    wait_for(lambda: _top(watching, "magma chamber basalt lava eruption") != str(new), 120, "the deletion")


def test_a_collection_made_while_the_server_runs_is_watched_too(isolated_env: Path, embed_model_path: Path) -> None:
    settings = make_settings(isolated_env / "discover-data", embed_model_path, None, watch_discover_seconds=0.5)
    index_corpus(settings, write_corpus(isolated_env / "first").resolve())
    handle = start_server(settings, isolated_env / "first", mcp=False, watch=True)
    try:
        later = write_corpus(isolated_env / "later").resolve()
        index_corpus(settings, later, collection="later")  # as `indexer index PATH -c later` from another shell

        def watchers() -> list[str]:
            with handle.client() as c:
                return list(c.get("/status").json()["server"]["watchers"])

        wait_for(lambda: watchers() == ["default", "later"], 120, "the new collection's watcher")
        new = later / "notes" / "glacier.md"
        new.write_text("# Glaciers\n\nMoraines and crevasses mark where a glacier's ice carved the valley.\n")

        def top() -> str | None:
            with handle.client() as c:
                body = {"query": "glacier moraine crevasse ice", "k": 1, "rerank": False, "collection": "later"}
                hits = c.post("/search", json=body).json()["hits"]
            return hits[0]["path"] if hits else None

        wait_for(lambda: top() == str(new), 120, "the new file in the new collection")
    finally:
        handle.stop()
