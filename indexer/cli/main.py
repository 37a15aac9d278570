"""The ``indexer`` command line.

Exit codes (every command): 0 success; 1 error (one line on stderr naming the problem and the fix; with
``--json`` also ``{"error": {"type": ..., "message": ...}}`` on stdout); 2 usage error (bad flag, missing or
malformed argument: the click/typer convention); 3 ``index`` ran but some files failed (listed in the summary).
"""

from __future__ import annotations

import json
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from indexer.cli.options import (
    STATE,
    ClusterOpt,
    CollectionOpt,
    JsonOpt,
    VerboseOpt,
    add_verbose_everywhere,
    set_verbose,
)
from indexer.cli.progress import BarProgress, progress_bars
from indexer.cli.status_view import time_split as cluster_time
from indexer.codec import decode_result, request_json, result_json
from indexer.collection.facade import Collection, list_collections, open_collection, open_reader
from indexer.core import registry
from indexer.core.paths import user_path
from indexer.errors import IndexerError, InputError, NotFoundError
from indexer.names import printable, printable_data
from indexer.settings import default, load_settings
from indexer.types import IndexReport, SearchRequest, SearchResult

app = typer.Typer(help="Index local folders with llama.cpp embeddings and search them.", no_args_is_help=True)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

try:  # the models sub-app lives with the model code
    from indexer.cli.models import app as models_app

    app.add_typer(models_app, name="models", help="Build, list and locate embedding models.")
except ImportError:  # pragma: no cover - only while the models package is incomplete
    pass

for _name, _sub in registry.load_all("indexer.commands").items():  # plugin sub-commands, e.g. `indexer qdrant`
    app.add_typer(_sub, name=_name)

from indexer.cli.serve import register as _register_server  # noqa: E402 - `serve` and `mcp` live with the server

_register_server(app)

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FILES_FAILED = 0, 1, 2, 3
_STATE = STATE  # verbose/json flags of this run (indexer.cli.options)


def _version(value: bool) -> None:
    if not value:
        return
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from indexer import __version__

    try:
        llama = version("llama-cpp-python")
    except PackageNotFoundError:  # pragma: no cover - a dependency
        llama = "not installed"
    out.print(f"indexer {__version__} (llama-cpp-python {llama}, Python {platform.python_version()})",
              highlight=False)
    raise typer.Exit(0)


@app.callback()
def _main(
    verbose: bool = VerboseOpt,
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Index local folders with llama.cpp embeddings and search them."""


def _fail(exc: BaseException, code: int = EXIT_ERROR) -> typer.Exit:
    """Report ``exc`` as one line on stderr (and a JSON error object on stdout with --json)."""
    _report_error(type(exc).__name__, _one_line(str(exc)) or type(exc).__name__)
    return typer.Exit(code)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _report_error(kind: str, message: str) -> None:
    if _STATE["json"]:
        print(json.dumps({"error": {"type": kind, "message": message}}))
    err.print(Text.assemble(("error:", "red"), " ", message), highlight=False, soft_wrap=True)


T = TypeVar("T")


def _open(collection: str | None, **overrides: Any) -> Collection:
    return open_collection(collection, **overrides)


def _read(collection: str | None, what: Callable[[Any], T]) -> T:
    """``what(face)`` of a collection: its reader's on a stateless search worker (setting ``stateless``: no state
    database opened, nothing written), else the collection's."""
    settings = load_settings(collection=collection)
    if settings.stateless:
        reader = open_reader(settings.collection, settings)
        try:
            return what(reader)
        finally:
            reader.close()
    with _open(collection) as col:
        return what(col)


