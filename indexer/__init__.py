"""indexer: keep local documents searchable with llama.cpp embeddings, FAISS or Qdrant, and reranking.

The Python API::

    import indexer

    with indexer.open_collection("notes") as col:
        report = col.index(["~/notes"])          # add a root and sync it; unchanged files are skipped
        result = col.search("how do I rotate keys?", k=5)
        for hit in result.hits:
            print(hit.path, hit.start_line, hit.score, hit.rerank_score)
"""

from indexer.collection import Collection, list_collections, open_collection
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
from indexer.pipeline import IndexReport
from indexer.query import SearchResult
from indexer.settings import Settings, load_settings
from indexer.types import SearchHit

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
