"""Operations commands of the ``indexer`` CLI: ``migrate``, ``backup``, ``restore``, ``reindex``.

Thin: each command translates flags and prints what the modules that own the logic return
(``indexer.ops.schema``, ``indexer.ops.backup``, ``indexer.collection.reindex``). ``register(app)`` adds them to
the main app.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from indexer.cli.options import ClusterOpt
from indexer.errors import IndexerError, InputError
from indexer.settings import load_settings

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

_JSON = typer.Option(False, "--json", help="Machine-readable output on stdout.")


def _fail(exc: Exception, as_json: bool) -> typer.Exit:
    message = " ".join(str(exc).split())
    if as_json:
        print(json.dumps({"error": {"type": type(exc).__name__, "message": message}}))
    err.print(f"[red]error:[/red] {message}", highlight=False, markup=True)
    return typer.Exit(1)


def migrate(
    status: bool = typer.Option(False, "--status", help="Only show applied and pending migrations."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the migrations that would apply; change nothing."),
    as_json: bool = _JSON,
) -> None:
    """Bring the state database's schema up to date (opening a collection does this too)."""
    from indexer.ops.schema import migrate as run
    from indexer.ops.schema import migration_status

    try:
        settings = load_settings()
        report = migration_status(settings) if status else run(settings, dry_run=dry_run)
    except IndexerError as exc:
        raise _fail(exc, as_json) from exc
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
        return
    err.print(f"state database: {report.database}{'' if report.exists else ' (not created yet)'}", highlight=False)
    if report.unknown:
        err.print(f"written by a newer indexer: {', '.join(report.unknown)}", highlight=False)
    for name in report.applied:
        out.print(f"applied  {name}", highlight=False)
    for name in report.pending:
        done = name in report.applied_now
        out.print(f"{'applied  ' if done else 'pending  '}{name}{' (now)' if done else ''}", highlight=False)
    if dry_run and report.pending:
        err.print(f"dry run: {len(report.pending)} migration(s) would apply; nothing was changed", highlight=False)
    elif not report.pending:
        err.print("up to date", highlight=False)


_COLLECTION = typer.Option(None, "--collection", "-c", help="Collection name (default: 'default').")


def backup(
    path: Path = typer.Argument(..., metavar="PATH", help="New (or empty) folder to write the backup into."),
    collection: str | None = _COLLECTION,
    as_json: bool = _JSON,
) -> None:
    """Write a consistent snapshot of a collection (state and vectors); indexing may go on meanwhile."""
    from indexer.ops.backup import backup as run

    try:
        report = run(load_settings(collection=collection), path)
    except IndexerError as exc:
        raise _fail(exc, as_json) from exc
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(
            f"backed up {report.collection} ({report.store}: {report.files} files, {report.chunks} chunks, "
            f"{report.points} points) to {report.path} in {report.seconds:.2f}s",
            highlight=False,
        )


def restore(
    path: Path = typer.Argument(..., metavar="PATH", help="A folder written by `indexer backup`."),
    as_json: bool = _JSON,
) -> None:
    """Bring a backed-up collection back into this data directory (where it must not exist yet)."""
    from indexer.ops.backup import restore as run

    try:
        report = run(load_settings(), path)
    except IndexerError as exc:
        raise _fail(exc, as_json) from exc
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(
            f"restored {report.collection} ({report.files} files, {report.points} points); "
            "`indexer index` catches up with changes made since the backup",
            highlight=False,
        )


def reindex(
    model: str | None = typer.Option(None, "--model", metavar="MODEL", help="New embedding model (name or .gguf)."),
    collection: str | None = _COLLECTION,
    abort: bool = typer.Option(False, "--abort", help="Cancel a reindex under way; the old vectors stay."),
    cluster: str | None = ClusterOpt,
    as_json: bool = _JSON,
) -> None:
    """Switch a collection to another embedding model without downtime (searches use the old vectors until the
    new ones are complete); run again to resume after an interruption."""
    from indexer.cli.progress import progress_bars
    from indexer.collection import reindex as job
    from indexer.collection.facade import open_collection

    if not abort and not model:
        raise _fail(InputError("pass --model NEW (or --abort to cancel a reindex under way)"), as_json)
    try:
        with open_collection(collection, cluster=cluster) as col:
            if abort:
                cancelled = job.abort(col)
                result: dict[str, Any] = {"collection": col.name, "aborted": cancelled}
            else:
                assert model is not None
                with progress_bars(err, as_json, "re-embedding files") as progress:
                    result = job.run(col, model, progress).to_dict()
    except IndexerError as exc:
        raise _fail(exc, as_json) from exc
    if as_json:
        out.print_json(json.dumps(result))
    elif abort:
        err.print("reindex cancelled; the collection is unchanged" if result["aborted"] else "no reindex under way")
    else:
        first, last = result["first_pass"], result["catch_up"]
        err.print(
            f"{result['collection']} now uses {result['model']} (was {result['old_model']}): "
            f"{first.get('chunks_embedded', 0)} chunks embedded, {last.get('files_indexed', 0)} files caught up "
            f"at the switch, in {result['seconds']:.1f}s",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    """Add the operations commands to ``app``."""
    app.command()(migrate)
    app.command()(backup)
    app.command()(restore)
    app.command()(reindex)
