"""An embedded Qdrant collection (one client per folder) served: searches, an admin sync and the watcher share the
query side's store inside the server, and `indexer search` reaches the store through the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from indexer.server import announce
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
        wait_for(lambda: (c.get("/status").json()["collections"][0].get("watch") or {}).get("state") == "idle", 120)
        answers: list[httpx.Response] = []

        def synced() -> bool:  # 409 only while a watcher batch holds the writer lock: the watcher is idle now
            answers.append(c.post("/collections/default/sync"))
            return answers[-1].status_code == 200

        wait_for(synced, 60, "an admin sync beside the idle watcher")
        report = answers[-1].json()["report"]
        assert report["files_indexed"] == 0 and report["failed"] == []
        assert report["files_unchanged"] + report["files_touched"] == 6  # the corpus and the comet, none re-read
        assert [a.status_code for a in answers].count(409) <= 2, [a.text for a in answers]


def test_indexer_search_reaches_embedded_qdrant_through_the_server(qdrant_served: ServerHandle) -> None:
    """Embedded Qdrant admits one process per folder: while the server holds it, `indexer search` works only
    through the server (announced for the data directory), and `--local` is refused with the reason."""
    data_dir = Path(qdrant_served.settings.data_dir)
    ann = announce.Announcement(qdrant_served.url, os.getpid(), "test-token", time.time(), str(data_dir))
    announce.write(data_dir, ann)
    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir)}
    script = Path(sys.executable).with_name("indexer")
    try:
        served = subprocess.run(
            [str(script), "search", "nightly database backups", "-k", "1", "--json"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        local = subprocess.run(
            [str(script), "search", "nightly database backups", "--local"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    finally:
        announce.remove(data_dir, ann)
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["hits"][0]["path"].endswith("backup.md")
    assert local.returncode == 1 and "one process" in local.stderr.lower(), local.stderr
