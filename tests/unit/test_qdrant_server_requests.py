"""The requests the Qdrant server store sends for the cluster options, as they leave qdrant-client: its real REST
layer (models serialized, middleware run) with the HTTP transport swapped for a recorder that answers as a Qdrant
server would (no server runs here; tests/integration/test_qdrant_server_options.py runs the same against
QDRANT_URL). Bodies are read back through qdrant-client's models:

- a reindexed collection's live vectors: the alias ``<name>__live``, switched by one aliases request;
- ``qdrant_route_affinity``: ``X-Qdrant-Route-Affinity`` on every request (a fixed value, or each HTTP caller's);
- ``qdrant_shard_key``: collections created with ``sharding_method=custom``, a shard key made before its first
  write, every write with its key (its root's, or the tenant's), a tenant's every read with its key.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from qdrant_client import models as qm

from indexer.core import caller
from indexer.errors import ConfigError, InputError
from indexer.settings import Settings
from indexer.types import Filter, Metric, Point
from plugins.qdrant.client_fields import AFFINITY, route_affinity_of
from plugins.qdrant.client_store import QdrantStore
from plugins.qdrant.edge import EdgeStore
from plugins.qdrant.sharding import ShardedClient, ShardKeys


def _info(custom: bool) -> dict[str, Any]:
    info = qm.CollectionInfo(
        status=qm.CollectionStatus.GREEN, optimizer_status=qm.OptimizersStatusOneOf.OK, segments_count=1,
        config=qm.CollectionConfig(
            params=qm.CollectionParams(vectors=qm.VectorParams(size=2, distance=qm.Distance.COSINE),
                                       sharding_method=qm.ShardingMethod.CUSTOM if custom else None),
            hnsw_config=qm.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
            optimizer_config=qm.OptimizersConfig(default_segment_number=0, flush_interval_sec=5),
            metadata={"metric": "cosine", "indexer.model_id": "m"}),
        payload_schema={})
    return json.loads(info.model_dump_json(exclude_none=True))


class FakeQdrant:
    """Answers qdrant-client's REST requests as a Qdrant server would, recording each (method, path, headers, body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, httpx.Headers, Any]] = []
        self.collections: dict[str, bool] = {}  # name -> custom-sharded
        self.aliases: dict[str, str] = {}
        self.shard_keys: set[tuple[str, str]] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path, method = request.url.path, request.method
        self.requests.append((method, path, request.headers, body))
        done = {"operation_id": 1, "status": "completed"}
        routes: list[tuple[str, str, Any]] = [
            ("GET", r"/aliases", lambda m: {"aliases": [{"alias_name": a, "collection_name": c}
                                                        for a, c in self.aliases.items()]}),
            ("POST", r"/collections/aliases", lambda m: self._aliases(body)),
            ("GET", r"/collections/([^/]+)/exists", lambda m: {"exists": m[1] in self.collections}),
            ("PUT", r"/collections/([^/]+)/index", lambda m: done),
            ("PUT", r"/collections/([^/]+)/shards", lambda m: self._shard_key(m[1], body)),
            ("POST", r"/collections/([^/]+)/shards/delete", lambda m: True),
            ("PUT", r"/collections/([^/]+)/points", lambda m: done),
            ("POST", r"/collections/([^/]+)/points/delete", lambda m: done),
            ("POST", r"/collections/([^/]+)/points/query", lambda m: {"points": []}),
            ("POST", r"/collections/([^/]+)/points/count", lambda m: {"count": 0}),
            ("POST", r"/collections/([^/]+)/points/scroll", lambda m: {"points": [], "next_page_offset": None}),
            ("POST", r"/collections/([^/]+)/facet", lambda m: {"hits": []}),
            ("PUT", r"/collections/([^/]+)", lambda m: self._create(m[1], body)),
            ("GET", r"/collections/([^/]+)", lambda m: _info(self.collections[m[1]])),
        ]
        for verb, pattern, answer in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                return httpx.Response(200, json={"result": answer(match), "status": "ok", "time": 0.0})
        return httpx.Response(404, json={"status": {"error": f"no route {method} {path}"}, "time": 0.0})

    def _create(self, name: str, body: Any) -> bool:
        self.collections[name] = body.get("sharding_method") == "custom"
        return True

    def _shard_key(self, name: str, body: Any) -> bool:
        self.shard_keys.add((name, str(body["shard_key"])))
        return True

    def _aliases(self, body: Any) -> bool:
        for action in body["actions"]:
            if "delete_alias" in action:
                self.aliases.pop(action["delete_alias"]["alias_name"])
            else:
                made = action["create_alias"]
                self.aliases[made["alias_name"]] = made["collection_name"]
        return True

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for m, p, _, b in self.requests if m == method and p == path]


