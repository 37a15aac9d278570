"""Shards and replicas of Qdrant collections come from settings (qdrant_shard_number, qdrant_replication_factor,
qdrant_write_consistency_factor) and reach create_collection. Embedded Qdrant accepts and ignores them (its
collection config reports none), so the server-bound arguments are checked where the adapter passes them."""

from __future__ import annotations

import pytest

from indexer.errors import ConfigError
from indexer.settings import load_settings
from plugins.qdrant.client_store import QdrantStore, qdrant_distribution


def test_settings_from_the_environment_reach_the_store(monkeypatch):
    monkeypatch.setenv("INDEXER_QDRANT_SHARD_NUMBER", "6")
    monkeypatch.setenv("INDEXER_QDRANT_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("INDEXER_QDRANT_WRITE_CONSISTENCY_FACTOR", "1")
    assert qdrant_distribution(load_settings()) == {
        "shard_number": 6,
        "replication_factor": 2,
        "write_consistency_factor": 1,
    }
    with pytest.raises(ConfigError, match="qdrant_shard_number"):
        load_settings(qdrant_shard_number=0)


def test_create_collection_gets_the_distribution_and_embedded_qdrant_still_works(tmp_path):
    store = QdrantStore(path=tmp_path / "q", shard_number=6, replication_factor=2, write_consistency_factor=1)
    seen: dict[str, object] = {}
    create = store.client.create_collection

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return create(*args, **kwargs)

    store.client.create_collection = spy  # type: ignore[method-assign]
    store.ensure_collection("c", 4, {"indexer.model_id": "m"})
    assert (seen["shard_number"], seen["replication_factor"], seen["write_consistency_factor"]) == (6, 2, 1)
    params = store.client.get_collection("c").config.params
    # Embedded mode has one shard and no replicas: it reports what it really has, not what was asked.
    assert params.shard_number in (None, 1) and params.replication_factor in (None, 1)
    assert store.collection_meta("c")["indexer.model_id"] == "m"
    store.close()


def test_defaults_pass_nothing_and_a_write_quorum_above_the_replicas_is_refused(tmp_path):
    store = QdrantStore(path=tmp_path / "q")
    assert store.distribution == {}
    store.close()
    with pytest.raises(ConfigError, match="write_consistency_factor=3 exceeds"):
        QdrantStore(path=tmp_path / "q2", replication_factor=2, write_consistency_factor=3)
