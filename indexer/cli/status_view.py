"""``indexer status`` as a person reads it: a few labelled lines, model names and relative times.

``--json`` prints the facade's dictionary unchanged (the machine contract); this module only arranges it. The
details that matter to a maintainer (store options, prompts, the weight-type probe, health counts) come with
``-v``.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from indexer.state.watch_files import describe as describe_watcher


def ago(when: str | float | None, now: float | None = None) -> str:
    """``"3 minutes ago (2026-12-02 04:10 UTC)"`` for an ISO time or a Unix time; ``"never"`` for None."""
    if when is None or when == "":
        return "never"
    stamp = datetime.fromisoformat(when).timestamp() if isinstance(when, str) else float(when)
    seconds = max(0.0, (time.time() if now is None else now) - stamp)
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = int(seconds // size)
            rel = f"{n} {unit}{'s' if n != 1 else ''} ago"
            break
    else:
        rel = "just now" if seconds < 10 else f"{int(seconds)} seconds ago"
    clock = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(stamp))
    return f"{rel} ({clock})"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def weights_text(info: dict[str, Any]) -> str:
    """``"weights f32, q8_0"``: the model file's weight types, and whether they run on this CPU."""
    weights = info.get("weights") or {}
    kinds = weights.get("weight_types") or []
    if not kinds:
        return f"weights unknown ({weights.get('error') or 'not read'})"
    runs = "" if weights.get("runs_here") is not False else ", which do not run on this CPU"
    return f"weights {', '.join(kinds)}{runs}"


def chunks_text(info: dict[str, Any]) -> str:
    """``"256 tokens each, context: the heading path"``: the chunk size and context the collection was made with."""
    size = info.get("chunk_tokens")
    size_text = f"{size:,} tokens each" if isinstance(size, int) else f"up to {size or 'the model limit'}"
    context = info.get("chunk_context") or "none"
    return f"{size_text}, context: {'the heading path' if context == 'heading' else context}"


def pictures_text(info: dict[str, Any]) -> str:
    """Whether the collection embeds pictures (its model has a projector) and how many image points it holds."""
    points = int(info.get("image_points") or 0)
    if info.get("pictures"):
        return f"yes, {_plural(points, 'image point')} (the model embeds images)"
    extra = f"; {_plural(points, 'image point')} from an earlier model" if points else ""
    return f"no (the model embeds text only){extra}"


