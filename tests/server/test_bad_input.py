"""One bad input never hurts anyone else: lone surrogates and deeply nested JSON on every route answer 4xx
(never 5xx), a bad /v1/embeddings request fails alone in its batch, and the connection it came on stays usable.
A real server on loopback with an attached Qdrant collection, so the Qdrant-shaped routes are reached too."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import ATTACHED, ServerHandle, wait_for

pytestmark = pytest.mark.slow

SURROGATE = "\ud800x"  # JSON's "\ud800x": a lone high surrogate, not text
DEEP = 1000  # deeper than Python's default recursion limit


def raw(c: httpx.Client, path: str, body: object) -> httpx.Response:
    """POST ``body`` as JSON with escapes (httpx's own encoder refuses lone surrogates)."""
    return c.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def deep(n: int = DEEP) -> bytes:
    return b"[" * n + b"]" * n


def test_a_lone_surrogate_fails_alone_in_its_batch(attached_served: ServerHandle) -> None:
    svc = attached_served.service
    release, running = threading.Event(), threading.Event()

    def hold_the_model() -> None:
        running.set()
        release.wait(120)

    good = [f"sentence number {i} about glaciers" for i in range(6)]
    with ThreadPoolExecutor(max_workers=8) as pool, attached_served.client() as c:
        blocker = pool.submit(svc.worker.call_sync, hold_the_model, 120)
        assert running.wait(30)
        try:
            ok = [pool.submit(c.post, "/v1/embeddings", json={"input": text}) for text in good]
            bad = pool.submit(raw, c, "/v1/embeddings", {"input": ["fine", SURROGATE]})
            wait_for(lambda: len(svc._embed_pending) == 7, what="seven requests waiting for one batch")
            flushes = svc.embed_flushes
        finally:
            release.set()
        blocker.result(60)
        answers = [f.result(60) for f in ok]
        refused = bad.result(60)
        assert svc.embed_flushes == flushes + 1  # one batch held them all
        assert refused.status_code == 400, refused.text
        message = refused.json()["error"]["message"]
        assert "input[1]" in message and "lone surrogate" in message and "U+D800" in message
        for text, answer in zip(good, answers, strict=True):
            assert answer.status_code == 200, answer.text
            assert len(answer.json()["data"][0]["embedding"]) == 384, text
        # the same kept-alive client goes on: the connection was not reset
        again = c.post("/v1/embeddings", json={"input": "after the bad one"})
        assert again.status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/search", {"query": SURROGATE}),
        ("/search", {"query": "fine", "path_glob": SURROGATE}),
        ("/v1/embeddings", {"input": SURROGATE}),
        ("/v1/rerank", {"query": SURROGATE, "documents": ["a"]}),
        ("/v1/rerank", {"query": "fine", "documents": ["a", {"text": SURROGATE}]}),
        (f"/collections/{ATTACHED}/points/query", {"query": {"text": SURROGATE}}),
        (f"/collections/{ATTACHED}/points/query", {"query": {"nearest": {"text": SURROGATE}}, "limit": 2}),
        (f"/collections/{ATTACHED}/points/query", {"query": {"text": "ice"}, "using": SURROGATE}),
    ],
)
def test_lone_surrogates_are_refused_as_bad_input(attached_served: ServerHandle, path: str, body: object) -> None:
    with attached_served.client() as c:
        answer = raw(c, path, body)
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.status_code != 404, answer.text  # the route and the collection exist: the input was judged
        after = c.post("/search", json={"query": "nightly backups", "k": 1})
    assert after.status_code == 200 and after.json()["hits"][0]["path"].endswith("backup.md")


def test_surrogates_in_data_fields_are_answered_like_any_other_value(attached_served: ServerHandle) -> None:
    """A filter value or a payload key is data for Qdrant, not text for a model: a surrogate there matches
    nothing (200, no hit, no field), as Qdrant answers; a surrogate query text names the problem."""
    query = f"/collections/{ATTACHED}/points/query"
    with attached_served.client() as c:
        flt = {"must": [{"key": "topic", "match": {"value": SURROGATE}}]}
        filtered = raw(c, query, {"query": {"text": "ice"}, "filter": flt})
        keyed = raw(c, query, {"query": {"text": "ice"}, "with_payload": [SURROGATE], "limit": 2})
        text = raw(c, query, {"query": {"text": SURROGATE}})
    assert filtered.status_code == 200 and filtered.json()["result"]["points"] == []
    assert keyed.status_code == 200 and [p["payload"] for p in keyed.json()["result"]["points"]] == [{}, {}]
    assert text.status_code == 400 and "lone surrogate" in text.json()["status"]["error"]


@pytest.mark.parametrize(
    "path", ["/search", "/v1/embeddings", "/v1/rerank", f"/collections/{ATTACHED}/points/query", "/collections/x/sync"]
)
def test_deep_json_is_refused_with_400(attached_served: ServerHandle, path: str) -> None:
    def nested_filter(n: int) -> bytes:
        return b'{"query": {"text": "ice"}, "filter": ' + b'{"must": [' * n + b"1" + b"]}" * n + b"}"

    with attached_served.client() as c:
        answers = [c.post(path, content=deep(), headers={"content-type": "application/json"})]
        for n in (DEEP, 400, 150):  # too deep for the parser, for the validators, for Qdrant
            answers.append(c.post(path, content=nested_filter(n), headers={"content-type": "application/json"}))
    for answer in answers:
        assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:200])


def test_odd_query_strings_never_give_5xx(attached_served: ServerHandle) -> None:
    with attached_served.client() as c:
        answers = [
            c.get("/files?path=%ED%A0%80&collection=default"),
            c.get("/files?path=/x%00y&collection=default"),
            c.get("/status?collection=%ED%A0%80"),
            c.get("/files", params={"path": "/" + "a/" * 2000, "collection": "default"}),
        ]
    for answer in answers:
        assert 400 <= answer.status_code < 500, (answer.request.url, answer.status_code, answer.text[:200])


@pytest.mark.parametrize("encoded", ["%2E%2E", "a%20b", "a%00b", "caf%C3%A9", ".hidden", "x" * 201, "%ED%A0%80"])
def test_qdrant_route_names_follow_the_one_collection_name_rule(attached_served: ServerHandle, encoded: str) -> None:
    with attached_served.client() as c:
        query = c.post(f"/collections/{encoded}/points/query", json={"query": {"text": "ice"}})
        sync = c.post(f"/collections/{encoded}/sync")
        good = c.post(f"/collections/{ATTACHED}/points/query", json={"query": {"text": "ice"}, "limit": 1})
    assert query.status_code == 400, query.text
    assert "not a collection name" in query.json()["status"]["error"]  # Qdrant's error shape
    assert sync.status_code == 400 and "not a collection name" in sync.json()["error"]["message"]
    assert good.status_code == 200 and len(good.json()["result"]["points"]) == 1
