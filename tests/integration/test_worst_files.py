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
