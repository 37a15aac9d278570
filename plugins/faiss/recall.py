"""Recall that holds on FAISS (:class:`indexer.plugin_api.RecallCheck`; docs/stores.md#recall-that-holds).

A mixin of :class:`plugins.faiss.faiss_store.FaissStore`. A measurement takes the collection's recent searches as
queries (the ring every search feeds: :class:`indexer.search.recall.RecentQueries`), filled up when there are fewer
than ``sample`` with points of the collection (uniformly: their ids are hashes, so a random id and the next one
stored; each one's own point left out), computes their exact nearest neighbours with the sidecar's float vectors
(paged, on a connection of its own: no lock of the store is held during the scan), then searches the index with each
query (its own point left out) at the search-time parameters tried: ``nprobe`` and the rescoring depth of the 8-bit
codes for IVF lists, ``efSearch`` for HNSW. With tuning they start at their defaults (the depth at
:attr:`plugins.faiss.index.VectorIndex.rescore`) and are raised, whichever gains more recall per millisecond first
(:func:`indexer.search.recall.climb`; every step recorded), until the estimate meets the floor or a query's median
time passes the latency budget. The estimate is recorded in ``<collection>/recall.json`` (read by status in any
process; a searching process reads it again at most every ``RE_READ_S``, so a choice the watcher's process made
reaches the server's) and the tuned values used by every search that follows. An explicit ``ivf_nprobe`` or
``hnsw_ef_search`` (settings ``faiss_nprobe``, ``faiss_ef_search``) wins and is never tuned.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np

from indexer.plugin_api import RecallEstimate, recall
from plugins.faiss.index import CODES, AutoParams, VectorIndex, pq_subquantizers
from plugins.faiss.routing import LAMBDA
from plugins.faiss.selection import exact
from plugins.faiss.sidecar import Sidecar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from indexer.plugin_api import Settings

logger = logging.getLogger(__name__)

RECALL_FILE = "recall.json"
LISTS_FILE = "ivf_lists.json"  # the IVF lists (and codes) chosen for the next training, with the reason
RECENT_FILE = "recent_queries.npz"  # the ring of recent query vectors (indexer.search.recall.RecentQueries)
PAGE = 20_000  # vectors per step of the exact scan (30 MB at 384 dimensions)
RE_READ_S = 30.0  # a searching process reads the recorded choice again after this long
RESCORE_CAP = 16  # the deepest rescoring of IVF's 8-bit codes tried (x limit candidates read from the sidecar)
_PARAM = {"ivf": "nprobe", "hnsw": "efSearch"}  # the search-time parameter of each structure


class FaissRecall:
    """RecallCheck on FAISS collections (mixed into FaissStore, whose members these use)."""

    _lock: threading.RLock
    fixed: dict[str, int | None]  # parameter name -> an explicit setting (never tuned), None: tuned
    _recall: dict[str, tuple[RecallEstimate | None, float]]  # per collection: the recorded estimate, when read
    reread_s = RE_READ_S
    _require: Callable[[str], Any]
    _sync: Callable[[Any], VectorIndex]
    _rebuild_soon: Callable[..., VectorIndex]
    _folder: Callable[[str], Path]
    search_threads: int | None
    auto: AutoParams

    def _init_recall(self, nprobe: int | None, ef_search: int | None) -> None:
        self.fixed = {"nprobe": nprobe, "efSearch": ef_search}
        self._recall = {}
        self._recent: dict[str, recall.RecentQueries] = {}

    def recent_queries(self, collection: str) -> recall.RecentQueries:
        """The ring of ``collection``'s recent query vectors (``<collection>/recent_queries.npz``)."""
        with self._lock:
            ring = self._recent.get(collection)
            if ring is None:
                ring = self._recent[collection] = recall.RecentQueries(self._folder(collection) / RECENT_FILE)
            return ring

    def _save_recent(self, collection: str | None = None) -> None:
        """Write the rings (one collection's, or every one) to disk (closing, dropping)."""
        for name, ring in list(self._recent.items()):
            if collection is None or name == collection:
                ring.save()

    def lists_choice(self, collection: str) -> dict[str, Any] | None:
        """The recorded choice for the next training: {lists, codes (when chosen), why, recall, points, at}."""
        try:
            choice = json.loads((self._folder(collection) / LISTS_FILE).read_text())
        except (OSError, ValueError):
            return None
        return choice if isinstance(choice, dict) and isinstance(choice.get("lists"), int) else None

    def _auto_for(self, coll: Any) -> AutoParams:
        """The auto kind's parameters for (re)building ``coll``: the explicit list count, else the recorded choice,
        else by size (:func:`plugins.faiss.index.ivf_lists`)."""
        choice = None if self.auto.lists else self.lists_choice(coll.name)
        if not choice:
            return self.auto
        codes = str(choice["codes"]) if choice.get("codes") in CODES else self.auto.codes
        return replace(self.auto, lists=choice["lists"], codes=codes)

    def _choose_lists(
        self, collection: str, estimate: RecallEstimate, lists: int, codes: str = "", dim: int = 0,
    ) -> dict[str, Any] | None:
        """After a tuning that could not reach the floor within the latency budget, recorded with its reason:
        over int8 codes (the default), pq codes (a fast scan at about half the time a point, over as many lists:
        docs/benchmarks.md#recall-session-15), trained again at once in the background by the caller;
        otherwise the next training makes half as many lists (twice the points a visited list holds), not forced
        (a 1M training costs minutes of CPU), taken by the next rebuild (growth, re-creation)."""
        if self.auto.lists or lists <= 8:
            return None
        pq = codes == "int8" and pq_subquantizers(dim) > 0
        choice = {"lists": lists if pq else max(8, lists // 2), "recall": estimate.recall,
                  "points": estimate.points, "at": time.time(),
                  "why": f"recall {estimate.recall:.3f} below the floor at nprobe {estimate.value}, rescoring "
                         f"{estimate.rescore} x k with {lists} lists of {codes or 'their'} codes"}
        if pq or codes == "pq":  # kept by every later choice: the default codes would be int8 again
            choice["codes"] = "pq"
        recall.write_estimate_json(self._folder(collection) / LISTS_FILE, choice, f"FAISS collection {collection!r}")
        logger.warning("FAISS collection %s: %s; its %s training makes %d lists%s", collection, choice["why"],
                       "new" if pq else "next", choice["lists"], " of pq codes" if pq else "")
        return choice

    def _retrain(self, collection: str) -> None:
        """Train the collection's index again now, with the recorded choice (in the background from
        ``background_from`` vectors, the current index answering meanwhile: plugins/faiss/rebuild.py)."""
        with self._lock:
            coll = self._require(collection)
            with coll.sidecar.read():
                index = self._sync(coll)
                coll.index = self._rebuild_soon(coll, index, index.seq)

    def recall_estimate(self, collection: str) -> RecallEstimate | None:
        return recall.read_estimate(self._folder(collection) / RECALL_FILE)

    def _tuned(self, collection: str, index: VectorIndex) -> tuple[int | None, int, int]:
        """(tuned value of ``index``'s search-time parameter or None: its default or the explicit setting, rescoring
        depth: 1 is none, list order: 2 the grouped one, else 1)."""
        estimate, read_at = self._recall.get(collection, (None, float("-inf")))
        if time.monotonic() - read_at > self.reread_s:  # another process (the watcher) may have tuned it since
            estimate = self.recall_estimate(collection)
            self._recall[collection] = (estimate, time.monotonic())
        param = _PARAM.get(index.structure)
        if estimate is None or estimate.source != "tuned" or estimate.param != param or self.fixed.get(param or ""):
            return None, index.rescore, 1
        graph = estimate.graph or {}
        lists, pq = graph.get("lists"), int(index.codes == "pq")
        if index.structure == "ivf" and lists and (lists != index.lists() or graph.get("pq", 0) != pq):
            return None, index.rescore, 1  # tuned on lists trained before: nothing carries over
        if index.structure != "ivf":
            return estimate.value, 1, 1
        return estimate.value, max(1, estimate.rescore or 1), 2 if graph.get("grouped") else 1

    def _search_at(
        self, coll: Any, index: VectorIndex, query: np.ndarray, limit: int, allowed: np.ndarray | None,
        excluded: np.ndarray | None = None, at: tuple[int | None, ...] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The index's search at ``at`` (parameter, rescoring depth[, list order: 2 grouped]; default: the tuned
        ones): with a depth above 1, ``depth x limit`` candidates of the 8-bit codes are rescored with the sidecar's
        float vectors (call inside a sidecar read)."""
        chosen = self._tuned(coll.name, index) if at is None else at
        value, depth, order = chosen[0], int(chosen[1] or 1), int(chosen[2] or 1) if len(chosen) > 2 else 1
        index.tuned = value
        index.grouped = LAMBDA if order == 2 else 0.0
        if depth <= 1:
            return self._search_index(index, query, limit, allowed, excluded)
        _raw, iids = self._search_index(index, query, limit * depth, allowed, excluded)
        return exact(coll.sidecar.vectors_of(iids, coll.dim), query, limit, index.ip)

    def _search_index(
        self, index: VectorIndex, query: np.ndarray, limit: int, allowed: np.ndarray | None,
        excluded: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One query with ``search_threads`` OpenMP threads (one query gains nothing from more: they
        spin and wait, ~4x slower on a busy 2-core machine); the process-wide setting is restored."""
        if self.search_threads is None:
            return index.search(query, limit, allowed, excluded)
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self.search_threads)
        try:
            return index.search(query, limit, allowed, excluded)
        finally:
            faiss.omp_set_num_threads(previous)

    def measure_recall(
        self, collection: str, sample: int = recall.SAMPLE, tune: bool = True, floor: float = recall.FLOOR,
        latency_budget_ms: float = recall.LATENCY_BUDGET_MS,
    ) -> RecallEstimate:
        k = recall.K
        with self._lock:
            coll = self._require(collection)
            with coll.sidecar.read():
                index = self._sync(coll)
                shape = index.approximate()
                points = coll.sidecar.count()
                default = index.auto.nprobe if index.structure == "ivf" else index.hnsw.ef_search
                ip = index.ip
                lists = index.lists()
                rescore = index.rescore
                codes = index.codes
        if shape is None:
            exact_search = RecallEstimate(1.0, 0, k, None, None, None, "exact", points, None, time.time())
            return self._record(collection, exact_search)
        name, current, cap = shape
        searched = self.recent_queries(collection).vectors(coll.dim, sample)
        reader = Sidecar(coll.sidecar.path, create=False)  # its own connection: the scan holds no lock of the store
        try:
            with reader.read():
                own, chunks = _sample(reader, sample - len(searched), coll.dim) if len(searched) < sample else (
                    np.zeros(0, np.int64), np.zeros((0, coll.dim), np.float32))
                queries = np.concatenate([searched, chunks]).astype(np.float32)
                mine = np.concatenate([np.zeros(len(searched), bool), np.ones(len(own), bool)])  # own point left out
                own = np.concatenate([np.zeros(len(searched), np.int64), own])
                truth = _exact_top(reader, queries, own, mine, k, ip)
        finally:
            reader.close()

        def measure(at: tuple[int, ...]) -> tuple[float, float, float]:
            with self._lock, coll.sidecar.read():
                index = self._sync(coll)
                saved = index.tuned, index.grouped
                found, times = [], []
                try:
                    for q, has in zip(queries, mine, strict=True):
                        start = time.perf_counter()
                        found.append(self._search_at(coll, index, q, k + int(has), None, None, at)[1])
                        times.append(time.perf_counter() - start)  # a chunk asks for k + 1: itself left out
                    latency = float(np.median(times)) * 1000 if times else 0.0
                finally:
                    index.tuned, index.grouped = saved
                ids = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
                got_ids, got_vectors = coll.sidecar.vectors_of(ids, coll.dim)
            vectors = dict(zip(got_ids.tolist(), got_vectors, strict=True))
            approx = [[(str(i), _score(q, vectors[i], ip)) for i in row.tolist() if not (has and i == me) and
                       i in vectors][:k] for q, row, me, has in zip(queries, found, own.tolist(), mine, strict=True)]
            mean, error = recall.estimate(approx, truth, k)
            return mean, latency, error

        fixed = self.fixed.get(name)
        trials = None
        order = 1  # the list order: 2 is the grouped one (plugins/faiss/routing.py), a lever of pq lists by scores
        if tune and fixed is None:
            caps = (max(cap, default), RESCORE_CAP if name == "nprobe" else 1, *((2,) if codes == "pq" and ip else ()))
            start = (default, rescore, 1)[:len(caps)]
            chosen, tried = recall.climb(measure, start, caps, floor, latency_budget_ms)
            (value, depth, *grouped), estimate, latency = chosen.value, chosen.recall, chosen.latency_ms
            order, source = grouped[0] if grouped else 1, "tuned"
            trials = [[*t.value, round(t.recall, 4), round(t.latency_ms, 3), round(t.error, 4)] for t in tried]
        else:
            value, depth = current, rescore
            estimate, latency, _error = measure((value, depth))
            source = "setting" if fixed else "default"
        record = self._record(collection, RecallEstimate(
            round(estimate, 4), len(queries), k, name, value, depth if name == "nprobe" else None, source, points,
            round(latency, 3), time.time(), recall.sample_kind(len(searched), len(queries)), len(searched),
            {"lists": lists, **({"pq": 1} if codes == "pq" else {}), **({"grouped": 1} if order == 2 else {})}
            if lists else None, trials))
        if source == "tuned" and lists and record.recall < floor:
            choice = self._choose_lists(collection, record, lists, codes, coll.dim)
            if choice and choice.get("codes", codes) != codes:
                self._retrain(collection)
        return record

    def _record(self, collection: str, estimate: RecallEstimate) -> RecallEstimate:
        recall.write_estimate(self._folder(collection) / RECALL_FILE, estimate, f"FAISS collection {collection!r}")
        with self._lock:
            self._recall[collection] = (estimate, time.monotonic())
        return estimate


