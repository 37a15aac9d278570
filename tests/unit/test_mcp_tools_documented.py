"""The MCP tools the docs name are the tools the MCP server registers (issue 41: the lists had left out `fields`):
README.md, docs/server.md (the endpoint table and the tools' signatures), the module's docstring and
`indexer mcp --help`."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]


def _registered() -> list[str]:
    from indexer.server.mcp import build_mcp

    server = build_mcp(None)  # type: ignore[arg-type]  # the service is used only when a tool is called
    return [tool.name for tool in anyio.run(server.list_tools)]


def _ticked(text: str) -> list[str]:
    return re.findall(r"`+(\w+)`+", text)


def test_every_documented_list_of_mcp_tools_is_the_registered_one() -> None:
    from indexer.cli.serve import mcp_command
    from indexer.server import mcp

    registered = _registered()
    assert registered == ["search", "fields", "status"]
    readme = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("indexer mcp "))
    server_md = (ROOT / "docs" / "server.md").read_text()
    row = next(line for line in server_md.splitlines() if line.startswith("| `/mcp` |"))
    signatures = server_md.split("Tools: ", 1)[1].split("Errors come back", 1)[0]
    lists = {
        "README.md": _ticked(readme.split("MCP tools", 1)[1].split("over", 1)[0]),
        "docs/server.md table": _ticked(row.split("tools", 1)[1]),
        "docs/server.md signatures": re.findall(r"`(\w+)\(", signatures),
        "indexer/server/mcp.py": _ticked((mcp.__doc__ or "").split("MCP tools", 1)[1].split(".", 1)[0]),
        "indexer mcp --help": _ticked((mcp_command.__doc__ or "").split("Serve the", 1)[1].split("tools", 1)[0]),
    }
    for where, names in lists.items():
        assert names == registered, (where, names)
    assert all(f"`{name}`" in mcp.INSTRUCTIONS for name in registered)
