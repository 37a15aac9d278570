"""``indexer serve`` and ``indexer mcp`` (registered on the main CLI by ``register``). Imports stay light here:
the web stack is imported only when a command runs."""

from __future__ import annotations

import typer

from indexer.errors import IndexerError
from indexer.settings import default, load_settings


def serve_command(
    host: str = typer.Option(None, "--host", help="address to bind (default 127.0.0.1: this machine only)"),
    port: int = typer.Option(None, "--port", help=f"port (default {default('server_port')}; 0 picks a free one)"),
    watch: bool = typer.Option(True, "--watch/--no-watch", help="keep the collections' roots in sync (live)"),
    stateless: bool = typer.Option(None, "--stateless", help="a search worker: answer from the Qdrant store and the "
                                   "models alone, no state database, nothing written (docs/deploy.md)"),
    public: bool = typer.Option(False, "--public", help="allow a non-loopback address without API keys"),
    rerank_model: str | None = typer.Option(None, help="reranker model (.gguf path or name)"),
    log_level: str = typer.Option("warning", help="uvicorn log level"),
) -> None:
    """Serve search, /v1/embeddings, /v1/rerank, MCP and the search page over HTTP (see /docs)."""
    from indexer.server.run import serve

    try:
        settings = load_settings(server_host=host, server_port=port, rerank_model=rerank_model, stateless=stateless)
        serve(settings, watch=watch, allow_public=public, log_level=log_level)
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def mcp_command(
    rerank_model: str | None = typer.Option(None, help="reranker model (.gguf path or name)"),
) -> None:
    """Serve the `search`, `fields` and `status` tools over MCP on stdin/stdout (for coding assistants and agents)."""
    from indexer.server.mcp import run_stdio

    try:
        run_stdio(load_settings(rerank_model=rerank_model))
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
    app.command("mcp")(mcp_command)
