"""The CLI as a daily tool, in real subprocesses (and a real terminal where progress is drawn): a readable
`status`, nested roots counted once, stderr free of native logs, `-v index` stage timings, progress inside the
first file, spreadsheet hits naming their rows."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest

from tests.integration.corpus import write_corpus
from tests.integration.test_cli import run

pytestmark = pytest.mark.slow

# What llama.cpp, ggml and MTMD print when their logs are not silenced.
NATIVE_LOG = re.compile(r"llama_|ggml_|gguf_|load_tensors|load_hparams|print_info|n_ctx|clip_|mtmd|main: |\.cpp:\d")


def test_status_is_a_readable_summary_and_json_stays_the_contract(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    assert run("index", str(corpus)).returncode == 0
    plain = run("status")
    assert plain.returncode == 0, plain.stderr
    text = plain.stdout
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines() if line.strip())
    assert rows["collection"] == "default"
    assert rows["contents"].startswith("5 files, ") and "in step" in rows["contents"]
    assert rows["model"].startswith("all-MiniLM-L6-v2 (384 dimensions")  # a name, not the fingerprinted id
    assert re.search(r"-[0-9a-f]{12}", rows["model"]) is None
    assert re.search(r"; weights (bf16|f16|f32|q8_0)(, (bf16|f16|f32|q8_0))*\)$", rows["model"]), rows["model"]
    assert re.fullmatch(r"\d+ tokens each, context: none", rows["chunks"]), rows["chunks"]
    assert rows["pictures"] == "no (the model embeds text only)"
    assert re.match(r"(just now|\d+ seconds ago) \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)", rows["last indexed"])
    assert rows["watcher"].startswith("not running")
    assert str(corpus.resolve()) in rows["roots"]
    for raw in ("None", "{'", "[]", "store_options"):  # no Python dumps, no internal keys
        assert raw not in text, raw
    verbose = run("status", "-v").stdout
    assert "model id" in verbose and "+tok-" in verbose and "store options" in verbose
    data = json.loads(run("status", "--json").stdout)
    assert data["model"].startswith("all-MiniLM-L6-v2-") and data["model_name"] == "all-MiniLM-L6-v2"
    assert data["last_indexed"].endswith("+00:00") and data["watcher"] is None and "store_options" in data
    assert data["pictures"] is False and data["image_points"] == 0 and data["chunk_context"] == "none"
    assert isinstance(data["chunk_tokens"], int) and data["weights"]["weight_types"]


def test_nested_roots_are_adopted_with_a_note_counted_once_and_forget_says_the_fix(tmp_path, embed_model_path):
    outer = write_corpus(tmp_path / "notes")
    inner = outer / "baking"
    assert run("index", str(outer)).returncode == 0
    both = run("index", str(outer), str(inner), "--json")
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["files_seen"] == 5  # once, not 5 + 1
    assert "is inside the root" in both.stderr and str(outer.resolve()) in both.stderr
    status = json.loads(run("status", "--json").stdout)
    assert status["roots"] == [str(outer.resolve())] and status["files"] == 5

    refused = run("forget", str(inner))
    assert refused.returncode == 1
    assert ".indexerignore" in refused.stderr and f"indexer forget {outer.resolve()}" in refused.stderr
    assert json.loads(run("status", "--json").stdout)["files"] == 5  # nothing lost

    # the other way round: a root, then a folder holding it
    assert run("drop", "default", "--yes").returncode == 0
    assert run("index", str(inner)).returncode == 0
    wider = run("index", str(outer), "--json")
    assert wider.returncode == 0 and "contains the root" in wider.stderr
    status = json.loads(run("status", "--json").stdout)
    assert status["roots"] == [str(outer.resolve())] and status["files"] == 5
    gone = run("forget", str(outer), "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout)["files_removed"] == 5
    assert json.loads(run("status", "--json").stdout)["points"] == 0


def test_stderr_has_no_native_logs_without_v_and_v_index_shows_stage_timings(
    tmp_path, embed_model_path, embed_model_alt_path, reranker_model_path
):
    corpus = write_corpus(tmp_path / "corpus")
    env = {"INDEXER_RERANK_MODEL": str(reranker_model_path)}
    runs = [
        run("index", str(corpus), env=env),
        run("search", "how to bake bread", env=env),
        run("search", "saturn rings", "--mode", "dense", "--no-rerank", env=env),
        run("status", env=env),
        run("reindex", "--model", str(embed_model_alt_path), env=env),
        run("search", "tomato seedlings", env=env),
    ]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        native = [line for line in proc.stderr.splitlines() if NATIVE_LOG.search(line)]
        assert native == [], (proc.args, native)
    verbose = run("-v", "index", str(corpus), "--json")
    stages = json.loads(verbose.stdout)["stages"]
    assert {"scan"} <= set(stages)
    touched = tmp_path / "corpus" / "garden" / "tomatoes.rst"
    touched.write_text(touched.read_text() + "\nMulch keeps the soil moist.\n")
    again = run("-v", "index", str(corpus))
    line = next(x for x in again.stderr.splitlines() if x.startswith("stage timings (s):"))
    for stage in ("scan", "read", "chunk", "embed", "write"):
        assert re.search(rf"\b{stage} \d+\.\d\d", line), (stage, line)


def _frames(args: list[str], timeout: float = 300.0) -> list[tuple[float, str]]:
    """Run the CLI in a real terminal (a pty: rich draws its progress there) and return (seconds since the
    start, text) of every chunk of output, escape sequences removed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI with stdin/stdout/stderr on the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "indexer.cli", *args], dict(os.environ))
    started = time.monotonic()
    frames = []
    try:
        while time.monotonic() - started < timeout:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", data.decode("utf-8", "replace"))
            frames.append((time.monotonic() - started, text))
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "".join(t for _, t in frames)[-2000:]
    return frames