def _store(fake: FakeQdrant, **options: Any) -> QdrantStore:
    store = QdrantStore(url="http://qdrant.test:6333", retries=1, **options)
    client = store.client._client if isinstance(store.client, ShardedClient) else store.client
    client._client.openapi_client.client._client._transport = httpx.MockTransport(fake)  # type: ignore[attr-defined]
    return store


def _points(*roots: str) -> list[Point]:
    return [Point(str(uuid.UUID(int=i + 1)), np.array([1.0, 0.0], dtype=np.float32),
                  {"path": f"{root}/f{i}.md", "root": root, "text": f"chunk {i}"}) for i, root in enumerate(roots)]


# -- the live vectors of a reindexed collection ------------------------------------------------------------------
def test_the_live_alias_is_made_then_switched_in_one_atomic_request():
    fake = FakeQdrant()
    store = _store(fake)
    assert store.live_vectors("docs") is None
    store.set_live_vectors("docs", "docs__1")
    store.set_live_vectors("docs", "docs__2")
    first, second = (qm.ChangeAliasesOperation.model_validate(b) for b in fake.bodies("POST", "/collections/aliases"))
    assert [type(a) for a in first.actions] == [qm.CreateAliasOperation]
    assert first.actions[0].create_alias.alias_name == "docs__live"  # type: ignore[union-attr]
    assert [type(a) for a in second.actions] == [qm.DeleteAliasOperation, qm.CreateAliasOperation]
    assert second.actions[1].create_alias.collection_name == "docs__2"  # type: ignore[union-attr]
    assert store.live_vectors("docs") == "docs__2" and store.live_vectors("other") is None
    store.close()


# -- X-Qdrant-Route-Affinity ------------------------------------------------------------------------------------
def test_a_fixed_route_affinity_goes_with_every_request():
    fake = FakeQdrant()
    store = _store(fake, route_affinity="worker-1")
    store._dims["c"] = (2, Metric.COSINE)
    store.search("c", np.array([1.0, 0.0], dtype=np.float32), 3)
    store.count_where("c", Filter(committed=True))
    store.facet("c", "file_type", None, 5)
    store.payloads_where("c", None, 4)
    assert len(fake.requests) == 4 and all(h.get(AFFINITY) == "worker-1" for _, _, h, _ in fake.requests)
    store.close()


def test_caller_affinity_is_each_callers_and_absent_outside_a_request():
    fake = FakeQdrant()
    store = _store(fake, route_affinity="caller")
    store._dims["c"] = (2, Metric.COSINE)
    vector = np.array([1.0, 0.0], dtype=np.float32)
    with caller.calling("alice"):
        store.search("c", vector, 3)
    with caller.calling("10.0.0.7"):
        store.count_where("c", None)
    store.search("c", vector, 3)  # the CLI, a watcher: no caller
    assert [h.get(AFFINITY) for _, _, h, _ in fake.requests] == ["alice", "10.0.0.7", None]
    store.close()


def test_the_route_affinity_setting_is_checked_and_embedded_qdrant_ignores_it(tmp_path):
    assert route_affinity_of(None) is None and route_affinity_of(" ") is None
    assert route_affinity_of("caller") == "caller"
    with pytest.raises(ConfigError, match="not 'caller' or a header value"):
        route_affinity_of("caf\u00e9\n")
    settings = Settings(data_dir=tmp_path, qdrant_route_affinity="caller")
    embedded = QdrantStore.from_options({"path": str(tmp_path / "q")}, Metric.COSINE, settings)
    assert isinstance(embedded, EdgeStore) and not hasattr(embedded, "route_affinity")
    embedded.close()


def test_the_http_server_marks_each_request_with_its_caller_and_the_mark_reaches_the_model_thread():
    from indexer.server.app import CallerMiddleware
    from indexer.server.worker import ModelWorker

    seen: list[str | None] = []
    pool = ModelWorker()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(await pool.run(caller.current))

    async def call(headers: list[tuple[bytes, bytes]]) -> None:
        await CallerMiddleware(app)({"type": "http", "headers": headers, "client": ("192.0.2.5", 4000)}, None, None)

    try:
        asyncio.run(call([(b"x-qdrant-route-affinity", b"session-42")]))
        asyncio.run(call([]))
        asyncio.run(call([(b"x-qdrant-route-affinity", "caf\u00e9".encode("latin-1"))]))  # not ASCII: the address
    finally:
        pool.close()
    assert seen == ["session-42", "192.0.2.5", "192.0.2.5"] and caller.current() is None


