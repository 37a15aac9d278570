"""Copying points into a new embedded Qdrant shard with the current lexical terms: a collection that qdrant-client's
local mode left moving onto qdrant-edge, and a shard whose terms an older analyzer made (its lexical rebuild). The
dense vector and the payload are copied as stored; the sparse vector is made anew from the payload by the current
analyzer (:mod:`indexer.search.lexical`), so nothing is re-embedded."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from indexer.plugin_api import lexical


def copy_points(shard: Any, pages: Iterable[Sequence[Any]], call: Callable[[str, Callable[[], Any]], Any]) -> int:
    """Upsert every record of ``pages`` (records with ``id``, ``vector`` and ``payload``) into ``shard``, with the
    current analyzer's sparse vector, then flush; returns how many. A payload without its chunk's language gets
    it (``lang``, detected once)."""
    import qdrant_edge as qe

    name, moved = lexical.sparse_name(), 0
    for page in pages:
        batch = []
        for r in page:
            dense: Any = r.vector.get("") if isinstance(r.vector, dict) else r.vector
            payload = dict(r.payload or {})
            payload["lang"] = lexical.chunk_language(payload)
            indices, values = lexical.sparse_document(payload)
            vector: dict[str, Any] = {"": list(dense), name: qe.SparseVector(indices=indices, values=values)}
            batch.append(qe.Point(id=str(r.id), vector=vector, payload=payload))
        if batch:
            call("copy points", partial(shard.update, qe.UpdateOperation.upsert_points(batch)))
            moved += len(batch)
    call("flush", shard.flush)
    return moved


EDGE_DIR = "edge"  # the embedded store's folder of shards, beside each its files
_COUNTED: dict[tuple[int, str], frozenset[str] | None] = {}  # what read-only stores counted (cannot keep it)


class EdgeLanguages:
    """A mixin of :class:`plugins.qdrant.edge.EdgeStore`: the files beside a shard (its meta, and its chunks per
    language: what a query's language is told among, :func:`indexer.search.lexical.held`). The counts are kept
    on upsert (the ``lang`` indexing records) and not lowered on delete (a superset); a shard made after them (a
    lexical rebuild's, or a new collection of a dropped one's name) makes them stale: recounted from its payloads
    on the next search."""

    path: Path
    read_only: bool
    _lock: Any

    def _meta_file(self, collection: str) -> Path:
        return self.path / EDGE_DIR / f"{collection}.meta.json"

    def _languages_file(self, collection: str) -> Path:
        return self.path / EDGE_DIR / f"{collection}.languages.json"

    def _pages(self, collection: str, *, with_payload: bool, with_vector: bool) -> Iterator[list[Any]]:
        raise NotImplementedError  # the store's

    def _note_languages(self, collection: str, payloads: Sequence[Mapping[str, Any]]) -> None:
        if any("lang" in p for p in payloads):
            with self._lock:
                _write_counts(self._languages_file(collection),
                              lexical.count_languages(payloads, self._counts(collection)))

    def _held(self, collection: str) -> frozenset[str] | None:
        counts = self._counts(collection)
        if counts is None and (id(self), collection) in _COUNTED:  # a read-only store counts once per process
            return _COUNTED[id(self), collection]
        if counts is None:  # stale or never kept: count the shard's payloads once
            langs = [{"lang": (r.payload or {}).get("lang")} for page in
                     self._pages(collection, with_payload=True, with_vector=False) for r in page]
            counts = lexical.count_languages([p for p in langs if isinstance(p["lang"], str)])
            if self.read_only:
                _COUNTED[id(self), collection] = lexical.held(counts)
            elif counts:
                with contextlib.suppress(OSError):
                    _write_counts(self._languages_file(collection), counts)
        return lexical.held(counts)

    def _counts(self, collection: str) -> dict[str, int] | None:
        """The kept counts, or None when there are none or the shard is newer than them."""
        path = self._languages_file(collection)
        try:
            config = self.path / EDGE_DIR / collection / "edge_config.json"
            if config.exists() and config.stat().st_mtime > path.stat().st_mtime:
                return None
            return {str(k): int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
        except (OSError, ValueError, AttributeError):
            return None


def _write_counts(path: Path, counts: Mapping[str, int]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(counts), sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def local_pages(client: Any, collection: str, limit: int) -> Iterator[list[Any]]:
    """Every point of a local-mode (qdrant-client) collection, with vectors and payloads, a page at a time."""
    offset: Any = None
    while True:
        records, offset = client.scroll(collection, limit=limit, offset=offset, with_payload=True, with_vectors=True)
        yield records
        if offset is None:
            return
