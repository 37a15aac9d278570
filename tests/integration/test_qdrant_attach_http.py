"""The Qdrant-shaped endpoint, called by qdrant-client itself: text queries, filters, reranking, refusals.

A real uvicorn server on loopback serves the router (one model thread, as in the HTTP service)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

import indexer
from plugins.qdrant_attach import attach
from tests.integration.corpus import write_corpus
from tests.integration.test_qdrant_attach import Loc, make_plain_named

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedder(embed_model_path):
    from indexer.engine.adapters import LlamaEmbedder

    emb = LlamaEmbedder(embed_model_path)
    yield emb
    emb.close()


@pytest.fixture
def served(tmp_path, embedder, reranker_model_path) -> Iterator[dict[str, Any]]:
    """A collection with several named vectors (ours fits 'mini'), our corpus indexed into it, and the router
    served by uvicorn on a free loopback port."""
    import uvicorn
    from fastapi import FastAPI

    from plugins.qdrant_attach.http import QueryEndpoint, build_router

    loc = Loc(None, tmp_path / "qdrant")
    name = f"theirs_{uuid.uuid4().hex[:8]}"
    make_plain_named(loc, name, embedder)
    with attach(name, path=loc.path, embedder=embedder) as col:
        col.index([write_corpus(tmp_path / "corpus")])

    settings = indexer.load_settings(rerank_model=str(reranker_model_path))
    pool = ThreadPoolExecutor(max_workers=1)  # the one thread that owns models and the embedded client

    async def run(fn):
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    endpoint = QueryEndpoint(settings)
    router = build_router(settings, run, endpoint=endpoint)
    app = FastAPI()
    app.include_router(router)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    yield {"url": url, "name": name}
    server.should_exit = True
    thread.join(timeout=30)
    pool.submit(endpoint.close).result()
    pool.shutdown()


def test_qdrant_client_gains_text_queries(served):
    client = QdrantClient(url=served["url"], cloud_inference=True, check_compatibility=False)
    try:
        res = client.query_points(served["name"], query=qm.Document(text="rings of Saturn", model="indexer"), limit=3)
        assert res.points[0].payload["source"].endswith("planets.txt") and res.points[0].payload["indexer"]
        # their points answer too, and the filter goes to Qdrant unchanged
        geo = qm.Filter(must=[qm.FieldCondition(key="topic", match=qm.MatchValue(value="geo"))])
        only = client.query_points(
            served["name"], query=qm.Document(text="ice valleys", model="indexer"), query_filter=geo, limit=5,
            using="mini",
        )
        assert {p.payload["source"] for p in only.points} == {"/theirs/ice.md", "/theirs/lava.md"}
        # reranking through the Document's options: scores are rerank scores, best first
        ranked = client.query_points(
            served["name"],
            query=qm.Document(text="bake a loaf", model="indexer", options={"rerank": True, "candidates": 6}),
            limit=3,
        )
        scores = [p.score for p in ranked.points]
        assert scores == sorted(scores, reverse=True) and ranked.points[0].payload["source"].endswith("bread.md")
        # a query we do not extend is answered from the embedded folder (through the one client held on it)
        vector = client.query_points(served["name"], query=[0.1] * 384, using="mini", limit=2)
        assert len(vector.points) == 2 and all(p.payload for p in vector.points)
        with pytest.raises(UnexpectedResponse) as exc2:
            client.query_points(served["name"], query=qm.Document(text="x", model="indexer"), using="big")
        assert exc2.value.status_code == 400 and b"vector mini" in exc2.value.content
        with pytest.raises(UnexpectedResponse) as exc3:
            client.query_points("nope", query=qm.Document(text="x", model="indexer"))
        assert exc3.value.status_code == 404
    finally:
        client.close()


def test_qdrant_client_reads_an_attached_collection_through_our_url(served):
    """qdrant-client 1.20's read calls (compatibility check on) work against our URL for an attached collection
    in an embedded folder; what we do not serve is refused in Qdrant's error shape."""
    client = QdrantClient(url=served["url"], cloud_inference=True)  # its version check reads GET / too
    name = served["name"]
    try:
        assert name in [c.name for c in client.get_collections().collections]
        assert client.collection_exists(name) and not client.collection_exists("nope")
        info = client.get_collection(name)
        total = info.points_count
        assert total and total > 4 and set(info.config.params.vectors) == {"small", "mini", "big"}
        assert client.count(name, exact=True).count == total
        geo = qm.Filter(must=[qm.FieldCondition(key="topic", match=qm.MatchValue(value="geo"))])
        assert client.count(name, count_filter=geo).count == 2
        page, nxt = client.scroll(name, limit=3, with_payload=["source"])
        assert len(page) == 3 and nxt is not None and all(set(r.payload) <= {"source"} for r in page)
        rest, _ = client.scroll(name, limit=1000, offset=nxt)
        assert len(page) + len(rest) == total
        got = client.retrieve(name, ids=[page[0].id], with_vectors=["mini"])
        assert [r.id for r in got] == [page[0].id] and len(got[0].vector["mini"]) == 384
        nearest = client.query_points(name, query=got[0].vector["mini"], using="mini", limit=1)
        assert nearest.points[0].id == page[0].id
        with pytest.raises(UnexpectedResponse) as exc:
            client.delete_collection(name)
        assert exc.value.status_code == 404 and b"not served here" in exc.value.content
        with pytest.raises(UnexpectedResponse) as exc2:
            client.get_collection("nope")
        assert exc2.value.status_code == 404 and b"nope" in exc2.value.content
        with pytest.raises(UnexpectedResponse) as exc3:
            client.delete(name, points_selector=qm.PointIdsList(points=[page[0].id]))
        assert exc3.value.status_code == 404 and b"not served here" in exc3.value.content
    finally:
        client.close()


