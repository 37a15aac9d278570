"""Retrieval for the three search modes and the fusion of the dense and lexical rankings.

- ``dense``: the store's vector search;
- ``lexical``: the store's BM25 search (:class:`indexer.ports.LexicalSearch`);
- ``hybrid``: both, each ``depth`` deep, fused into one ranking.

Fusion methods (measured on SciFact in docs/benchmarks.md):

- ``rrf``: reciprocal rank fusion, ``sum(w / (RRF_K + rank))`` over the lists a chunk appears in;
- ``score``: each list's scores min-max normalised to [0, 1] over its hits, then ``w * dense + (1 - w) * lexical``
  (a chunk missing from a list gets 0 there);
- ``dbsf``: distribution-based score fusion, as Qdrant's engine computes it: each list's scores mapped from
  ``[mean - 3 sd, mean + 3 sd]`` (sample standard deviation) to [0, 1] (0.5 when a list's scores do not vary),
  then weighted and summed. At ``w = 0.5`` it ranks exactly as qdrant-edge's in-engine ``Fusion.Dbsf``
  (tests/contract/test_qdrant_edge.py).

``dense_weight`` is ``w`` (the dense side's share; 0.5 weighs both halves equally). The default (``score``, 0.4)
was chosen on one half of SciFact's queries and checked on the other (docs/benchmarks.md). ``dbsf`` (0.5) is
qdrant-edge's in-engine fusion: on embedded Qdrant it measured +0.007 nDCG@10 over ours, but run as the rule for
both stores it gains +0.002 on FAISS (within the halves' noise) and puts the two stores 0.0045 apart, where the
default keeps them within 0.0003 (docs/stores.md): so it is offered, not the default.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from indexer.errors import InputError
from indexer.ports import LexicalSearch, VectorStore, lexical_index
from indexer.types import Filter, Hit

MODES = ("dense", "lexical", "hybrid")
FUSIONS = ("rrf", "score", "dbsf")
RRF_K = 60


# The dense side's share when none is set: dbsf at 0.5 is Qdrant's in-engine rule; score/rrf keep 0.4 (tuned on
# half of SciFact's queries).
DEFAULT_WEIGHTS = {"dbsf": 0.5, "score": 0.4, "rrf": 0.4}


@dataclass(frozen=True)
class FusionConfig:
    method: str = "score"
    dense_weight: float = 0.4
    depth_factor: int = 2  # each side fetches this many times the candidates (at least 50)
    min_depth: int = 50

    @classmethod
    def of(cls, method: str, dense_weight: float | None = None) -> FusionConfig:
        """The config of ``method`` with ``dense_weight``, or the method's default weight."""
        return cls(method=method, dense_weight=DEFAULT_WEIGHTS.get(method, 0.5) if dense_weight is None
                   else dense_weight)


def lexical_store(store: VectorStore, collection: str, mode: str) -> LexicalSearch:
    """The store's lexical index, built, or an InputError saying how to get one."""
    lexical = lexical_index(store)
    if lexical is None:
        raise InputError(
            f"search mode {mode!r} needs a lexical index, which the {store.name} store does not "
            "keep; use mode 'dense'"
        )
    if not lexical.has_lexical(collection):
        raise InputError(
            f"collection {collection!r} has no lexical index yet (it was made by an older version); run "
            f"`indexer index -c {collection}` once to build it (nothing is re-embedded), or use mode 'dense'"
        )
    return lexical


def fuse(dense: Sequence[Hit], lexical: Sequence[Hit], config: FusionConfig) -> list[Hit]:
    """One ranking of the chunks in either list, best first; ``Hit.score`` is the fused score.

    An image point (payload ``media``) has no words: the lexical side can find it only by its file name. One the
    lexical side did not find keeps its dense rank (placed where the dense side ranked it: never sunk by a
    lexical score it cannot have, never lifted above text it ranked below), its score its dense value clamped
    between its neighbours'. One the lexical side found is scored as any chunk, each side counted once
    (``w x dense + (1 - w) x lexical``), so its name can earn it a better place, but not twice: it takes the
    better of the two places. Scores stay in each method's range ([0, 1] for ``score``)."""
    if config.method not in FUSIONS:
        raise InputError(f"unknown fusion {config.method!r}; use one of {', '.join(FUSIONS)}")
    w = config.dense_weight
    if not 0.0 <= w <= 1.0:
        raise InputError(f"fusion dense_weight={w} is out of range; use 0..1")
    scores: dict[str, float] = {}
    hits: dict[str, Hit] = {}
    dense_values: dict[str, float] = {}
    for weight, ranked in ((w, dense), (1.0 - w, lexical)):
        values = _NORMALIZE[config.method](ranked)
        for hit, value in zip(ranked, values, strict=True):
            hits.setdefault(hit.id, hit)
            scores[hit.id] = scores.get(hit.id, 0.0) + weight * value
            if ranked is dense:
                dense_values[hit.id] = value
    lexical_ids = {h.id for h in lexical}
    dense_rank = {h.id: r for r, h in enumerate(dense)}
    pictures = [h.id for h in dense if h.payload.get("media")]
    held = {i for i in pictures if i not in lexical_ids}
    order = sorted((i for i in scores if i not in held), key=lambda i: (-scores[i], i))
    for pid in pictures:  # best dense first, so each keeps its place among those before it
        earned = order.index(pid) if pid in order else None
        if pid not in held:
            order.remove(pid)
        at = dense_rank[pid] if earned is None else min(dense_rank[pid], earned)
        at = min(at, len(order))
        above = scores[order[at - 1]] if at > 0 else float("inf")
        below = scores[order[at]] if at < len(order) else float("-inf")
        own = scores[pid] if earned is not None and earned <= dense_rank[pid] else dense_values[pid]
        scores[pid] = min(max(own, below), above) if below != float("-inf") or above != float("inf") else own
        order.insert(at, pid)
    return [Hit(id=i, score=scores[i], payload=hits[i].payload) for i in order]


