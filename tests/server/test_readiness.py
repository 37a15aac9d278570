"""Readiness: /status and /readyz never wait behind model work; with the store deleted under a running server,
/readyz is 503 and searches say so until the watcher's next batch repairs the store as `indexer index` does."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, wait_for, write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_queue(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "ready-corpus").resolve()
    settings = make_settings(isolated_env / "ready-data", embed_model_path, None, max_queue=2)
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False)
    yield handle
    handle.stop()


def test_status_and_readyz_answer_while_the_model_queue_is_full(tiny_queue: ServerHandle) -> None:
    worker = tiny_queue.service.worker
    release, running = threading.Event(), threading.Event()

    def hold_the_model() -> None:
        running.set()
        release.wait(120)

    with ThreadPoolExecutor(max_workers=4) as pool, tiny_queue.client() as c:
        blocker = pool.submit(worker.call_sync, hold_the_model, 120)
        try:
            assert running.wait(30)
            queued = pool.submit(c.post, "/search", json={"query": "backup", "rerank": False})
            wait_for(lambda: worker.depth == 2, what="a full model queue")
            refused = c.post("/search", json={"query": "backup", "rerank": False})
            # a short timeout: had they waited for the model, they would time out here
            with httpx.Client(base_url=tiny_queue.url, timeout=10) as quick:
                status = quick.get("/status")
                ready = quick.get("/readyz")
                metrics = quick.get("/metrics")
        finally:
            release.set()
        blocker.result(60)
        assert queued.result(60).status_code == 200
    assert refused.status_code == 503  # the queue is really full
    assert status.status_code == 200, status.text
    server = status.json()["server"]
    assert server["queue_depth"] == 2 and server["queue_limit"] == 2
    assert status.json()["collections"][0]["points"] >= 5
    assert ready.status_code == 200, ready.text
    assert metrics.status_code == 200 and "indexer_index_points" in metrics.text


def test_readyz_status_and_metrics_answer_while_every_picture_worker_is_held(
    tiny_queue: ServerHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: thumbnail decodes (and /fields, /overview) run on a bounded pool of their own. Every worker of it
    held on an event inside a thumbnail decode: /readyz, /status and /metrics still answer; past max_queue the
    pictures get 503 + Retry-After; released, the held ones answer."""
    from indexer.collection.files import Thumbnails
    from indexer.server.service import MEDIA_WORKERS

    release = threading.Event()
    entered = threading.Semaphore(0)

    def held_decode(self: Thumbnails, col: object, path: str, size: int) -> bytes:
        entered.release()
        release.wait(120)
        return b"held"

    monkeypatch.setattr(Thumbnails, "get", held_decode)
    svc = tiny_queue.service
    path = str(tiny_queue.root / "docs" / "keys.md")
    limit = tiny_queue.settings.max_queue
    with ThreadPoolExecutor(max_workers=limit + 1) as pool, tiny_queue.client() as c:
        try:
            held = [pool.submit(c.get, "/thumbnail", params={"path": path}) for _ in range(limit)]
            for _ in range(MEDIA_WORKERS):
                assert entered.acquire(timeout=30)  # every media worker is inside a decode
            wait_for(lambda: svc._media_waiting == limit, what="the picture queue to fill")
            busy = c.get("/thumbnail", params={"path": path})
            with httpx.Client(base_url=tiny_queue.url, timeout=10) as quick:
                ready = quick.get("/readyz")
                status = quick.get("/status")
                metrics = quick.get("/metrics")
        finally:
            release.set()
        answers = [f.result(60) for f in held]
    assert ready.status_code == 200, ready.text
    assert status.status_code == 200 and status.json()["collections"][0]["points"] >= 5
    assert metrics.status_code == 200 and "indexer_index_points" in metrics.text
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1", busy.text
    assert "thumbnails or summaries waiting" in busy.json()["error"]["message"]
    assert [a.status_code for a in answers] == [200] * limit and answers[0].content == b"held"


@pytest.mark.parametrize(("store", "trigger"), [("faiss", "file"), ("qdrant", "file"), ("faiss", "readiness")])
def test_a_deleted_store_is_repaired_inside_the_server(
    isolated_env: Path, embed_model_path: Path, store: str, trigger: str
) -> None:
    """The watcher's next batch repairs it (trigger "file": one file saved), or, with no file change at all,
    the readiness probe that saw the disagreement asks the watcher for its reconciliation scan."""
    root = write_corpus(isolated_env / f"repair-{store}-{trigger}-corpus").resolve()
    data = isolated_env / f"repair-{store}-{trigger}-data"
    settings = make_settings(data, embed_model_path, None, store=store)
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False, watch=True)
    try:
        with handle.client() as c:
            def watch_state() -> str | None:
                return (c.get("/status").json()["collections"][0].get("watch") or {}).get("state")

            wait_for(lambda: watch_state() == "idle", 120, "the reconciliation scan")
            before = c.get("/status").json()["collections"][0]
            assert c.get("/readyz").status_code == 200
            folder = data / store / "default"
            assert folder.is_dir(), sorted(p.name for p in (data / store).iterdir())
            _delete_store(handle, store, folder)

            search = c.post("/search", json={"query": "nightly backups", "rerank": False})
            said = search.json().get("warning") if search.status_code == 200 else search.json()["error"]["message"]
            assert said and "default" in said, search.text
            ready = c.get("/readyz")  # (this probe also asks the watcher to repair: searched first)
            assert ready.status_code == 503, ready.text
            assert "default" in ready.json()["error"]["message"]

            if trigger == "file":
                new = root / "notes" / "comet.md"  # one saved file: the watcher's next batch
                new.write_text("# Comets\n\nA comet's tail of ice and dust always points away from the sun.\n")
            wait_for(lambda: c.get("/readyz").status_code == 200, 120, "the repair")
            after = c.get("/status").json()["collections"][0]
            hits = c.post("/search", json={"query": "nightly backups of the database", "k": 1}).json()
    finally:
        handle.stop()
    assert after["health"]["ok"], after["health"]
    added = 1 if trigger == "file" else 0
    assert after["points"] == before["points"] + added and after["files"] == before["files"] + added
    assert hits["hits"][0]["path"].endswith("backup.md") and hits.get("warning") is None


def _delete_store(handle: ServerHandle, store: str, folder: Path) -> None:
    """The store's files deleted under the running server (``rm -rf`` of its folder)."""
    shutil.rmtree(folder)