@app.command()
def index(
    paths: list[Path] = typer.Argument(
        None, metavar="PATH", help="Folders to add as roots and sync (none: re-sync every root)."
    ),
    collection: str | None = CollectionOpt,
    store: str | None = typer.Option(
        None, metavar="NAME", help=f"Store plugin for a new collection: {default('store')} (default), qdrant, ..."
    ),
    qdrant_url: str | None = typer.Option(None, metavar="URL", help="Qdrant server URL (else embedded storage)."),
    metric: str | None = typer.Option(None, metavar="NAME", help="cosine (default), dot, euclid or manhattan."),
    model: str | None = typer.Option(
        None, "--model", metavar="MODEL", help="Embedding model: catalogue name or .gguf path."
    ),
    repair: bool = typer.Option(
        False, "--repair", help="Rebuild the store's copy first (damaged or unreadable), from cached vectors and files."
    ),
    cluster: str | None = ClusterOpt,
    as_json: bool = JsonOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Add folders as roots of a collection and sync them, or re-sync every root; unchanged files are skipped."""
    try:
        with _open(collection, store=store, qdrant_url=qdrant_url, metric=metric, embed_model=model,
                   cluster=cluster) as col:
            if repair:
                col.repair_store()
            with progress_bars(err, as_json) as progress:
                try:
                    report = col.index(paths, progress=progress) if paths else col.sync(progress=progress)
                except KeyboardInterrupt:
                    raise _interrupted(progress) from None
    except IndexerError as exc:
        raise _fail(exc) from exc
    for note in report.notes:  # what the run decided for the user: said with --json too
        err.print(f"note: {printable(note)}", highlight=False, markup=False)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        _print_report(report)
    raise typer.Exit(EXIT_FILES_FAILED if report.failed else EXIT_OK)


def _interrupted(progress: BarProgress) -> typer.Exit:
    """Ctrl-C during indexing: one line saying what was kept, and that a re-run resumes; exit 130."""
    of = f" of {progress.total}" if progress.total is not None else ""
    _report_error(
        "Interrupted",
        f"interrupted: {progress.done}{of} files were done and are kept (the last unfinished write is rolled back); "
        "run the same command again to resume",
    )
    return typer.Exit(130)


def _print_report(r: IndexReport) -> None:
    """The summary is the command's result: on stdout (progress and errors go to stderr)."""
    rate = r.tokens_embedded / r.embed_seconds if r.embed_seconds else 0.0
    out.print(
        f"{r.files_seen} files: {r.files_indexed} indexed, {r.files_unchanged + r.files_touched} unchanged, "
        f"{r.files_removed} removed, {len(r.failed)} failed; {r.chunks_embedded} chunks embedded "
        f"({r.tokens_embedded} tokens, {rate:,.0f} tokens/s), {r.chunks_reused} reused; "
        f"{r.points_upserted} points written, {r.points_deleted} deleted in {r.seconds:.2f}s",
        highlight=False,
    )
    for path, reason in r.failed:
        out.print(f"  failed: {printable(path)}: {reason}", highlight=False, markup=False)
    for path, reason in r.skipped:
        out.print(f"  skipped: {printable(path)}: {reason}", highlight=False, markup=False)
    for path, reason in r.partial:
        out.print(f"  partly read: {printable(path)}: {reason}", highlight=False, markup=False)
    if _STATE["verbose"] and r.stages:
        stages = ", ".join(f"{name} {seconds:.2f}" for name, seconds in r.stages.items())
        err.print(f"stage timings (s): {stages}; total {r.seconds:.2f}", highlight=False, markup=False)
    if _STATE["verbose"] and r.cluster:  # the nodes' side: where each node's time went
        for node in (r.cluster.get("per_node") or {}).values():
            err.print(f"cluster node {node.get('host')}: {cluster_time(node)}", highlight=False, markup=False)


@app.command()
def search(
    query: str = typer.Argument("", metavar="QUERY", help="What to look for (or --image FILE)."),
    collection: str | None = CollectionOpt,
    image: Path | None = typer.Option(
        None, "--image", metavar="FILE", help="Pictures like this image file (a collection with a multimodal model)."
    ),
    k: int | None = typer.Option(None, "-k", metavar="N", help=f"Results to return (default {default('top_k')})."),
    candidates: int | None = typer.Option(
        None, metavar="N", help=f"Candidates fetched before reranking (default {default('candidates')})."
    ),
    path: str | None = typer.Option(
        None, "--path", metavar="GLOB", help="Glob on the file path, e.g. '*.md' or 'docs/*'."
    ),
    under: Path | None = typer.Option(None, "--under", metavar="DIR", help="Only files under this folder."),
    file_type: list[str] = typer.Option(
        [], "--type", metavar="EXT", help="File extension(s), e.g. --type md --type py."
    ),
    rerank: bool | None = typer.Option(
        None, "--rerank/--no-rerank", help="Rerank the candidates (default: on when a reranker is set)."
    ),
    rerank_model: str | None = typer.Option(None, metavar="MODEL", help="Reranker model (.gguf path or name)."),
    rerank_candidates: int | None = typer.Option(
        None, metavar="N", help="Rerank exactly N candidates (default: as many as rerank_budget_ms allows)."
    ),
    local: bool = typer.Option(
        False, "--local", help="Search in-process even when a server serves this data directory."
    ),
    mode: str | None = typer.Option(
        None, "--mode", metavar="MODE", help=f"dense, lexical or hybrid (default: {default('search_mode')})."
    ),
    meta: list[str] = typer.Option(
        [], "--meta", metavar="NAME=VALUE",
        help="Metadata each hit must have (substring, any case), e.g. --meta sender=ada --meta author=Lovelace.",
    ),
    where: list[str] = typer.Option(
        [], "--where", "-w", metavar="CLAUSE",
        help="Filter clause(s), all must hold: 'modified>=2025-01-01', 'sender in ada,linus', 'not type=pdf', "
        "'size<1M', 'path~docs/*.md' (docs/search.md; `indexer fields` lists the fields).",
    ),
    facet: list[str] = typer.Option(
        [], "--facet", metavar="FIELD", help="Count the filter's matches per value of FIELD (type, folder, sender...)."
    ),
    as_json: bool = JsonOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Search a collection (through `indexer serve` when one serves this data directory; else in-process)."""
    if not query and image is None:  # QUERY is optional only beside --image: a usage error, before any lookup
        _report_error("UsageError", "Missing argument 'QUERY' (or --image FILE) (see `indexer search --help`)")
        raise typer.Exit(EXIT_USAGE)
    prefix = str(user_path(under)) if under else None  # resolved here: the server's cwd is not ours
    try:
        request = SearchRequest(
            query,
            image=_image_bytes(image) if image is not None else None,
            k=k,
            candidates=candidates,
            path_glob=path,
            path_prefix=prefix,
            file_types=tuple(file_type),
            rerank=rerank,
            mode=mode,
            rerank_candidates=rerank_candidates,
            metadata=metadata_pairs(meta),
            where=where_clauses(where),
            facets=tuple(facet),
        )
        result = None if rerank_model or local else _remote_search(collection, request)
        if result is None:
            with _open(collection, rerank_model=rerank_model) as col:
                result = col.search(request)
    except NotFoundError as exc:  # no such collection: an error, not a usage error
        raise _fail(exc) from exc
    except InputError as exc:  # the request itself (mode, k, a filter clause or field): a usage error
        raise _fail(exc, EXIT_USAGE) from exc
    except IndexerError as exc:
        raise _fail(exc) from exc
    from indexer.cli.results import print_result  # one printer for remote and in-process results

    print_result(result_json(result), as_json=as_json, verbose=_STATE["verbose"])


def _image_bytes(path: Path) -> bytes:
    """The bytes of ``--image FILE`` (the user's own file, read as given; the facade checks and decodes them)."""
    try:
        return path.expanduser().read_bytes()
    except OSError as exc:
        raise InputError(f"--image {path}: cannot read it ({exc.strerror or exc})") from exc


def metadata_pairs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``NAME=VALUE`` options as pairs; an item without ``=`` is a usage error naming the form."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            hint = f"{item!r}: write NAME=VALUE, e.g. --meta sender=ada@example.org"
            raise typer.BadParameter(hint, param_hint="--meta")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


def where_clauses(items: list[str]) -> tuple[str, ...]:
    """``--where`` clauses as given: the filter language's one reader reads them wherever the search runs (a
    relative path in a clause is relative to the collection's roots on every front end; ``--under DIR`` is the
    option resolved against this directory)."""
    return tuple(items)


def _remote_search(collection: str | None, request: SearchRequest) -> SearchResult | None:
    """The search answered by `indexer serve` when one serves this data directory, else None."""
    from indexer.server.client import remote_search

    settings = load_settings(collection=collection)
    answer = remote_search(settings.data_dir, {"collection": settings.collection, **request_json(request)})
    return None if answer is None else decode_result(answer)


@app.command()
def status(collection: str | None = CollectionOpt, as_json: bool = JsonOpt, verbose: bool = VerboseOpt) -> None:
    """Show a collection's files, chunks, points, store, model and roots."""
    try:
        info = _read(collection, lambda face: face.status())
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps(printable_data(info)))  # valid UTF-8 whatever the file names
        return
    from indexer.cli.status_view import lines

    rows = lines(info, verbose=bool(_STATE["verbose"]))
    width = max(len(label) for label, _ in rows)
    for label, text in rows:
        out.print(f"{label:<{width}}  {text}", highlight=False, markup=False)



@app.command()
def fields(collection: str | None = CollectionOpt, as_json: bool = JsonOpt, verbose: bool = VerboseOpt) -> None:
    """List the fields a search can filter on (--where), with their kind, chunk counts and commonest values."""
    try:
        found = _read(collection, lambda face: face.fields())
    except IndexerError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(json.dumps(printable_data(found)))
        return
    for f in found:
        examples = ", ".join(f"{v} ({n})" for v, n in f["examples"])
        line = f"{f['field']:<16} {f['kind']:<7} {f['chunks']:>8} chunks"
        out.print(f"{line}  {examples}" if examples else line, highlight=False, markup=False)
        if f.get("note"):
            err.print(f"  {f['note']}", highlight=False, markup=False)


@app.command()
def collections(as_json: bool = JsonOpt, verbose: bool = VerboseOpt) -> None:
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
def forget(
    path: Path = typer.Argument(..., metavar="PATH", help="The root folder to remove."),
    collection: str | None = CollectionOpt,
    as_json: bool = JsonOpt,
    verbose: bool = VerboseOpt,
) -> None:
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
    name: str = typer.Argument(..., metavar="NAME", help="The collection to delete."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    verbose: bool = VerboseOpt,
) -> None:
    """Delete a collection: its points, state and embedded store files."""
    if not yes and not typer.confirm(f"Delete collection {name!r} and all its points?", err=True):
        err.print("not dropped", highlight=False)
        raise typer.Exit(EXIT_ERROR)
    try:
        with _open(name) as col:
            col.drop()
    except IndexerError as exc:
        raise _fail(exc) from exc
    err.print(f"dropped {name}")


@app.command()
def watch(
    paths: list[Path] = typer.Argument(
        None, metavar="PATH", help="Folders to watch, added as roots (none: every root)."
    ),
    collection: str | None = CollectionOpt,
    polling: bool | None = typer.Option(
        None, "--polling/--no-polling", help="Poll instead of OS events (network filesystems)."
    ),
    rescan: float | None = typer.Option(
        None, "--rescan", metavar="SECONDS",
        help=f"Seconds between full rescans (default {default('watch_rescan_seconds'):g}).",
    ),
    cluster: str | None = ClusterOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Keep a collection in step with its folders until Ctrl-C or SIGTERM; one log line per batch."""
    from indexer.cli.watch import watch_command

    try:
        code = watch_command(paths, collection, polling, rescan, lambda m: err.print(m, highlight=False),
                             cluster=cluster)
    except IndexerError as exc:
        raise _fail(exc) from exc
    raise typer.Exit(code)


from indexer.cli import ops as ops_cli  # noqa: E402  (migrate, backup, restore, reindex: logic in their own modules)

ops_cli.register(app)

from indexer.cli import evaluate as eval_cli  # noqa: E402  (`indexer eval`: logic in indexer.ops.evaluate)

eval_cli.register(app)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every expected failure ends as one line on stderr and a documented exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = args[: args.index("--")] if "--" in args else args
    _STATE["json"] = "--json" in options
    if "-v" in options or "--verbose" in options:
        set_verbose(True)  # also covers failures before the option's callback runs (e.g. a usage error)
    sys.exit(_run(args))


def cli_command() -> Any:
    """The click command tree of ``app``, with help that shows metavars (NAME, N, PATH...) and no Python type
    tags (typer prints ``<list[Path]>``, ``<bool>``)."""
    add_verbose_everywhere(app)
    command = typer.main.get_command(app)
    _hide_type_tags(command)
    return command


def _hide_type_tags(command: Any) -> None:
    for param in getattr(command, "params", []):
        if hasattr(param, "display_type"):
            label = "" if getattr(param, "param_type_name", "") == "argument" or getattr(param, "is_flag", False) else (
                param.metavar or (param.name or "value").upper()
            )
            param.display_type = lambda ctx, label=label: label
    get_help_option = getattr(command, "get_help_option", None)
    if get_help_option is not None:

        def help_option(ctx: Any, get: Any = get_help_option) -> Any:
            option = get(ctx)
            if option is not None and hasattr(option, "display_type"):
                option.display_type = lambda ctx: ""
            return option

        command.get_help_option = help_option
    for sub in (getattr(command, "commands", None) or {}).values():
        _hide_type_tags(sub)


def _run(args: list[str]) -> int:
    command = cli_command()
    try:
        code = command.main(args=args, prog_name="indexer", standalone_mode=False)
    except typer.Abort as exc:  # confirmation prompt without input (EOF), or Ctrl-C turned into Abort by click
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            _report_error("Interrupted", "interrupted")
            return 130
        err.print()
        _report_error("Aborted", "aborted: no answer given")
        return EXIT_ERROR
    except IndexerError as exc:  # a command that did not catch its own
        return _fail(exc).exit_code
    except typer.TyperException as exc:  # usage errors (click's UsageError and friends)
        return _usage_error(exc)
    except KeyboardInterrupt:
        _report_error("Interrupted", "interrupted")
        return 130
    except OSError as exc:
        _report_error(type(exc).__name__, _one_line(str(exc)))
        return EXIT_ERROR
    except Exception as exc:  # a bug: one line, and the traceback with -v
        if _STATE["verbose"]:
            traceback.print_exc()
        _report_error(
            "InternalError",
            f"internal error: {type(exc).__name__}: {_one_line(str(exc))} (a bug: rerun with -v for the traceback "
            "and report it)",
        )
        return EXIT_ERROR
    return code if isinstance(code, int) else EXIT_OK


_INPUT_SHOULD_BE = re.compile(r"Input should be ([^,.;]+)[^.;]*")  # typer's pydantic-style wording


def _usage_error(exc: typer.TyperException) -> int:
    code = int(getattr(exc, "exit_code", EXIT_USAGE))
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare `indexer` or `indexer models`: show the help
        err.print(exc.format_message(), highlight=False, markup=False)
        return EXIT_USAGE
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    message = _INPUT_SHOULD_BE.sub(r"expected \1", _one_line(exc.format_message()))
    _report_error("UsageError", message + where)
    return code if code else EXIT_USAGE


if __name__ == "__main__":
    main()
