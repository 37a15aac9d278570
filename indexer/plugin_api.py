"""The plugin API: the one module a plugin imports (built-in plugins included; import-linter holds them to it).

A plugin is a reader, a source, a store, a CLI command group or an HTTP router, registered through an entry
point (docs/plugins.md). Everything it may rely on is named here, and nothing else of indexer is promised:

- the vocabulary: the frozen values of :mod:`indexer.types`, the ports of :mod:`indexer.ports`, the error tree
  of :mod:`indexer.errors`, the typed :class:`Settings`;
- helpers a store needs: :func:`prepare_vector` (size, finite values, unit length for cosine), :func:`canonical_id`,
  :func:`ancestor_dirs` (the ``dirs`` payload behind exact ``path_prefix`` filters), :mod:`lexical` (the BM25
  terms every store indexes alike), :func:`database_error` (SQLite errors into the tree), :func:`lock_for`
  (the one file-lock helper), :func:`copy_sqlite` / :func:`copy_folder` / :func:`restore_folder` /
  :func:`count_rows` for the optional snapshot capabilities (:class:`StoreSnapshots`: backup and restore);
- the one collection-name rule: :func:`valid_collection_name`, :data:`COLLECTION_NAME_RULE` (its wording);
- for a source: :func:`load_readers` (every registered reader), the optional :class:`FolderScan`;
- for a reader: :class:`Document` with its :class:`Section` values (slide, sheet rows, message, cell: where a
  chunk lies) and :class:`OutlineNode` values (source code's syntax units, kept whole by the chunker);
- for the normalization a metric needs: :class:`Normalization`, :func:`choose_normalization`,
  :func:`normalization_name`.

A plugin that brings collections of its own kind (the Qdrant attach plugin: a CLI group, an HTTP router and a
Python API over foreign Qdrant collections) also gets what keeps it on the one query path:

- :func:`prepare` with :class:`SearchRequest` and :class:`QueryLimits` (every default, cap and check of a query),
  :func:`rerank_stage` (the one rerank stage);
- :func:`load_embedder`, :func:`load_reranker`, :func:`resolve_model` (the one model loader);
- collection records and indexing through the facade's narrow functions: :func:`get_record`, :func:`add_record`,
  :func:`remove_record`, :func:`list_collections`, :func:`index_paths`, :func:`forget_path` (with
  :class:`CollectionRecord`, :class:`IndexReport`, :class:`Progress`).

An HTTP router's factory is called with the server's service: ``service.settings``, ``service.worker.run(fn)``
(runs ``fn`` on the thread that owns the models) and ``service.reader(name)`` (its query-side collection) are
its public API.
"""

from indexer.collection.facade import (
    add_record,
    forget_path,
    get_record,
    index_paths,
    list_collections,
    remove_record,
)
from indexer.core.location import COLLECTION_NAME_RULE, valid_collection_name
from indexer.core.locks import lock_for
from indexer.core.normalization import Normalization, choose_normalization, normalization_name
from indexer.core.registry import load_readers
from indexer.core.snapshots import copy_folder, copy_sqlite, count_rows, restore_folder
from indexer.core.sqlite_errors import database_error
from indexer.core.vectors import ancestor_dirs, canonical_id, prepare_vector
from indexer.engine.loader import load_embedder, load_reranker
from indexer.engine.loader import resolve as resolve_model
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
from indexer.names import encodable, printable
from indexer.ports import (
    Embedder,
    FolderScan,
    Progress,
    Reader,
    Reranker,
    Source,
    SourceFactory,
    StoreFactory,
    StoreSnapshots,
    VectorStore,
)
from indexer.search import lexical
from indexer.search.query import QueryLimits, prepare
from indexer.search.rerank import RerankBudget, Reranked, rerank_stage
from indexer.settings import Settings, load_settings
from indexer.state.store import CollectionRecord
from indexer.types import (
    BAD_NAME,
    ROOT_UNAVAILABLE,
    Document,
    Filter,
    Hit,
    IndexReport,
    Metric,
    OutlineNode,
    Point,
    ScanProblem,
    SearchRequest,
    Section,
    SourceRef,
)

__all__ = [
    "BAD_NAME",
    "COLLECTION_NAME_RULE",
    "ROOT_UNAVAILABLE",
    "CollectionMismatchError",
    "CollectionRecord",
    "ConfigError",
    "Document",
    "Embedder",
    "Filter",
    "FolderScan",
    "Hit",
    "IndexReport",
    "IndexerError",
    "InputError",
    "LockedError",
    "Metric",
    "Normalization",
    "OutlineNode",
    "Point",
    "Progress",
    "QueryLimits",
    "Reader",
    "RerankBudget",
    "Reranked",
    "Reranker",
    "ScanProblem",
    "SearchRequest",
    "Section",
    "Settings",
    "Source",
    "SourceError",
    "SourceFactory",
    "SourceRef",
    "StoreError",
    "StoreFactory",
    "StoreSnapshots",
    "StoreUnavailableError",
    "VectorStore",
    "add_record",
    "ancestor_dirs",
    "canonical_id",
    "choose_normalization",
    "copy_folder",
    "copy_sqlite",
    "count_rows",
    "database_error",
    "encodable",
    "forget_path",
    "get_record",
    "index_paths",
    "lexical",
    "list_collections",
    "load_embedder",
    "load_readers",
    "load_reranker",
    "load_settings",
    "lock_for",
    "normalization_name",
    "printable",
    "prepare",
    "prepare_vector",
    "remove_record",
    "rerank_stage",
    "resolve_model",
    "restore_folder",
    "valid_collection_name",
]
