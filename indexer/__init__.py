"""indexer: keep local documents searchable with llama.cpp embeddings, FAISS or Qdrant, and reranking.

The Python API::

    import indexer

    with indexer.open_collection("notes") as col:
        report = col.index(["~/notes"])          # add a root and sync it; unchanged files are skipped
        result = col.search("how do I rotate keys?", k=5)
        for hit in result.hits:
            print(hit.path, hit.start_line, hit.score, hit.rerank_score)
"""

from typing import TYPE_CHECKING, Any

from indexer.errors import (
    CollectionMismatchError,
    ConfigError,
    IndexerError,
    InputError,
    ModelError,
    ModelUnavailableError,
    SourceError,
    StateError,
    StoreError,
    StoreUnavailableError,
)

if TYPE_CHECKING:
    from indexer.collection.facade import Collection, list_collections, open_collection
    from indexer.settings import Settings, load_settings
    from indexer.types import IndexReport, SearchHit, SearchResult

# The facade is imported on first use (PEP 562), so `import indexer.<light module>` stays light: the console
# script answers `indexer search` through a running server without loading numpy, pydantic or llama.cpp.
_LAZY = {
    "Collection": "indexer.collection.facade",
    "list_collections": "indexer.collection.facade",
    "open_collection": "indexer.collection.facade",
    "IndexReport": "indexer.types",
    "SearchResult": "indexer.types",
    "Settings": "indexer.settings",
    "load_settings": "indexer.settings",
    "SearchHit": "indexer.types",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'indexer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Collection",
    "CollectionMismatchError",
    "ConfigError",
    "IndexReport",
    "IndexerError",
    "InputError",
    "ModelError",
    "ModelUnavailableError",
    "SearchHit",
    "SearchResult",
    "Settings",
    "SourceError",
    "StateError",
    "StoreError",
    "StoreUnavailableError",
    "list_collections",
    "load_settings",
    "open_collection",
]

__version__ = "0.1.0"