def _progress(frames: list[tuple[float, str]], label: str) -> list[tuple[float, int, int, int]]:
    """(seconds, files done, chunks embedded, chunks split) of every progress frame drawn."""
    out = []
    pattern = re.compile(rf"{label}\s.*?(\d+)/\S+.*?[\r\n]+\s*chunks embedded[^\r\n]*?\s(\d+)/(\d+|\?)")
    for at, text in frames:
        for m in pattern.finditer(text):
            split = 0 if m.group(3) == "?" else int(m.group(3))
            out.append((at, int(m.group(1)), int(m.group(2)), split))
    return out


def test_progress_moves_within_2_s_inside_the_first_file_and_reindex_shows_it(
    tmp_path, embed_model_path, embed_model_alt_path
):
    folder = tmp_path / "big"
    folder.mkdir()
    words = [f"word{i}" for i in range(3000)]
    with (folder / "book.txt").open("w") as f:  # one file of 100 paragraphs, several hundred chunks
        for p in range(100):
            f.write(" ".join(words[(p * 37 + j * 11) % 3000] for j in range(120)) + "\n\n")

    frames = _progress(_frames(["index", str(folder)]), "files")
    assert frames, "no progress was drawn"
    first = frames[0][0]
    moved = next(f for f in frames if f[2] > 0 or f[3] > 0)  # chunks split, then embedded
    assert moved[1] == 0, "chunks moved only after the file was done"  # inside the first (only) file
    assert moved[0] - first <= 2.0, f"the chunk count first moved {moved[0] - first:.1f}s after the bar"
    embedded = next(f for f in frames if f[2] > 0)
    assert embedded[1] == 0 and embedded[2] < embedded[3]  # embedding reported in steps inside the file
    assert max(f[2] for f in frames) >= 200

    again = _progress(_frames(["reindex", "--model", str(embed_model_alt_path)]), "re-embedding files")
    assert again and max(f[2] for f in again) > 0  # reindex moves the same way


def test_a_spreadsheet_hit_names_its_row(tmp_path, embed_model_path):
    folder = tmp_path / "sheets"
    folder.mkdir()
    with (folder / "people.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["name", "code", "city"])
        for i in range(2, 202):
            out.writerow([f"person{i}", f"CODE{i * 7}", ("paris", "berlin", "tokyo")[i % 3]])
    assert run("index", str(folder)).returncode == 0
    found = run("search", "CODE959", "-k", "1", "--mode", "lexical")
    assert found.returncode == 0, found.stderr
    first = found.stdout.splitlines()
    assert "[row 137 (A137:C137)]" in first[0], found.stdout  # 959 = 137 * 7
    assert first[1].strip() == "name: person137; code: CODE959; city: tokyo"
    hit = json.loads(run("search", "CODE959", "-k", "1", "--json").stdout)["hits"][0]
    assert hit["location"]["rows"] == "137" and hit["locator"] == "row 137 (A137:C137)"


def test_stage_names_are_the_reports(tmp_path: Path) -> None:
    """The report's stages are what `-v index` prints: the names a user reads in docs/indexing.md."""
    from indexer.types import IndexReport

    report = IndexReport()
    report.timed("read", 0.25)
    report.timed("read", 0.5)
    assert report.to_dict()["stages"] == {"read": 0.75}
