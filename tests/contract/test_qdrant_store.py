"""Qdrant-specific behaviour beyond the shared contract: folder lock, unreachable server, paging."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import plugins.qdrant.client_store as qdrant_store
from indexer.errors import ConfigError, StoreError, StoreUnavailableError
from indexer.types import Metric, Point
from plugins.qdrant import QdrantStore


def test_exactly_one_of_url_and_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        QdrantStore()
    with pytest.raises(ConfigError, match="exactly one"):
        QdrantStore(url="http://localhost:6333", path=tmp_path)


def test_second_process_on_an_embedded_folder_gets_a_clear_error(tmp_path: Path) -> None:
    store = QdrantStore(path=tmp_path / "q")
    store.ensure_collection("c", 4, {})
    try:
        code = (
            "import sys\n"
            "from plugins.qdrant import QdrantStore\n"
            "from indexer.errors import StoreError\n"
            "try:\n"
            f"    QdrantStore(path={str(tmp_path / 'q')!r})\n"
            "except StoreError as exc:\n"
            "    print(exc)\n"
            "    sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "another process holds" in proc.stdout
        assert "Qdrant server" in proc.stdout and "FAISS" in proc.stdout
    finally:
        store.close()
    QdrantStore(path=tmp_path / "q").close()  # released on close


def test_unreachable_server_raises_store_unavailable_after_retries() -> None:
    store = QdrantStore(url="http://127.0.0.1:9", retries=3, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="after 3 tries"):
        store.collection_meta("c")
    assert time.monotonic() - started >= 0.2 + 0.4  # backed off between tries
    store.close()


def test_store_errors_are_translated(tmp_path: Path) -> None:
    store = QdrantStore(path=tmp_path / "q")
    try:
        with pytest.raises(StoreError, match="does not exist"):
            store.count("missing")
    finally:
        store.close()


def test_list_ids_pages_through_every_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qdrant_store, "LIST_PAGE", 7)
    store = QdrantStore(path=tmp_path / "q", metric=Metric.DOT)
    try:
        store.ensure_collection("c", 4, {})
        rng = np.random.default_rng(0)
        points = [Point(str(uuid.uuid4()), rng.normal(size=4), {}) for _ in range(30)]
        store.upsert("c", points)
        assert store.list_ids("c") == {p.id for p in points}
    finally:
        store.close()
