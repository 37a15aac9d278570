"""The console script's fast `indexer search`: what it leaves to the full CLI, and how it prints."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from typing import Any

import pytest

from indexer.cli.entry import fast_search
from indexer.cli.results import print_result
from indexer.server import announce
from indexer.types import SearchHit

HIT = {
    "path": "/docs/a.md", "score": 0.5, "rerank_score": None, "text": "alpha  beta\\ngamma", "start_line": 3,
    "end_line": 7, "page": None, "heading": ["A"], "chunk_id": "c1", "extra": "ignored",
}


@pytest.fixture()
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "none.toml"))
    return tmp_path


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        data = json.dumps({"hits": [HIT]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def listening(data_dir):
    """A real HTTP server announced for the data directory that answers every /search and records it."""
    handler = type("Handler", (_Recorder,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    announce.write(data_dir, announce.Announcement(url, os.getpid(), "t", time.time(), str(data_dir)))
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "args",
    [
        ["q", "--help"],
        ["q", "--local"],
        ["q", "--rerank-model", "m.gguf"],
        ["q", "--rerank-model=m.gguf"],
        ["q", "--no-such-flag"],
        ["q", "-k", "many"],
        [],
        ["q", "-c", ".bad"],
    ],
)
def test_left_to_the_full_cli(args, data_dir, listening):
    # a server that answers every search: only a search the fast path must leave alone reaches the full CLI
    assert fast_search(args) is None
    assert listening.requests == [], f"{args} was sent to the server"


def test_a_plain_search_is_answered_by_the_announced_server(data_dir, listening, capsys):
    assert fast_search(["q", "-k", "3", "--json"]) == 0  # the same server answers: the checks above can tell
    assert [r["query"] for r in listening.requests] == ["q"] and listening.requests[0]["k"] == 3
    assert json.loads(capsys.readouterr().out)["hits"][0]["path"] == HIT["path"]


def test_no_server_means_the_full_cli(data_dir):
    assert fast_search(["anything", "-k", "3"]) is None


def test_json_prints_the_in_process_shape(capsys):
    print_result({"hits": [HIT]}, as_json=True, verbose=False)
    answer = json.loads(capsys.readouterr().out)
    assert answer == {"hits": answer["hits"], "matched": None, "facets": {}, "where": [], "filter_note": None}
    [printed] = answer["hits"]
    hit = SearchHit(
        path="/docs/a.md", score=0.5, rerank_score=None, text="alpha  beta\\ngamma", start_line=3, end_line=7,
        page=None, heading=("A",), chunk_id="c1",
    )
    assert printed == hit.to_dict()


def test_text_lines_notes_and_timings(capsys):
    answer = {"hits": [{**HIT, "rerank_score": 0.25}], "rerank_note": "reranked 1", "timings_ms": {"embed": 1.25}}
    print_result(answer, as_json=False, verbose=True)
    got = capsys.readouterr()
    assert got.out.splitlines() == ["1. /docs/a.md:3-7  score=0.500 rerank=0.250", "   alpha beta\\ngamma"]
    assert got.err.splitlines() == ["reranked 1", "timings (ms): embed=1.2"]