# -- custom sharding in create mode ------------------------------------------------------------------------------
def test_a_shard_key_per_root_creates_custom_sharded_collections_and_keys_each_write():
    fake = FakeQdrant()
    store = _store(fake, shard_key="root", shard_number=2)
    store.ensure_collection("c", 2, {"indexer.model_id": "m"})
    created = qm.CreateCollection.model_validate(fake.bodies("PUT", "/collections/c")[0])
    assert created.sharding_method == qm.ShardingMethod.CUSTOM and created.shard_number == 2
    store.upsert("c", _points("/r1", "/r2", "/r1"))
    store.upsert("c", _points("/r2"))
    keys = [qm.CreateShardingKey.model_validate(b).shard_key for b in fake.bodies("PUT", "/collections/c/shards")]
    assert keys == ["/r1", "/r2"]  # each made once, before its first write
    writes = [qm.PointsList.model_validate(b) for b in fake.bodies("PUT", "/collections/c/points")]
    assert [(w.shard_key, len(w.points)) for w in writes] == [("/r1", 2), ("/r2", 1), ("/r2", 1)]
    store.search("c", np.array([1.0, 0.0], dtype=np.float32), 3)
    query = qm.QueryRequest.model_validate(fake.bodies("POST", "/collections/c/points/query")[0])
    assert query.shard_key is None  # a search asks every shard
    store.close()


def test_a_tenant_key_goes_with_every_write_and_every_read_of_its_points():
    fake = FakeQdrant()
    store = _store(fake, shard_key="tenant:acme")
    store.ensure_collection("c", 2, {"indexer.model_id": "m"})
    store.upsert("c", _points("/r1", "/r2"))
    store.search("c", np.array([1.0, 0.0], dtype=np.float32), 3)
    store.count_where("c", None)
    store.facet("c", "file_type", None, 5)
    store.payloads_where("c", None, 2)
    store.delete("c", [str(uuid.UUID(int=1))])
    assert fake.shard_keys == {("c", "acme")}
    assert [qm.PointsList.model_validate(b).shard_key for b in fake.bodies("PUT", "/collections/c/points")] == ["acme"]
    read = {"query": qm.QueryRequest, "count": qm.CountRequest, "scroll": qm.ScrollRequest, "facet": qm.FacetRequest}
    for kind, model in read.items():
        path = f"/collections/c/{'facet' if kind == 'facet' else 'points/' + kind}"
        assert [model.model_validate(b).shard_key for b in fake.bodies("POST", path)] == ["acme"], kind
    deleted = fake.bodies("POST", "/collections/c/points/delete")
    assert [qm.PointIdsList.model_validate(b).shard_key for b in deleted] == ["acme"]
    store.close()


def test_a_collection_made_before_the_setting_is_written_without_keys_and_the_meta_companion_never_keyed():
    fake = FakeQdrant()
    fake.collections["old"] = False  # auto-sharded
    store = _store(fake, shard_key="tenant:acme")
    store.upsert("old", _points("/r1"))
    store.count_where("old", None)
    assert qm.PointsList.model_validate(fake.bodies("PUT", "/collections/old/points")[0]).shard_key is None
    assert qm.CountRequest.model_validate(fake.bodies("POST", "/collections/old/points/count")[0]).shard_key is None
    assert not fake.shard_keys
    store.client.create_collection("old__indexer_meta", vectors_config=qm.VectorParams(size=1,
                                                                                        distance=qm.Distance.DOT))
    assert fake.collections["old__indexer_meta"] is False
    store.close()


def test_the_shard_key_setting_is_checked():
    assert ShardKeys.parse(None) is None and ShardKeys.parse("root") == ShardKeys()
    assert ShardKeys.parse("tenant: acme ") == ShardKeys(tenant="acme")
    for bad in ("tenant:", "roots", "field:x"):
        with pytest.raises(ConfigError, match="is not 'root'"):
            ShardKeys.parse(bad)
    with pytest.raises(Exception, match="no 'root' payload"):
        ShardKeys().key({"path": "/x"}, "c")


def test_a_tenants_drop_removes_its_shard_key_and_leaves_the_shared_collection():
    fake = FakeQdrant()
    store = _store(fake, shard_key="tenant:acme")
    store.ensure_collection("c", 2, {"indexer.model_id": "m"})
    store.upsert("c", _points("/r1"))
    fake.collections["c__indexer_meta"] = False
    store.drop("c")
    bodies = fake.bodies("POST", "/collections/c/shards/delete")
    dropped = [qm.DropShardingKey.model_validate(b).shard_key for b in bodies]
    assert dropped == ["acme"] and not [r for r in fake.requests if r[0] == "DELETE"]  # no collection deleted
    store.close()


def test_a_collection_shared_by_tenants_is_not_reindexed():
    from indexer.collection.reindex import refuse_shared
    from indexer.core.normalization import Normalization
    from indexer.state.database import CollectionRecord

    rec = CollectionRecord(name="c", store="qdrant", store_options={"url": "http://q:6333"}, metric="cosine",
                           model_id="m", model_path="/m.gguf", normalization=Normalization.parse("l2"), dimensions=2)
    refuse_shared(Settings(qdrant_shard_key="root"), rec)  # a shard key per root: reindexed as any collection
    with pytest.raises(InputError, match="shared by tenants.*index into a new collection name"):
        refuse_shared(Settings(qdrant_shard_key="tenant:acme"), rec)
