"""What every plugin speaks (a reader, a source, a store, a CLI group, a router): the frozen values of
:mod:`indexer.types`, the ports of :mod:`indexer.ports`, the error tree, the typed :class:`Settings`, and the
helpers a store or a source needs. Import these from ``indexer.plugin_api`` (docs/plugins.md)."""

from indexer.core import caller
from indexer.core.entry_points import PLUGIN_API_VERSION
from indexer.core.images import ImageError, PreparedImage, prepare_image
from indexer.core.location import COLLECTION_NAME_RULE, valid_collection_name
from indexer.core.locks import lock_for
from indexer.core.normalization import Normalization, choose_normalization, normalization_name
from indexer.core.paths import user_path
from indexer.core.registry import load_readers
from indexer.core.snapshots import copy_folder, copy_sqlite, count_rows, restore_folder
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
from indexer.names import encodable, printable
from indexer.ports import (
    Embedder,
    LexicalSearch,
    PayloadFields,
    Progress,
    Reader,
    RecallCheck,
    Reranker,
    Source,
    SourceFactory,
    SourcePlugin,
    StoreFactory,
    StoreProcesses,
    StoreSnapshots,
    VectorStore,
)
from indexer.search import lexical, recall
from indexer.settings import Settings, load_settings
from indexer.state import payload_fields
from indexer.types import (
    BAD_NAME,
    ROOT_UNAVAILABLE,
    Clause,
    Document,
    Filter,
    Hit,
    IndexReport,
    MediaPart,
    Metric,
    OutlineNode,
    Point,
    RecallEstimate,
    ScanProblem,
    SearchRequest,
    Section,
    SourceRef,
)

__all__ = [
    "PLUGIN_API_VERSION",
    "BAD_NAME",
    "COLLECTION_NAME_RULE",
    "Clause",
    "ROOT_UNAVAILABLE",
    "CollectionMismatchError",
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
    "Reader",
    "RecallCheck",
    "RecallEstimate",
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
    "ancestor_dirs",
    "canonical_id",
    "choose_normalization",
    "copy_folder",
    "copy_sqlite",
    "count_rows",
    "database_error",
    "encodable",
    "lexical",
    "recall",
    "caller",
    "payload_fields",
    "load_readers",
    "load_settings",
    "lock_for",
    "normalization_name",
    "user_path",
    "prepare_image",
    "prepare_vector",
    "printable",
    "restore_folder",
    "valid_collection_name",
]