def _rrf(ranked: Sequence[Hit]) -> list[float]:
    return [1.0 / (RRF_K + rank) for rank in range(1, len(ranked) + 1)]


def _minmax(ranked: Sequence[Hit]) -> list[float]:
    if not ranked:
        return []
    values = [h.score for h in ranked]
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [1.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def _dbsf(ranked: Sequence[Hit]) -> list[float]:
    if not ranked:
        return []
    values = np.asarray([h.score for h in ranked], dtype=np.float64)
    sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    if sd <= 1e-12:
        return [0.5] * len(values)
    low = float(values.mean()) - 3.0 * sd
    return [float(v) for v in (values - low) / (6.0 * sd)]


_NORMALIZE: dict[str, Callable[[Sequence[Hit]], list[float]]] = {"rrf": _rrf, "score": _minmax, "dbsf": _dbsf}


def kept(
    fetch: Callable[[int], list[Hit]],
    want: int,
    keep: Callable[[Sequence[str]], set[str]] | None,
    share: float = 1.0,
    among: Callable[[int], list[Hit]] | None = None,
) -> list[Hit]:
    """``fetch(want)``, or with ``keep``: the first ``want`` hits it keeps, fetching 1.5x ``want / share`` (at
    least 2x ``want``). When that first fetch holds too few (the filter's matches are far from the query):
    ``among(want)``, the search among the filter's listed matches, if given; else 4x deeper each round, until that
    many are kept or the store returns fewer than asked (it has no more)."""
    if keep is None:
        return fetch(want)
    n = max(want * 2, int(want * 1.5 / max(share, 0.01)))
    while True:
        found = fetch(n)
        ok = keep([h.id for h in found])
        hits = [h for h in found if h.id in ok]
        if len(hits) >= want or len(found) < n:
            return hits[:want]
        if among is not None:
            return among(want)
        n *= 4


def depth(candidates: int, config: FusionConfig) -> int:
    return max(candidates * config.depth_factor, config.min_depth)


def retrieve(
    store: VectorStore,
    collection: str,
    mode: str,
    query: str,
    vector: Callable[[], np.ndarray],
    limit: int,
    where: Filter | None,
    config: FusionConfig,
    keep: Callable[[Sequence[str]], set[str]] | None = None,
    share: float = 1.0,
    listing: Callable[[], frozenset[str]] | None = None,
) -> tuple[list[Hit], dict[str, float]]:
    """The ranked candidates of one query in ``mode`` (at most ``limit``), and the time of each side in ms.

    ``vector`` embeds the query; it is called only when the dense side runs. ``keep`` (a broad filter's check,
    :class:`indexer.search.query.Selection`) says which candidate ids match; each side then fetches more until
    ``deep`` of its hits match or the store has no more: never fewer hits than match."""
    timings: dict[str, float] = {}
    if mode not in MODES:
        raise InputError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    lex = lexical_store(store, collection, mode) if mode != "dense" else None
    dense_hits: list[Hit] = []
    lexical_hits: list[Hit] = []
    deep = depth(limit, config) if mode == "hybrid" else limit
    listed: list[Filter] = []

    def among(search: Callable[[int, Filter], list[Hit]]) -> Callable[[int], list[Hit]] | None:
        """A search among the broad filter's matches, listed once for both sides (None: no listing)."""
        if listing is None:
            return None

        def run(n: int) -> list[Hit]:
            if not listed:
                ids = listing()
                listed.append(replace(where, ids=ids) if where is not None else Filter(ids=ids))
            return search(n, listed[0]) if listed[0].ids else []

        return run

    if mode != "lexical":
        t0 = time.perf_counter()
        query_vector = vector()
        t1 = time.perf_counter()
        dense_hits = kept(lambda n: store.search(collection, query_vector, n, where), deep, keep, share,
                          among(lambda n, f: store.search(collection, query_vector, n, f)))
        timings["embed"] = (t1 - t0) * 1000
        timings["dense"] = (time.perf_counter() - t1) * 1000
    if lex is not None:
        t0 = time.perf_counter()
        lexical_hits = kept(lambda n: lex.search_lexical(collection, query, n, where), deep, keep, share,
                            among(lambda n, f: lex.search_lexical(collection, query, n, f)))
        timings["lexical"] = (time.perf_counter() - t0) * 1000
    if mode == "dense":
        return dense_hits[:limit], timings
    if mode == "lexical":
        return lexical_hits[:limit], timings
    return fuse(dense_hits, lexical_hits, config)[:limit], timings


