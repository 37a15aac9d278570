"""The `indexer` command line in real subprocesses: exit codes, --json shapes, summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.corpus import write_corpus
from tests.unit.test_readers import make_pdf

pytestmark = pytest.mark.slow


def run(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=600,
    )


def test_cli_index_search_status_forget_drop(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n")  # a reader failure

    first = run("index", str(corpus), "--json")
    assert first.returncode == 3, first.stderr  # one file failed
    report = json.loads(first.stdout)
    assert report["files_indexed"] == 5
    assert [f["path"] for f in report["failed"]] == [str((corpus / "broken.pdf").resolve())]
    assert "PDF" in report["failed"][0]["reason"]

    (corpus / "broken.pdf").write_bytes(make_pdf(["café au lait"]))
    second = run("index", str(corpus))
    assert second.returncode == 0, second.stderr
    assert "1 indexed" in second.stdout and "5 unchanged" in second.stdout  # the summary is the result: stdout
    resync = run("index")  # no paths: re-sync every root of the collection
    assert resync.returncode == 0 and "0 indexed, 6 unchanged" in resync.stdout, resync.stdout

    found = run("search", "how to bake bread", "--json", "-k", "3")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert len(hits) == 3 and hits[0]["path"].endswith("bread.md")
    assert {"path", "score", "rerank_score", "text", "start_line", "end_line"} <= set(hits[0])
    assert hits[0]["rerank_score"] is None and hits[0]["score"] >= hits[1]["score"]

    verbose = run("-v", "search", "saturn rings", "--no-rerank")
    assert verbose.returncode == 0 and "planets.txt" in verbose.stdout and "timings (ms)" in verbose.stderr

    status = json.loads(run("status", "--json").stdout)
    assert {"collection", "files", "chunks", "points", "store", "metric", "model", "normalization", "roots"} <= set(
        status
    )
    assert status["files"] == 6 and status["points"] == status["chunks"] and status["store"] == "faiss"

    assert "default" in run("collections").stdout
    forgot = run("forget", str(corpus), "--json")
    assert forgot.returncode == 0 and json.loads(forgot.stdout)["files_removed"] == 6
    assert json.loads(run("status", "--json").stdout)["points"] == 0

    refused = run("drop", "default", input="n\n")
    assert refused.returncode == 1 and "default" in run("collections").stdout
    dropped = run("drop", "default", "--yes")
    assert dropped.returncode == 0 and run("collections", "--json").stdout.strip() == "[]"


def test_cli_fatal_errors_exit_1_with_a_clear_message(tmp_path):
    missing = run("index", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    no_collection = run("search", "anything", "--collection", "ghost")
    assert no_collection.returncode == 1 and "indexer index PATH" in no_collection.stderr
    bad_name = run("status", "--collection", "../etc")
    assert bad_name.returncode == 1 and "collection names" in bad_name.stderr


def test_cli_a_name_that_is_not_utf8_fails_alone_and_every_output_is_utf8(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    with open(os.fsencode(corpus) + b"/\xff\xfe.md", "wb") as fh:
        fh.write(b"# odd\nglaciers carve valleys\n")
    os.makedirs(os.fsencode(corpus) + b"/dir\xe9")
    with open(os.fsencode(corpus) + b"/dir\xe9/inside.md", "wb") as fh:
        fh.write(b"# inside\ntext\n")
    done = subprocess.run([sys.executable, "-m", "indexer.cli", "index", str(corpus), "--json"], capture_output=True)
    assert done.returncode == 3, done.stderr  # finished, some files failed
    report = json.loads(done.stdout.decode("utf-8"))
    assert report["files_indexed"] == 5  # the corpus, the odd names alone left out
    assert sorted(f["path"] for f in report["failed"]) == [f"{corpus}/\\xff\\xfe.md", f"{corpus}/dir\\xe9"]
    done.stderr.decode("utf-8")  # the log lines too
    status = subprocess.run([sys.executable, "-m", "indexer.cli", "status", "--json"], capture_output=True)
    assert status.returncode == 0 and json.loads(status.stdout.decode("utf-8"))["files"] == 5


def test_version_prints_one_line_and_exits_0():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("indexer ") and "llama-cpp-python" in proc.stdout
    assert len(proc.stdout.splitlines()) == 1


def test_ctrl_c_during_index_says_what_was_kept_and_a_rerun_resumes(tmp_path, embed_model_path):
    import signal
    import sqlite3
    import time

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(240):
        words = " ".join(f"word{(i * 31 + j) % 997}" for j in range(80))
        (folder / f"note{i:03d}.md").write_text(f"# Note {i}\n\n{words}\n")
    small = {"INDEXER_EMBED_BATCH_CHUNKS": "16"}  # a commit every 16 chunks: the first lands within a second or two
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "index", str(folder)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **small}, start_new_session=True,
                            # as from a terminal: a suite started in the background (`... &`) ignores SIGINT, and
                            # Python keeps an inherited SIG_IGN (no KeyboardInterrupt)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    state = os.path.join(os.environ["INDEXER_DATA_DIR"], "state.sqlite")
    deadline = time.monotonic() + 300
    kept = 0
    while kept == 0 and proc.poll() is None and time.monotonic() < deadline:  # until some files are committed
        time.sleep(0.2)
        try:
            db = sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=1)
            kept = db.execute("SELECT COUNT(*) FROM files WHERE status='indexed'").fetchone()[0]
            db.close()
        except sqlite3.Error:
            pass
    assert proc.poll() is None and kept > 0, "indexing ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the command and its parse workers
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted" in lines[0] and "again to resume" in lines[0], err
    again = run("index", str(folder), "--json", env=small)
    report = json.loads(again.stdout)
    assert again.returncode == 0 and report["files_indexed"] < 240  # the files done before are not redone
    status = json.loads(run("status", "--json").stdout)
    assert status["files"] == 240 and status["points"] == status["chunks"]
