"""The plugin API: the one module a plugin imports (built-in plugins included; import-linter holds them to it).

A plugin is a reader, a source, a store, a CLI command group or an HTTP router, registered through an entry
point (docs/plugins.md). Everything it may rely on is named here, and nothing else of indexer is promised:

- the vocabulary: the frozen values of :mod:`indexer.types`, the ports of :mod:`indexer.ports`, the error tree
  of :mod:`indexer.errors`, the typed :class:`Settings`;
- helpers a store needs: :func:`prepare_vector` (size, finite values, unit length for cosine), :func:`canonical_id`,
  :func:`ancestor_dirs` (the ``dirs`` payload behind exact ``path_prefix`` filters), :mod:`lexical` (the BM25
  terms every store indexes alike), :func:`database_error` (SQLite errors into the tree), :func:`lock_for`
  (the one file-lock helper);
- for a source: :func:`load_readers` (every registered reader);
- for the normalization a metric needs: :class:`Normalization`, :func:`choose_normalization`,
  :func:`normalization_name`.

Front-end plugins (the Qdrant attach plugin's CLI, HTTP router and Python API) also get the one query path and
the one model loader: see :mod:`indexer.extension` (kept apart so a store or reader never loads the facade).
"""

from indexer.core.locks import lock_for
from indexer.core.normalization import Normalization, choose_normalization, normalization_name
from indexer.core.registry import load_readers
from indexer.core.sqlite_errors import database_error
from indexer.core.vectors import ancestor_dirs, canonical_id, prepare_vector
from indexer.errors import (
    CollectionMismatchError,
    ConfigError,
    IndexerError,
    InputError,
    LockedError,
    SourceError,
    StoreError,
    StoreUnavailableError,
)
from indexer.ports import Embedder, Reader, Reranker, Source, SourceFactory, StoreFactory, VectorStore
from indexer.search import lexical
from indexer.settings import Settings, load_settings
from indexer.types import ROOT_UNAVAILABLE, Document, Filter, Hit, Metric, Point, ScanProblem, SourceRef

__all__ = [
    "ROOT_UNAVAILABLE",
    "CollectionMismatchError",
    "ConfigError",
    "Document",
    "Embedder",
    "Filter",
    "Hit",
    "IndexerError",
    "InputError",
    "LockedError",
    "Metric",
    "Normalization",
    "Point",
    "Reader",
    "Reranker",
    "ScanProblem",
    "Settings",
    "Source",
    "SourceError",
    "SourceFactory",
    "SourceRef",
    "StoreError",
    "StoreFactory",
    "StoreUnavailableError",
    "VectorStore",
    "ancestor_dirs",
    "canonical_id",
    "choose_normalization",
    "database_error",
    "lexical",
    "load_readers",
    "load_settings",
    "lock_for",
    "normalization_name",
    "prepare_vector",
]
