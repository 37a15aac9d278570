"""Under `indexer serve`, hostile files landing beside an edit do not slow it down: with a failing PNG, a PDF
holding one 20,000 x 20,000 image and a billion-laughs .docx dropped into the watched folder just before each
edit (fresh copies each time), every edit is searchable quickly. The goal is 1 s at p95 (bench/
hostile_freshness.py measures it); this test's bound is looser (3 s) for a busy shared machine. Meanwhile the
server process's RSS stays within its idle RSS plus the documented margin (docs/benchmarks.md: 100 MB; 200 MB
here) and each parse worker's within ``parse_memory_mb``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.documents import hostile_files
from tests.server.conftest import index_corpus, make_settings, start_server, wait_for, write_corpus

pytestmark = pytest.mark.slow

EDITS = 6
BOUND_S = 3.0
MARGIN_MB = 200


def _rss_mb(pid: int | str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class _Peaks:
    """The peak RSS of this process (the server) and of its child processes (the parse workers), every 50 ms."""

    def __init__(self) -> None:
        self.main = self.worker = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(0.05):
            self.main = max(self.main, _rss_mb(me))
            for task in Path(f"/proc/{me}/task").iterdir():
                try:
                    children = (task / "children").read_text().split()
                except OSError:
                    continue
                for child in children:
                    self.worker = max(self.worker, _rss_mb(child))


def test_an_edit_beside_hostile_files_is_searchable_quickly(isolated_env: Path, embed_model_path: Path) -> None:
    root = write_corpus(isolated_env / "hostile-root").resolve()
    settings = make_settings(isolated_env / "hostile-data", embed_model_path, None)
    index_corpus(settings, root)
    hostile = hostile_files(isolated_env)
    (root / "drop").mkdir()
    target = root / "notes" / "edited.md"
    handle = start_server(settings, root, mcp=False, watch=True)
    try:
        def watch() -> dict:
            with handle.client() as c:
                return c.get("/status").json()["collections"][0].get("watch") or {}

        wait_for(lambda: watch().get("state") == "idle", 120, "the reconciliation scan")
        samples = []
        idle_mb = _rss_mb(os.getpid())
        peaks = _Peaks()
        with handle.client() as c:
            for i in range(EDITS):
                for ext, data in hostile.items():
                    (root / "drop" / f"h{i}.{ext}").write_bytes(data)
                marker = f"zqmarker{i}"
                started = time.monotonic()
                target.write_text(f"# Edited\n\nThe marker {marker} was written in edit {i}.\n")
                body = {"query": marker, "k": 1, "rerank": False, "mode": "lexical", "path_prefix": str(target)}
                while True:
                    hits = c.post("/search", json=body).json()["hits"]
                    if hits and marker in hits[0]["text"]:
                        break
                    assert time.monotonic() - started < 60, f"edit {i} not searchable after 60 s"
                    time.sleep(0.01)
                samples.append(time.monotonic() - started)
                time.sleep(0.3)
        peaks.stop.set()
        peaks.thread.join(5)
        assert peaks.main < idle_mb + MARGIN_MB, (idle_mb, peaks.main)
        assert 0 < peaks.worker < settings.parse_memory_mb, peaks.worker
        samples.sort()
        p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
        assert p95 < BOUND_S, f"edits beside hostile files: {[round(s, 2) for s in samples]} s"
        # the hostile files were refused (failed or skipped): nothing of them is searchable
        wait_for(lambda: watch().get("state") == "idle", 120, "the hostile files")
        with handle.client() as c:
            body = {"query": "lol closing words", "k": 5, "rerank": False, "path_prefix": str(root / "drop")}
            assert c.post("/search", json=body).json()["hits"] == []
    finally:
        handle.stop()

