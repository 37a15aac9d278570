"""Documents at their worst, through the product with the real model: what a reader leaves out is reported for
that file ("partly read") and what it could read is searchable; the other files are indexed as usual."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import indexer
from tests.unit.test_mail_limits import BROKEN_BOUNDARY, UNPARSEABLE, _mbox

pytestmark = pytest.mark.slow


def test_mail_left_out_is_reported_and_the_rest_is_searchable(tmp_path, embed_model_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "broken.eml").write_bytes(BROKEN_BOUNDARY)
    _mbox(folder / "box.mbox", 3, [UNPARSEABLE])
    (folder / "note.txt").write_text("An ordinary note about the canteen menu.\n")
    with indexer.open_collection("mail") as col:
        report = col.index([folder])
        assert report.failed == [] and report.files_indexed == 3
        partial = {os.path.basename(p): reason for p, reason in report.partial}
        assert set(partial) == {"broken.eml", "box.mbox"}, partial
        assert "could not be parsed" in partial["box.mbox"] and "boundary" in partial["broken.eml"]
        hit = col.search("pump budget eastern station", k=1).hits[0]
        assert hit.path.endswith("broken.eml") and "4,200 euros" in hit.text
    shown = subprocess.run([sys.executable, "-m", "indexer.cli", "index", str(folder), "--collection", "mail2"],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "partly read:" in shown.stdout and "broken.eml" in shown.stdout


def _big_mbox(path, messages: int):  # type: ignore[no-untyped-def]
    import mailbox
    from email.message import EmailMessage

    box = mailbox.mbox(str(path))
    for i in range(messages):
        msg = EmailMessage()
        msg["Subject"] = f"Report {i}"
        msg["From"] = "ops@example.org"
        msg.set_content(f"Pump station {i} was inspected; valve {i * 7} replaced and filter {i * 3} cleaned.")
        box.add(msg)
    box.flush()
    box.close()
    return path


def test_kill_9_during_a_big_mailbox_loses_at_most_one_batch_and_duplicates_nothing(tmp_path, embed_model_path):
    import json
    import signal
    import sqlite3
    import time

    folder = tmp_path / "mail"
    folder.mkdir()
    _big_mbox(folder / "big.mbox", 1_000)
    for i in range(20):
        (folder / f"note{i}.txt").write_text(f"A small note number {i} about the canteen.\n")
    data_dir = tmp_path / "data"
    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir), "INDEXER_EMBED_BATCH_CHUNKS": "100"}
    process = subprocess.Popen([sys.executable, "-m", "indexer.cli", "index", str(folder)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    cached, deadline = 0, time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with sqlite3.connect(data_dir / "state.sqlite", timeout=1) as db:
                cached = db.execute("SELECT count(*) FROM vector_cache").fetchone()[0]
        except sqlite3.Error:
            cached = 0
        if cached >= 300:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before the kill"
    with sqlite3.connect(data_dir / "state.sqlite") as db:
        indexed = {r[0] for r in db.execute("SELECT path FROM files WHERE status='indexed'")}
    assert {os.path.basename(p) for p in indexed} >= {f"note{i}.txt" for i in range(20)}  # the neighbours first
    assert not any(p.endswith("big.mbox") for p in indexed)

    again = subprocess.run([sys.executable, "-m", "indexer.cli", "index", str(folder), "--json"], env=env,
                           capture_output=True, text=True, timeout=900)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    report = json.loads(again.stdout)
    assert report["chunks_reused"] >= cached - 20  # everything embedded before the kill (the notes not re-read)
    status = json.loads(subprocess.run([sys.executable, "-m", "indexer.cli", "status", "--json"], env=env,
                                       capture_output=True, text=True, timeout=300).stdout)  # fmt: skip
    assert status["points"] == status["chunks"] and status["health"]["store_points"] == status["chunks"]
    with sqlite3.connect(data_dir / "state.sqlite") as db:
        ids = [r[0] for r in db.execute("SELECT point_id FROM chunks")]
    assert len(ids) == len(set(ids)) == status["chunks"] >= 1_000
