"""Custom sharding of the collections indexer creates on a Qdrant server (setting ``qdrant_shard_key``;
docs/qdrant-plugin.md#custom-sharding):

* ``root``: a shard key per indexed root (the point's ``root`` payload): each folder's points in shards of their
  own, which a cluster can place on chosen nodes; searches name no key, so Qdrant asks every shard;
* ``tenant:NAME``: every point this writer writes goes to shard key ``NAME``, and every read of a writer or worker
  with that setting names it: tenants sharing a collection never see each other's points (nor delete them: the
  writer's orphan sweep lists its own shard only; its ``indexer drop`` removes its shard key, not the collection).
  ``indexer reindex`` is refused there: it would build a new collection of one tenant's points and drop the
  shared one.

The collection is created with ``sharding_method=custom`` (``qdrant_shard_number`` is then shards per key); a shard
key is created the first time a write needs it (one that exists already is fine). A collection created before the
setting (auto-sharded) is written and read as before, keys left out: Qdrant refuses a key there.

:class:`ShardedClient` stands in for the store's qdrant-client and adds the key to the calls that take one, so the
store's code is the same either way. The meta companion collection (``__indexer_meta``) is never sharded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from indexer.plugin_api import ConfigError, StoreError

ROOT = "root"
TENANT = "tenant:"
# qdrant-client calls that take shard_key_selector and read or change existing points
KEYED = frozenset({"query_points", "query_points_groups", "scroll", "count", "facet", "retrieve", "delete",
                   "set_payload", "delete_payload", "overwrite_payload", "update_vectors", "search_matrix_pairs"})


@dataclass(frozen=True)
class ShardKeys:
    """Which shard key a point goes to: its root's, or one tenant's."""

    tenant: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> ShardKeys | None:
        if text is None or not str(text).strip():
            return None
        text = str(text).strip()
        if text == ROOT:
            return cls()
        if text.startswith(TENANT) and text[len(TENANT):].strip():
            return cls(tenant=text[len(TENANT):].strip())
        raise ConfigError(f"qdrant_shard_key {text!r} is not 'root' (a shard key per indexed root) or 'tenant:NAME' "
                          "(every point and every search of this writer or worker in shard key NAME)")

    def key(self, payload: Any, collection: str) -> str:
        if self.tenant is not None:
            return self.tenant
        root = (payload or {}).get("root")
        if not root:
            raise StoreError(f"a point for Qdrant collection {collection!r} (qdrant_shard_key=root) has no 'root' "
                             "payload to take its shard key from; nothing was written")
        return str(root)

    @property
    def selector(self) -> str | None:
        """The key every read names (a tenant's); None: every shard."""
        return self.tenant


class ShardedClient:
    """A qdrant-client whose writes to our custom-sharded collections carry their shard key and whose reads name
    the tenant's (see the module's docstring). Anything else is the client's own."""

    def __init__(self, client: Any, keys: ShardKeys, plain_suffixes: Sequence[str] = ()) -> None:
        self._client = client
        self.keys = keys
        self._plain_suffixes = tuple(plain_suffixes)
        self._custom: dict[str, bool] = {}  # collection -> created custom-sharded
        self._made: set[tuple[str, str]] = set()  # shard keys known to exist

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if name not in KEYED or self.keys.selector is None:
            return value

        def keyed(collection_name: str, *args: Any, **kwargs: Any) -> Any:
            if "shard_key_selector" not in kwargs and self._sharded(collection_name):
                kwargs["shard_key_selector"] = self.keys.selector
            return value(collection_name, *args, **kwargs)

        return keyed

    def _plain(self, collection: str) -> bool:
        return collection.endswith(self._plain_suffixes) if self._plain_suffixes else False

    def _sharded(self, collection: str) -> bool:
        if self._plain(collection):
            return False
        if collection not in self._custom:
            info = self._client.get_collection(collection)
            params = getattr(getattr(info, "config", None), "params", None)
            self._custom[collection] = getattr(params, "sharding_method", None) == qm.ShardingMethod.CUSTOM
        return self._custom[collection]

    def create_collection(self, collection_name: str, **kwargs: Any) -> Any:
        if not self._plain(collection_name):
            kwargs["sharding_method"] = qm.ShardingMethod.CUSTOM
        done = self._client.create_collection(collection_name, **kwargs)
        self._custom[collection_name] = not self._plain(collection_name)
        return done

    def delete_collection(self, collection_name: str, *args: Any, **kwargs: Any) -> Any:
        """Dropping a collection; a tenant's drop removes its own shard key (its points) and leaves the collection
        and its meta companion to the other tenants (delete the collection with Qdrant's API once none is left)."""
        if self.keys.tenant is not None:
            if self._plain(collection_name) or not self._sharded(collection_name):
                return True  # shared: the meta companion, or a collection made before the setting
            self._made.discard((collection_name, self.keys.tenant))
            try:
                return self._client.delete_shard_key(collection_name, self.keys.tenant)
            except UnexpectedResponse as exc:
                if "not found" in str(exc).lower() or "doesn't exist" in str(exc).lower():
                    return True  # this tenant never wrote there
                raise
        self._custom.pop(collection_name, None)
        self._made = {m for m in self._made if m[0] != collection_name}
        return self._client.delete_collection(collection_name, *args, **kwargs)

    def upsert(self, collection_name: str, points: Sequence[Any], **kwargs: Any) -> Any:
        if "shard_key_selector" in kwargs or not self._sharded(collection_name):
            return self._client.upsert(collection_name, points, **kwargs)
        groups: dict[str, list[Any]] = {}
        for point in points:
            groups.setdefault(self.keys.key(point.payload, collection_name), []).append(point)
        done = None
        for key, group in groups.items():
            self._ensure_key(collection_name, key)
            done = self._client.upsert(collection_name, group, shard_key_selector=key, **kwargs)
        return done

    def _ensure_key(self, collection: str, key: str) -> None:
        if (collection, key) in self._made:
            return
        try:
            self._client.create_shard_key(collection, key)
        except UnexpectedResponse as exc:
            if "already exists" not in str(exc).lower():
                raise
        self._made.add((collection, key))


def sharded(client: Any, text: str | None, plain_suffixes: Sequence[str]) -> Any:
    """``client``, or a :class:`ShardedClient` over it when the ``qdrant_shard_key`` setting is given."""
    keys = ShardKeys.parse(text)
    return client if keys is None else ShardedClient(client, keys, plain_suffixes)


__all__: Sequence[str] = ["ROOT", "TENANT", "ShardKeys", "ShardedClient", "sharded"]
