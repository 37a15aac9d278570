"""Kill -9 an indexing process at several points and compare with a clean build; search while indexing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import indexer
from indexer.core.normalization import Normalization
from tests.integration.corpus import write_corpus, write_many

pytestmark = pytest.mark.slow


def _start_index(data_dir: Path, *paths: Path, batch: int = 8, collection: str = "default") -> subprocess.Popen[str]:
    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir), "INDEXER_EMBED_BATCH_CHUNKS": str(batch)}
    return subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "index", "--collection", collection, *map(str, paths)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _files_committed(data_dir: Path) -> int:
    db = data_dir / "state.sqlite"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM files").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0  # schema not created yet


def _kill_when(proc: subprocess.Popen[str], data_dir: Path, at_least_files: int, timeout: float = 300) -> bool:
    """SIGKILL ``proc`` once ``at_least_files`` files are committed; False if it finished first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if _files_committed(data_dir) >= at_least_files:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    proc.wait()
    return False


def _snapshot(data_dir: Path) -> tuple[dict[str, tuple[str, str]], int, set[str]]:
    """(point id -> (path, text)), the store's point count, and the ids the state store knows."""
    with indexer.open_collection("default", data_dir=data_dir) as col:
        store = col.store
        ids = store.list_ids("default")
        count = store.count("default")
        state_ids = {pid for path in col.state.files("default") for pid in col.state.chunk_ids("default", [path])[path]}
        vec = col.embedder.embed_batch(["observation"], Normalization.L2)[0]
        hits = store.search("default", vec, limit=count or 1)
    payloads = {h.id: (str(h.payload["path"]), str(h.payload["text"])) for h in hits}
    assert set(payloads) == ids
    return payloads, count, state_ids


def test_sigkill_at_any_point_then_rerun_equals_a_clean_build(tmp_path, embed_model_path):
    corpus = write_many(tmp_path / "corpus", n_files=60, paragraphs=10)
    crashed = tmp_path / "crashed"

    killed_early = _start_index(crashed, corpus)
    time.sleep(0.3)  # during start-up / model load
    killed_early.send_signal(signal.SIGKILL)
    killed_early.wait()

    kills = 0
    for threshold in (3, 20, 41):
        kills += _kill_when(_start_index(crashed, corpus), crashed, threshold)
    assert kills >= 2, "the indexer finished before it could be killed; make the corpus bigger"

    # edit files the dead runs may have half-written: their orphan points must not survive
    for i in (1, 2, 45, 59):
        (corpus / f"d{i % 5}" / f"note-{i:03d}.md").write_text(
            f"# Rewritten {i}\n\nA brand new text about kites {i}.\n"
        )
    (corpus / "d0" / "note-000.md").unlink()

    final = _start_index(crashed, corpus)
    _, err = final.communicate(timeout=600)
    assert final.returncode == 0, err

    clean = tmp_path / "clean"
    done = _start_index(clean, corpus, batch=256)
    _, err = done.communicate(timeout=600)
    assert done.returncode == 0, err

    got, got_count, got_state = _snapshot(crashed)
    want, want_count, want_state = _snapshot(clean)
    assert got == want  # same ids, paths and texts: nothing lost, nothing stale
    assert got_count == want_count == len(want)  # no duplicate points
    assert got_state == set(got) and want_state == set(want)


def test_search_works_while_another_process_indexes(tmp_path, embed_model_path):
    small = write_corpus(tmp_path / "small", {"whales.md": "# Whales\n\nBlue whales are the largest animals."})
    big = write_many(tmp_path / "big", n_files=150, paragraphs=6)
    with indexer.open_collection("live") as col:
        col.index([small])
    data_dir = Path(os.environ["INDEXER_DATA_DIR"])
    proc = _start_index(data_dir, big, collection="live")
    searched_while_running = 0
    seen_new_points = False
    try:
        while proc.poll() is None:
            with indexer.open_collection("live") as col:
                result = col.search("largest animals in the ocean", k=3)
                assert result.hits and result.hits[0].path.endswith("whales.md")
                seen_new_points |= col.status()["points"] > 1
            if proc.poll() is None:
                searched_while_running += 1
    finally:
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert searched_while_running >= 2
    assert seen_new_points, "searches never saw points the running indexer had written"
    with indexer.open_collection("live") as col:
        assert "note-" in col.search("glaciers change over seasons", k=1).hits[0].path


def test_a_second_indexer_on_the_same_collection_is_refused(tmp_path, embed_model_path):
    big = write_many(tmp_path / "big", n_files=80, paragraphs=6)
    data_dir = Path(os.environ["INDEXER_DATA_DIR"])
    first = _start_index(data_dir, big)
    try:
        while _files_committed(data_dir) < 1 and first.poll() is None:
            time.sleep(0.05)
        second = _start_index(data_dir, big)
        _, err = second.communicate(timeout=600)
        if first.poll() is None:
            assert second.returncode == 1 and "another indexer process" in err
    finally:
        first.communicate(timeout=600)
    assert first.returncode == 0