def test_raw_http_shape_and_scores(served):
    body = {"query": {"text": "glaciers and ice"}, "limit": 2, "rerank": False, "with_payload": ["source"]}
    answer = httpx.post(f"{served['url']}/collections/{served['name']}/points/query", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["status"] == "ok" and isinstance(data["time"], float)
    top = data["result"]["points"][0]
    assert top["payload"] == {"source": "/theirs/ice.md"} and top["rerank_score"] is None
    assert top["score"] == top["vector_score"]  # Euclid: Qdrant's distance, as Qdrant would answer
    bad = httpx.post(
        f"{served['url']}/collections/{served['name']}/points/query",
        json={"query": {"text": "x"}, "prefetch": [{"query": [0.0]}]},
        timeout=60,
    )
    assert bad.status_code == 400 and "prefetch" in bad.json()["status"]["error"]


def test_the_http_service_serves_it_behind_its_api_keys(tmp_path, embedder, embed_model_path):
    """The real service (create_app) includes the router through its entry point; qdrant-client's own
    api_key (sent as the 'api-key' header) passes the service's key check."""
    pytest.importorskip("indexer.server.app")
    from tests.server.conftest import make_settings, start_server

    loc = Loc(None, tmp_path / "qdrant")
    name = f"theirs_{uuid.uuid4().hex[:8]}"
    make_plain_named(loc, name, embedder)
    settings = make_settings(tmp_path / "data", embed_model_path, None, api_keys=("read-key",))
    with attach(name, path=loc.path, embedder=embedder, settings=settings) as col:
        col.index([write_corpus(tmp_path / "corpus")])
    handle = start_server(settings, tmp_path, warm_up=False, mcp=False)
    try:
        anonymous = QdrantClient(url=handle.url, cloud_inference=True, check_compatibility=False)
        with pytest.raises(UnexpectedResponse) as exc:
            anonymous.query_points(name, query=qm.Document(text="x", model="indexer"))
        assert exc.value.status_code == 401
        anonymous.close()
        client = QdrantClient(url=handle.url, api_key="read-key", cloud_inference=True, check_compatibility=False)
        res = client.query_points(name, query=qm.Document(text="exponential backoff between retries", model="m"))
        assert res.points[0].payload["source"].endswith("retry.py")
        assert name in [c.name for c in client.get_collections().collections]  # Qdrant's shape for qdrant-client
        assert client.count(name).count > 4
        client.close()
        ours = httpx.get(f"{handle.url}/collections", headers={"X-API-Key": "read-key"}).json()  # the service's own
        assert isinstance(ours, list) and {c["collection"] for c in ours} == {f"qdrant.{name}"}
        assert "/collections/{name}/points/query" in httpx.get(f"{handle.url}/openapi.json").json()["paths"]
    finally:
        handle.stop()


def test_queries_we_do_not_extend_are_forwarded_unchanged(tmp_path):
    """A vector query goes to the collection's Qdrant server as sent, with the API key, and its answer (status
    and body) comes back as is. The upstream here is a loopback stand-in recording what it receives."""
    import json
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import uvicorn
    from fastapi import FastAPI

    from plugins.qdrant_attach.http import build_router

    seen: list[tuple[str, str | None, dict[str, Any]]] = []

    class Upstream(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            seen.append((self.path, self.headers.get("api-key"), {}))
            result: Any = {"collections": [{"name": "docs"}, {"name": "other"}]} if self.path == "/collections" else {
                "status": "green", "optimizer_status": "ok", "segments_count": 1, "points_count": 3,
                "indexed_vectors_count": 0, "payload_schema": {},
                "config": {"params": {"vectors": {"dense": {"size": 2, "distance": "Cosine"}}},
                           "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
                           "optimizer_config": {"deleted_threshold": 0.2, "vacuum_min_vector_number": 1000,
                                                "default_segment_number": 0, "flush_interval_sec": 5},
                           "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0}}}
            self._send(200, {"result": result, "status": "ok", "time": 0.1})

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append((self.path, self.headers.get("api-key"), body))
            if self.path.endswith("/points/count"):
                self._send(200, {"result": {"count": 3}, "status": "ok", "time": 0.1})
                return
            status = 404 if "missing" in self.path else 200
            self._send(status, {"result": {"points": [{"id": 7, "version": 3, "score": 0.25}]}, "status": "ok",
                                "time": 0.5} if status == 200 else {"status": {"error": "Not found"}})

        def _send(self, status: int, data: Any) -> None:
            out = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    upstream = HTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    settings = indexer.load_settings(
        qdrant_url=f"http://127.0.0.1:{upstream.server_port}", qdrant_api_key="secret", data_dir=tmp_path / "data"
    )

    async def run(fn):
        return fn()

    app = FastAPI()
    app.include_router(build_router(settings, run))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        client = QdrantClient(url=url, check_compatibility=False)
        flt = qm.Filter(must=[qm.FieldCondition(key="k", match=qm.MatchValue(value="v"))])
        res = client.query_points("docs", query=[0.5, 0.25], using="dense", query_filter=flt, limit=4)
        assert [(p.id, p.version, p.score) for p in res.points] == [(7, 3, 0.25)]
        path, key, body = seen[-1]
        assert path == "/collections/docs/points/query" and key == "secret"
        sent = {"must": [{"key": "k", "match": {"value": "v"}}]}
        assert body == {"query": {"nearest": [0.5, 0.25]}, "using": "dense", "filter": sent, "limit": 4,
                        "with_vector": False, "with_payload": True}
        with pytest.raises(UnexpectedResponse) as exc:
            client.query_points("missing", query=[0.5, 0.25])
        assert exc.value.status_code == 404 and b"Not found" in exc.value.content
        # the read calls go to the server too, with the key, answered as it answers
        assert client.count("docs", exact=True).count == 3
        assert seen[-1][:2] == ("/collections/docs/points/count", "secret")
        assert client.get_collection("docs").points_count == 3 and seen[-1][:2] == ("/collections/docs", "secret")
        client.close()
        lister = QdrantClient(url=url, check_compatibility=False)
        assert {c.name for c in lister.get_collections().collections} == {"docs", "other"}
        lister.close()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        upstream.shutdown()
