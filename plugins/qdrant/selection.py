"""Which points an embedded Qdrant search may return: a :class:`~indexer.plugin_api.Filter` as a qdrant-edge filter
(path prefix and types as payload conditions, ``ids`` as a ``HasIdCondition``, ``hidden`` excluded), and when a
large share of the points is selected, the ids checked after the search instead.

A ``HasIdCondition`` of 10,000 ids costs qdrant-edge about 2 ms on a dense search and 4 ms on a lexical one, each
time, besides its conversion (~8 ms; the last few filters are kept built: a filter's selection is the same set
object until the state changes, :mod:`indexer.state.columns`). A search that returns no payloads costs half of one
that does. So a selection of at least :data:`CHECK_FROM` ids and :data:`CHECK_SHARE` of the points is searched
without its ids and without payloads, ``max(2 k, 1.5 k / share)`` deep; the first ``k`` hits in the selection keep
their order and scores and get their payloads by id; when fewer than ``k`` are among them and the search had more,
the search runs with the ``HasIdCondition`` (the selection's matches lie far from the query).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from indexer.plugin_api import Filter, StoreError
from plugins.qdrant import clauses

CHECK_FROM = 2_000
CHECK_SHARE = 0.4

class Built:
    """The last few filters, converted (a filter's id selection is the same set object until the state changes,
    indexer.state.columns: converting 10,000 ids costs ~8 ms, per side of a search)."""

    def __init__(self, convert: Callable[[Filter], Any], size: int = 8) -> None:
        self._convert = convert
        self._size = size
        self._built: OrderedDict[Filter, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, where: Filter | None) -> Any:
        if where is None:
            return None
        with self._lock:
            built = self._built.get(where)
            if built is not None:
                self._built.move_to_end(where)
                return built
        built = self._convert(where)
        with self._lock:
            self._built[where] = built
            while len(self._built) > self._size:
                self._built.popitem(last=False)
        return built


def edge() -> Any:
    try:
        import qdrant_edge
    except ImportError as exc:  # a dependency of the project: only a broken install lacks it
        raise StoreError("qdrant-edge-py is not installed; reinstall indexer (`pip install llama-indexer`)") from exc
    return qdrant_edge


def _edge_filter(where: Filter) -> Any:
    qe = edge()
    must: list[Any] = []
    if where.path_prefix is not None:
        prefix = where.path_prefix.rstrip("/") or "/"
        must.append(qe.Filter(should=[qe.FieldCondition("path", match=qe.MatchValue(prefix)),
                                      qe.FieldCondition("dirs", match=qe.MatchValue(prefix))]))
    if where.file_types:
        must.append(qe.FieldCondition("file_type", match=qe.MatchAny(list(where.file_types))))
    if where.ids is not None:  # the exact selection of the filter's other clauses (indexer.state.fields)
        must.append(qe.HasIdCondition(set(where.ids)))
    if where.clauses:  # a stateless worker's clauses, on the payload the writer keeps (plugins/qdrant/clauses.py)
        must.append(clauses.to_edge(clauses.clauses_filter(where.clauses, dict(where.kinds))))
    if where.committed:  # points a writer has not committed (a large file mid-write): never seen by a worker
        must.append(clauses.to_edge(clauses.COMMITTED))
    # points written but not committed (a large file mid-write): never seen, filtered or not
    must_not = [qe.HasIdCondition(set(where.hidden))] if where.hidden else []
    return qe.Filter(must=must or None, must_not=must_not or None) if must or must_not else None


edge_filter = Built(_edge_filter)  # the qdrant-edge filter of a Filter (None: everything)


def checked_depth(where: Filter | None, limit: int, points: int) -> tuple[Filter, int] | None:
    """(the filter without its ids, how deep to search) when ``where`` selects enough of the ``points`` for its
    ids to be checked after the search; None: search with them."""
    if where is None or where.ids is None or points <= 0:
        return None
    share = len(where.ids) / points
    if len(where.ids) < CHECK_FROM or share < CHECK_SHARE:
        return None
    rest = replace(where, ids=None)
    return rest, max(2 * limit, int(limit * 1.5 / min(share, 1.0)))


Found = list[tuple[str, float, dict[str, Any] | None]]  # (id, score, payload or None) best first


def search(
    where: Filter | None, limit: int, points: Callable[[], int], run: Callable[[int, Filter | None, bool], Found],
    payloads: Callable[[list[str]], dict[str, dict[str, Any]]],
) -> list[tuple[str, float, dict[str, Any]]]:
    """The ``limit`` best points ``where`` allows, (id, score, payload): ``run(n, filter, with_payloads)`` searches,
    ``payloads(ids)`` reads payloads by id, ``points()`` counts the collection (about). A large id selection is
    checked after a search without payloads (:func:`checked_depth`), else ``where`` goes to the search whole."""
    checked = None
    if where is not None and where.ids is not None and len(where.ids) >= CHECK_FROM:
        checked = checked_depth(where, limit, points())
    if checked is not None and where is not None and where.ids is not None:
        rest, depth = checked
        found = run(depth, rest, False)
        kept = [(pid, score) for pid, score, _ in found if pid in where.ids][:limit]
        if len(kept) == limit or len(found) < depth:
            read = payloads([pid for pid, _ in kept]) if kept else {}
            return [(pid, score, read.get(pid, {})) for pid, score in kept]
    return [(pid, score, payload or {}) for pid, score, payload in run(limit, where, True)]
