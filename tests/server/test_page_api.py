"""The endpoints the search page stands on: GET /overview (the empty page, the status panel) and the marks of
GET /files (the viewer marks what the hit's snippet marks), over the real server and models."""

from __future__ import annotations

import re
import time

import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow


def test_overview_shows_the_collection_for_a_person(served: ServerHandle) -> None:
    with served.client() as c:
        o = c.get("/overview").json()
        status = c.get("/status", params={"collection": "default"}).json()["collections"][0]
        missing = c.get("/overview", params={"collection": "nope"})
    assert o["collection"] == "default"
    assert (o["files"], o["chunks"]) == (status["files"], status["chunks"]) and o["files"] == 5
    assert o["roots"] == [{"path": str(served.root), "name": served.root.name}]
    assert o["last_commit"] is not None and 0 <= o["now"] - o["last_commit"] < 3600
    assert abs(o["now"] - time.time()) < 60
    # the model by name: the status's identity without its weights fingerprint
    assert status["model"].startswith(o["model"]) and len(status["model"]) > len(o["model"])
    assert not re.search(r"-[0-9a-f]{12}", o["model"]), o["model"]
    assert o["reranker"] and not o["reranker"].endswith(".gguf")
    assert o["watcher"]["running"] is False and "not running" in o["watcher"]["line"]
    # example queries drawn from the collection: its file names' words, spread over its folders
    assert 3 <= len(o["examples"]) <= 5, o["examples"]
    names = {"keys", "backup", "pasta", "garden", "geometry"}
    assert set(o["examples"]) <= names, o["examples"]
    assert missing.status_code == 404


def test_files_marks_the_query_words_on_the_hits_lines_only(served: ServerHandle) -> None:
    keys = str(served.root / "docs" / "keys.md")
    with served.client() as c:
        hit = c.post("/search", json={"query": "rotate the API keys", "k": 1, "rerank": False}).json()["hits"][0]
        assert hit["path"] == keys
        data = c.get("/files", params={"path": keys, "query": "rotate the API keys",
                                       "from": hit["start_line"], "to": hit["end_line"]}).json()
        only_heading = c.get("/files", params={"path": keys, "query": "key rotation", "from": 3, "to": 3}).json()
        plain = c.get("/files", params={"path": keys}).json()
    text = data["text"]
    marked = [text[a:b] for a, b in data["marks"]]
    # the words the snippet marks, whole words, stems matched ("keys" and "rotate"), no stopword ("the")
    assert {w.lower() for w in marked} >= {"rotate", "api", "keys"}, marked
    assert "the" not in {w.lower() for w in marked}
    assert {w.lower() for w in marked} <= {w.lower() for a, b in hit["marks"] for w in [hit["snippet"][a:b]]} | {
        "key", "keys", "rotate", "rotation", "api"}
    # line 3 is "## Key rotation": only its words are marked, not those of line 5
    line3 = text.split("\n")[2]
    assert [text[a:b] for a, b in only_heading["marks"]] == ["Key", "rotation"], line3
    assert "marks" not in plain


def test_files_refuses_bad_line_numbers(served: ServerHandle) -> None:
    keys = str(served.root / "docs" / "keys.md")
    with served.client() as c:
        bad = c.get("/files", params={"path": keys, "query": "keys", "from": 0})
    assert bad.status_code == 422 and "from" in bad.json()["error"]["message"]
