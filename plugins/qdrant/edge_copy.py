"""Copying points into a new embedded Qdrant shard with the current lexical terms: a collection that qdrant-client's
local mode left moving onto qdrant-edge, and a shard whose terms an older analyzer made (its lexical rebuild). The
dense vector and the payload are copied as stored; the sparse vector is made anew from the payload by the current
analyzer (:mod:`indexer.search.lexical`), so nothing is re-embedded."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from indexer.plugin_api import lexical


def copy_points(shard: Any, pages: Iterable[Sequence[Any]], call: Callable[[str, Callable[[], Any]], Any],
                languages: list[dict[str, str]] | None = None) -> int:
    """Upsert every record of ``pages`` (records with ``id``, ``vector`` and ``payload``) into ``shard``, with the
    current analyzer's sparse vector, then flush; returns how many. A payload without its chunk's language gets
    it (``lang``, detected once), listed in ``languages`` (``{"lang": ...}``) when given."""
    import qdrant_edge as qe

    name, moved = lexical.sparse_name(), 0
    for page in pages:
        batch = []
        for r in page:
            dense: Any = r.vector.get("") if isinstance(r.vector, dict) else r.vector
            payload = dict(r.payload or {})
            payload["lang"] = lang = lexical.chunk_language(payload)
            if languages is not None:
                languages.append({"lang": lang})
            indices, values = lexical.sparse_document(payload)
            vector: dict[str, Any] = {"": list(dense), name: qe.SparseVector(indices=indices, values=values)}
            batch.append(qe.Point(id=str(r.id), vector=vector, payload=payload))
        if batch:
            call("copy points", partial(shard.update, qe.UpdateOperation.upsert_points(batch)))
            moved += len(batch)
    call("flush", shard.flush)
    return moved


def read_languages(path: Path) -> dict[str, int]:
    """A collection's chunks per language (:func:`indexer.search.lexical.held`), as :func:`note_languages` keeps
    them beside its shard; empty when none were recorded."""
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def note_languages(path: Path, payloads: Sequence[Mapping[str, Any]], fresh: bool = False) -> None:
    """Count the ``lang`` of ``payloads`` into the file (``fresh``: instead of what it held); not lowered on
    delete, so a superset of the collection's languages."""
    if any("lang" in p for p in payloads) or fresh:
        counts = lexical.count_languages(payloads, None if fresh else read_languages(path))
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(counts, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


def local_pages(client: Any, collection: str, limit: int) -> Iterator[list[Any]]:
    """Every point of a local-mode (qdrant-client) collection, with vectors and payloads, a page at a time."""
    offset: Any = None
    while True:
        records, offset = client.scroll(collection, limit=limit, offset=offset, with_payload=True, with_vectors=True)
        yield records
        if offset is None:
            return
