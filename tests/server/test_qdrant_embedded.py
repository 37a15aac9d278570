"""An embedded Qdrant collection (one client per folder) served: searches, an admin sync and the watcher share the
query side's store inside the server, and `indexer search` reaches the store through the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, wait_for, write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def qdrant_served(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "qdrant-corpus").resolve()
    settings = make_settings(isolated_env / "qdrant-data", embed_model_path, None, store="qdrant")
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False, watch=True)
    yield handle
    handle.stop()


def test_search_sync_and_watch_on_embedded_qdrant(qdrant_served: ServerHandle) -> None:
    with qdrant_served.client() as c:
        status = c.get("/status").json()["collections"][0]
        assert status["store"] == "qdrant" and status["points"] >= 5
        hits = c.post("/search", json={"query": "nightly database backups", "k": 1}).json()["hits"]
        assert hits[0]["path"].endswith("backup.md")
        wait_for(lambda: (c.get("/status").json()["collections"][0].get("watch") or {}).get("state") == "idle", 120)
        new = qdrant_served.root / "notes" / "comet.md"
        new.write_text("# Comets\n\nA comet's tail of ice and dust always points away from the sun.\n")

        def found() -> bool:
            top = c.post("/search", json={"query": "comet tail ice dust sun", "k": 1}).json()["hits"]
            return bool(top) and top[0]["path"] == str(new)

        wait_for(found, 120, "the watcher to index the new file")
        report = c.post("/collections/default/sync")
        assert report.status_code in (200, 409), report.text  # 409 while the watcher holds the writer lock
        if report.status_code == 200:
            assert report.json()["report"]["files_indexed"] == 0
