"""The ``indexer`` console script: ``indexer search`` through a running server, fast; everything else in the CLI.

``indexer search`` against a running ``indexer serve`` should answer in well under 150 ms, process start
included, but the full CLI (typer, rich, pydantic settings, the facade, numpy) takes most of a second to import.
So this module, standard library only, answers a plain ``indexer search`` itself when a server announces itself
for the data directory: it finds the data directory and collection with :mod:`indexer.core.location` (the rules of
:mod:`indexer.settings`), sends the search, and prints what the CLI prints. Anything else (other commands,
``--help``, ``--local``, ``--rerank-model``, an option it does not know, no server, an error answer) goes to
:mod:`indexer.cli.main`, which does the same search the long way and reports errors the one way.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from indexer.cli.results import print_result
from indexer.codec import request_body
from indexer.core.location import data_dir_and_collection
from indexer.core.paths import user_path

_NOT_HANDLED = None


def main() -> None:
    if sys.argv[1:2] == ["search"]:
        code = fast_search(sys.argv[2:])
        if code is not _NOT_HANDLED:
            sys.exit(code)
    from indexer.cli.main import main as cli_main

    cli_main()


# -- the search ---------------------------------------------------------------------------------------------------
class _Unhandled(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # anything argparse cannot parse is the CLI's to explain
        raise _Unhandled(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("query")
    p.add_argument("-c", "--collection")
    p.add_argument("-k", type=int)
    p.add_argument("--candidates", type=int)
    p.add_argument("--path")
    p.add_argument("--under")
    p.add_argument("--type", action="append", default=[])
    p.add_argument("--rerank", action="store_true", default=None)
    p.add_argument("--no-rerank", dest="rerank", action="store_false")
    p.add_argument("--mode")
    p.add_argument("-w", "--where", action="append", default=[])
    p.add_argument("--facet", action="append", default=[])
    p.add_argument("--meta", action="append", default=[])
    p.add_argument("--json", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def fast_search(args: list[str]) -> int | None:
    """Exit code of a search answered by the announced server; None when the full CLI should handle it."""
    if any(a in ("--help", "--local", "--rerank-model") or a.startswith("--rerank-model=") for a in args):
        return _NOT_HANDLED
    try:
        opts = _parser().parse_args(args)
    except (_Unhandled, argparse.ArgumentError, ValueError):
        return _NOT_HANDLED
    metadata = {}
    for item in opts.meta:  # NAME=VALUE; anything else is the CLI's to explain
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            return _NOT_HANDLED
        metadata[name.strip()] = value.strip()
    where = data_dir_and_collection(opts.collection)
    if where is None:
        return _NOT_HANDLED
    from indexer.server.client import post_search

    body = {
        "collection": where[1],
        **request_body(
            query=opts.query,
            k=opts.k,
            candidates=opts.candidates,
            path_glob=opts.path,
            path_prefix=str(user_path(opts.under)) if opts.under else None,
            file_types=[t.lower().lstrip(".") for t in opts.type],
            rerank=opts.rerank,
            mode=opts.mode,
            metadata=metadata,
            where=opts.where,
            facets=opts.facet,
        ),
    }
    answer = post_search(where[0], body)
    if answer is None or answer[0] != 200 or not isinstance(answer[1], dict):
        return _NOT_HANDLED  # no server, or an error: the CLI reports it (asking the server again)
    print_result(answer[1], as_json=opts.json, verbose=opts.verbose)
    return 0
