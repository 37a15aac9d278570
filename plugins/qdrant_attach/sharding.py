"""Custom-sharded foreign collections: which shard key our writes carry.

LlamaIndex's ``QdrantVectorStore`` (and anyone using ``sharding_method=custom``) creates collections whose writes
must name a shard key: without one Qdrant answers HTTP 400 "Shard key not specified". An attachment to such a
collection writes with a key rule the user gives (``indexer qdrant index ... --shard-key RULE``, store option
``shard_key``):

* ``NAME``: every point of ours goes to shard key ``NAME`` (a tenant's, say);
* ``field:PATH``: each point's key is the value at the dotted ``PATH`` of the payload as written in their layout
  (``field:metadata.file_type``); a point without it is refused, naming the field.

Without a rule, a write to a custom-sharded collection is refused before anything is sent, naming the fix.
Reads (searches, counts) name no key: Qdrant then searches every shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from qdrant_client import models as qm

from indexer.plugin_api import ConfigError, StoreError
from plugins.qdrant_attach.layout import get_path

T = TypeVar("T")
FIELD = "field:"


@dataclass(frozen=True)
class ShardKeyRule:
    """A shard key for each point we write: one ``constant``, or the value at payload ``field``."""

    constant: str | None = None
    field: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> ShardKeyRule | None:
        if text is None or not str(text).strip():
            return None
        text = str(text).strip()
        if text.startswith(FIELD):
            path = text[len(FIELD):].strip()
            if not path:
                raise ConfigError("shard key rule 'field:' names no payload field; write field:metadata.tenant")
            return cls(field=path)
        return cls(constant=text)

    def key(self, payload: Mapping[str, Any], collection: str) -> str:
        if self.constant is not None:
            return self.constant
        value = get_path(payload, self.field or "")
        if value is None or isinstance(value, (dict, list)) or str(value) == "":
            raise StoreError(
                f"a point for custom-sharded Qdrant collection {collection!r} has no value at {self.field!r}, which "
                f"the shard key rule field:{self.field} reads; nothing was written. Give those files that field, or "
                "use a constant key (--shard-key NAME)")
        return str(value)


def custom_sharded(info: Any) -> bool:
    """Whether a collection's info (``get_collection``) says ``sharding_method: custom``."""
    params = getattr(getattr(info, "config", None), "params", None)
    return getattr(params, "sharding_method", None) == qm.ShardingMethod.CUSTOM


def refusal(collection: str, where: str) -> StoreError:
    return StoreError(
        f"Qdrant collection {collection!r} at {where} is custom-sharded (sharding_method=custom, as LlamaIndex's "
        "QdrantVectorStore makes them): every write must name a shard key, and this attachment has no key rule. "
        "Nothing was written. Index again with --shard-key NAME (every point of ours in shard NAME) or "
        "--shard-key field:PATH (each point's key from its payload at PATH, e.g. field:metadata.tenant)")


def by_key(items: Iterable[T], payload_of: Any, rule: ShardKeyRule, collection: str) -> dict[str, list[T]]:
    """``items`` grouped by the shard key the rule gives each (in their order)."""
    out: dict[str, list[T]] = {}
    for item in items:
        out.setdefault(rule.key(payload_of(item), collection), []).append(item)
    return out
