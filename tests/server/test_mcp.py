"""MCP tools `search`, `fields` and `status`, with the official SDK's client: over the server's HTTP transport and over
stdio (`indexer mcp` in a subprocess)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow

mcp = pytest.importorskip("mcp")


def _payload(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content:
        return result.structured_content
    return json.loads(result.content[0].text)


async def _exercise(client) -> tuple[set[str], dict, dict, object]:
    tools = {t.name for t in (await client.list_tools()).tools}
    found = _payload(await client.call_tool("search", {"query": "nightly database backups", "k": 2}))
    status = _payload(await client.call_tool("status", {}))
    bad = await client.call_tool("search", {"query": "x", "collection": "missing"})
    return tools, found, status, bad


def test_mcp_over_http(served: ServerHandle) -> None:
    from mcp import Client

    async def main():
        async with Client(served.url + "/mcp") as client:
            return await _exercise(client)

    tools, found, status, bad = anyio.run(main)
    assert tools == {"search", "fields", "status"}
    assert found["hits"][0]["path"].endswith("backup.md") and len(found["hits"]) == 2
    assert status["collections"][0]["collection"] == "default"
    assert bad.is_error and "does not exist" in bad.content[0].text


def test_mcp_over_stdio(served: ServerHandle, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ)
    env.update(
        INDEXER_DATA_DIR=str(served.settings.data_dir),
        INDEXER_EMBED_MODEL=served.settings.embed_model,
        INDEXER_THREADS="2",
        INDEXER_CONFIG=str(tmp_path / "none.toml"),
    )
    env.pop("INDEXER_RERANK_MODEL", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "indexer.cli", "mcp"], env=env)

    async def main():
        async with Client(params) as client:
            return await _exercise(client)

    tools, found, status, bad = anyio.run(main)
    assert tools == {"search", "fields", "status"}
    assert found["hits"][0]["path"].endswith("backup.md")
    assert found["reranked"] is False  # no reranker configured for this process
    assert status["collections"][0]["files"] == 5
    assert bad.is_error and "does not exist" in bad.content[0].text


def test_mcp_answers_are_compact_unless_full_is_asked(served: ServerHandle) -> None:
    from mcp import Client

    async def main():
        async with Client(served.url + "/mcp") as client:
            compact = await client.call_tool("search", {"query": "backups of the database", "k": 10})
            full = await client.call_tool("search", {"query": "backups of the database", "k": 10, "full": True})
            fields = await client.call_tool("fields", {})
            return compact, full, fields

    compact, full, fields = anyio.run(main)
    text = compact.content[0].text
    data, whole = json.loads(text), _payload(full)
    assert len(data["hits"]) == len(whole["hits"]) >= 5
    assert len(text) < 3000 and "\n" not in text  # no indentation: an assistant pays for every character
    hit = data["hits"][0]
    assert set(hit) <= {"path", "lines", "locator", "score", "rerank_score", "snippet"} and "backup" in hit["snippet"]
    assert whole["hits"][0]["text"] and len(full.content[0].text) > len(text)
    assert {f["field"] for f in _payload(fields)["fields"]} >= {"path", "type", "modified", "size"}
