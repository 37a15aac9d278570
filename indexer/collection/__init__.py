"""The facade: :class:`Collection` (one parts object, :mod:`indexer.collection.parts`, with its two faces: the
reader, :mod:`indexer.collection.reader`, and the writer, :mod:`indexer.collection.writer`) and the functions that
open one. Every rule and default every front end needs lives here (search, sync, file access, status, model
identity, a running reindex)."""

from indexer.collection.facade import Collection, list_collections, open_collection, open_state

__all__ = ["Collection", "list_collections", "open_collection", "open_state"]
