"""Operations commands of the ``indexer`` CLI: ``migrate``, ``backup``, ``restore``, ``reindex``.

Thin: each command translates flags and prints what the modules that own the logic return
(``indexer.schema``, ``indexer.backup``, ``indexer.reindex``). ``register(app)`` adds them to the main app.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from indexer.errors import IndexerError
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
    from indexer.schema import migrate as run
    from indexer.schema import migration_status

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
    from indexer.backup import backup as run

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
    from indexer.backup import restore as run

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


def register(app: typer.Typer) -> None:
    """Add the operations commands to ``app``."""
    app.command()(migrate)
    app.command()(backup)
    app.command()(restore)
