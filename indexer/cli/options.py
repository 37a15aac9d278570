"""Options every ``indexer`` subcommand shares, and the one place that sets up logging for the CLI.

``-v`` works before *and* after the subcommand (``indexer -v search q`` and ``indexer search q -v``): every
command gets ``--verbose/-v`` from :func:`add_verbose_everywhere` (commands of plugins included), unless it
declares ``verbose: bool = VerboseOpt`` itself. ``tests/integration/test_cli_errors.py`` checks every command.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

import typer

STATE: dict[str, Any] = {"verbose": False, "json": False}


def set_verbose(verbose: bool) -> bool:
    """Turn on INFO logging and stage timings (once on, it stays on for the process)."""
    if verbose:
        STATE["verbose"] = True
    logging.basicConfig(
        level=logging.INFO if STATE["verbose"] else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        force=True,
    )
    for noisy in _NOISY:  # libraries that narrate their own loading at INFO: their warnings still show
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return verbose


# faiss tries each CPU build in turn and logs every ModuleNotFoundError; gguf logs each file it writes
_NOISY = ("faiss.loader", "gguf.gguf_writer", "httpx")


VerboseOpt: Any = typer.Option(
    False, "--verbose", "-v", help="Log details and stage timings to stderr.", callback=set_verbose
)
CollectionOpt: Any = typer.Option(
    None, "--collection", "-c", metavar="NAME", help="Collection name (default: 'default')."
)
ClusterOpt: Any = typer.Option(
    None, "--cluster", metavar="ADDRESS",
    help="Embed on a Ray cluster: auto (the one `ray start` made here), HOST:PORT, or local (docs/deploy.md).",
)
JsonOpt: Any = typer.Option(
    False, "--json", help='Machine-readable output on stdout; an error prints {"error": {"type", "message"}}.'
)


def add_verbose_everywhere(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its sub-apps a ``--verbose/-v`` option (idempotent)."""
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = _with_verbose(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            add_verbose_everywhere(group.typer_instance)


def _with_verbose(fn: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(fn, eval_str=True)
    if "verbose" in signature.parameters:
        return fn

    @functools.wraps(fn)
    def command(*args: Any, verbose: bool = False, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    extra = inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=VerboseOpt, annotation=bool)
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), extra]
    )
    return command
