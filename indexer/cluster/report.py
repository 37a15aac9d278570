"""The Ray cluster's part of a run, as one line of the run's report (no Ray import: the writer reads it)."""

from __future__ import annotations

from typing import Any


def note(work: dict[str, Any]) -> str:
    """One line for the run's report: where the embedding ran, how fast per node, what was refused or lost."""
    nodes = "; ".join(_node(n) for n in work.get("per_node", {}).values() if n["texts"] or n.get("files"))
    out = (f"embedded on the Ray cluster at {work['address']}: {work['workers']} workers on {work['nodes']} nodes"
           + (f" ({nodes})" if nodes else "") + f", {work['local_texts']} texts by the writer itself")
    if work.get("refused"):
        out += "; refused: " + "; ".join(work["refused"])
    if work.get("lost"):
        out += "; lost: " + "; ".join(work["lost"])
    if work.get("given_up"):
        out += f"; the cluster was given up ({work['given_up']}) and the writer finished alone"
    return out


def _node(n: dict[str, Any]) -> str:
    out = f"{n['host']} {n['texts']} texts at {n['chars_per_s']:,} chars/s"
    if n.get("files"):
        out += f", {n['files']} documents parsed in {n['parse_seconds']:.1f} s ({n['bytes_sent']:,} bytes sent)"
    return out
