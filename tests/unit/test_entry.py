"""The console script's fast `indexer search`: what it leaves to the full CLI, and how it prints."""

from __future__ import annotations

import json
import os
import time

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
def test_left_to_the_full_cli(args, data_dir):
    # a live announcement that nothing answers: reaching the network would fall back too, so these must not
    announce.write(data_dir, announce.Announcement("http://127.0.0.1:9", os.getpid(), "t", time.time(), str(data_dir)))
    assert fast_search(args) is None


def test_no_server_means_the_full_cli(data_dir):
    assert fast_search(["anything", "-k", "3"]) is None


def test_json_prints_the_in_process_shape(capsys):
    print_result({"hits": [HIT]}, as_json=True, verbose=False)
    [printed] = json.loads(capsys.readouterr().out)
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
