"""The plugin API: the one package a plugin imports (built-in plugins included; import-linter holds them to it).

Two doors: :mod:`indexer.plugin_api.vocabulary` (what every plugin speaks: readers, sources, stores) and
:mod:`indexer.plugin_api.collections` (for a plugin that drives collections of its own kind). Every name of
both is importable from ``indexer.plugin_api`` itself (docs/api.md lists them); the second door's names load
the facade on first use only, so a reader or store plugin never pays for it.

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
- for a source: :func:`load_readers` (every registered reader), :class:`Source` (the port, every optional
  ability with its default: inherit it) and :class:`SourcePlugin` (the least a source must have);
- for a reader: :class:`Document` with its :class:`Section` values (slide, sheet rows, message, cell: where a
  chunk lies) and :class:`OutlineNode` values (source code's syntax units, kept whole by the chunker);
- for the normalization a metric needs: :class:`Normalization`, :func:`choose_normalization`,
  :func:`normalization_name`.

A plugin that brings collections of its own kind (the Qdrant attach plugin: a CLI group, an HTTP router and a
Python API over foreign Qdrant collections) also gets, through :mod:`indexer.plugin_api.collections`, what keeps
it on the one query path:

- :func:`prepare` with :class:`SearchRequest` and :class:`QueryLimits` (every default, cap and check of a query),
  :func:`rerank_stage` (the one rerank stage);
- :func:`load_embedder`, :func:`load_reranker`, :func:`resolve_model` (the one model loader);
- collection records and indexing through the facade's narrow functions: :func:`get_record`, :func:`add_record`,
  :func:`remove_record`, :func:`list_collections`, :func:`index_paths`, :func:`forget_path` (with
  :class:`CollectionRecord`, :class:`IndexReport`, :class:`Progress`).

An HTTP router's factory is called with the server's service: ``service.settings``, ``service.worker.run(fn)``
(runs ``fn`` on the thread that owns the models) and ``service.reader(name)`` (its query-side collection) are
its public API (``service.reader(name)`` is the collection's :class:`~indexer.collection.reader.CollectionReader`).
"""

from typing import TYPE_CHECKING, Any

from indexer.plugin_api.vocabulary import (
    BAD_NAME,
    COLLECTION_NAME_RULE,
    PLUGIN_API_VERSION,
    ROOT_UNAVAILABLE,
    Clause,
    CollectionMismatchError,
    ConfigError,
    Document,
    Embedder,
    Filter,
    Hit,
    ImageError,
    IndexerError,
    IndexReport,
    InputError,
    LexicalSearch,
    LockedError,
    MediaPart,
    Metric,
    Normalization,
    OutlineNode,
    PayloadFields,
    Point,
    PreparedImage,
    Progress,
    Reader,
    RecallCheck,
    RecallEstimate,
    Reranker,
    ScanProblem,
    SearchRequest,
    Section,
    Settings,
    Source,
    SourceError,
    SourceFactory,
    SourcePlugin,
    SourceRef,
    StoreError,
    StoreFactory,
    StoreProcesses,
    StoreSnapshots,
    StoreUnavailableError,
    VectorStore,
    ancestor_dirs,
    caller,
    canonical_id,
    choose_normalization,
    copy_folder,
    copy_sqlite,
    count_rows,
    database_error,
    encodable,
    lexical,
    load_readers,
    load_settings,
    lock_for,
    normalization_name,
    payload_fields,
    prepare_image,
    prepare_vector,
    printable,
    recall,
    restore_folder,
    user_path,
    valid_collection_name,
)

if TYPE_CHECKING:
    from indexer.plugin_api.collections import (
        CollectionRecord,
        QueryLimits,
        RerankBudget,
        Reranked,
        add_record,
        fit_query,
        forget_path,
        get_record,
        index_paths,
        list_collections,
        load_embedder,
        load_reranker,
        prepare,
        remove_record,
        rerank_stage,
        resolve_model,
    )

_DOOR = frozenset(
    {
        "CollectionRecord", "QueryLimits", "RerankBudget", "Reranked", "add_record", "fit_query", "forget_path",
        "get_record",
        "index_paths", "list_collections", "load_embedder", "load_reranker", "prepare", "remove_record",
        "rerank_stage", "resolve_model",
    }
)


def __getattr__(name: str) -> Any:
    """The names of :mod:`indexer.plugin_api.collections`, imported on first use (PEP 562)."""
    if name not in _DOOR:
        raise AttributeError(f"module 'indexer.plugin_api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module("indexer.plugin_api.collections"), name)
    globals()[name] = value
    return value


__all__ = [
    "PLUGIN_API_VERSION",
    "BAD_NAME",
    "COLLECTION_NAME_RULE",
    "Clause",
    "ROOT_UNAVAILABLE",
    "CollectionMismatchError",
    "CollectionRecord",
    "ConfigError",
    "Document",
    "Embedder",
    "Filter",
    "Hit",
    "IndexReport",
    "IndexerError",
    "InputError",
    "ImageError",
    "LexicalSearch",
    "LockedError",
    "MediaPart",
    "Metric",
    "Normalization",
    "OutlineNode",
    "PayloadFields",
    "Point",
    "PreparedImage",
    "Progress",
    "QueryLimits",
    "Reader",
    "RecallCheck",
    "RecallEstimate",
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
    "SourcePlugin",
    "SourceRef",
    "StoreError",
    "StoreFactory",
    "StoreProcesses",
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
    "fit_query",
    "forget_path",
    "get_record",
    "index_paths",
    "lexical",
    "recall",
    "caller",
    "payload_fields",
    "list_collections",
    "load_embedder",
    "load_readers",
    "load_reranker",
    "load_settings",
    "lock_for",
    "normalization_name",
    "prepare_image",
    "printable",
    "prepare",
    "prepare_vector",
    "remove_record",
    "rerank_stage",
    "resolve_model",
    "restore_folder",
    "user_path",
    "valid_collection_name",
]
