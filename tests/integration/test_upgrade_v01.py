"""A data directory written by release 0.1 (tests/fixtures/data-v0.1, see its README) opens with today's code,
upgrades its schema, and searches and syncs without re-embedding anything, for FAISS and embedded Qdrant."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.collection.facade import open_collection
from indexer.errors import CollectionMismatchError
from indexer.migrations import MIGRATIONS

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "data-v0.1"
OLD_DOCS = "/tmp/indexer-fixture-v0.1/docs"  # where 0.1 indexed them (absolute paths are kept by design)
RECORDED_MODEL_ID = "all-MiniLM-L6-v2-9de8e9bd11b9"


@pytest.fixture
def upgraded(tmp_path, monkeypatch, embed_model_f16_path):
    """A copy of the fixture in a new place; its model path re-pointed at this machine's model cache."""
    shutil.copytree(FIXTURE / "data", tmp_path / "data")
    shutil.copytree(FIXTURE / "docs", tmp_path / "docs")
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    db = sqlite3.connect(tmp_path / "data" / "state.sqlite")
    db.execute("UPDATE collections SET model_path=?", (str(embed_model_f16_path),))  # v0.1 embedded with f16
    db.commit()
    db.close()
    return tmp_path


def test_dry_run_lists_the_upgrade_then_opening_applies_it(upgraded):
    env = {**os.environ}
    dry = subprocess.run(
        [sys.executable, "-m", "indexer.cli", "migrate", "--dry-run", "--json"], capture_output=True, text=True, env=env
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["pending"] == [m.__name__ for m in MIGRATIONS[1:]]
    with open_collection() as col:  # opening applies the pending migrations
        assert col.state.applied_migrations() == sorted(m.__name__ for m in MIGRATIONS)
        # 0.1 recorded absolute store paths of the place it was made; the upgrade makes them data-dir relative
        assert col.record.store_options["path"] == "faiss/default"


@pytest.mark.parametrize("collection", ["default", "embedded-qdrant"])
def test_v01_collection_searches_and_syncs_without_re_embedding(upgraded, collection):
    with open_collection(collection) as col:
        status = col.status()
        assert status["files"] == 3 and status["chunks"] == 4 and status["points"] == 4
        assert status["health"]["ok"], status["health"]
        hits = col.search("when is the encryption key rotated", k=2, mode="dense").hits
        assert hits[0].path == f"{OLD_DOCS}/backup-policy.md" and (hits[0].start_line, hits[0].end_line) == (7, 10)
        assert hits[0].score == pytest.approx(0.604, abs=2e-3)  # the score 0.1 gave (fixture README)
        # The model file was rebuilt by a newer converter (another file fingerprint) from the same weights:
        # its vectors match the stored ones, so the collection keeps its identity and its vectors.
        assert col.record.model_id == RECORDED_MODEL_ID

        moved = col.index([upgraded / "docs"])  # the same files at their new place
        assert moved.files_indexed == 3 and moved.tokens_embedded == 0 and moved.chunks_reused == 4
        col.forget(OLD_DOCS)
        assert col.status()["points"] == 4
        assert col.search("tomatoes and basil", k=1).hits[0].path == str(upgraded / "docs" / "garden.md")
        again = col.sync()
        assert again.files_indexed == 0 and again.files_unchanged + again.files_touched == 3


def test_another_model_is_still_refused_after_the_upgrade(upgraded, q8_runs):
    from indexer.models import ensure_model

    other = ensure_model(quant="q8_0" if q8_runs else "bf16")  # weights whose vectors differ from the fixture's f16
    db = sqlite3.connect(upgraded / "data" / "state.sqlite")
    db.execute("UPDATE collections SET model_path=?", (str(other),))
    db.commit()
    db.close()
    with open_collection() as col, pytest.raises(CollectionMismatchError, match="indexer reindex"):
        col.search("encryption key")
