"""`indexer eval`: a user's own yardstick. Each query of a qrels file (:mod:`indexer.ops.qrels`) is searched in
each run (a search mode, with or without the rerank stage); hits are collapsed to files at their best chunk's
rank, mapped to the qrels' documents (a path relative to the root, or a glob), and scored with nDCG@10,
recall@k and MRR (:mod:`indexer.ops.metrics`). Two reports of the same queries compare per run with a paired
bootstrap interval.

The search is a callable, so the same code scores a collection (:func:`collection_search`), a saved run or a
benchmark's own ranking (bench/retrieval_quality.py).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from indexer.errors import InputError
from indexer.ops import metrics
from indexer.ops.qrels import Query

# (query text, mode, rerank) -> the files found, best first (absolute or root-relative paths)
Search = Callable[[str, str, bool], list[str]]
NDCG_K = 10
RECALL_K = 100
MODES = ("dense", "lexical", "hybrid")
_GLOB = set("*?[")


def run_label(mode: str, rerank: bool) -> str:
    return f"{mode}+rerank" if rerank else mode


def files_in_order(paths: Iterable[str]) -> list[str]:
    """Chunk hits' paths collapsed to files, each at its best (first) rank."""
    seen: dict[str, None] = {}
    for p in paths:
        seen.setdefault(p, None)
    return list(seen)


def relative(path: str, root: Path | None) -> str:
    """``path`` as a posix path relative to ``root`` (as given when it is not under the root)."""
    if root is not None:
        try:
            return Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return PurePosixPath(Path(path).as_posix()).as_posix()


def as_documents(files: Sequence[str], grades: Mapping[str, float]) -> list[str]:
    """Each ranked file as the qrels document it is: its own path when judged, else the first unused glob of the
    query it matches (a glob counts once), else itself (not judged)."""
    globs = [d for d in grades if _GLOB & set(d)]
    used: set[str] = set()
    out: list[str] = []
    for f in files:
        if f in grades:
            out.append(f)
            continue
        match = next((g for g in globs if g not in used and fnmatch.fnmatchcase(f, g)), None)
        if match is not None:
            used.add(match)
        out.append(match or f)
    return out


@dataclass(frozen=True)
class QueryScore:
    qid: str
    query: str
    ndcg: float
    recall: float
    rr: float
    first_relevant: int | None
    top: tuple[str, ...]  # the first files found
    found: tuple[str, ...] = ()  # the relevant documents found at any rank searched (a glob as written)


@dataclass
class Run:
    mode: str
    rerank: bool
    recall_k: int
    scores: list[QueryScore] = field(default_factory=list)

    @property
    def label(self) -> str:
        return run_label(self.mode, self.rerank)

    def mean(self, name: str) -> float:
        values = [getattr(s, name) for s in self.scores]
        return sum(values) / len(values) if values else 0.0

    def per_query(self, name: str = "ndcg") -> dict[str, float]:
        return {s.qid: float(getattr(s, name)) for s in self.scores}

    def worst(self, n: int = 5) -> list[QueryScore]:
        """The ``n`` queries that fail worst; a perfect one (nDCG@10 1.0) is never listed."""
        failing = [s for s in self.scores if s.ndcg < 1.0 - 1e-9]
        return sorted(failing, key=lambda s: (s.ndcg, s.rr, s.qid))[:n]

    def summary(self) -> dict[str, Any]:
        return {"run": self.label, "mode": self.mode, "rerank": self.rerank, "queries": len(self.scores),
                f"ndcg@{NDCG_K}": round(self.mean("ndcg"), 4), f"recall@{self.recall_k}": round(self.mean("recall"), 4),
                "mrr": round(self.mean("rr"), 4)}


def score_query(q: Query, files: Sequence[str], recall_k: int) -> QueryScore:
    ranked = as_documents(files, q.grades)
    found = tuple(dict.fromkeys(d for d in ranked if q.grades.get(d, 0) > 0))
    return QueryScore(q.qid, q.text, metrics.ndcg_at(ranked, q.grades, NDCG_K),
                      metrics.recall_at(ranked, q.grades, recall_k), metrics.reciprocal_rank(ranked, q.grades),
                      metrics.first_relevant_rank(ranked, q.grades), tuple(files[:3]), found)


def evaluate(queries: Sequence[Query], search: Search, runs: Sequence[tuple[str, bool]], root: Path | None = None,
             recall_k: int = RECALL_K) -> list[Run]:
    """Score every query with a relevant document in every run; ``root`` makes found paths relative."""
    judged = [q for q in queries if q.relevant]
    out = []
    for mode, rerank in runs:
        run = Run(mode, rerank, recall_k)
        for q in judged:
            files = [relative(p, root) for p in search(q.text, mode, rerank)]
            run.scores.append(score_query(q, files, recall_k))
        out.append(run)
    return out


