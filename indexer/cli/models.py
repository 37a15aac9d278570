"""``indexer models ...``: build, locate and list the catalogue models.

Only ``path`` writes to stdout (the path alone, so ``$(indexer models path)`` works); progress and errors go
to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import typer

from indexer.errors import IndexerError
from indexer.models import native
from indexer.models.cache import default_quant, ensure_model, is_current, list_models, model_path, models_dir
from indexer.models.catalogue import DEFAULT_EMBED_MODEL
from indexer.models.convert import BUILD_QUANTS, build_quant, projector_path
from indexer.models.local import build_from_folder, find_local, list_local
from indexer.models.quantize import FILE_TYPES

app = typer.Typer(help="Build, locate and list embedding/rerank models (built offline from the package index).",
                  no_args_is_help=True)

_QUANT_HELP = (f"Weight type: {', '.join(BUILD_QUANTS)} (default: the fastest type this machine runs, measured "
               "once by the native probe; `indexer models list` shows it; k-quants are written by llama.cpp's "
               "quantizer).")


def _refuse_unrunnable(quant: str | None, force: bool) -> str | None:
    """The weight type, spelled as ggml spells it; refused (exit 1) when the native probe excluded a tensor type
    such a file holds, or could not prove it, unless forced (a file for another machine)."""
    if quant is None:
        return None
    try:
        quant = build_quant(quant)
        if force:
            return quant
        types = FILE_TYPES[quant][1] if quant in FILE_TYPES else (quant,)
        result = native.prove(types)
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    for tensor_type in types:
        verdict = result.verdict(tensor_type)
        if result.trusted or verdict is None or verdict.runs:
            continue
        why = (f"llama.cpp's decode was {verdict.reason} in the native probe" if verdict.state == native.EXCLUDED
               else f"the native probe could not prove it: {verdict.reason}")
        instead = f"build --quant {result.chosen} instead, or " if result.chosen else ""
        typer.echo(f"error: {quant} files hold {tensor_type} weights, which cannot run on this machine ({why}); "
                   f"{instead}pass --force to build a file for another machine", err=True)
        raise typer.Exit(code=1)
    return quant


def _build(name: str, quant: str | None) -> str:
    try:
        quant = build_quant(quant) if quant else default_quant()
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
    quant = _refuse_unrunnable(quant, force)
    if from_folder is not None:
        try:
            typer.echo(f"converting {from_folder} ...", err=True)
            built = build_from_folder(from_folder, as_name, quant)
            if projector_path(built).is_file():
                typer.echo(f"projector: {projector_path(built)} (found beside the model: `indexer index --model "
                           f"{built.stem.rsplit('-', 1)[0]}` embeds pictures with it; pass it as mmproj_path only to "
                           "LlamaEmbedding directly)", err=True)
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


@app.command("probe")
def probe_cmd(
    refresh: bool = typer.Option(False, "--refresh", help="Probe again (the eager types, and every type proven "
                                 "before), replacing the cached verdict."),
    every: bool = typer.Option(False, "--all", help="Also prove now every type that is otherwise proven lazily "
                               "(k-quants, i-quants: about 20 s once)."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
) -> None:
    """Print which weight types llama.cpp runs on this machine (the native probe's table: verdicts, tokens/s,
    cosine to f32, reasons)."""
    try:
        result = native.probe(refresh=refresh)
        if every:
            result = native.prove(native.LAZY_QUANTS)
    except IndexerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    if as_json:
        typer.echo(json.dumps({**result.to_json(), "trusted": result.trusted}, indent=1))
        return
    typer.echo(f"machine: {result.key.get('cpu', '?')} | kernel {result.key.get('kernel', '?')} | llama.cpp build "
               f"{result.key.get('llama_build', '?')} | probe {result.seconds:.2f} s")
    if result.trusted:
        typer.echo(result.summary())
        return
    for line in result.table():
        typer.echo(line)
    typer.echo(f"default weight type: {result.chosen or 'none (no type ran)'}")


@app.command("list")
def list_cmd() -> None:
    """List known models, whether each is built and its size."""
    typer.echo(f"models dir: {models_dir()}; * = the weight type this machine gets by default", err=True)
    try:
        result = native.probe()
        typer.echo(f"this machine ({result.key.get('cpu', '?')}): {result.summary()}", err=True)
        refused = {v.quant for v in result.verdicts if v.refused}
    except IndexerError as exc:
        typer.echo(f"native probe failed: {exc}", err=True)
        refused = set()
    rows = list_models()
    width = max(len(r.name) for r in rows) if rows else 10
    for row in rows:
        size = f"{row.size_bytes / 1e6:7.1f} MB" if row.size_bytes is not None else "        -"
        state = "stale" if row.stale else "built" if row.built else "not built"
        holds = set(FILE_TYPES[row.quant][1]) if row.quant in FILE_TYPES else {row.quant}
        if row.built:
            with contextlib.suppress(IndexerError):
                holds = native.weight_types(row.path)
        if holds & refused:
            state = "cannot run here" if not row.built else "built; cannot run here"
        mark = "*" if row.default else " "
        typer.echo(f"{row.name:<{width}}  {row.quant:<6}{mark} {row.kind:<9} {state:<9} {size}  {row.path}")
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
