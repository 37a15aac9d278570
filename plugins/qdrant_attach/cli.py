"""``indexer qdrant ...``: inspect, search, index into, forget from and detach from existing Qdrant collections.

Registered through the ``indexer.commands`` entry point; heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from plugins.qdrant_attach.api import AttachedCollection

app = typer.Typer(help="Attach to an existing Qdrant collection: inspect, search, index into it.", no_args_is_help=True)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

UrlOpt = typer.Option(None, "--url", help="Qdrant server URL (default: the qdrant_url setting)")
PathOpt = typer.Option(None, "--path", help="embedded Qdrant folder (as given to QdrantClient(path=...))")
KeyOpt = typer.Option(None, "--api-key", envvar="INDEXER_QDRANT_API_KEY", help="Qdrant API key", show_default=False)
VectorOpt = typer.Option(None, "--vector", help="dense vector name to use ('' = the unnamed vector)")
LayoutOpt = typer.Option(None, "--layout", help="payload layout: langchain, llamaindex, haystack or custom")
TextOpt = typer.Option(None, "--text-field", help="payload field holding the text (dotted path)")
MetaOpt = typer.Option(None, "--metadata-field", help="payload field holding the metadata dict ('' = top level)")
SourceOpt = typer.Option(None, "--source-field", help="payload field holding the source path (dotted path)")
ModelOpt = typer.Option(None, "--model", help="embedding model: catalogue name or .gguf path")
AsOpt = typer.Option(None, "--as", help="our name for the attachment (default: qdrant.<collection>)")
JsonOpt = typer.Option(False, "--json", help="machine-readable output on stdout")


def _fail(message: str, kind: str, as_json: bool) -> typer.Exit:
    """One line on stderr naming the problem; with --json also ``{"error": {"type", "message"}}`` on stdout
    (the shape of every command's --json errors)."""
    from rich.markup import escape

    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    if as_json:
        print(json.dumps({"error": {"type": kind, "message": message}}))
    return typer.Exit(1)


@contextmanager
def _attached(
    name: str, url: str | None, path: Path | None, as_json: bool = False, **opts: Any
) -> Iterator[AttachedCollection]:
    from indexer.plugin_api import IndexerError, load_settings
    from plugins.qdrant_attach.api import attach

    overrides = {k: opts.pop(k) for k in ("embed_model", "rerank_model") if k in opts}
    try:
        settings = load_settings(**overrides)
        with attach(name, url=url, path=path, settings=settings, **opts) as col:
            yield col
    except IndexerError as exc:
        raise _fail(str(exc), type(exc).__name__, as_json) from exc


@app.command()
def inspect(
    name: str = typer.Argument(..., help="collection (or alias) name"),
    url: str | None = UrlOpt,
    path: Path | None = PathOpt,
    api_key: str | None = KeyOpt,
    sample: int = typer.Option(64, "--sample", min=1, max=1000, help="points sampled for the payload layout"),
    vector: str | None = VectorOpt,
    layout: str | None = LayoutOpt,
    text_field: str | None = TextOpt,
    metadata_field: str | None = MetaOpt,
    source_field: str | None = SourceOpt,
    model: str | None = ModelOpt,
    check: bool = typer.Option(True, "--check/--no-check", help="load the model and check which vector fits it"),
    as_json: bool = JsonOpt,
) -> None:
    """Show a collection's vectors, payload indexes, aliases, points and payload layout, and what fits our model."""
    with _attached(
        name, url, path, api_key=api_key, sample=sample, vector=vector, layout=layout, text_field=text_field,
        metadata_field=metadata_field, source_field=source_field, embed_model=model, as_json=as_json,
    ) as col:
        data = col.report.to_dict()
        data["layout"] = col.layout.to_dict()
        if check:
            data["compatibility"] = col.check()
    if as_json:
        out.print_json(json.dumps(data))
        return
    _print_report(data)


def _print_report(data: dict[str, Any]) -> None:
    table = Table(show_header=False)
    table.add_row("collection", f"{data['collection']} at {data['location']} ({data['status']})")
    table.add_row("points", str(data["points"]))
    for v in data["dense_vectors"]:
        extra = f", multivector {v['multivector']}" if v["multivector"] else ""
        shape = f"{v['size']} dims, {v['distance']}, {v['datatype']}{extra}"
        table.add_row(f"vector {v['name'] or '(unnamed)'}", shape)
    for v in data["sparse_vectors"]:
        table.add_row(f"sparse {v['name']}", f"modifier {v['modifier'] or 'none'}")
    table.add_row("payload indexes", ", ".join(f"{k} ({t})" for k, t in data["payload_indexes"].items()) or "none")
    table.add_row("aliases", ", ".join(data["aliases"]) or "none")
    lay = data["layout"]
    table.add_row("layout", f"{lay['kind']}: {lay['evidence']}")
    table.add_row("text field", lay["text_field"])
    table.add_row("metadata field", lay["metadata_field"] or "(top level)")
    table.add_row("source field", lay["source_field"] or "(not found; pass --source-field)")
    fields = ", ".join(f"{f['key']}:{'|'.join(f['types'])} ({f['present']})" for f in data["payload_fields"])
    table.add_row(f"payload ({data['sample_size']} sampled)", fields or "empty")
    comp = data.get("compatibility")
    if comp:
        table.add_row("model", f"{comp['model']} ({comp['dimensions']} dims, {comp['similarity']})")
        if comp.get("vector"):
            v = comp["vector"]
            probe = comp["probe"]
            agree = f", agreement {probe['agreement']} over {probe['compared']} texts" if probe["compared"] else ""
            table.add_row(
                "fits",
                f"vector {v['vector'] or '(unnamed)'} ({v['distance']}, normalization {v['normalization']}); "
                f"stored vectors: {probe['verdict']} model{agree}",
            )
            if probe.get("scale"):
                table.add_row("scale", f"mismatch: {probe['scale']}")
        else:
            table.add_row("fits", f"no: {comp['problem']}")
    out.print(table)


@app.command()
def search(
    name: str = typer.Argument(..., help="collection (or alias) name"),
    query: str = typer.Argument(..., help="what to look for"),
    url: str | None = UrlOpt,
    path: Path | None = PathOpt,
    api_key: str | None = KeyOpt,
    vector: str | None = VectorOpt,
    layout: str | None = LayoutOpt,
    text_field: str | None = TextOpt,
    metadata_field: str | None = MetaOpt,
    source_field: str | None = SourceOpt,
    filter_json: str | None = typer.Option(None, "--filter", help="Qdrant filter as JSON, passed through unchanged"),
    k: int | None = typer.Option(None, "-k", help="results to return (default 10)"),
    candidates: int | None = typer.Option(None, help="candidates fetched before reranking (default 50)"),
    rerank: bool | None = typer.Option(None, "--rerank/--no-rerank", help="default: on when a reranker is set"),
    rerank_model: str | None = typer.Option(None, help="reranker model (.gguf path or name)"),
    model: str | None = ModelOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Search an existing collection with a text query; hits come back in the collection's own payload terms."""
    try:
        qfilter = json.loads(filter_json) if filter_json else None
    except ValueError as exc:
        raise _fail(f"--filter is not valid JSON: {exc}", "InputError", as_json) from exc
    with _attached(
        name, url, path, api_key=api_key, vector=vector, layout=layout, text_field=text_field,
        metadata_field=metadata_field, source_field=source_field, embed_model=model, rerank_model=rerank_model,
        as_json=as_json,
    ) as col:
        result = col.search(query, k=k, candidates=candidates, filter=qfilter, rerank=rerank)
    if as_json:
        out.print_json(json.dumps(result.to_dict(), default=str))
        return
    for i, hit in enumerate(result.hits, 1):
        rs = f" rerank={hit.rerank_score:.3f}" if hit.rerank_score is not None else ""
        mine = " (ours)" if hit.ours else ""
        out.print(f"[bold]{i}. {hit.source or hit.id}[/bold]{mine}  score={hit.score:.3f}{rs}", highlight=False)
        snippet = " ".join(hit.text.split())
        out.print(f"   {snippet[:240]}{'…' if len(snippet) > 240 else ''}", highlight=False, markup=False)
    err.print(result.note, highlight=False)


@app.command()
def index(
    name: str = typer.Argument(..., help="collection (or alias) name"),
    paths: list[Path] = typer.Argument(..., help="folders to index into the collection"),
    url: str | None = UrlOpt,
    path: Path | None = PathOpt,
    api_key: str | None = KeyOpt,
    vector: str | None = VectorOpt,
    add_vector: str | None = typer.Option(None, "--add-vector", help="create this named vector for our model"),
    layout: str | None = LayoutOpt,
    text_field: str | None = TextOpt,
    metadata_field: str | None = MetaOpt,
    source_field: str | None = SourceOpt,
    as_name: str | None = AsOpt,
    model: str | None = ModelOpt,
    allow_other_model: bool = typer.Option(False, "--allow-other-model", help="write even if their vectors differ"),
    shard_key: str | None = typer.Option(None, "--shard-key", help="a custom-sharded collection's shard key for our "
                                         "points: NAME, or field:PATH (each point's from its payload)"),
    as_json: bool = JsonOpt,
) -> None:
    """Index folders into an existing collection, as points in its own payload layout (theirs stay untouched)."""
    with _attached(
        name, url, path, api_key=api_key, vector=vector, add_vector=add_vector, layout=layout, text_field=text_field,
        metadata_field=metadata_field, source_field=source_field, as_name=as_name, embed_model=model, as_json=as_json,
        shard_key=shard_key,
    ) as col:
        report = col.index(paths, allow_other_model=allow_other_model)
        attached_as = col.name
    if as_json:
        out.print_json(json.dumps({"attachment": attached_as, **report.to_dict()}))
    else:
        out.print(
            f"{attached_as}: {report.files_indexed} files indexed, {report.files_removed} removed, "
            f"{len(report.failed)} failed; {report.points_upserted} points written, {report.points_deleted} deleted",
            highlight=False,
        )
    raise typer.Exit(3 if report.failed else 0)  # exit codes of every command: see indexer.cli.main


@app.command()
def forget(
    name: str = typer.Argument(..., help="collection (or alias) name"),
    root: Path = typer.Argument(..., help="a folder indexed into it"),
    url: str | None = UrlOpt,
    path: Path | None = PathOpt,
    api_key: str | None = KeyOpt,
    as_name: str | None = AsOpt,
) -> None:
    """Remove one of our roots and its points (theirs are never touched)."""
    with _attached(name, url, path, api_key=api_key, as_name=as_name) as col:
        report = col.forget(root)
    out.print(f"forgot {report.files_removed} files ({report.points_deleted} points)")


@app.command()
def detach(
    name: str = typer.Argument(..., help="collection (or alias) name"),
    url: str | None = UrlOpt,
    path: Path | None = PathOpt,
    api_key: str | None = KeyOpt,
    as_name: str | None = AsOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete every point we wrote into the collection and forget the attachment. Theirs stay."""
    if not yes and not typer.confirm(f"Delete indexer's points from {name!r}?"):
        raise typer.Exit(1)
    with _attached(name, url, path, api_key=api_key, as_name=as_name) as col:
        n = col.detach()
    out.print(f"deleted {n} of our points from {name}; detached")
