"""``indexer eval``: score a collection's search on the user's own queries (logic: indexer.ops.evaluate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from indexer.cli.ops import _fail  # one error line (and JSON object) for the operations commands
from indexer.errors import IndexerError, InputError

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def eval_command(
    queries: Path = typer.Argument(..., metavar="QUERIES", help="JSONL or TSV of queries and expected documents, "
                                   "or a BEIR folder (docs/search.md)."),
    collection: str | None = typer.Option(None, "--collection", "-c", metavar="NAME", help="Collection to score."),
    root: Path | None = typer.Option(None, "--root", help="Folder the documents' paths are relative to "
                                     "(default: the collection's only root)."),
    doc_template: str = typer.Option("{id}", "--doc-template", help="Document id to path, e.g. '{id}.md' (BEIR)."),
    split: str = typer.Option("test", "--split", help="BEIR qrels split (qrels/SPLIT.tsv)."),
    modes: list[str] = typer.Option(None, "--mode", help="dense, lexical, hybrid (repeat; default: all three)."),
    rerank: str = typer.Option("auto", "--rerank", help="off, on, both, or auto (both when a reranker is set)."),
    recall_k: int = typer.Option(100, "--recall-k", min=1, max=1000, help="k of recall@k (files)."),
    candidates: int | None = typer.Option(None, "--candidates", min=1, help="Candidates per search (default: the "
                                          "collection's setting, as `indexer search` uses it)."),
    against: str | None = typer.Option(None, "--against", metavar="NAME", help="Also score this collection and "
                                       "compare (b = --against, a = --collection)."),
    baseline: Path | None = typer.Option(None, "--compare", metavar="REPORT", help="Compare with a saved "
                                         "`indexer eval --json` report (a = the report, b = this run)."),
    worst: int = typer.Option(5, "--worst", min=0, help="Queries that fail worst, shown per run."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout (save it to compare)."),
) -> None:
    """Measure retrieval on your own queries: nDCG@10, recall@k and MRR per search mode, with and without rerank;
    the worst queries; a paired comparison with a confidence interval."""
    from indexer.ops import evaluate, qrels

    try:
        loaded = qrels.load(queries, doc_template, split)
        result = _score(collection, loaded, root, modes, rerank, (recall_k, candidates), worst)
        if against is not None:
            other = _score(against, loaded, root, modes, rerank, (recall_k, candidates), worst)
            result["comparison"] = evaluate.compare(evaluate.runs_from_dict(result),
                                                    evaluate.runs_from_dict(other))
            result["against"] = other["summary"]
            result["against_collection"] = other["collection"]
        if baseline is not None:
            saved = _saved_report(baseline)
            result["comparison"] = evaluate.compare(evaluate.runs_from_dict(saved), evaluate.runs_from_dict(result))
    except _Usage as exc:  # a malformed argument: a usage error, as for `indexer search`
        raise _fail_usage(exc, as_json) from exc
    except OSError as exc:
        raise _fail(InputError(f"{queries}: cannot read it ({exc.strerror or exc})"), as_json) from exc
    except ValueError as exc:
        raise _fail(InputError(str(exc)), as_json) from exc
    except IndexerError as exc:
        raise _fail(exc, as_json) from exc
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
        return
    _print(result)


class _Usage(InputError):
    """A malformed command-line value (exit 2)."""


def _fail_usage(exc: Exception, as_json: bool) -> typer.Exit:
    _fail(exc, as_json)
    return typer.Exit(2)


def _saved_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Usage(f"--compare {path}: no such file; save a report first with `indexer eval QUERIES --json > "
                     f"{path.name}`") from None
    except OSError as exc:
        raise _Usage(f"--compare {path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Usage(f"--compare {path}: not a JSON report; save one with `indexer eval QUERIES --json`") from None
    if not isinstance(data, dict):
        raise _Usage(f"--compare {path}: not a saved `indexer eval --json` report")
    return data


def _score(name: str | None, loaded: list[Any], root: Path | None, modes: list[str] | None, rerank: str,
           depths: tuple[int, int | None], worst: int) -> dict[str, Any]:
    from indexer.collection.facade import open_collection
    from indexer.ops import evaluate

    if rerank not in ("auto", "on", "off", "both"):
        raise _Usage(f"--rerank {rerank}: use off, on, both or auto")
    bad = sorted(set(modes or ()) - set(evaluate.MODES))
    if bad:
        raise _Usage(f"--mode {', '.join(bad)}: use {', '.join(evaluate.MODES)}")
    recall_k, candidates = depths
    depth = max(3 * recall_k, 30)  # chunks fetched: files repeat among them
    wide = max(depth, candidates or 0, 1000)  # the caps of interactive searches do not bind an evaluation
    with open_collection(name, max_top_k=wide, max_candidates=wide) as col:
        status = col.status()
        has_reranker = bool(status.get("reranker"))
        if rerank == "on" and not has_reranker:
            raise InputError("--rerank on needs a reranker: set rerank_model (docs/search.md)")
        flags = {"off": [False], "on": [True], "both": [False, True], "auto": [False, True] if has_reranker
                 else [False]}[rerank]
        where = root or _only_root(status["roots"])
        runs = [(m, r) for m in (modes or evaluate.MODES) for r in flags]
        search = evaluate.collection_search(col, depth, candidates)
        scored = evaluate.evaluate(loaded, search, runs, where.resolve(), recall_k)
    data = evaluate.report(scored, loaded, worst)
    data["never_found_why"] = evaluate.why_not_found(data["never_found"], where.resolve(), status.get("roots") or ())
    data["depth"] = depth
    return {"collection": status["collection"], "root": str(where), **data}


def _only_root(roots: list[str]) -> Path:
    if len(roots) != 1:
        raise InputError(f"the collection has {len(roots)} roots; name the one the documents are relative to "
                         "with --root")
    return Path(roots[0])


def _table(title: str, summary: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for key in summary[0]:
        if key not in ("mode", "rerank"):
            table.add_column(key)
    for row in summary:
        table.add_row(*[str(v) for k, v in row.items() if k not in ("mode", "rerank")])
    out.print(table)


def _print(result: dict[str, Any]) -> None:
    _table(f"{result['collection']}: {result['judged']} judged queries (root {result['root']})", result["summary"])
    if result.get("against"):
        _table(f"{result['against_collection']} (--against)", result["against"])
    for label, rows in result["worst"].items():
        if not rows:
            continue
        out.print(f"worst queries, {label}:", highlight=False)
        for s in rows:
            rank = s["first_relevant"] or "not found"
            out.print(f"  ndcg {s['ndcg']:.3f}  first relevant: {rank}  {s['query'][:70]!r}  top: "
                      f"{', '.join(s['top'][:2])}", highlight=False)
    why = result.get("never_found_why") or {}
    for doc in result["never_found"][:10]:
        out.print(f"never found: {doc}: {why.get(doc, 'not in any run at any rank searched')}", highlight=False)
    for c in result.get("comparison", []):
        verdict = "a real difference" if c["significant"] else "within noise"
        out.print(f"{c['run']}: {c['metric']} {c['a']:.4f} -> {c['b']:.4f} (delta {c['delta']:+.4f}, 95% CI "
                  f"[{c['ci_low']:+.4f}, {c['ci_high']:+.4f}], {c['queries']} queries): {verdict}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(name="eval")(eval_command)