def explicit(settings: Settings) -> dict[str, int]:
    """The store options an explicit ``faiss_nprobe`` / ``faiss_ef_search`` / ``faiss_ivf_lists`` setting gives
    (never tuned or chosen)."""
    pairs = (("ivf_nprobe", settings.faiss_nprobe), ("hnsw_ef_search", settings.faiss_ef_search),
             ("ivf_lists", settings.faiss_ivf_lists))
    return {key: int(value) for key, value in pairs if value is not None}


def _score(q: np.ndarray, v: np.ndarray, ip: bool) -> float:
    return float(q @ v) if ip else -float(((q - v) ** 2).sum())


def _sample(sidecar: Sidecar, size: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of about ``size`` distinct points: the first id at or after each of ``size`` random 63-bit
    numbers (ids are blake2b hashes, so uniform), wrapping around to the first id."""
    rng = np.random.default_rng(50)
    chosen: dict[int, bytes] = {}
    sql = "SELECT iid, vector FROM points WHERE iid >= ? ORDER BY iid LIMIT 1"
    for start in rng.integers(0, 2**63 - 1, size=size, dtype=np.int64).tolist():
        row = sidecar.conn.execute(sql, (start,)).fetchone() or sidecar.conn.execute(sql, (-(2**63),)).fetchone()
        if row is not None:
            chosen[int(row[0])] = row[1]
    ids = np.asarray(sorted(chosen), dtype=np.int64)
    vectors = np.frombuffer(b"".join(chosen[i] for i in ids.tolist()), dtype="<f4").reshape(len(ids), dim)
    return ids, vectors.astype(np.float32)


def _exact_top(
    sidecar: Sidecar, queries: np.ndarray, own: np.ndarray, mine: np.ndarray, k: int, ip: bool,
) -> list[Sequence[Any]]:
    """Each query's exact ``k`` nearest (id, score) over every stored vector, its own point (``own`` where ``mine``:
    a chunk used as a query, not a search) left out."""
    n = len(queries)
    best_s = np.full((n, k), -np.inf, dtype=np.float64)
    best_i = np.full((n, k), -1, dtype=np.int64)
    sq = (queries.astype(np.float64) ** 2).sum(axis=1)[:, None]
    cursor = sidecar.conn.execute("SELECT iid, vector FROM points")
    while rows := cursor.fetchmany(PAGE):
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
        scores = (queries @ vectors.T).astype(np.float64)
        if not ip:
            scores = -(sq - 2 * scores + (vectors.astype(np.float64) ** 2).sum(axis=1)[None, :])
        scores[(ids[None, :] == own[:, None]) & mine[:, None]] = -np.inf
        all_s = np.concatenate([best_s, scores], axis=1)
        all_i = np.concatenate([best_i, np.broadcast_to(ids, (n, len(ids)))], axis=1)
        top = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(all_s, top, axis=1)
        best_i = np.take_along_axis(all_i, top, axis=1)
    return [[(str(i), float(s)) for i, s in zip(ids_row.tolist(), s_row.tolist(), strict=True) if i >= 0 and
             s > -np.inf] for ids_row, s_row in zip(best_i, best_s, strict=True)]
