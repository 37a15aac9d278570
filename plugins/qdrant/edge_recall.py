"""Recall that holds on embedded Qdrant (:class:`indexer.plugin_api.RecallCheck`; docs/stores.md#recall-that-holds).

A mixin of :class:`plugins.qdrant.edge.EdgeStore`. A measurement takes the collection's recent searches as queries (the
ring every search feeds: :class:`indexer.search.recall.RecentQueries`), filled up when there are fewer than ``sample``
with points of the collection (the first point at or after each of random UUIDs: chunk ids are hashes, so uniform, each
one's own point left out), asks the engine for each one's exact neighbours (``exact=True`` with the int8 codes ignored:
a full scan of the float vectors) and compares the search as it runs (HNSW at ``hnsw_ef``, the best ``oversampling x
limit`` of the int8 codes rescored with the float vectors), each query's own point left out. With tuning, ``hnsw_ef``
and the oversampling are raised, whichever gains more recall per millisecond first
(:func:`indexer.search.recall.climb`), until the estimate meets the floor or a query's median time passes the latency
budget; every step is recorded. The estimate is recorded in ``edge/<collection>.recall.json`` and the tuned values used
by every search that follows; an explicit ``hnsw_ef`` (setting ``qdrant_hnsw_ef``) wins and is never tuned. When the
tuning cannot reach the floor, or reaches it only past GRAPH_SPEED_SHARE of the latency budget, the graph itself is
made denser (``m`` and ``ef_construct`` doubled, recorded in ``edge/<collection>.graph.json``) and built again in the
background; the settings ``qdrant_hnsw_m`` / ``qdrant_ef_construct`` win and are never changed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from indexer.plugin_api import Metric, RecallEstimate, recall
from plugins.qdrant import selection
from plugins.qdrant.edge_build import BackgroundBuilder, graph_of

logger = logging.getLogger(__name__)

RECALL_SUFFIX = ".recall.json"
RECENT_SUFFIX = ".recent_queries.npz"  # the ring of recent query vectors (indexer.search.recall.RecentQueries)
RE_READ_S = 30.0  # a process that did not measure reads the recorded choice again after this long
EF_CAP = 8192  # the widest beam tried (the latency budget stops it first; boilerplate at 100k: 0.77 at 2048, 0.91 at
# 8192, 3.8 ms; the int8 codes lose nothing there: ignoring them gives the same recall at twice the time)
OVERSAMPLING_CAP = 16  # the most int8 candidates per result rescored with the float vectors
GRAPH_SUFFIX = ".graph.json"  # the HNSW graph chosen for the next builds, with its reason
M_CAP, EF_CONSTRUCT_CAP = 64, 512  # the densest graph chosen (each step doubles m and ef_construct)
# A denser graph is also chosen when the floor is met but only at a median query time over this share of the
# latency budget (3 ms of the default 5): the beam had to be widened that far because the graph is too sparse for
# the data (1M SciFact-derived points, m 16: 0.655 at hnsw_ef 128, the floor only at 2048, 4.4 ms); after one such
# step another only if it bought at least 1 - SPEED_GAIN of the time.
GRAPH_SPEED_SHARE = 0.6
SPEED_GAIN = 0.8


def graph_reason(estimate: RecallEstimate, floor: float, latency_budget_ms: float, default_ef: int,
                 previous: Mapping[str, Any] | None) -> str | None:
    """Why a tuned ``estimate`` calls for a denser graph ("recall": the floor missed with the search-time values
    at their caps or the budget spent; "speed": met only past GRAPH_SPEED_SHARE of the budget, with the beam
    raised above its default), or None. A speed step after a previous one must have bought SPEED_GAIN."""
    if estimate.recall < floor:
        return "recall"
    slow = (estimate.latency_ms or 0.0) > GRAPH_SPEED_SHARE * latency_budget_ms and (estimate.value or 0) > default_ef
    if not slow:
        return None
    before = previous or {}
    if before.get("for") == "speed" and isinstance(before.get("latency_ms"), int | float):
        return "speed" if estimate.latency_ms < SPEED_GAIN * before["latency_ms"] else None
    return "speed"


def search_params(ef: int, oversampling: float | None, limit: int) -> Any:
    """The engine's search parameters: beam ``max(ef, 2 x limit)``, the int8 codes' best ``oversampling x limit``
    rescored (None: no codes)."""
    qe = selection.edge()
    rescore = qe.QuantizationSearchParams(rescore=True, oversampling=float(oversampling)) if oversampling else None
    return qe.SearchParams(hnsw_ef=max(int(ef), 2 * limit), quantization=rescore)


class EdgeRecall:
    """RecallCheck on qdrant-edge shards (mixed into EdgeStore, whose members these use)."""

    path: Path
    read_only: bool
    _lock: threading.RLock
    _require: Callable[[str], Any]
    _call: Callable[..., Any]
    _shape: Callable[[str], tuple[int, Metric]]
    _query: Callable[[str, Any], Any]
    count: Callable[[str], int]
    _pages: Callable[..., Any]
    _dir: Callable[[str], Path]
    _swap_built: Callable[[str, Path], None]
    builder: BackgroundBuilder

    def _init_recall(self, fixed_ef: int | None, default_ef: int, oversampling: float | None,
                     graph: Mapping[str, int] | None = None) -> None:
        self.fixed_ef = fixed_ef  # an explicit setting: never tuned
        self.fixed_graph = {key: int(value) for key, value in (graph or {}).items() if value}  # settings: never chosen
        self._defaults = (default_ef, oversampling)
        self._recall: dict[str, tuple[RecallEstimate | None, float]] = {}  # per collection: the record, when read
        self.reread_s = RE_READ_S
        self._recent: dict[str, recall.RecentQueries] = {}

    def recent_queries(self, collection: str) -> recall.RecentQueries:
        """The ring of ``collection``'s recent query vectors (``edge/<collection>.recent_queries.npz``; a read-only
        worker keeps its own in memory)."""
        with self._lock:
            ring = self._recent.get(collection)
            if ring is None:
                path = None if self.read_only else self.path / "edge" / f"{collection}{RECENT_SUFFIX}"
                ring = self._recent[collection] = recall.RecentQueries(path)
            return ring

    def _save_recent(self) -> None:
        for ring in list(self._recent.values()):
            ring.save()

    def _recall_file(self, collection: str) -> Path:
        return self.path / "edge" / f"{collection}{RECALL_SUFFIX}"

    def recall_estimate(self, collection: str) -> RecallEstimate | None:
        return recall.read_estimate(self._recall_file(collection))

    def _tuned(self, collection: str) -> tuple[int, float | None]:
        """(hnsw_ef, oversampling) searches use now: the explicit setting, else the tuned ones, else the defaults."""
        ef, oversampling = self._defaults
        if self.fixed_ef:
            return self.fixed_ef, oversampling
        estimate, read_at = self._recall.get(collection, (None, float("-inf")))
        if time.monotonic() - read_at > self.reread_s:  # a stateless worker: the writer may have tuned it since
            estimate = self.recall_estimate(collection)
            self._recall[collection] = (estimate, time.monotonic())
        if estimate is not None and estimate.source == "tuned" and estimate.param == "hnsw_ef" and estimate.value:
            return estimate.value, float(estimate.rescore) if oversampling and estimate.rescore else oversampling
        return ef, oversampling

    def _graph_file(self, collection: str) -> Path:
        return self.path / "edge" / f"{collection}{GRAPH_SUFFIX}"

    def graph_choice(self, collection: str) -> dict[str, Any] | None:
        """The recorded choice of the HNSW graph for the next builds: {m, ef_construct, why, recall, points, at}."""
        try:
            choice = json.loads(self._graph_file(collection).read_text())
        except (OSError, ValueError):
            return None
        return choice if isinstance(choice, dict) else None

    def _graph_for(self, collection: str) -> dict[str, int]:
        """The HNSW ``m`` / ``ef_construct`` a build of ``collection`` uses: the explicit settings, else the recorded
        choice, else {} (the shard's own: HNSW_M / HNSW_EF_CONSTRUCT from its creation, which hold at 1M chunks on
        the SciFact-derived set: recall 0.981)."""
        choice = self.graph_choice(collection) or {}
        chosen = {key: int(choice[key]) for key in ("m", "ef_construct") if isinstance(choice.get(key), int)}
        return {**chosen, **self.fixed_graph}

    def _choose_graph(self, collection: str, estimate: RecallEstimate, reason: str = "recall") -> dict[str, Any] | None:
        """After a tuning that could not reach the floor (the beam and oversampling at their caps or the latency
        budget spent), the graph itself misses neighbours; after one that reached it only with a beam that costs
        too much (``reason`` "speed", :func:`graph_reason`), it is too sparse for the data: the next build doubles
        ``m`` and ``ef_construct`` (up to M_CAP / EF_CONSTRUCT_CAP; an explicit setting is kept), the choice is
        recorded with its reason, and that build starts now, in the background (the whole graph is built again;
        searches go on meanwhile, at the tuned values)."""
        now = graph_of(self._dir(collection))
        if not now or self.read_only:
            return None
        caps = {"m": M_CAP, "ef_construct": EF_CONSTRUCT_CAP}
        free = {key: min(cap, now[key] * 2) for key, cap in caps.items() if key not in self.fixed_graph}
        if all(value == now[key] for key, value in free.items()):
            return None  # at the caps, or fixed by the settings
        raised = {**now, **free, **self.fixed_graph}
        where = (f"hnsw_ef {estimate.value}, oversampling {estimate.rescore} with m {now['m']}, ef_construct "
                 f"{now['ef_construct']}")
        why = (f"recall {estimate.recall:.3f} at a median {estimate.latency_ms} ms a query at {where}: the floor "
               "costs too much of the latency budget" if reason == "speed" else
               f"recall {estimate.recall:.3f} below the floor at {where}")
        choice = {**raised, "why": why, "for": reason, "recall": estimate.recall, "latency_ms": estimate.latency_ms,
                  "points": estimate.points, "at": time.time()}
        recall.write_estimate_json(self._graph_file(collection), choice, f"embedded Qdrant collection {collection!r}")
        logger.warning("embedded Qdrant collection %s: %s; building its HNSW graph again with m %d, ef_construct %d",
                       collection, choice["why"], raised["m"], raised["ef_construct"])
        self.builder.rebuild(collection, self._dir(collection), self._swap_built)
        return choice

    def _forget_recall(self, collection: str) -> None:
        self._recall.pop(collection, None)
        self._recall_file(collection).unlink(missing_ok=True)
        self._graph_file(collection).unlink(missing_ok=True)
        ring = self._recent.pop(collection, None)
        if ring is not None:
            ring.clear()
        (self.path / "edge" / f"{collection}{RECENT_SUFFIX}").unlink(missing_ok=True)

    def measure_recall(
        self, collection: str, sample: int = recall.SAMPLE, tune: bool = True, floor: float = recall.FLOOR,
        latency_budget_ms: float = recall.LATENCY_BUDGET_MS,
    ) -> RecallEstimate:
        qe = selection.edge()
        k = recall.K
        dims, metric = self._shape(collection)
        negate = metric in (Metric.EUCLID, Metric.MANHATTAN)
        points = self.count(collection)
        default_ef, oversampling = self._defaults
        if points <= k + 1:  # every point is a candidate: nothing to miss
            exact_search = RecallEstimate(1.0, 0, k, None, None, None, "exact", points, None, time.time())
            return self._record(collection, exact_search)
        searched = self.recent_queries(collection).vectors(dims, sample)
        own, queries = self._sample(collection, sample - len(searched), points) if len(searched) < sample else (
            [], np.zeros((0, dims), np.float32))
        own = [""] * len(searched) + own  # a search has no point of its own to leave out
        queries = np.concatenate([searched, queries.reshape(-1, dims)]).astype(np.float32)
        exact_params = qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))

        def ranked(query: np.ndarray, me: str, params: Any) -> list[tuple[str, float]]:
            request = qe.QueryRequest(limit=k + 1 if me else k, query=qe.Query.Nearest(query.tolist()),
                                      with_payload=False,
                                      params=params)
            found = self._query(collection, request)
            return [(str(p.id), -float(p.score) if negate else float(p.score)) for p in found if str(p.id) != me][:k]

        truth = [ranked(q, me, exact_params) for q, me in zip(queries, own, strict=True)]

        def measure(at: tuple[int, ...]) -> tuple[float, float, float]:
            ef, depth = at
            got, times = [], []  # a search asks for k, as users' do; a chunk for k + 1 (itself left out)
            for q, me in zip(queries, own, strict=True):
                start = time.perf_counter()
                got.append(ranked(q, me, search_params(ef, depth if oversampling else None, k + 1 if me else k)))
                times.append(time.perf_counter() - start)
            mean, error = recall.estimate(got, truth, k)
            return mean, float(np.median(times)) * 1000 if times else 0.0, error

        start_depth = int(oversampling or 1)
        trials = None
        if tune and not self.fixed_ef:
            caps = (EF_CAP, OVERSAMPLING_CAP if oversampling else start_depth)
            chosen, tried = recall.climb(measure, (default_ef, start_depth), caps, floor, latency_budget_ms)
            (value, depth), estimate, latency, source = chosen.value, chosen.recall, chosen.latency_ms, "tuned"
            trials = [[*t.value, round(t.recall, 4), round(t.latency_ms, 3), round(t.error, 4)] for t in tried]
        else:
            value, depth = self.fixed_ef or default_ef, start_depth
            estimate, latency, _error = measure((value, depth))
            source = "setting" if self.fixed_ef else "default"
        record = self._record(collection, RecallEstimate(
            round(estimate, 4), len(queries), k, "hnsw_ef", value, depth if oversampling else None, source, points,
            round(latency, 3), time.time(), recall.sample_kind(len(searched), len(queries)), len(searched),
            graph_of(self._dir(collection)) or None, trials))
        if source == "tuned" and not self.builder.building(collection):
            reason = graph_reason(record, floor, latency_budget_ms, default_ef, self.graph_choice(collection))
            if reason:
                self._choose_graph(collection, record, reason)
        return record

    def _sample(self, collection: str, size: int, points: int) -> tuple[list[str], np.ndarray]:
        """(ids, vectors) of about ``size`` distinct points: the first at or after each of ``size`` random UUIDs
        (cheap, uniform when ids are hashes, as chunk ids are); when that finds fewer than half (ids that are not
        hashes, e.g. sequential), a uniform choice among every id listed."""
        qe = selection.edge()
        rng = np.random.default_rng(50)
        chosen: dict[str, np.ndarray] = {}

        def keep(records: Any) -> None:
            for record in records:
                vector = record.vector
                dense = vector.get("") if isinstance(vector, dict) else vector
                chosen[str(record.id)] = np.asarray(dense, dtype=np.float32)

        for _ in range(size):
            offset = str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 65 | int(rng.integers(0, 2**63)), version=4))
            for start in (offset, None):  # past the last id: wrap around to the first
                request = qe.ScrollRequest(offset=start, limit=1, with_payload=False, with_vector=True)
                with self._lock:
                    shard = self._require(collection)
                    records, _next = self._call("sample points", lambda s=shard, r=request: s.scroll(r))
                if records:
                    keep(records[:1])
                    break
        if len(chosen) < min(size, points) // 2:
            every = sorted(str(r.id) for page in self._pages(collection, with_payload=False, with_vector=False)
                           for r in page)
            picked = [every[i] for i in recall.sample_rows(len(every), size).tolist()]
            chosen.clear()
            with self._lock:
                shard = self._require(collection)
                keep(self._call("sample points", lambda: shard.retrieve(picked, False, True)))
        ids = sorted(chosen)
        return ids, np.stack([chosen[i] for i in ids]) if ids else np.zeros((0, 1), np.float32)

    def _record(self, collection: str, estimate: RecallEstimate) -> RecallEstimate:
        if not self.read_only:  # a stateless worker keeps its estimate in memory
            recall.write_estimate(self._recall_file(collection), estimate,
                                  f"embedded Qdrant collection {collection!r}")
        with self._lock:
            self._recall[collection] = (estimate, time.monotonic())
        return estimate
