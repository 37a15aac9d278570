"""The ``indexer`` command line. Exit codes: 0 success, 1 fatal error, 2 some files failed to index."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from indexer import plugins
from indexer.collection import Collection, list_collections, open_collection
from indexer.errors import IndexerError
from indexer.pipeline import IndexReport
from indexer.query import SearchRequest
from indexer.settings import load_settings

app = typer.Typer(help="Index local folders with llama.cpp embeddings and search them.", no_args_is_help=True)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

try:  # the models sub-app lives with the model code
    from indexer.models.cli import app as models_app

    app.add_typer(models_app, name="models", help="Build, list and locate embedding models.")
except ImportError:  # pragma: no cover - only while the models package is incomplete
    pass

for _name, _sub in plugins.load_all("indexer.commands").items():  # plugin sub-commands, e.g. `indexer qdrant`
    app.add_typer(_sub, name=_name)

from indexer.server.cli import register as _register_server  # noqa: E402 - `serve` and `mcp` live with the server

_register_server(app)

CollectionOpt = typer.Option(None, "--collection", "-c", help="collection name (default: 'default')")
JsonOpt = typer.Option(False, "--json", help="machine-readable output on stdout")


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="log details and stage timings")) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    _STATE["verbose"] = verbose


_STATE: dict[str, Any] = {"verbose": False}


class _BarProgress:
    """Pipeline progress drawn with rich on stderr; silent when stderr is not a terminal."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.files = bar.add_task("files", total=None)
        self.chunks = bar.add_task("chunks embedded", total=None)
        self.tokens = 0
        self.started = time.monotonic()

    def files_total(self, n: int) -> None:
        self.bar.update(self.files, total=n, completed=0)

    def file_done(self, path: str) -> None:
        self.bar.advance(self.files)

    def embedded(self, chunks: int, tokens: int) -> None:
        self.tokens += tokens
        elapsed = time.monotonic() - self.started
        rate = f" ({self.tokens / elapsed:,.0f} tokens/s)" if elapsed > 0 else ""
        self.bar.update(self.chunks, advance=chunks, description=f"chunks embedded{rate}")


def _fail(exc: Exception, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/red] {exc}", highlight=False)
    return typer.Exit(code)


def _open(collection: str | None, **overrides: Any) -> Collection:
    return open_collection(collection, **overrides)


@app.command()
def index(
    paths: list[Path] = typer.Argument(None, help="folders to add as roots and sync (none: re-sync every root)"),
    collection: str | None = CollectionOpt,
    store: str | None = typer.Option(None, help="store plugin for a new collection: faiss (default), qdrant, ..."),
    qdrant_url: str | None = typer.Option(None, help="Qdrant server URL (else embedded storage)"),
    metric: str | None = typer.Option(None, help="cosine (default), dot, euclid"),
    model: str | None = typer.Option(None, "--model", help="embedding model: catalogue name or .gguf path"),
    as_json: bool = JsonOpt,
) -> None:
    """Index PATHS into a collection (adds them as roots), or re-sync all its roots; unchanged files are skipped."""
    try:
        with _open(collection, store=store, qdrant_url=qdrant_url, metric=metric, embed_model=model) as col:
            show = sys.stderr.isatty() and not as_json
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=err,
                disable=not show,
                transient=True,
            ) as bar:
                progress = _BarProgress(bar)
                report = col.index(paths, progress=progress) if paths else col.sync(progress=progress)
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        _print_report(report)
    raise typer.Exit(2 if report.failed else 0)


def _print_report(r: IndexReport) -> None:
    rate = r.tokens_embedded / r.embed_seconds if r.embed_seconds else 0.0
    err.print(
        f"{r.files_seen} files: {r.files_indexed} indexed, {r.files_unchanged + r.files_touched} unchanged, "
        f"{r.files_removed} removed, {len(r.failed)} failed; {r.chunks_embedded} chunks embedded "
        f"({r.tokens_embedded} tokens, {rate:,.0f} tokens/s), {r.chunks_reused} reused; "
        f"{r.points_upserted} points written, {r.points_deleted} deleted in {r.seconds:.2f}s",
        highlight=False,
    )
    for path, reason in r.failed:
        err.print(f"  failed: {path}: {reason}", highlight=False)
    for path, reason in r.skipped:
        err.print(f"  skipped: {path}: {reason}", highlight=False)


