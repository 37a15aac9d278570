"""The cluster embedder's own logic, without Ray: how a batch is cut into parts, the report line, the tolerance
by weight type, and that a small batch never reaches the pool."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexer.cluster.embedder import _cut, tolerance
from indexer.cluster.report import note


@pytest.mark.parametrize("n,size,workers", [(1, 10, 2), (2, 5000, 2), (40, 300, 2), (100, 1000, 3), (7, 4096, 8)])
def test_parts_keep_every_text_once_in_order(n, size, workers):
    texts = [f"{i:04d}" + "x" * size for i in range(n)]
    parts = _cut(texts, 4096, workers)
    assert [t for p in parts for t in p] == texts
    assert all(parts)
    assert len(parts) >= min(n, workers)  # each worker gets something when there are enough texts


def test_parts_are_about_the_size_asked():
    texts = ["y" * 500] * 80  # 40,000 characters
    parts = _cut(texts, 4000, 2)
    sizes = [sum(map(len, p)) for p in parts]
    assert len(parts) == 10 and max(sizes) <= 5000 and min(sizes) >= 3000


def test_the_report_line_names_nodes_rates_refusals_and_losses():
    work = {"address": "10.0.0.5:6379", "workers": 1, "nodes": 1, "local_texts": 3, "given_up": None,
            "refused": ["node abc (10.0.0.7): its canary vectors differ"], "lost": ["vm:1234: ActorDiedError"],
            "per_node": {"n1": {"host": "vm:1234", "texts": 10, "chars": 9000, "seconds": 1.0, "chars_per_s": 9000},
                         "n2": {"host": "vm:5678", "texts": 0, "chars": 0, "seconds": 0.0, "chars_per_s": 0}}}
    line = note(work)
    assert "10.0.0.5:6379" in line and "vm:1234 10 texts at 9,000 chars/s" in line and "vm:5678" not in line
    assert "refused: node abc" in line and "lost: vm:1234" in line and "finished alone" not in line
    assert "finished alone" in note({**work, "given_up": "no part finished in 300 s"})


def test_tolerance_is_stricter_for_float_weights(embed_model_f16_path: Path, tmp_path: Path):
    assert tolerance(str(embed_model_f16_path)) == 0.9999  # f16 matrices
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"nope")
    assert tolerance(str(bad)) == 0.9999  # unreadable: the stricter bound


def test_tolerance_of_a_quantized_file(embed_model_q8_path: Path, q8_runs: bool):
    assert tolerance(str(embed_model_q8_path)) == 0.999


def _run_record(**over):
    node = {"host": "vm:1234", "texts": 10, "chars": 9000, "seconds": 1.0, "chars_per_s": 9000, "files": 4,
            "bytes_sent": 1000, "parse_seconds": 3.25, "chunk_seconds": 0.5, "transfer_seconds": 0.25,
            "embed_seconds": 0.75}
    return {"address": "10.0.0.5:6379", "workers": 2, "nodes": 2, "local_texts": 3, "given_up": None, "refused": [],
            "lost": [], "per_node": {"n1": node}, "started_at": 1.0, **over}


def test_status_reads_the_last_run_and_a_running_one(tmp_path):
    import os

    from indexer.cli.status_view import cluster_rows
    from indexer.state.cluster_runs import read_run, write_run

    assert read_run(tmp_path, "notes") is None  # no run on a cluster yet: no row
    write_run(tmp_path, "notes", _run_record(running=True, pid=os.getpid()))
    run = read_run(tmp_path, "notes")
    assert run is not None and run["running"]
    rows = cluster_rows(run, verbose=True)
    assert rows[0][0] == "cluster" and rows[0][1].startswith("running now") and "2 workers on 2 nodes" in rows[0][1]
    assert "vm:1234: 9,000 chars/s embedded (10 texts), 4 documents parsed" in rows[1][1]
    assert rows[2][1] == "time: transfer+queue 0.2 s, parse 3.2 s, chunk 0.5 s, embed 0.8 s"
    write_run(tmp_path, "notes", _run_record(running=True, pid=2 ** 22 + 12345))  # its writer is gone (killed)
    run = read_run(tmp_path, "notes")
    assert run is not None and not run["running"]
    assert cluster_rows(run)[0][1].startswith("last run") and len(cluster_rows(run)) == 2  # no time rows without -v


def test_the_progress_bar_draws_a_cluster_line():
    from rich.console import Console
    from rich.progress import Progress

    from indexer.cli.progress import BarProgress

    with Progress(console=Console(file=open(os.devnull, "w")), disable=True) as bar:  # noqa: SIM115
        progress = BarProgress(bar)
        progress.cluster(_run_record())
        progress.cluster(_run_record(workers=1, nodes=1))
        line = bar.tasks[-1].description
    assert len(bar.tasks) == 3 and line.startswith("cluster: 1 workers on 1 nodes (vm:1234 9,000 chars/s, 4 docs")