def worker_lines(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows of a stateless search worker's status: what it reads from the store (the writer has the rest)."""
    search = info.get("search_mode") or "hybrid"
    search += ", lexical index ready" if info.get("lexical_index") else ", no lexical index"
    search += f", rerank with {info['reranker']}" if info.get("reranker") else ", no rerank model"
    return [
        ("collection", f"{info['collection']} (a stateless search worker: files, chunks and roots are the writer's)"),
        ("contents", f"{_plural(info['points'], 'point')} in the store (vectors: {info.get('vectors')})"),
        ("model", f"{info.get('model_name') or info['model']} ({info['dimensions']} dimensions, {info['metric']}, "
                  f"{info.get('normalization')} normalization)"),
        ("store", f"{info['store']} at {info.get('store_location') or '?'}"),
        ("search", search),
        ("recall", (info.get("recall") or {}).get("text") or "not measured"),
    ]


def lines(info: dict[str, Any], verbose: bool = False) -> list[tuple[str, str]]:
    """The ``(label, text)`` rows of the readable status of one collection."""
    if info.get("stateless"):
        return worker_lines(info)
    health = info.get("health") or {}
    ok = "in step" if health.get("ok") else f"NOT in step: {health.get('problem') or 'see `indexer status -v`'}"
    contents = (
        f"{_plural(info['files'], 'file')}"
        + (f" ({info['failed_files']:,} failed)" if info.get("failed_files") else "")
        + f", {_plural(info['chunks'], 'chunk')}, {_plural(info['tokens'], 'token')}; "
        f"{_plural(info['points'], 'point')} in the store ({ok})"
    )
    model = (
        f"{info.get('model_name') or info['model']} ({info['dimensions']} dimensions, {info['metric']}, "
        f"{info['normalization']} normalization; tokenizer: {info.get('tokenizer')}; {weights_text(info)})"
    )
    search = info.get("search_mode") or "hybrid"
    lexical = info.get("lexical_index")
    terms = f" (terms: {info['lexical_terms']})" if info.get("lexical_terms") else ""
    search += f", lexical index ready{terms}" if lexical else f", no lexical index: {info.get('lexical_note')}"
    search += f", rerank with {info['reranker']}" if info.get("reranker") else ", no rerank model"
    rows = [
        ("collection", info["collection"]),
        ("contents", contents),
        ("model", model),
        ("chunks", chunks_text(info)),
        ("pictures", pictures_text(info)),
        ("store", f"{info['store']} at {info.get('store_location') or '?'}"),
        ("roots", ", ".join(info.get("roots") or []) or "none yet (`indexer index FOLDER`)"),
        ("search", search),
        ("recall", (info.get("recall") or {}).get("text") or "not measured"),
        ("last indexed", ago(info.get("last_indexed"))),
        ("watcher", describe_watcher(info.get("watcher"))),
    ]
    if info.get("cluster"):
        rows += cluster_rows(info["cluster"], verbose)
    reindex = info.get("reindex")
    if reindex:
        rows.append(
            (
                "reindex",
                f"to {reindex.get('model')}: {reindex.get('files_done')} of {reindex.get('files_total')} files, "
                f"started {ago(reindex.get('started_at'))}",
            )
        )
    blind = (info.get("model_reads") or {}).get("note")
    if blind:  # much of the text is in writing the model barely reads: said once, with the fix
        rows.append(("warning", blind))
    for w in info.get("writing") or []:  # a large file being written: hidden from searches until complete
        rows.append(("writing", f"{w['path']}: {w['chunks_written']:,} chunks written so far"))
    failures = info.get("failures") or []
    for f in failures[: None if verbose else 5]:
        rows.append(("failed", f"{f['path']}: {f['reason']}"))
    if len(failures) > 5 and not verbose:
        rows.append(("", f"... and {len(failures) - 5} more (`indexer status -v` lists them)"))
    if verbose:
        weights = info.get("weights") or {}
        rows += [
            ("model id", str(info["model"])),
            ("model file", str(info.get("model_path"))),
            ("weights", str(weights.get("probe") or weights)),
            ("store options", ", ".join(f"{k}={v}" for k, v in (info.get("store_options") or {}).items())),
            ("prompts", f"query {info['prompts'].get('query')!r}, document {info['prompts'].get('document')!r}"),
            ("health", ", ".join(f"{k}={v}" for k, v in health.items())),
        ]
    return rows


def cluster_rows(run: dict[str, Any], verbose: bool = False) -> list[tuple[str, str]]:
    """The last (or ongoing) indexing run on a Ray cluster: nodes, workers, each node's rate; with ``verbose``
    where each node's time went."""
    when = (f"running now (started {ago(run.get('started_at'))})" if run.get("running")
            else f"last run {ago(run.get('updated_at'))}")
    workers, nodes = _plural(int(run.get("workers") or 0), "worker"), _plural(int(run.get("nodes") or 0), "node")
    head = (f"{when} on the Ray cluster at {run.get('address')}: {workers} on {nodes}, "
            f"{run.get('local_texts', 0):,} texts embedded by the writer")
    if run.get("given_up"):
        head += f"; given up ({run['given_up']}), the writer finished alone"
    rows = [("cluster", head)]
    for node in (run.get("per_node") or {}).values():
        rate = f"{node.get('chars_per_s', 0):,} chars/s embedded ({node.get('texts', 0):,} texts)"
        if node.get("files"):
            rate += f", {node['files']:,} documents parsed"
        rows.append(("  node", f"{node.get('host')}: {rate}"))
        if verbose:
            rows.append(("", "time: " + time_split(node)))
    for line in (run.get("refused") or []) + (run.get("lost") or []):
        rows.append(("  node", line))
    return rows


def time_split(node: dict[str, Any]) -> str:
    """Where a node's time went (seconds): transfer and queue (its trips minus its work: dispatch, bytes, a read
    waiting behind the one parsing), parse, chunk, embed."""
    stages = (("transfer+queue", "transfer"), ("parse", "parse"), ("chunk", "chunk"), ("embed", "embed"))
    return ", ".join(f"{label} {float(node.get(f'{k}_seconds') or 0):.1f} s" for label, k in stages)
