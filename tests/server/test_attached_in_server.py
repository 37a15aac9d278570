"""Attachments in one embedded Qdrant folder inside `indexer serve`: one client for the folder, shared by every
attachment in it; both are served, ready, and kept in sync by the watcher inside the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, make_settings, start_server, wait_for

pytestmark = pytest.mark.slow

NAMES = ("first", "second")


@pytest.fixture(scope="module")
def two_attached(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    from indexer.engine.adapters import LlamaEmbedder
    from plugins.qdrant_attach import attach
    from tests.integration.corpus import write_corpus
    from tests.integration.test_qdrant_attach import Loc, make_plain_named

    settings = make_settings(isolated_env / "two-data", embed_model_path, None, watch_discover_seconds=0.5)
    folder = isolated_env / "two-qdrant"
    emb = LlamaEmbedder(embed_model_path)
    try:
        for name in NAMES:
            make_plain_named(Loc(None, folder), name, emb)
            with attach(name, path=folder, embedder=emb, settings=settings) as col:
                col.index([write_corpus(isolated_env / f"two-{name}")])
    finally:
        emb.close()
    handle = start_server(settings, isolated_env, mcp=False, watch=True)
    yield handle
    handle.stop()


def test_two_attachments_in_one_folder_are_served_and_synced(two_attached: ServerHandle, isolated_env: Path) -> None:
    with two_attached.client() as c:
        def watching() -> dict[str, str | None]:
            cols = c.get("/status").json()["collections"]
            return {col["collection"]: (col.get("watch") or {}).get("state") for col in cols}

        wait_for(lambda: watching() == {f"qdrant.{n}": "idle" for n in NAMES}, 120, "both watchers idle")
        ready = c.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert c.get("/status").json()["server"]["last_errors"] == []
        for name in NAMES:
            answer = c.post(f"/collections/{name}/points/query", json={"query": {"text": "rings of Saturn"}})
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["points"][0]["payload"]["source"].endswith("planets.txt")
            hits = c.post("/search", json={"query": "rings of Saturn", "collection": f"qdrant.{name}"})
            assert hits.status_code == 200 and hits.json()["hits"][0]["path"].endswith("planets.txt")

        new = isolated_env / "two-second" / "astronomy" / "comet.md"
        new.write_text("# Comets\n\nA comet's tail of ice and dust always points away from the sun.\n")

        def found() -> bool:
            body = {"query": {"text": "comet tail of ice and dust"}, "limit": 1}
            points = c.post("/collections/second/points/query", json=body).json()["result"]["points"]
            return bool(points) and points[0]["payload"].get("source") == str(new)

        wait_for(found, 120, "the watcher inside the server to index the new file")
        synced = c.post("/collections/qdrant.first/sync")
        assert synced.status_code == 200, synced.text
        assert synced.json()["report"]["files_indexed"] == 0
