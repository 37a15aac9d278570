"""API keys (read and admin scopes), body cap, loopback default, no CORS by default, real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, write_corpus

pytestmark = pytest.mark.slow

READ_KEY = "read-key-123"
ADMIN_KEY = "admin-key-456"


@pytest.fixture(scope="module")
def locked(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "locked-corpus").resolve()
    settings = make_settings(
        isolated_env / "locked-data",
        embed_model_path,
        None,
        api_keys=(READ_KEY,),
        admin_api_keys=(ADMIN_KEY,),
        max_body_bytes=4096,
    )
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False)
    yield handle
    handle.stop()


def test_keys_are_required_and_scoped(locked: ServerHandle) -> None:
    body = {"query": "backup policy", "k": 1}
    with locked.client() as c:
        anonymous = c.post("/search", json=body)
        wrong = c.post("/search", json=body, headers={"Authorization": "Bearer nope"})
        bearer = c.post("/search", json=body, headers={"Authorization": f"Bearer {READ_KEY}"})
        header = c.post("/search", json=body, headers={"X-API-Key": READ_KEY})
        admin_reads = c.post("/search", json=body, headers={"X-API-Key": ADMIN_KEY})
        read_sync = c.post("/collections/default/sync", headers={"X-API-Key": READ_KEY})
        admin_sync = c.post("/collections/default/sync", headers={"X-API-Key": ADMIN_KEY})
        health = c.get("/healthz")
        page = c.get("/")
        status_anon = c.get("/status")
        embeddings_anon = c.post("/v1/embeddings", json={"input": "x"})
    assert anonymous.status_code == 401 and "API key is required" in anonymous.json()["error"]["message"]
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401 and "not valid" in wrong.json()["error"]["message"]
    assert bearer.status_code == header.status_code == admin_reads.status_code == 200
    assert bearer.json()["hits"][0]["path"].endswith("backup.md")
    assert read_sync.status_code == 403 and "admin" in read_sync.json()["error"]["message"]
    assert admin_sync.status_code == 200, admin_sync.text
    report = admin_sync.json()["report"]
    # files written < 2 s before the index run are re-hashed ("touched"), not proven unchanged by stat data
    assert report["files_indexed"] == 0 and report["files_unchanged"] + report["files_touched"] == 5
    assert health.status_code == 200 and page.status_code == 200 and "<form" in page.text
    assert status_anon.status_code == 401 and embeddings_anon.status_code == 401


def test_body_cap_by_length_and_when_streamed(locked: ServerHandle) -> None:
    headers = {"X-API-Key": READ_KEY, "content-type": "application/json"}
    big = b'{"input": "' + b"a" * 8000 + b'"}'

    def chunks():
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    with locked.client() as c:
        declared = c.post("/v1/embeddings", content=big, headers=headers)
        streamed = c.post("/v1/embeddings", content=chunks(), headers=headers)
        small = c.post("/v1/embeddings", json={"input": "ok"}, headers={"X-API-Key": READ_KEY})
    for r in (declared, streamed):
        assert r.status_code == 413, r.text
        assert "max_body_bytes" in r.json()["error"]["message"]
    assert small.status_code == 200


def test_no_cors_by_default(locked: ServerHandle) -> None:
    with locked.client() as c:
        pre = c.options(
            "/search",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        r = c.post("/search", json={"query": "x"}, headers={"Origin": "https://evil.example", "X-API-Key": READ_KEY})
    assert "access-control-allow-origin" not in pre.headers
    assert "access-control-allow-origin" not in r.headers


def test_loopback_default_and_public_bind_needs_keys(tmp_path: Path) -> None:
    from indexer.errors import ConfigError
    from indexer.server.run import is_loopback, serve
    from indexer.settings import Settings

    assert Settings(data_dir=tmp_path).server_host == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(ConfigError, match="without API keys"):
        serve(Settings(data_dir=tmp_path, server_host="0.0.0.0", server_port=0))
