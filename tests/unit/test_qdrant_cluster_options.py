"""Qdrant's cluster options, as the requests qdrant-client sends (its REST models, captured where qdrant-client
hands them to its HTTP layer; no server runs here):

- an attachment to a custom-sharded collection (LlamaIndex's QdrantVectorStore makes them) writes with the shard
  key its rule gives (a constant, or a payload field), and without a rule refuses before sending anything, naming
  the fix;
- ``qdrant_read_consistency`` goes with every search and payload read of the server store.
"""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from indexer.errors import ConfigError, StoreError
from indexer.types import Metric, Point
from plugins.qdrant.client_fields import read_consistency_of
from plugins.qdrant.client_store import QdrantStore
from plugins.qdrant_attach.attached_store import AttachedStore
from plugins.qdrant_attach.sharding import ShardKeyRule, custom_sharded

LAYOUT = {"kind": "llamaindex", "text_field": "text", "metadata_field": "", "source_field": "file_path"}


class Captured:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, result: Any) -> Any:
        def record(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return result
        return record


def _client(captured: Captured) -> QdrantClient:
    client = QdrantClient(url="http://127.0.0.1:9", check_compatibility=False)
    api = client._client.openapi_client  # type: ignore[attr-defined]
    done = type("Answer", (), {"result": qm.UpdateResult(operation_id=1, status=qm.UpdateStatus.COMPLETED)})()
    api.points_api.upsert_points = captured("upsert", done)
    api.points_api.delete_points = captured("delete", done)
    return client


def _store(captured: Captured, shard_key: str | None, sharded: bool = True) -> AttachedStore:
    store = AttachedStore(collection="theirs", vector="", layout=LAYOUT, marker="qdrant.theirs",
                          url="http://127.0.0.1:9", client=_client(captured), shard_key=shard_key,
                          meta={"dimensions": "2"})
    store._checked, store.sharded = True, sharded  # as _check finds them (a server's collection info)
    store._refuse_foreign = lambda ids: None  # type: ignore[method-assign]
    return store


def _points(*metas: dict[str, Any]) -> list[Point]:
    import uuid

    return [Point(str(uuid.UUID(int=i + 1)), [1.0, 0.0], {"text": f"chunk {i}", "path": f"/n/{i}.md",
                                                         "metadata": m}) for i, m in enumerate(metas)]


def test_a_constant_rule_puts_the_key_on_every_write():
    captured = Captured()
    _store(captured, "tenant-a").upsert("qdrant.theirs", _points({}, {}))
    (name, kwargs), = captured.calls
    body = kwargs["point_insert_operations"]
    assert name == "upsert" and isinstance(body, qm.PointsList)
    assert body.shard_key == "tenant-a" and len(body.points) == 2
    assert qm.PointsList.model_validate(body.model_dump()).shard_key == "tenant-a"  # the model holds the key


def test_a_field_rule_groups_the_points_by_their_payloads_value():
    captured = Captured()
    store = _store(captured, "field:file_path")
    store.upsert("qdrant.theirs", _points({}, {}, {}))
    keys = sorted(kwargs["point_insert_operations"].shard_key for _, kwargs in captured.calls)
    assert keys == ["/n/0.md", "/n/1.md", "/n/2.md"]


def test_without_a_rule_a_custom_sharded_collection_is_refused_naming_the_fix():
    captured = Captured()
    with pytest.raises(StoreError, match=r"custom-sharded.*--shard-key NAME.*--shard-key field:PATH"):
        _store(captured, None).upsert("qdrant.theirs", _points({}))
    assert captured.calls == []  # nothing was sent


def test_an_auto_sharded_collection_names_no_key():
    captured = Captured()
    _store(captured, "tenant-a", sharded=False).upsert("qdrant.theirs", _points({}))
    assert captured.calls[0][1]["point_insert_operations"].shard_key is None


def test_the_rule_reads_a_payload_field_or_refuses_a_point_without_it():
    assert ShardKeyRule.parse("t1") == ShardKeyRule(constant="t1") and ShardKeyRule.parse(" ") is None
    rule = ShardKeyRule.parse("field:metadata.tenant")
    assert rule is not None and rule.key({"metadata": {"tenant": "blue"}}, "c") == "blue"
    with pytest.raises(StoreError, match="no value at 'metadata.tenant'"):
        rule.key({"metadata": {}}, "c")
    with pytest.raises(ConfigError, match="names no payload field"):
        ShardKeyRule.parse("field:")


def test_custom_sharding_is_read_from_the_collections_info():
    info = qm.CollectionInfo.model_construct(config=qm.CollectionConfig.model_construct(
        params=qm.CollectionParams.model_construct(sharding_method=qm.ShardingMethod.CUSTOM)))
    assert custom_sharded(info)
    info.config.params.sharding_method = qm.ShardingMethod.AUTO
    assert not custom_sharded(info)


def test_read_consistency_goes_with_every_search_of_the_server_store():
    assert read_consistency_of("majority") == qm.ReadConsistencyType.MAJORITY
    assert read_consistency_of("2") == 2 and read_consistency_of(None) is None
    with pytest.raises(ConfigError, match="not majority, quorum, all or a number"):
        read_consistency_of("most")
    store = QdrantStore(url="http://127.0.0.1:9", read_consistency="majority")
    store._shape = lambda collection: (2, Metric.COSINE)  # type: ignore[method-assign]
    seen: list[Any] = []

    def query_points(collection: str, **kwargs: Any) -> Any:
        seen.append(kwargs["consistency"])
        return type("Found", (), {"points": []})()

    store.client.query_points = query_points  # type: ignore[method-assign]
    store.search("c", __import__("numpy").array([1.0, 0.0], dtype="float32"), 3)
    assert seen == [qm.ReadConsistencyType.MAJORITY]
    store.close()
