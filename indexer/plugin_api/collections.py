"""The door for a plugin that drives collections of its own kind (the Qdrant attach plugin: a CLI group, an HTTP
router and a Python API over foreign Qdrant collections): what keeps it on the one query path and the one model
loader, and the facade's narrow functions over collection records and indexing.

- :func:`prepare` with :class:`~indexer.types.SearchRequest` and :class:`QueryLimits` (every default, cap and
  check of a query), :func:`rerank_stage` with :class:`Reranked` and :class:`RerankBudget` (the one rerank stage);
- :func:`load_embedder`, :func:`load_reranker`, :func:`resolve_model` (the one model loader);
- :func:`get_record`, :func:`add_record`, :func:`remove_record`, :func:`list_collections` (with
  :class:`CollectionRecord`), :func:`index_paths`, :func:`forget_path`.

Every name here is importable from ``indexer.plugin_api`` too.
"""

from indexer.collection.facade import forget_path, index_paths
from indexer.collection.records import add_record, get_record, list_collections, remove_record
from indexer.engine.loader import load_embedder, load_reranker
from indexer.engine.loader import resolve as resolve_model
from indexer.search.query import QueryLimits, fit_query, prepare
from indexer.search.rerank import RerankBudget, Reranked, rerank_stage
from indexer.state.database import CollectionRecord

__all__ = [
    "CollectionRecord",
    "QueryLimits",
    "RerankBudget",
    "Reranked",
    "add_record",
    "fit_query",
    "forget_path",
    "get_record",
    "index_paths",
    "list_collections",
    "load_embedder",
    "load_reranker",
    "prepare",
    "remove_record",
    "rerank_stage",
    "resolve_model",
]
