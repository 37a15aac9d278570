"""Model Context Protocol: the same search as the HTTP API, as MCP tools ``search``, ``fields`` and ``status``.

Built with the official MCP Python SDK. The server's HTTP app mounts it at ``/mcp`` (streamable HTTP,
stateless); ``indexer mcp`` serves it over stdio with its own :class:`~indexer.server.service.Service`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from mcp.types import TextContent  # a tool's return annotation is resolved at runtime

if TYPE_CHECKING:
    from indexer.server.service import Service

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Searches the user's local documents (files indexed by `indexer`). Call `search` with a natural-language "
    "query; each hit has the file path, line span (and PDF page), heading and the matching passage. Call "
    "`fields` to see what a search's `where` can filter on, and `status` to see the collections, their roots and "
    "sizes."
)


def build_mcp(svc: Service) -> Any:
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:  # pragma: no cover - mcp is a dependency
        raise ImportError("the MCP server needs the 'mcp' package: pip install 'mcp>=2.3'") from exc
    from mcp.server.mcpserver.exceptions import ToolError

    from indexer.codec import compact_result_json, result_json
    from indexer.errors import IndexerError
    from indexer.server.service import search_request

    server = MCPServer(name="indexer", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def search(
        query: str = "",
        collection: str = "default",
        image: str | None = None,
        k: int | None = None,
        rerank: bool | None = None,
        path_prefix: str | None = None,
        path_glob: str | None = None,
        file_types: list[str] | None = None,
        metadata: dict[str, str] | None = None,
        where: list[Any] | str | None = None,
        facets: list[str] | None = None,
        full: bool = False,
    ) -> TextContent:
        """Search local documents. Returns hits best first: path, start_line, end_line, page, heading, locator
        (where in the file: 'slide 3: Results', 'Sales!A2:D9', a message, a notebook cell), location, metadata,
        text, score (vector) and rerank_score. `path_prefix` keeps files under an absolute folder, `path_glob`
        matches paths like '*.md', `file_types` extensions like ['md', 'py'], `metadata` pairs each hit must have
        (substring, any case) like {'sender': 'ada', 'author': 'Lovelace'}; `where` filter clauses, all of which must
        hold, as texts or objects {field, op, value, not}: ['modified>=2025-01-01', 'sender in ada,linus'
        (sender contains ada or linus: finds 'Ada Lovelace <ada@example.org>'), 'sender==(ada@example.org,
        linus@example.org)' (the whole value equals one of them), 'not type=pdf', 'size<1M', 'date==2025-03'
        (within March), 'path^=docs' (under the folder docs of a root)] (the `fields` tool lists what a collection
        can be filtered on, with each field's kind); `facets` counts the matches per value of fields like
        ['type', 'sender']; `rerank` turns the reranker on or off. Hits are compact by
        default (path, lines, locator, scores and the passage around the match); `full` adds each chunk's whole
        text, heading, location and metadata. `image` (instead of `query`, in a collection with a multimodal
        model) finds pictures like it: a data URI (data:image/png;base64,...) or the absolute path of an indexed
        image; an image hit gives `image`: its path and pixel size."""
        from pydantic import ValidationError

        from indexer.server.schemas import SearchBody, plain_validation_message

        try:
            body = SearchBody(
                query=query,
                image=image,
                collection=collection,
                k=k,
                candidates=None,
                mode=None,
                rerank_candidates=None,
                rerank=rerank,
                path_prefix=path_prefix,
                path_glob=path_glob,
                file_types=file_types or [],
                metadata=metadata or {},
                where=where if where is not None else [],
                facets=facets or [],
            )
            result = await svc.search(body.collection, search_request(body))
        except IndexerError as exc:  # the message names the problem and the fix
            raise ToolError(str(exc)) from exc
        except ValidationError as exc:  # a value of the wrong type: the same plain message as over HTTP
            raise ToolError(plain_validation_message(exc.errors())) from exc
        data = result_json(result, collection) if full else compact_result_json(result, collection)
        return TextContent(type="text", text=json.dumps(data, ensure_ascii=False, separators=(",", ":")))

    @server.tool()
    async def fields(collection: str = "default") -> dict[str, Any]:
        """The fields a search's `where` can filter on (path, type, modified, size and the collection's metadata
        such as sender or date), with their kind, how many chunks have them and their commonest values."""
        try:
            return await svc.fields(collection)
        except IndexerError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def status(collection: str | None = None) -> dict[str, Any]:
        """Collections with their file, chunk and point counts, store, model and roots."""
        try:
            return await svc.status(collection)
        except IndexerError as exc:
            raise ToolError(str(exc)) from exc

    return server


def run_stdio(settings: Any) -> None:
    """``indexer mcp``: serve the tools over stdin/stdout (logs go to stderr)."""
    import anyio

    from indexer.server.service import Service

    svc = Service(settings)
    server = build_mcp(svc)

    async def main() -> None:
        await anyio.to_thread.run_sync(svc.warm_up)
        try:
            await server.run_stdio_async()
        finally:
            await anyio.to_thread.run_sync(svc.close)

    anyio.run(main)
