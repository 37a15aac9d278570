"""The HTTP API against a real uvicorn server on loopback with the real models and a real FAISS store."""

from __future__ import annotations

import os
import threading

import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow


def test_healthz_readyz_and_openapi(served: ServerHandle) -> None:
    with served.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"status": "ready"}
        schema = c.get("/openapi.json").json()
    for path in ("/search", "/v1/embeddings", "/v1/rerank", "/status", "/healthz", "/readyz", "/files"):
        assert path in schema["paths"], path
    assert schema["paths"]["/search"]["post"]["requestBody"]


def test_search_finds_the_expected_file_with_spans_scores_and_timings(served: ServerHandle) -> None:
    with served.client() as c:
        r = c.post("/search", json={"query": "how do I rotate the API keys?", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["collection"] == "default"
    top = body["hits"][0]
    assert top["path"].endswith("docs/keys.md")
    assert top["start_line"] >= 1 and top["end_line"] >= top["start_line"]
    assert "Key rotation" in top["heading"] or "Operations" in top["heading"]
    assert "vault rotate" in top["text"]
    assert isinstance(top["score"], float) and isinstance(top["rerank_score"], float)
    assert body["reranked"] is True
    assert len(body["hits"]) == 3
    assert {"embed", "search", "rerank", "total"} <= set(body["timings_ms"])


def test_search_rerank_off_filters_and_k(served: ServerHandle) -> None:
    with served.client() as c:
        plain = c.post("/search", json={"query": "tomato", "rerank": False, "k": 10}).json()
        only_txt = c.post("/search", json={"query": "tomato", "file_types": ["txt"], "rerank": False}).json()
        glob = c.post("/search", json={"query": "tomato", "path_glob": "*.md", "rerank": False}).json()
        under = c.post(
            "/search", json={"query": "tomato", "path_prefix": str(served.root / "src"), "rerank": False}
        ).json()
    assert plain["reranked"] is False and all(h["rerank_score"] is None for h in plain["hits"])
    assert "disabled for this query" in plain["rerank_note"]
    assert "rerank" not in plain["timings_ms"]
    assert only_txt["hits"] and all(h["path"].endswith(".txt") for h in only_txt["hits"])
    assert glob["hits"] and all(h["path"].endswith(".md") for h in glob["hits"])
    assert [h["path"] for h in under["hits"]] == [str(served.root / "src" / "geometry.py")]


def test_search_bad_input_is_a_json_error_without_stack_trace(served: ServerHandle) -> None:
    with served.client() as c:
        big_k = c.post("/search", json={"query": "keys", "k": 100000})
        missing = c.post("/search", json={"query": "keys", "collection": "nope"})
        blank = c.post("/search", json={"query": "   "})
        wrong_type = c.post("/search", json={"query": "keys", "k": "many"})
        extra = c.post("/search", json={"query": "keys", "colection": "typo"})
        not_json = c.post("/search", content=b"{not json", headers={"content-type": "application/json"})
        relative = c.post("/search", json={"query": "keys", "path_prefix": "docs"})
    assert big_k.status_code == 400 and "max_top_k" in big_k.json()["error"]["message"]
    assert missing.status_code == 404 and "'nope' does not exist" in missing.json()["error"]["message"]
    assert blank.status_code == 400 and "empty" in blank.json()["error"]["message"]
    assert wrong_type.status_code == 400 and "k must be a whole number" in wrong_type.json()["error"]["message"]
    assert extra.status_code == 422 and "colection" in extra.json()["error"]["message"]
    assert not_json.status_code == 422
    assert relative.status_code == 400 and "absolute" in relative.json()["error"]["message"]
    for r in (big_k, missing, blank, wrong_type, extra, not_json, relative):
        assert "Traceback" not in r.text and r.headers["content-type"].startswith("application/json")


def test_status_collections_and_metrics(served: ServerHandle) -> None:
    with served.client() as c:
        c.post("/search", json={"query": "backup policy"})
        status = c.get("/status").json()
        one = c.get("/status", params={"collection": "default"}).json()
        cols = c.get("/collections").json()
        metrics = c.get("/metrics")
    col = status["collections"][0]
    assert col["collection"] == "default" and col["files"] == 5 and col["points"] >= 5
    assert one["collections"][0]["roots"] == [str(served.root.resolve())]
    assert status["server"]["queue_limit"] == served.settings.max_queue
    assert cols[0]["collection"] == "default"
    text = metrics.text
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'indexer_http_request_duration_seconds_count{method="POST",route="/search",status="200"}' in text
    assert 'indexer_index_points{collection="default"}' in text
    assert "indexer_queue_depth" in text
    assert 'indexer_search_stage_seconds_count{stage="embed"}' in text
    assert 'indexer_rerank_pairs_total{source="search"}' in text


def test_files_serves_indexed_text_and_refuses_anything_else(served: ServerHandle, tmp_path) -> None:
    keys = served.root / "docs" / "keys.md"
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")
    link = served.root / "docs" / "link-to-secret.md"
    os.symlink(outside, link)
    unindexed = served.root / "docs" / "new.md"
    unindexed.write_text("not indexed yet")
    try:
        with served.client() as c:
            ok = c.get("/files", params={"path": str(keys)})
            dotdot = c.get("/files", params={"path": str(served.root / "docs" / ".." / ".." / outside.name)})
            direct = c.get("/files", params={"path": str(outside)})
            via_link = c.get("/files", params={"path": str(link)})
            fresh = c.get("/files", params={"path": str(unindexed)})
            relative = c.get("/files", params={"path": "docs/keys.md"})
            etc = c.get("/files", params={"path": "/etc/passwd"})
    finally:
        link.unlink()
        unindexed.unlink()
    assert ok.status_code == 200 and "vault rotate" in ok.json()["text"]
    assert ok.json()["changed_since_indexed"] is False
    for r in (dotdot, direct, via_link, fresh, relative, etc):
        assert r.status_code == 404, r.text
        assert "top secret" not in r.text and "root:" not in r.text


def test_search_is_not_held_up_by_a_busy_index_thread(served: ServerHandle) -> None:
    """The index thread (admin syncs, the watcher) is separate from the model worker that answers searches."""
    release = threading.Event()
    entered = threading.Event()

    def long_batch() -> None:
        entered.set()
        release.wait(120)

    busy = served.service._index_pool.submit(long_batch)
    try:
        assert entered.wait(30)
        with served.client() as c:
            r = c.post("/search", json={"query": "backup", "rerank": False})
        assert r.status_code == 200 and not busy.done()
    finally:
        release.set()
    busy.result(timeout=30)


def test_admin_sync_reindexes_a_changed_file(served: ServerHandle) -> None:
    target = served.root / "notes" / "garden.txt"
    original = target.read_text()
    target.write_text(original + "\nThe lemon tree blossoms in spring and smells of citrus.\n")
    try:
        with served.client() as c:
            r = c.post("/collections/default/sync")
            assert r.status_code == 200, r.text
            assert r.json()["report"]["files_indexed"] == 1
            hits = c.post("/search", json={"query": "lemon tree blossom", "k": 1, "rerank": False}).json()["hits"]
            assert hits[0]["path"] == str(target)
            missing = c.post("/collections/nope/sync")
            assert missing.status_code == 404
    finally:
        target.write_text(original)
        with served.client() as c:
            c.post("/collections/default/sync")


def test_search_modes(served: ServerHandle) -> None:
    with served.client() as c:
        default = c.post("/search", json={"query": "nightly backups", "rerank": False}).json()
        lexical = c.post("/search", json={"query": "spaghetti", "mode": "lexical", "rerank": False}).json()
        dense = c.post("/search", json={"query": "spaghetti", "mode": "dense", "rerank": False}).json()
        bad = c.post("/search", json={"query": "x", "mode": "fuzzy"})
    assert default["mode"] == served.settings.search_mode
    assert lexical["mode"] == "lexical" and lexical["hits"][0]["path"].endswith("pasta.txt")
    assert dense["mode"] == "dense" and dense["hits"]
    assert bad.status_code == 400 and "mode" in bad.json()["error"]["message"]


def test_sync_while_another_writer_holds_the_collection_is_409_with_retry_after(served: ServerHandle) -> None:
    from indexer.collection.facade import open_collection

    with open_collection("default", settings=served.settings) as other, other.parts.writer_lock(), served.client() as c:
        locked = c.post("/collections/default/sync")
        search = c.post("/search", json={"query": "backup", "rerank": False})
    assert locked.status_code == 409, locked.text
    assert locked.json()["error"]["type"] == "locked_error" and locked.headers["retry-after"] == "5"
    assert search.status_code == 200  # searching works meanwhile


def test_hits_carry_locator_location_and_metadata_and_metadata_filters(served: ServerHandle) -> None:
    with served.client() as c:
        plain = c.post("/search", json={"query": "rotate the API keys", "k": 2, "rerank": False}).json()
        none = c.post("/search", json={"query": "rotate the API keys", "metadata": {"author": "nobody"}})
        where = c.post("/search", json={"query": "rotate the API keys", "where": ["size>0", "not type=pdf"],
                                        "facets": ["type"]}).json()
        where_bad = c.post("/search", json={"query": "keys", "where": ["size>huge"]})
        bad = c.post("/search", json={"query": "keys", "metadata": {"author": ""}})
        schema = c.get("/openapi.json").json()
    top = plain["hits"][0]
    assert top["locator"] == "" and top["location"] == {} and top["metadata"] == {}  # Markdown has no sections
    # a field the collection does not have is named, with the fields it has (a 400, not an empty answer)
    assert none.status_code == 400 and "no field 'author'" in none.json()["error"]["message"]
    assert where["hits"] and where["matched"] >= len(where["hits"]) and where["facets"]["type"][0][1] >= 1
    assert where_bad.status_code == 400 and "not a size" in where_bad.json()["error"]["message"]
    assert bad.status_code == 400 and "metadata filter" in bad.json()["error"]["message"]
    assert {"locator", "location", "metadata"} <= set(schema["components"]["schemas"]["HitOut"]["properties"])


def test_the_api_docs_page_needs_no_network(served: ServerHandle) -> None:
    """/docs loads Swagger UI from the server itself (offline), never from a CDN."""
    import re

    with served.client() as c:
        page = c.get("/docs")
        assert page.status_code == 200
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: *'([^']+)'", page.text)
        assert urls and all(u.startswith("/") or u.startswith("data:") for u in urls), urls
        assets = {u: c.get(u) for u in urls if u.startswith("/static/")}
        missing = c.get("/static/docs/../../etc/passwd")
    assert len(assets) == 2
    for url, answer in assets.items():
        assert answer.status_code == 200 and len(answer.content) > 100_000, url
        assert answer.headers["content-type"].startswith(("text/javascript", "text/css")), url
    assert missing.status_code == 404


def test_a_body_sent_without_the_json_content_type_says_so(served: ServerHandle) -> None:
    """`curl -d '{...}'` sends application/x-www-form-urlencoded: a clear 415, not a bare 422."""
    body = b'{"query": "backup policy", "k": 1}'
    with served.client() as c:
        form = c.post("/search", content=body, headers={"content-type": "application/x-www-form-urlencoded"})
        bare = c.post("/v1/embeddings", content=b'{"input": "x"}')
        right = c.post("/search", content=body, headers={"content-type": "application/json"})
    for answer in (form, bare):
        assert answer.status_code == 415, answer.text
        assert "content-type: application/json" in answer.json()["error"]["message"]
    assert right.status_code == 200