@app.command()
def search(
    query: str = typer.Argument(..., help="what to look for"),
    collection: str | None = CollectionOpt,
    k: int | None = typer.Option(None, "-k", help="results to return (default 10)"),
    candidates: int | None = typer.Option(None, help="candidates fetched before reranking (default 50)"),
    path: str | None = typer.Option(None, "--path", help="glob on the file path, e.g. '*.md' or 'docs/*'"),
    under: Path | None = typer.Option(None, "--under", help="only files under this folder"),
    file_type: list[str] = typer.Option([], "--type", help="file extension(s), e.g. --type md --type py"),
    rerank: bool | None = typer.Option(None, "--rerank/--no-rerank", help="default: on when a reranker is set"),
    rerank_model: str | None = typer.Option(None, help="reranker model (.gguf path or name)"),
    local: bool = typer.Option(False, "--local", help="search in-process even when a server serves this data dir"),
    as_json: bool = JsonOpt,
) -> None:
    """Search a collection (through `indexer serve` when one serves this data directory; else in-process)."""
    prefix = str(under.expanduser().resolve()) if under else None  # resolved here: the server's cwd is not ours
    types = tuple(t.lower().lstrip(".") for t in file_type)
    try:
        remote = dict(query=query, k=k, candidates=candidates, path_glob=path, path_prefix=prefix, rerank=rerank)
        result = None if rerank_model or local else _remote_search(collection, file_types=list(types), **remote)
        if result is None:
            with _open(collection, rerank_model=rerank_model) as col:
                result = col.search(
                    SearchRequest(
                        query,
                        k=k,
                        candidates=candidates,
                        path_glob=path,
                        path_prefix=prefix,
                        file_types=tuple(file_type),
                        rerank=rerank,
                    )
                )
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps([h.to_dict() for h in result.hits]))
    else:
        for i, hit in enumerate(result.hits, 1):
            rs = f" rerank={hit.rerank_score:.3f}" if hit.rerank_score is not None else ""
            out.print(
                f"[bold]{i}. {hit.path}:{hit.start_line}-{hit.end_line}[/bold]  score={hit.score:.3f}{rs}",
                highlight=False,
            )
            snippet = " ".join(hit.text.split())
            out.print(f"   {snippet[:240]}{'…' if len(snippet) > 240 else ''}", highlight=False, markup=False)
        err.print(result.rerank_note, highlight=False)
    if _STATE["verbose"]:
        err.print("timings (ms): " + ", ".join(f"{k}={v:.1f}" for k, v in result.timings_ms.items()))


def _remote_search(collection: str | None, **body: Any) -> Any:
    """The search answered by `indexer serve` when one serves this data directory, else None."""
    from indexer.server.client import remote_search, result_from_json

    settings = load_settings(collection=collection)
    answer = remote_search(settings.data_dir, {"collection": settings.collection, **body})
    return None if answer is None else result_from_json(answer)


@app.command()
def status(collection: str | None = CollectionOpt, as_json: bool = JsonOpt) -> None:
    """Show a collection's files, chunks, points, store, model and roots."""
    try:
        with _open(collection) as col:
            info = col.status()
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps(info))
        return
    table = Table(show_header=False)
    if "watcher" in info:
        from indexer.watch_state import describe

        info["watcher"] = describe(info["watcher"])
    for key, value in info.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    out.print(table)


@app.command()
def collections(as_json: bool = JsonOpt) -> None:
    """List collections."""
    try:
        recs = list_collections(load_settings())
    except IndexerError as exc:
        raise _fail(exc) from exc
    rows = [
        {"collection": r.name, "store": r.store, "metric": r.metric, "model": r.model_id, "dimensions": r.dimensions}
        for r in recs
    ]
    if as_json:
        out.print_json(json.dumps(rows))
        return
    if not rows:
        err.print("no collections yet: run `indexer index PATH`")
    for row in rows:
        out.print(f"{row['collection']}\t{row['store']}\t{row['metric']}\t{row['model']}", highlight=False)


@app.command()
def forget(path: Path, collection: str | None = CollectionOpt, as_json: bool = JsonOpt) -> None:
    """Remove a root from a collection, with every point of its files."""
    try:
        with _open(collection) as col:
            report = col.forget(path)
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(f"forgot {report.files_removed} files ({report.points_deleted} points)")


@app.command()
def drop(
    name: str,
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete a collection: its points, state and embedded store files."""
    if not yes and not typer.confirm(f"Delete collection {name!r} and all its points?"):
        raise typer.Exit(1)
    try:
        with _open(name) as col:
            col.drop()
    except IndexerError as exc:
        raise _fail(exc) from exc
    err.print(f"dropped {name}")


@app.command()
def watch(
    paths: list[Path] = typer.Argument(None, help="folders to watch, added as roots (none: every root)"),
    collection: str | None = CollectionOpt,
    polling: bool | None = typer.Option(None, "--polling/--no-polling", help="poll (network filesystems)"),
    rescan: float | None = typer.Option(None, "--rescan", help="seconds between full rescans (default 600)"),
) -> None:
    """Keep a collection in step with its folders until Ctrl-C or SIGTERM; one log line per batch."""
    from indexer.watch import watch_command

    try:
        code = watch_command(paths, collection, polling, rescan, lambda m: err.print(m, highlight=False))
    except IndexerError as exc:
        raise _fail(exc) from exc
    raise typer.Exit(code)


from indexer import ops_cli  # noqa: E402  (migrate, backup, restore, reindex: logic in their own modules)

ops_cli.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
