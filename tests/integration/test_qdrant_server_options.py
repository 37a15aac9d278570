"""The Qdrant cluster options against a real Qdrant server (>= 1.19): run with QDRANT_URL set (skipped otherwise; no
server can be installed where this was written: tests/unit/test_qdrant_server_requests.py holds the same requests
to qdrant-client's models there).

- ``qdrant_shard_key=root``: the collection is created custom-sharded, a shard key per root, and searched whole;
- ``qdrant_shard_key=tenant:NAME``: two writers share one collection, each sees only its own points, one's
  orphan sweep never deletes the other's, and one's drop removes its shard key only;
- a reindexed collection: a stateless worker finds it through the ``<name>__live`` alias;
- ``qdrant_route_affinity``: the server takes the header on a worker's searches.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

import indexer
from indexer.collection.facade import open_reader
from indexer.settings import Settings

URL = os.environ.get("QDRANT_URL")
pytestmark = [pytest.mark.slow, pytest.mark.qdrant_server,
              pytest.mark.skipif(not URL, reason="QDRANT_URL is not set (no Qdrant server to test)")]


def _folder(root: Path, topic: str, n: int = 4) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"{topic}-{i}.md").write_text(f"# {topic} {i}\n\nNotes about {topic}, part {i}.\n")
    return root


def _settings(data: Path, **extra: object) -> Settings:
    return Settings(data_dir=data, store="qdrant", qdrant_url=URL, qdrant_api_key=os.environ.get("QDRANT_API_KEY"),
                    **extra)


def _client():
    from qdrant_client import QdrantClient

    return QdrantClient(url=URL, api_key=os.environ.get("QDRANT_API_KEY"), check_compatibility=False)


def test_a_shard_key_per_root(tmp_path):
    from qdrant_client import models as qm

    name = f"t{uuid.uuid4().hex[:10]}"
    a, b = _folder(tmp_path / "a", "tomatoes"), _folder(tmp_path / "b", "saturn")
    with indexer.open_collection(name, settings=_settings(tmp_path / "data", qdrant_shard_key="root")) as col:
        try:
            assert col.index([a, b]).failed == []
            info = _client().get_collection(name)
            assert info.config.params.sharding_method == qm.ShardingMethod.CUSTOM
            hits = col.search("notes about saturn", k=8, rerank=False).hits
            assert {Path(h.path).parent for h in hits} == {a, b}  # every shard searched
            assert col.status()["points"] == col.status()["chunks"]
        finally:
            col.drop()


def test_tenants_share_a_collection_and_never_see_or_delete_each_others_points(tmp_path):
    name = f"t{uuid.uuid4().hex[:10]}"
    a, b = _folder(tmp_path / "a", "tomatoes"), _folder(tmp_path / "b", "saturn")
    acme = _settings(tmp_path / "acme", qdrant_shard_key="tenant:acme")
    umbrella = _settings(tmp_path / "umbrella", qdrant_shard_key="tenant:umbrella")
    with indexer.open_collection(name, settings=acme) as first, \
            indexer.open_collection(name, settings=umbrella) as other:
        try:
            first.index([a])
            other.index([b])
            first.index([a])  # its orphan sweep lists its own shard only
            assert {Path(h.path).parent for h in first.search("notes", k=20, rerank=False).hits} == {a}
            assert {Path(h.path).parent for h in other.search("notes", k=20, rerank=False).hits} == {b}
            for col in (first, other):
                assert col.status()["points"] == col.status()["chunks"]  # each counts its own shard
            first.drop()  # its shard key goes; the collection and the other tenant's points stay
            assert {Path(h.path).parent for h in other.search("notes", k=20, rerank=False).hits} == {b}
        finally:
            _client().delete_collection(name)
            _client().delete_collection(name + "__indexer_meta")


def test_a_worker_finds_a_reindexed_collection_by_its_live_alias_with_route_affinity(
        tmp_path, embed_model_path, embed_model_alt_path):
    from indexer.collection import reindex, stateless

    name = f"t{uuid.uuid4().hex[:10]}"
    folder = _folder(tmp_path / "a", "tomatoes", 6)
    with indexer.open_collection(name, settings=_settings(tmp_path / "data", embed_model=str(embed_model_path))) as col:
        col.index([folder])
        reindex.run(col, str(embed_model_alt_path))
        expected = [h.chunk_id for h in col.search("tomatoes part 3", k=5, rerank=False).hits]
        aliases = {a.alias_name: a.collection_name for a in _client().get_aliases().aliases}
        assert aliases[name + "__live"] == col.record.store_options["vectors"]
        try:
            empty = tmp_path / "worker"
            empty.mkdir()
            worker = _settings(empty, stateless=True, embed_model=str(embed_model_alt_path),
                               qdrant_route_affinity="caller", qdrant_read_consistency="majority")
            stateless._RECORDS.clear()
            reader = open_reader(name, worker)
            try:
                from indexer.core import caller

                with caller.calling("test-caller"):
                    got = [h.chunk_id for h in reader.search("tomatoes part 3", k=5, rerank=False).hits]
                assert got == expected
            finally:
                reader.close()
                stateless._RECORDS.clear()
            assert list(empty.iterdir()) == []
        finally:
            col.drop()
