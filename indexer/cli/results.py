"""How ``indexer search`` prints a result: one printer for answers from a running server and in-process results.

Standard library and :mod:`indexer.codec` only: the console script's fast path (:mod:`indexer.cli.entry`) prints
through it too."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from indexer.codec import hit_fields


def hit_dict(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit of a /search answer in the shape of ``SearchHit.to_dict()`` (what ``--json`` prints): the codec's."""
    return hit_fields(hit)


def print_result(answer: dict[str, Any], *, as_json: bool, verbose: bool) -> None:
    """Print a search result as ``indexer search`` does (the CLI prints in-process results through this too)."""
    hits = [hit_dict(h) for h in answer["hits"]]
    facets = answer.get("facets") or {}
    if as_json:  # one shape whatever the options (docs/search.md#filters)
        out: Any = {"hits": hits, "matched": answer.get("matched"), "facets": facets,
                    "where": list(answer.get("where") or ()), "filter_note": answer.get("filter_note")}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        if answer.get("matched") == 0:
            print(f"no indexed chunk matches the filter: {answer.get('filter_note') or ''}".rstrip(": "),
                  file=sys.stderr)
    else:
        bold, plain = ("\033[1m", "\033[0m") if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else ("", "")
        for i, hit in enumerate(hits, 1):
            rs = f" rerank={hit['rerank_score']:.3f}" if hit["rerank_score"] is not None else ""
            if hit.get("media"):  # an image point: the file and its pixel size
                size = f" {hit['width']} x {hit['height']} px" if hit.get("width") else ""
                print(f"{bold}{i}. {hit['path']}{plain}  [{hit['media']}{size}]  score={hit['score']:.3f}{rs}")
                continue
            where = f"{hit['path']}:{hit['start_line']}-{hit['end_line']}"
            if hit["locator"]:
                where += f" [{hit['locator']}]"
            elif hit["page"] is not None:
                where += f" [page {hit['page']}]"
            print(f"{bold}{i}. {where}{plain}  score={hit['score']:.3f}{rs}")
            snippet = hit.get("snippet") or " ".join(hit["text"].split())  # centred on the match (search/snippets)
            print(f"   {snippet[:242]}{'…' if len(snippet) > 242 and not snippet.endswith('…') else ''}")
        for name, values in facets.items():
            print(f"{name}: " + ", ".join(f"{v} ({n})" for v, n in values) if values else f"{name}: (none)")
        matched = answer.get("matched")
        if matched == 0:
            note = answer.get("filter_note") or "`indexer fields` lists the fields and their values"
            print(f"no indexed chunk matches the filter: {note}", file=sys.stderr)
        elif matched is not None and verbose:
            print(f"the filter matched {matched} chunks", file=sys.stderr)
        note = str(answer.get("rerank_note", ""))
        if note and verbose:  # what the rerank stage did (or why none ran): with -v only
            print(note, file=sys.stderr)
    if verbose:
        timings = answer.get("timings_ms", {})
        print("timings (ms): " + ", ".join(f"{k}={float(v):.1f}" for k, v in timings.items()), file=sys.stderr)
    sys.stdout.flush()
