"""indexer reindex: switch a collection between two builds of the default model (to q8_0; to another weight
type where this machine cannot run q8_0) while another process searches in a loop; no query fails, results come
from the new vectors after the switch, file changes made during the reindex reach the new vectors, an interrupted
reindex resumes and an aborted one leaves the old intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from indexer.collection import reindex
from indexer.collection.facade import open_collection
from indexer.ops.backup import backup, restore
from indexer.settings import load_settings
from tests.integration.corpus import write_corpus, write_many

pytestmark = pytest.mark.slow

QUERY = "how to bake bread"

LOOP = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from indexer.collection.facade import open_collection

    out, stop = Path(sys.argv[1]), Path(sys.argv[2])
    with open_collection() as col, out.open("a") as log:
        while not stop.exists():
            try:
                hits = col.search(sys.argv[3], k=3, mode="dense").hits
                row = {"ok": True, "model": col.record.model_id, "path": hits[0].path, "score": hits[0].score}
            except Exception as exc:  # recorded, never raised: the test counts failures
                row = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            log.write(json.dumps(row) + "\\n")
            log.flush()
            time.sleep(0.02)
    """
)


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(condition, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class _ChangeFilesOnce:
    """Progress hook: after the first re-embedded file, edit and add files and index them into the live collection."""

    def __init__(self, corpus: Path) -> None:
        self.corpus, self.done = corpus, False

    def files_total(self, n: int) -> None:
        pass

    def embedded(self, chunks: int, tokens: int) -> None:
        pass

    def file_done(self, path: str) -> None:
        if self.done:
            return
        self.done = True
        (self.corpus / "garden" / "cheese.md").write_text("# Cheese\n\nAged cheddar pairs with crisp apples.\n")
        (self.corpus / "astronomy" / "planets.txt").write_text("Neptune is an ice giant with supersonic winds.\n")
        with open_collection() as live:  # the live collection keeps indexing during the reindex
            report = live.sync()
        assert report.files_indexed == 2


def test_switch_f16_to_q8_while_another_process_searches(tmp_path, embed_model_path, embed_model_alt_path):
    corpus = write_corpus(tmp_path / "corpus")
    with open_collection(embed_model=str(embed_model_path)) as col:
        col.index([corpus])
        old_id = col.record.model_id
        old_vectors = reindex.vectors_name(col.record)
        before = col.search(QUERY, k=3, mode="dense").hits[0]

    log, stop = tmp_path / "queries.jsonl", tmp_path / "stop"
    loop = subprocess.Popen([sys.executable, "-c", LOOP, str(log), str(stop), QUERY], env=dict(os.environ))
    try:
        _wait_for(lambda: len(_rows(log)) >= 3 or loop.poll() is not None, "the query loop's first answers")
        with open_collection() as col:
            report = reindex.run(col, str(embed_model_alt_path), _ChangeFilesOnce(corpus))
            new_id = col.record.model_id
            assert new_id != old_id and report.old_model == old_id and report.model == new_id
            assert report.catch_up["files_indexed"] == 2  # the edits made meanwhile reached the new vectors
            status = col.status()
            assert status["model"] == new_id and status["points"] == status["chunks"] and status["reindex"] is None
            after = col.search(QUERY, k=3, mode="dense").hits[0]
            assert col.search("aged cheddar", k=1).hits[0].path.endswith("cheese.md")
            assert "Neptune" in col.search("ice giant winds", k=1).hits[0].text
            assert col.store.count(col.name) == status["chunks"]
            assert not (Path(os.environ["INDEXER_DATA_DIR"]) / "faiss" / "default" / old_vectors).exists()
        n_at_switch = len(_rows(log))
        _wait_for(lambda: len(_rows(log)) >= n_at_switch + 3 or loop.poll() is not None, "answers after the switch")
    finally:
        stop.touch()
        loop.wait(timeout=120)
    rows = _rows(log)
    assert loop.returncode == 0
    failures = [r for r in rows if not r["ok"]]
    assert not failures, failures[:3]
    assert rows[0]["model"] == old_id and rows[-1]["model"] == new_id
    # The scores tell the vectors apart: two weight types embed the same query slightly differently.
    assert abs(before.score - after.score) > 1e-6 and before.path == after.path
    assert rows[0]["score"] == pytest.approx(before.score, abs=1e-6)
    assert rows[-1]["score"] == pytest.approx(after.score, abs=1e-6)
    switch = next(i for i, r in enumerate(rows) if r["model"] == new_id)
    assert all(r["model"] == new_id for r in rows[switch:])  # never back to the old vectors


class _Interrupt(Exception):
    pass


class _StopAfter:
    def __init__(self, n: int) -> None:
        self.n = n

    def files_total(self, n: int) -> None:
        pass

    def embedded(self, chunks: int, tokens: int) -> None:
        pass

    def file_done(self, path: str) -> None:
        self.n -= 1
        if self.n == 0:
            raise _Interrupt()


def test_interrupted_reindex_resumes_and_an_aborted_one_leaves_the_old_intact(
    tmp_path, embed_model_path, embed_model_alt_path, monkeypatch
):
    corpus = write_many(tmp_path / "corpus", 12, paragraphs=1)
    with open_collection(embed_model=str(embed_model_path), chunk_tokens=48) as col:
        col.index([corpus])
    with open_collection(embed_batch_chunks=2) as col:
        old = col.record
        old_hit = col.search("rivers over seasons", k=1, mode="dense").hits[0]
        with pytest.raises(_Interrupt):
            reindex.run(col, str(embed_model_alt_path), _StopAfter(6))
        progress = col.status()["reindex"]
        assert progress["files_total"] == 12 and 4 <= progress["files_done"] < 12
        assert col.record == old  # nothing switched: queries still use the old vectors
        still = col.search("rivers over seasons", k=1, mode="dense").hits[0]
        assert still.score == pytest.approx(old_hit.score, abs=1e-6)

        resumed = reindex.run(col, str(embed_model_alt_path))
        first = resumed.first_pass  # resumed, not restarted (files written < 2 s ago are re-hashed: "touched")
        assert first["files_unchanged"] + first["files_touched"] == progress["files_done"]
        assert resumed.first_pass["files_indexed"] == 12 - progress["files_done"]
        assert col.record.model_id != old.model_id and col.status()["points"] == col.status()["chunks"]
        assert col.status()["chunk_tokens"] == 48  # the new vectors keep the collection's chunk size
        assert col.state._db.execute("SELECT MAX(n_tokens) FROM chunks").fetchone()[0] <= 48

        with pytest.raises(_Interrupt):
            reindex.run(col, str(embed_model_path), _StopAfter(3))
        switched = col.record
        target = reindex.load_job(col).target
        assert reindex.abort(col) is True
        assert reindex.load_job(col) is None and col.status()["reindex"] is None
        assert col.store.collection_meta(col.name) is not None and col.record == switched
        assert reindex.raw_store(col.store).collection_meta(target) is None  # the half-built vectors are gone
        assert col.search("rivers over seasons", k=1).hits
        expected = col.search("rivers over seasons", k=1, mode="dense").hits[0]

    # A reindexed collection (vectors in a renamed store collection) backs up and restores like any other.
    backup(load_settings(), tmp_path / "bk")
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "restored"))
    restore(load_settings(), tmp_path / "bk")
    with open_collection() as col:
        got = col.search("rivers over seasons", k=1, mode="dense").hits[0]
        assert (got.path, got.score) == (expected.path, pytest.approx(expected.score, abs=1e-6))


