"""Ranking metrics with graded relevance, and a paired bootstrap comparison (used by `indexer eval` and
bench/retrieval_quality.py).

Conventions are trec_eval's (and BEIR's, through pytrec_eval): gain is the relevance grade itself, discounted by
``log2(rank + 1)``; the ideal ranking orders every judged document by grade; a grade of 0 or less is not
relevant. ``ranked`` is a query's ranked list of document keys; ``grades`` maps judged keys to grades.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0


def dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0)


def ndcg_at(ranked: Sequence[str], grades: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k: 0.0 for a query without a relevant document."""
    ideal = dcg(sorted((g for g in grades.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(0.0, float(grades.get(d, 0))) for d in ranked[:k]]) / ideal


def recall_at(ranked: Sequence[str], grades: Mapping[str, float], k: int = 100) -> float:
    """Share of the relevant documents (grade > 0) in the first ``k``."""
    relevant = {d for d, g in grades.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(ranked[:k])) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], grades: Mapping[str, float]) -> float:
    """1 / the rank of the first relevant document in the ranked list (0.0 when none is there)."""
    for i, d in enumerate(ranked):
        if grades.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def first_relevant_rank(ranked: Sequence[str], grades: Mapping[str, float]) -> int | None:
    rr = reciprocal_rank(ranked, grades)
    return round(1 / rr) if rr else None


@dataclass(frozen=True)
class Comparison:
    """Mean of ``b - a`` over paired queries with a bootstrap confidence interval."""

    metric: str
    queries: int
    mean_a: float
    mean_b: float
    delta: float
    low: float
    high: float
    level: float

    @property
    def significant(self) -> bool:
        """The interval excludes 0: the difference is unlikely to be noise of the query sample."""
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "queries": self.queries, "a": round(self.mean_a, 4),
                "b": round(self.mean_b, 4), "delta": round(self.delta, 4), "ci_low": round(self.low, 4),
                "ci_high": round(self.high, 4), "level": self.level, "significant": self.significant}


def paired_bootstrap(a: Mapping[str, float], b: Mapping[str, float], metric: str = "ndcg@10",
                     samples: int = BOOTSTRAP_SAMPLES, level: float = 0.95, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """Resample the queries both runs answered (with replacement) and take the percentile interval of the mean
    difference ``b - a``."""
    qids = sorted(set(a) & set(b))
    if not qids:
        raise ValueError("the two runs share no query; compare runs of the same queries file")
    diffs = [b[q] - a[q] for q in qids]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    tail = (1 - level) / 2
    low = means[int(math.floor(tail * (samples - 1)))]
    high = means[int(math.ceil((1 - tail) * (samples - 1)))]
    return Comparison(metric, n, sum(a[q] for q in qids) / n, sum(b[q] for q in qids) / n, sum(diffs) / n, low, high,
                      level)
