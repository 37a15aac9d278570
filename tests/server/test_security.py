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
        overview_anon = c.get("/overview")
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
    assert overview_anon.status_code == 401


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


# -- the Host allow-list (DNS rebinding) -----------------------------------------------------------------------
EVIL = {"Host": "evil.example"}


def _routes(c, file_path: str) -> dict[str, object]:
    """One request per kind of route, each with the attacker's Host header."""
    return {
        "files": c.get("/files", params={"path": file_path}, headers=EVIL),
        "search": c.post("/search", json={"query": "backup"}, headers=EVIL),
        "status": c.get("/status", headers=EVIL),
        "overview": c.get("/overview", headers=EVIL),
        "collections": c.get("/collections", headers=EVIL),
        "v1": c.post("/v1/embeddings", json={"input": "x"}, headers=EVIL),
        "qdrant": c.post("/collections/default/points/query", json={"query": {"text": "x"}}, headers=EVIL),
        "page": c.get("/", headers=EVIL),
        "health": c.get("/healthz", headers=EVIL),
        "ready": c.get("/readyz", headers=EVIL),
        "schema": c.get("/openapi.json", headers=EVIL),
        "mcp": c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=EVIL),
    }


def test_every_route_refuses_another_host_without_keys(served: ServerHandle) -> None:
    secret = str(served.root / "docs" / "keys.md")
    with served.client() as c:
        refused = _routes(c, secret)
        port = served.url.rsplit(":", 1)[1]
        ok = [
            c.get("/files", params={"path": secret}),  # Host: 127.0.0.1:port
            c.get("/files", params={"path": secret}, headers={"Host": f"localhost:{port}"}),
            c.get("/files", params={"path": secret}, headers={"Host": "LOCALHOST."}),
            c.get("/healthz", headers={"Host": f"[::1]:{port}"}),
        ]
        # forwarded-host headers are not trusted unless configured: they neither admit nor refuse
        smuggled = c.get("/files", params={"path": secret}, headers={**EVIL, "X-Forwarded-Host": "localhost"})
        ignored = c.get("/files", params={"path": secret}, headers={"X-Forwarded-Host": "evil.example"})
    for route, answer in refused.items():
        assert answer.status_code == 421, (route, answer.status_code, answer.text[:200])
        error = answer.json()["error"]
        assert error["type"] == "misdirected_request" and "allowed_hosts" in error["message"], route
        assert "vault rotate" not in answer.text
    assert [a.status_code for a in ok] == [200, 200, 200, 200]
    assert "vault rotate" in ok[0].json()["text"]
    assert smuggled.status_code == 421 and ignored.status_code == 200


def test_every_route_refuses_another_host_with_keys(locked: ServerHandle) -> None:
    key = {"X-API-Key": ADMIN_KEY}
    with locked.client(headers=key) as c:
        refused = _routes(c, str(locked.root / "docs" / "keys.md"))
        allowed = c.post("/search", json={"query": "backup policy", "k": 1})
    assert {route: a.status_code for route, a in refused.items()} == {route: 421 for route in refused}
    assert allowed.status_code == 200


def test_behind_a_reverse_proxy(isolated_env: Path, embed_model_path: Path) -> None:
    """allowed_hosts names the public name; trust_forwarded_host judges the proxy's X-Forwarded-Host."""
    settings = make_settings(
        isolated_env / "proxy-data", embed_model_path, None,
        allowed_hosts=("search.example.com", "*.internal.example"), trust_forwarded_host=True,
    )
    handle = start_server(settings, isolated_env, warm_up=False, mcp=False)
    try:
        with handle.client() as c:
            public = c.get("/healthz", headers={"X-Forwarded-Host": "search.example.com"})
            chained = c.get("/healthz", headers={"X-Forwarded-Host": "a.internal.example, proxy.local"})
            direct = c.get("/healthz", headers={"Host": "search.example.com:443"})
            evil = c.get("/healthz", headers={"X-Forwarded-Host": "evil.example"})
            suffix_only = c.get("/healthz", headers={"X-Forwarded-Host": "internal.example"})
            loopback = c.get("/healthz")  # allowed_hosts replaces the default names
    finally:
        handle.stop()
    assert [public.status_code, chained.status_code, direct.status_code] == [200, 200, 200]
    assert evil.status_code == suffix_only.status_code == loopback.status_code == 421
    assert "search.example.com" in evil.json()["error"]["message"]


def test_host_rules() -> None:
    from indexer.server.security import HostPolicy, default_allowed_hosts, host_name

    assert host_name("[::1]:8480") == "::1" and host_name("LocalHost:80") == "localhost"
    assert host_name("::1") == "::1" and host_name("example.com.") == "example.com"
    assert default_allowed_hosts("127.0.0.1") == ("localhost", "127.0.0.1", "::1")
    assert default_allowed_hosts("0.0.0.0") == ("localhost", "127.0.0.1", "::1")
    assert default_allowed_hosts("10.1.2.3")[-1] == "10.1.2.3"
    policy = HostPolicy(["*.example.com", "exact.org"])
    assert policy.allows("a.example.com") and policy.allows("exact.org")
    assert not policy.allows("example.com") and not policy.allows("evilexample.com") and not policy.allows("")
    assert HostPolicy(["*"]).allows("anything")
