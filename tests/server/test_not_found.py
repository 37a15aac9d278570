"""One not-found error for a collection that does not exist (issue 29): ``NotFoundError`` with one message, HTTP 404,
CLI exit 1, an MCP tool error, for search, status, drop and backup, per front end."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from indexer.errors import NotFoundError
from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, write_corpus

GHOST = "ghost"
MESSAGE = str(NotFoundError.collection(GHOST))


@pytest.fixture(scope="module")
def plain_served(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    """A server over one indexed collection, no reranker."""
    root = write_corpus(isolated_env / "plain-corpus").resolve()
    settings = make_settings(isolated_env / "plain-data", embed_model_path, None)
    index_corpus(settings, root)
    handle = start_server(settings, root, watch=False)
    yield handle
    handle.stop()


def test_the_message_names_the_collection_and_both_ways_out():
    assert f"'{GHOST}' does not exist" in MESSAGE and "indexer collections" in MESSAGE
    assert "indexer index PATH" in MESSAGE and "\n" not in MESSAGE
    assert isinstance(NotFoundError.collection(GHOST), NotFoundError)


def test_python_api_search_status_drop_and_backup(tmp_path, embed_model_path, monkeypatch):
    import indexer
    from indexer.ops.backup import backup

    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("INDEXER_EMBED_MODEL", str(embed_model_path))
    with indexer.open_collection("real") as col:
        (tmp_path / "docs").mkdir()
        (tmp_path / "docs" / "a.md").write_text("something to index\n")
        col.index([tmp_path / "docs"])  # a state database exists: only the collection is missing
    with indexer.open_collection(GHOST) as col:
        for call in (lambda: col.search("x"), col.status, col.drop):
            with pytest.raises(NotFoundError) as caught:
                call()
            assert str(caught.value) == MESSAGE
    with pytest.raises(NotFoundError) as caught:
        backup(indexer.load_settings(collection=GHOST), tmp_path / "backup")
    assert str(caught.value) == MESSAGE


def test_http_answers_404_with_the_one_message(plain_served: ServerHandle):
    with plain_served.client() as c:
        answers = [
            c.post("/search", json={"query": "x", "collection": GHOST}),
            c.get("/status", params={"collection": GHOST}),
            c.post(f"/collections/{GHOST}/sync"),
        ]
    for answer in answers:
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"] == {"message": MESSAGE, "type": "not_found_error", "param": None, "code": None}


def test_mcp_search_and_status_give_the_one_message_as_a_tool_error(plain_served: ServerHandle):
    pytest.importorskip("mcp")
    from mcp import Client

    async def main():
        async with Client(plain_served.url + "/mcp") as client:
            return (
                await client.call_tool("search", {"query": "x", "collection": GHOST}),
                await client.call_tool("status", {"collection": GHOST}),
            )

    for answer in anyio.run(main):
        assert answer.is_error and answer.content[0].text.endswith(": " + MESSAGE)  # the SDK names the tool first


def test_cli_exits_1_with_the_one_message(tmp_path, embed_model_path):
    env = {**os.environ, "INDEXER_DATA_DIR": str(tmp_path / "data"), "INDEXER_EMBED_MODEL": str(embed_model_path),
           "COLUMNS": "400"}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("something to index\n")
    commands = [
        ("index", str(tmp_path / "docs"), "-c", "real"),  # a state database exists: only the collection is missing
        ("search", "x", "-c", GHOST, "--local"),
        ("status", "-c", GHOST),
        ("drop", GHOST, "--yes"),
        ("backup", str(tmp_path / "backup"), "-c", GHOST),
    ]
    first, *answers = [
        subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env,
                       timeout=600)
        for args in commands
    ]
    assert first.returncode == 0, first.stderr
    for answer in answers:
        assert answer.returncode == 1, answer.stderr
        assert MESSAGE in " ".join(answer.stderr.split()), answer.stderr
