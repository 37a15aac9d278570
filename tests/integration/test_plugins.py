"""A third-party reader and store, registered only through entry points, used end to end with the real model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import indexer
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow


def test_third_party_reader_and_store_are_used_end_to_end(tmp_path: Path, embed_model_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "birds.tiny").write_text(
        "; internal note: the quarterly budget spreadsheet is overdue\n"
        "Swallows migrate south in autumn, flying thousands of kilometres to warmer winters.\n"
    )
    with indexer.open_collection("plug", store="tiny") as col:
        report = col.index([corpus])
        assert report.failed == [] and report.files_indexed == 6
        status = col.status()
        assert status["store"] == "tiny" and status["points"] == status["chunks"] == report.points_upserted
        assert status["store_options"] == {"path": "tiny/plug"}  # its defaults, recorded relative to the data dir
        data_dir = Path(col.settings.data_dir)

    # The store plugin wrote its own files where its default_options put them (inside the data directory).
    stored = json.loads((data_dir / "tiny" / "plug" / "plug.json").read_text())
    assert len(stored["points"]) == report.points_upserted
    assert stored["meta"]["indexer.normalization"] == "l2"

    with indexer.open_collection("plug") as col:  # reopened from the state alone: no store setting given
        hit = col.search("birds flying to warmer places in winter").hits[0]
        assert os.path.basename(hit.path) == "birds.tiny"
        assert "Swallows" in hit.text and "budget" not in hit.text  # the tiny reader dropped the comment line
        only_tiny = col.search("bread", file_types=("tiny",))
        assert [os.path.basename(h.path) for h in only_tiny.hits] == ["birds.tiny"]
        (corpus / "birds.tiny").unlink()
        assert col.sync().files_removed == 1
        assert col.status()["points"] == col.status()["chunks"]
