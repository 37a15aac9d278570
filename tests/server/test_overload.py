"""Overload: a full model queue answers 503 with Retry-After at once, and the server recovers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, wait_for, write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_queue(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "overload-corpus").resolve()
    settings = make_settings(isolated_env / "overload-data", embed_model_path, None, max_queue=3)
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False)
    yield handle
    handle.stop()


def test_full_queue_answers_503_with_retry_after_and_recovers(small_queue: ServerHandle) -> None:
    worker = small_queue.service.worker
    release = threading.Event()
    running = threading.Event()

    def long_model_job() -> None:  # stands in for a long embedding batch holding the model
        running.set()
        release.wait(120)

    pool = ThreadPoolExecutor(max_workers=4)
    try:
        blocker = pool.submit(worker.call_sync, long_model_job, 120)
        assert running.wait(30)
        with small_queue.client() as c:
            # two more fit in the queue (limit 3: one running + two waiting) ...
            queued = [pool.submit(c.post, "/search", json={"query": "backup", "rerank": False}) for _ in range(2)]
            wait_for(lambda: worker.depth == 3, what="two queued searches")
            # ... the next ones are refused at once, with a Retry-After
            refused = c.post("/search", json={"query": "backup", "rerank": False})
            refused_v1 = c.post("/v1/embeddings", json={"input": "x"})
            health = c.get("/healthz")
            assert refused.status_code == 503, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            assert "busy" in refused.json()["error"]["message"]
            assert refused_v1.status_code == 503
            assert health.status_code == 200  # the event loop stays responsive
            release.set()
            blocker.result(timeout=60)
            assert [f.result(timeout=60).status_code for f in queued] == [200, 200]
            wait_for(lambda: worker.depth == 0, what="an empty queue")
            again = c.post("/search", json={"query": "backup", "rerank": False})
            assert again.status_code == 200 and again.json()["hits"][0]["path"].endswith("backup.md")
            metrics = c.get("/metrics").text
        assert "indexer_overload_rejections_total 2.0" in metrics
    finally:
        release.set()
        pool.shutdown(wait=True)
