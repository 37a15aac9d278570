"""Attach to an existing Qdrant collection (LangChain, LlamaIndex, Haystack or your own): inspect, search with
reranking, and index files into it without changing anything of theirs. See docs/qdrant-plugin.md.

Registered through entry points like the built-ins: ``indexer.stores: qdrant_attach`` (the store the facade
uses for an attached collection) and ``indexer.commands: qdrant`` (the ``indexer qdrant`` sub-commands).
"""

from plugins.qdrant_attach.api import AttachedCollection, AttachedHit, AttachedResult, as_filter, attach
from plugins.qdrant_attach.compat import ModelProbe, VectorChoice
from plugins.qdrant_attach.inspection import CollectionReport, DenseVector, SparseVector
from plugins.qdrant_attach.layout import MARKER, Layout
from plugins.qdrant_attach.store import AttachedStore

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