def test_reindex_embedded_qdrant_and_cli(tmp_path, embed_model_path, embed_model_alt_path):
    corpus = write_corpus(tmp_path / "corpus")
    env = {**os.environ}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env)

    assert cli("index", str(corpus), "-c", "q", "--store", "qdrant", "--model", str(embed_model_path)).returncode == 0
    switched = cli("reindex", "-c", "q", "--model", str(embed_model_alt_path), "--json")
    assert switched.returncode == 0, switched.stderr
    result = json.loads(switched.stdout)
    assert result["switched"] and result["first_pass"]["files_indexed"] == 5
    status = json.loads(cli("status", "-c", "q", "--json").stdout)
    assert status["model"] == result["model"] and status["points"] == status["chunks"]
    found = cli("search", "saturn rings", "-c", "q", "--json", "-k", "1")
    assert found.returncode == 0 and json.loads(found.stdout)["hits"][0]["path"].endswith("planets.txt")
    same = cli("reindex", "-c", "q", "--model", str(embed_model_alt_path))
    assert same.returncode == 1 and "nothing to do" in same.stderr
    missing = cli("reindex", "-c", "q")
    assert missing.returncode == 1 and "--model" in missing.stderr


def test_http_server_keeps_answering_across_a_switch(tmp_path, embed_model_path, embed_model_alt_path):
    """`indexer serve` (real HTTP on loopback) configured with the old model answers every query during and after
    the reindex; its long-lived collection follows the switch on its own."""
    import threading

    from tests.server.conftest import index_corpus, make_settings, start_server
    from tests.server.conftest import write_corpus as write_server_corpus

    root = write_server_corpus(tmp_path / "corpus").resolve()
    settings = make_settings(tmp_path / "data", embed_model_path, None)
    index_corpus(settings, root)
    handle = start_server(settings, root, watch=False)
    answers: list[tuple[int, float | None]] = []
    stop = threading.Event()

    def loop() -> None:
        with handle.client() as client:
            while not stop.is_set():
                r = client.post("/search", json={"query": "how do I rotate the API keys?", "k": 1, "mode": "dense"})
                answers.append((r.status_code, r.json()["hits"][0]["score"] if r.status_code == 200 else None))

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        _wait_for(lambda: len(answers) >= 3, "the first answers")
        with open_collection(settings=settings) as col:
            reindex.run(col, str(embed_model_alt_path))
            expected = col.search("how do I rotate the API keys?", k=1, mode="dense").hits[0].score
        at_switch = len(answers)
        _wait_for(lambda: len(answers) >= at_switch + 3, "answers after the switch")
    finally:
        stop.set()
        worker.join(timeout=120)
        handle.stop()
    assert all(code == 200 for code, _ in answers), [a for a in answers if a[0] != 200][:3]
    assert answers[0][1] != pytest.approx(expected, abs=1e-6)  # the old vectors answered first
    assert answers[-1][1] == pytest.approx(expected, abs=1e-6)  # the new ones at the end
