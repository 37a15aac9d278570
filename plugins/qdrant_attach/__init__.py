"""Attach to an existing Qdrant collection (LangChain, LlamaIndex, Haystack or your own): inspect, search with
reranking, and index files into it without changing anything of theirs. See docs/qdrant-plugin.md.

Registered through entry points like the built-ins: ``indexer.stores: qdrant_attach`` (the store the facade
uses for an attached collection), ``indexer.commands: qdrant`` (the ``indexer qdrant`` sub-commands) and
``indexer.routers: qdrant`` (Qdrant's query API with text queries on the HTTP service).

Names are imported lazily: ``indexer --help`` loads the sub-commands, and qdrant-client costs seconds to import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "AttachedCollection": "api",
    "AttachedHit": "api",
    "AttachedResult": "api",
    "as_filter": "api",
    "attach": "api",
    "ModelProbe": "compat",
    "VectorChoice": "compat",
    "CollectionReport": "inspection",
    "DenseVector": "inspection",
    "SparseVector": "inspection",
    "MARKER": "layout",
    "Layout": "layout",
    "AttachedStore": "attached_store",
}
__all__ = [
    "MARKER",
    "AttachedCollection",
    "AttachedHit",
    "AttachedResult",
    "AttachedStore",
    "CollectionReport",
    "DenseVector",
    "Layout",
    "ModelProbe",
    "SparseVector",
    "VectorChoice",
    "as_filter",
    "attach",
]

if TYPE_CHECKING:
    from plugins.qdrant_attach.api import AttachedCollection, AttachedHit, AttachedResult, as_filter, attach
    from plugins.qdrant_attach.attached_store import AttachedStore
    from plugins.qdrant_attach.compat import ModelProbe, VectorChoice
    from plugins.qdrant_attach.inspection import CollectionReport, DenseVector, SparseVector
    from plugins.qdrant_attach.layout import MARKER, Layout


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
