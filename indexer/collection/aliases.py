"""Which store collection holds a collection's vectors: after a reindex (:mod:`indexer.collection.reindex`) the
vectors of collection ``name`` live in a store collection ``<name>__<stamp>``, recorded in the collection's
``store_options`` (``vectors``). :class:`AliasedStore` sends a store's calls for ``name`` there, so nothing above
it needs to know.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from indexer.state.database import CollectionRecord
from indexer.types import Filter, Hit, Point

if TYPE_CHECKING:
    from indexer.ports import VectorStore

VECTORS = "vectors"  # store_options key: the store collection holding a collection's vectors (default: its name)
PREVIOUS_MODEL = "reindexed_from"  # store_options key: the model path the last reindex switched away from


def vectors_name(rec: CollectionRecord) -> str:
    return str(rec.store_options.get(VECTORS) or rec.name)


class AliasedStore:
    """A VectorStore that sends calls for collection ``name`` to the store collection ``target``."""

    def __init__(self, store: VectorStore, name: str, target: str) -> None:
        self.inner = store
        self.name = store.name
        self._alias = {name: target}

    def _c(self, collection: str) -> str:
        return self._alias.get(collection, collection)

    def ensure_collection(self, collection: str, dimensions: int, meta: Mapping[str, str]) -> None:
        self.inner.ensure_collection(self._c(collection), dimensions, meta)

    def collection_meta(self, collection: str) -> dict[str, str] | None:
        return self.inner.collection_meta(self._c(collection))

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        self.inner.upsert(self._c(collection), points)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self.inner.delete(self._c(collection), ids)

    def search(self, collection: str, vector: np.ndarray, limit: int, where: Filter | None = None) -> list[Hit]:
        return self.inner.search(self._c(collection), vector, limit, where)

    def count(self, collection: str) -> int:
        return self.inner.count(self._c(collection))

    def list_ids(self, collection: str) -> set[str]:
        return self.inner.list_ids(self._c(collection))

    def drop(self, collection: str) -> None:
        self.inner.drop(self._c(collection))

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, attr: str) -> Any:
        """Anything else the store offers (lexical search, path, client): methods get the collection mapped."""
        value = getattr(self.inner, attr)
        if not callable(value):
            return value

        def mapped(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], str):
                args = (self._c(args[0]), *args[1:])
            if isinstance(kwargs.get("collection"), str):
                kwargs["collection"] = self._c(kwargs["collection"])
            return value(*args, **kwargs)

        return mapped


def store_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Recorded options less ours (``vectors``): what the store plugin is built from."""
    return {k: v for k, v in options.items() if k not in (VECTORS, PREVIOUS_MODEL)}


def wrap_store(store: VectorStore, rec: CollectionRecord | None) -> VectorStore:
    """The collection's store, aliased to the store collection that holds its vectors after a reindex."""
    if rec is None or vectors_name(rec) == rec.name:
        return store
    return AliasedStore(store, rec.name, vectors_name(rec))


def raw_store(store: VectorStore) -> VectorStore:
    return store.inner if isinstance(store, AliasedStore) else store


def keep_live(store: VectorStore, rec: CollectionRecord | None) -> None:
    """Record in the store itself which store collection holds ``rec``'s vectors, when the store keeps such a
    record (Qdrant: :meth:`~indexer.ports.PayloadFields.set_live_vectors`): what a stateless search worker, which
    has no state record, reads to find a reindexed collection. Nothing is written when the record already says so,
    or when the collection was never reindexed (no record: its own name)."""
    from indexer.ports import payload_fields

    port = payload_fields(raw_store(store))
    if rec is None or port is None:
        return
    target = vectors_name(rec)
    if (port.live_vectors(rec.name) or rec.name) != target:
        port.set_live_vectors(rec.name, target)
