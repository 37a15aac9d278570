"""`indexer watch` as a process: SIGTERM exits 0 with nothing lost, SIGKILL during a burst then a restart gives
the index a clean run gives, `indexer status` shows the watcher, and thousands of files created at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import indexer
from indexer.state.watch_files import read_status
from indexer.watch.watcher import Watcher, WatchOptions
from tests.integration.corpus import write_corpus, write_many
from tests.integration.waiting import until as wait_until

pytestmark = pytest.mark.slow

DEADLINE = 300.0


def until(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "condition") -> Any:
    return wait_until(predicate, timeout, what, poll=0.05)


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "INDEXER_DATA_DIR": str(data_dir), "INDEXER_EMBED_BATCH_CHUNKS": "8", **extra}


def _cli(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli", *args], env=_env(data_dir, **extra), capture_output=True, text=True
    )


def _start_watch(data_dir: Path, *args: str, log: Path) -> subprocess.Popen[str]:
    with open(log, "a") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "indexer.cli", "watch", *args],
            env=_env(data_dir),
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _status(data_dir: Path) -> dict[str, Any]:
    return read_status(data_dir, "default") or {}


def _idle(data_dir: Path) -> bool:
    s = _status(data_dir)
    return bool(s.get("running")) and s.get("state") == "idle" and s.get("queued") == 0


def _index_state(data_dir: Path) -> tuple[dict[str, list[str]], set[str], set[str]]:
    """(path -> chunk content hashes), the state's point ids and the store's point ids."""
    with indexer.open_collection("default", data_dir=data_dir) as col:
        assert col.record is not None and col.record.store == os.environ.get("INDEXER_STORE", "faiss")
        files = col.state.files("default")
        chunks = {p: [c.content_hash for c in col.state.chunks("default", p)] for p in files}
        state_ids = {pid for ids in col.state.chunk_ids("default", list(files)).values() for pid in ids}
        store_ids = col.store.list_ids("default")
    return chunks, state_ids, store_ids


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_finishes_and_exits_0_and_status_shows_the_watcher(tmp_path, embed_model_path, stop_signal):
    root = write_corpus(tmp_path / "root")
    data = tmp_path / "data"
    log = tmp_path / "watch.log"
    proc = _start_watch(data, str(root), log=log)
    try:
        until(lambda: _idle(data), what="watcher idle")
        status = json.loads(_cli(data, "status", "--json").stdout)
        assert status["watcher"]["running"] is True and status["watcher"]["pid"] == proc.pid
        (root / "late.md").write_text("Lighthouses warn ships away from rocky coasts.\n")
        until(lambda: (_status(data).get("totals") or {}).get("files_indexed", 0) >= 6, what="late file")
    finally:
        proc.send_signal(stop_signal)
        code = proc.wait(120)
    text = log.read_text()
    assert code == 0, text
    assert "batch 1:" in text and "watching" in text  # one line per batch
    status = _status(data)
    assert status["running"] is False and status["state"] == "stopped" and status["queued"] == 0
    out = _cli(data, "search", "warning ships away from rocks", "-k", "1", "--json")
    assert json.loads(out.stdout)["hits"][0]["path"].endswith("late.md")


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_sigkill_during_a_burst_then_restart_equals_a_clean_index(tmp_path, embed_model_path, store, monkeypatch):
    monkeypatch.setenv("INDEXER_STORE", store)  # the collection the first watcher creates, and the clean one
    root = tmp_path / "root"
    write_corpus(root)
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    log = tmp_path / "watch.log"
    proc = _start_watch(crashed, str(root), log=log)
    try:
        until(lambda: _idle(crashed), what="watcher idle")
        write_many(root / "burst", n_files=120, paragraphs=3)
        until(lambda: (_status(crashed).get("totals") or {}).get("files_indexed", 0) >= 5 + 10, what="mid-burst")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    killed = _status(crashed)
    assert killed["running"] is False and killed["state"] == "stopped"  # the lock died with the process
    # more changes while no watcher runs: found by the restart's reconciliation scan
    (root / "baking" / "bread.md").unlink()
    write_many(root / "later", n_files=5, paragraphs=2)

    again = _start_watch(crashed, log=log)  # no paths: every root
    try:
        until(lambda: _idle(crashed), what="restarted watcher idle")
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(120) == 0, log.read_text()

    assert _cli(clean, "index", str(root)).returncode == 0
    crashed_chunks, crashed_state, crashed_store = _index_state(crashed)
    clean_chunks, clean_state, clean_store = _index_state(clean)
    assert crashed_chunks == clean_chunks
    assert crashed_state == crashed_store == clean_state == clean_store
    assert len(crashed_chunks) == 5 - 1 + 120 + 5


def test_many_files_created_at_once(tmp_path, embed_model_path):
    n = int(os.environ.get("INDEXER_TEST_WATCH_FILES", "5000"))
    root = tmp_path / "root"
    root.mkdir()
    (root / "seed.md").write_text("A seed file so the collection exists.\n")
    texts = [f"Ledger line {i}: {w} crates shipped to the {w} warehouse." for i, w in enumerate("abcdefghij" * 5)]
    with indexer.open_collection("many") as col:
        watcher = Watcher(col, [root], WatchOptions(rescan_seconds=0))
        watcher.start()
        try:
            assert watcher.wait_idle(DEADLINE)
            for i in range(n):  # small files, 50 distinct texts: the vector cache keeps embedding cheap
                folder = root / f"part{i % 10}"
                folder.mkdir(exist_ok=True)
                (folder / f"f{i:05d}.md").write_text(texts[i % len(texts)] + "\n")
            until(lambda: watcher.wait_idle(DEADLINE) and len(col.state.files("many")) == n + 1, what="all files")
            status = col.status()
            assert status["points"] == status["chunks"] == n + 1
            one = str((root / "part3" / "f00123.md").resolve())
            hits = col.search("crates shipped to the warehouse", k=5, path_prefix=one).hits
            assert [os.path.basename(h.path) for h in hits] == ["f00123.md"]
            assert watcher.totals["chunks_embedded"] <= len(texts) + 1
            assert watcher.status()["freshness"]["samples"] > 0
        finally:
            watcher.stop()
