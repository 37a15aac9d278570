"""A collection at a glance, for a person (the search page's empty view and status panel, ``GET /overview``).

Everything here is cheap (a few state-database queries, no store or model call), so the page can ask for it on
every load: the counts, the roots (with the name the ``folder`` facet gives each), when a file was last committed,
the models by name, the watcher in one line, and a few example queries drawn from the collection.

Example queries (:func:`example_queries`): the commonest document titles and subjects the readers recorded
(``title``/``subject`` metadata among a uniform sample of about 5,000 chunks:
:meth:`~indexer.state.fields.FieldIndex.commonest`), then the words of file names spread over the collection's
path order (file names are what a person named their documents by). Cost: two indexed range reads, up to
:data:`PATHS_READ` paths; no chunk text is read.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import PurePath
from typing import Any

from indexer.engine.adapters import model_name
from indexer.search.lexical import STOPWORDS
from indexer.state.database import StateStore

EXAMPLES = 5
PATHS_READ = 2000  # file names looked at for examples (the first in path order)
TITLE_FIELDS = ("title", "subject")
MAX_EXAMPLE_CHARS = 60
_NAME_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
_GENERIC = frozenset({"readme", "index", "main", "init", "untitled", "copy", "new", "file", "test", "tmp"})


def root_name(root: str) -> str:
    """A root's name as the ``folder`` facet writes it (its last component): :func:`indexer.state.fields.folder`."""
    return os.path.basename(root.rstrip("/")) or root


def example_queries(state: StateStore, collection: str, chunks: int, limit: int = EXAMPLES) -> list[str]:
    """Up to ``limit`` queries a person could try: titles/subjects first, then file-name words."""
    out: list[str] = []
    seen: set[str] = set()

    def add(text: str) -> None:
        text = " ".join(text.split())
        key = text.casefold()
        if text and len(text) <= MAX_EXAMPLE_CHARS and key not in seen and len(out) < limit:
            seen.add(key)
            out.append(text)

    for value, _ in state.fields.commonest(collection, TITLE_FIELDS, limit, chunks):
        add(value)
    paths = state.paths(collection, PATHS_READ)
    phrases = [p for p in (_name_phrase(path) for path in paths) if p]
    if phrases and len(out) < limit:
        step = max(1, len(phrases) // (limit - len(out)))  # spread over the path order: several folders
        for phrase in phrases[::step]:
            add(phrase)
        for phrase in phrases:
            add(phrase)
    return out


def _name_phrase(path: str) -> str:
    """The words of a file name (``key-rotation_2024.md`` -> ``key rotation``), generic names and numbers left out."""
    stem = PurePath(path).stem
    words = [w.lower() for w in _NAME_WORDS.findall(stem)]
    words = [w for w in words if len(w) >= 3 and w not in STOPWORDS and w not in _GENERIC]
    return " ".join(words[:4])


def overview(state: StateStore, collection: str, record: Any, settings: Any, watcher: dict[str, Any] | None,
             watcher_line: str) -> dict[str, Any]:
    """The collection for a person (see the module's docstring); times are seconds since the epoch, with the
    server's ``now`` so a page shows them relative to the server's clock."""
    counts = state.counts(collection)
    roots = state.roots(collection)
    fresh = (watcher or {}).get("freshness") or {}
    return {
        "collection": collection,
        "now": time.time(),
        "files": counts["files"],
        "failed_files": counts["failed"],
        "chunks": counts["chunks"],
        "roots": [{"path": root, "name": root_name(root)} for root in roots],
        "last_commit": state.last_commit(collection),
        "model": model_name(record.model_id),
        "reranker": model_name(PurePath(settings.rerank_model).name) if settings.rerank_model else None,
        "store": record.store,
        "search_mode": settings.search_mode,
        "watcher": {
            "running": bool((watcher or {}).get("running")),
            "state": (watcher or {}).get("state") or ("stopped" if watcher else "not started"),
            "queued": (watcher or {}).get("queued", 0),
            "freshness_ms": {"last": fresh.get("last_ms"), "p50": fresh.get("p50_ms"), "p95": fresh.get("p95_ms")},
            "updated_at": (watcher or {}).get("updated_at"),
            "line": watcher_line,
        },
        "examples": example_queries(state, collection, counts["chunks"]),
    }