def unmatched(queries: Sequence[Query], runs: Sequence[Run]) -> list[str]:
    """Relevant documents no run found at any rank searched (a wrong root or template shows here first)."""
    found = {d for run in runs for s in run.scores for d in s.found}
    wanted = {d for q in queries if q.relevant for d, g in q.grades.items() if g > 0}
    return sorted(wanted - found)


def why_not_found(docs: Sequence[str], root: Path | None, roots: Sequence[str] = ()) -> dict[str, str]:
    """For each document never found, what the likely reason is: no such file under ``root`` (a wrong --root or
    --doc-template), a file outside the collection's ``roots`` (never indexed), or indexed but never retrieved."""
    tops = [Path(r).resolve() for r in roots]
    out = {}
    for doc in docs:
        if root is None or _GLOB & set(doc):
            matches = sorted(root.glob(doc)) if root is not None else []
            path = matches[0] if matches else None
        else:
            path = root / doc
        if path is None or not path.is_file():
            out[doc] = f"no such file under {root} (check --root / --doc-template)"
        elif tops and not any(path.resolve().is_relative_to(t) for t in tops):
            out[doc] = "outside the collection's roots (never indexed; `indexer index` that folder, or fix --root)"
        else:
            out[doc] = "indexed, but not in any run's results at any rank searched"
    return out


def compare(a: Sequence[Run], b: Sequence[Run], metric: str = "ndcg") -> list[dict[str, Any]]:
    """Per run label both sides have: b minus a, with a 95% paired bootstrap interval over queries."""
    b_runs = {r.label: r for r in b}
    out = []
    for run in a:
        other = b_runs.get(run.label)
        if other is not None:
            c = metrics.paired_bootstrap(run.per_query(metric), other.per_query(metric), f"{metric}@{NDCG_K}")
            out.append({"run": run.label, **c.to_dict()})
    if not out:
        raise InputError("the two evaluations share no run (mode and rerank); evaluate the same modes on both")
    return out


def runs_from_dict(data: Mapping[str, Any]) -> list[Run]:
    """Runs saved by `indexer eval --json` (for comparing with a later evaluation)."""
    try:
        runs = []
        for r in data["runs"]:
            run = Run(str(r["mode"]), bool(r["rerank"]), int(r.get("recall_k", RECALL_K)))
            run.scores = [QueryScore(str(s["qid"]), str(s["query"]), float(s["ndcg"]), float(s["recall"]),
                                     float(s["rr"]), s.get("first_relevant"), tuple(s.get("top", ())),
                                     tuple(s.get("found", ())))
                          for s in r["queries"]]
            runs.append(run)
        return runs
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a saved `indexer eval --json` report ({type(exc).__name__}: {exc})") from exc


def report(runs: Sequence[Run], queries: Sequence[Query], worst: int = 5) -> dict[str, Any]:
    """The evaluation as data (what `--json` prints and `--compare` reads back)."""
    return {
        "queries": len(queries), "judged": sum(1 for q in queries if q.relevant),
        "summary": [r.summary() for r in runs],
        "worst": {r.label: [_score_dict(s) for s in r.worst(worst)] for r in runs},
        "never_found": unmatched(queries, runs)[:20],
        "never_found_why": {},  # filled by the caller that knows the root and the collection's roots
        "runs": [{"mode": r.mode, "rerank": r.rerank, "recall_k": r.recall_k,
                  "queries": [_score_dict(s) for s in r.scores]} for r in runs],
    }


def _score_dict(s: QueryScore) -> dict[str, Any]:
    return {"qid": s.qid, "query": s.query, "ndcg": round(s.ndcg, 6), "recall": round(s.recall, 6),
            "rr": round(s.rr, 6), "first_relevant": s.first_relevant, "top": list(s.top), "found": list(s.found)}


def collection_search(col: Any, depth: int, candidates: int | None = None) -> Search:
    """Search an open collection (the facade's ``search``), collapsed to files: first what a search with the
    collection's ``candidates`` (or the given number) returns, as `indexer search -k CANDIDATES` ranks it (the
    fused ranking depends on its depth), then the files of a ``depth``-chunk retrieval not yet found (for
    recall@k; not reranked)."""
    limit = int(candidates or col.query_limits().candidates)

    def search(text: str, mode: str, rerank: bool) -> list[str]:
        top = col.search(text, k=limit, candidates=limit, mode=mode, rerank=rerank).hits
        deep = col.search(text, k=depth, mode=mode, rerank=False).hits if depth > limit else ()
        return files_in_order([*(h.path for h in top), *(h.path for h in deep)])

    return search
