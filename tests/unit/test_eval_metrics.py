"""`indexer eval`'s arithmetic on a hand-computed qrels fixture (4 judged queries, graded relevance, a glob, a
judged-irrelevant document, a query without relevant documents), in JSONL, TSV and BEIR form; the paired
bootstrap comparison. Rankings are fixed lists: what is checked is the counting, not a search."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from indexer.errors import InputError
from indexer.ops import evaluate, metrics, qrels

# query -> (grades, the files a search returns, best first)
CASES = {
    "q1": ("bake bread", {"a.md": 2, "b.md": 1}, ["b.md", "c.md", "a.md"]),
    "q2": ("saturn rings", {"d.md": 1}, ["a.md", "b.md", "c.md", "d.md"]),
    "q3": ("meeting notes", {"notes/*.md": 1, "e.md": 0}, ["e.md", "notes/x.md", "notes/y.md"]),
    "q4": ("tax forms", {"f.md": 3}, ["a.md"]),
    "q5": ("nothing relevant", {"x.md": 0}, ["a.md"]),
}

L2 = math.log2
# worked by hand: gain = grade, discount log2(rank + 1); the ideal orders the judged grades
NDCG = {
    "q1": (1 / L2(2) + 2 / L2(4)) / (2 / L2(2) + 1 / L2(3)),  # b (1) at 1, a (2) at 3
    "q2": (1 / L2(5)) / 1,  # d at 4
    "q3": (1 / L2(3)) / 1,  # e judged 0 at 1, the glob's first match at 2, its second match not counted again
    "q4": 0.0,
}
RR = {"q1": 1.0, "q2": 1 / 4, "q3": 1 / 2, "q4": 0.0}
RECALL_100 = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 0.0}
RECALL_2 = {"q1": 0.5, "q2": 0.0, "q3": 1.0, "q4": 0.0}


def _search(text: str, mode: str, rerank: bool) -> list[str]:
    return next(files for t, _, files in CASES.values() if t == text)


def _write_jsonl(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": qid, "query": t, "relevant": g}) + "\n"
                            for qid, (t, g, _) in CASES.items()), encoding="utf-8")
    return path


def _write_tsv(path: Path) -> Path:
    path.write_text("".join(f"{t}\t{d}\t{g}\n" for t, grades, _ in CASES.values() for d, g in grades.items()),
                    encoding="utf-8")
    return path


def _write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": qid, "text": t}) + "\n"
                                                  for qid, (t, _, _) in CASES.items()), encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{qid}\t{d}\t{g}" for qid, (_, grades, _) in CASES.items()
                                              for d, g in grades.items()]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(params=["jsonl", "tsv", "beir"])
def loaded(request: pytest.FixtureRequest, tmp_path: Path) -> list[qrels.Query]:
    write = {"jsonl": lambda: _write_jsonl(tmp_path / "q.jsonl"), "tsv": lambda: _write_tsv(tmp_path / "q.tsv"),
             "beir": lambda: _write_beir(tmp_path / "beir")}[request.param]
    return qrels.load(write())


def test_hand_computed_figures_in_every_format(loaded: list[qrels.Query]) -> None:
    assert len(loaded) == 5 and sum(1 for q in loaded if q.relevant) == 4
    (run,) = evaluate.evaluate(loaded, _search, [("hybrid", False)], recall_k=100)
    by_text = {s.query: s for s in run.scores}
    for qid, (text, _, _) in list(CASES.items())[:4]:
        s = by_text[text]
        assert s.ndcg == pytest.approx(NDCG[qid], abs=1e-12), qid
        assert s.rr == pytest.approx(RR[qid], abs=1e-12), qid
        assert s.recall == pytest.approx(RECALL_100[qid], abs=1e-12), qid
    summary = run.summary()
    assert summary["queries"] == 4  # q5 has no relevant document: not scored
    assert summary["ndcg@10"] == round(sum(NDCG.values()) / 4, 4) == 0.4554
    assert summary["recall@100"] == 0.75
    assert summary["mrr"] == 0.4375
    (two,) = evaluate.evaluate(loaded, _search, [("hybrid", False)], recall_k=2)
    assert two.mean("recall") == pytest.approx(sum(RECALL_2.values()) / 4) == 0.375
    assert [s.query for s in run.worst(2)] == ["tax forms", "saturn rings"]


def test_paths_relative_to_a_root_and_template(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"query": "bake bread", "relevant": ["a"]}) + "\n", encoding="utf-8")
    loaded = qrels.load(path, template="docs/{id}.md")
    root = tmp_path / "corpus"

    def search(text: str, mode: str, rerank: bool) -> list[str]:
        return [str(root / "docs" / "b.md"), str(root / "docs" / "a.md")]

    (run,) = evaluate.evaluate(loaded, search, [("dense", False)], root=root.resolve())
    assert run.scores[0].first_relevant == 2
    assert run.scores[0].ndcg == pytest.approx(1 / math.log2(3))


def test_chunks_collapse_to_their_file_at_its_best_rank() -> None:
    assert evaluate.files_in_order(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_bootstrap_tells_noise_from_a_difference() -> None:
    a = {f"q{i}": 0.5 for i in range(40)}
    same = metrics.paired_bootstrap(a, dict(a))
    assert (same.delta, same.low, same.high, same.significant) == (0.0, 0.0, 0.0, False)
    better = metrics.paired_bootstrap(a, {q: v + 0.1 + 0.01 * (i % 3) for i, (q, v) in enumerate(a.items())})
    assert better.significant and better.low > 0.09
    mixed = metrics.paired_bootstrap(a, {q: v + (0.2 if i % 2 else -0.2) for i, (q, v) in enumerate(a.items())})
    assert not mixed.significant and mixed.low < 0 < mixed.high


def test_compare_reads_back_a_saved_report(tmp_path: Path) -> None:
    loaded = qrels.load(_write_jsonl(tmp_path / "q.jsonl"))
    runs = evaluate.evaluate(loaded, _search, [("dense", False), ("hybrid", False)])
    saved = json.loads(json.dumps(evaluate.report(runs, loaded)))
    again = evaluate.runs_from_dict(saved)
    rows = evaluate.compare(again, runs)
    assert [r["run"] for r in rows] == ["dense", "hybrid"] and all(r["delta"] == 0 for r in rows)
    with pytest.raises(InputError, match="share no run"):
        evaluate.compare(runs[:1], runs[1:])


@pytest.mark.parametrize(("text", "message"), [
    ('{"query": "x"}\n', "needs \"query\""),
    ("not json\n", "not JSON"),
    ('{"query": "x", "relevant": {"a.md": "high"}}\n', "not a number"),
    ('{"query": "x", "relevant": {"a.md": 0}}\n', "no query has a relevant document"),
])
def test_bad_queries_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        qrels.load(path)


def test_a_document_found_at_rank_4_is_found_and_the_reasons_for_the_others(tmp_path: Path) -> None:
    loaded = qrels.load(_write_jsonl(tmp_path / "q.jsonl"))
    runs = evaluate.evaluate(loaded, _search, [("dense", False)])
    report = evaluate.report(runs, loaded)
    # q2's d.md ranks 4th (recall 1.0): found; only q4's f.md is never found (the glob of q3 is found too)
    assert report["never_found"] == ["f.md"]
    saved = {s["qid"]: s for s in report["runs"][0]["queries"]}
    assert saved["q2"]["found"] == ["d.md"] and saved["q2"]["recall"] == 1.0
    assert [s.query for s in runs[0].worst(10)] == ["tax forms", "saturn rings", "meeting notes", "bake bread"]
    root = tmp_path / "corpus"
    (root / "indexed").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    (root / "indexed" / "a.md").write_text("a")
    (root / "elsewhere" / "b.md").write_text("b")
    why = evaluate.why_not_found(["indexed/a.md", "elsewhere/b.md", "missing.md", "nothing/*.md"], root,
                                 [str(root / "indexed")])
    assert why["indexed/a.md"].startswith("indexed, but not in any run's results")
    assert why["elsewhere/b.md"].startswith("outside the collection's roots")
    assert why["missing.md"].startswith("no such file under") and "--doc-template" in why["missing.md"]
    assert why["nothing/*.md"].startswith("no such file under")


def test_perfect_queries_are_not_listed_among_the_worst(tmp_path: Path) -> None:
    loaded = qrels.load(_write_jsonl(tmp_path / "q.jsonl"))

    def perfect(text: str, mode: str, rerank: bool) -> list[str]:
        return {"bake bread": ["a.md", "b.md"]}.get(text, _search(text, mode, rerank))

    (run,) = evaluate.evaluate(loaded, perfect, [("dense", False)])
    assert "bake bread" not in [s.query for s in run.worst(10)] and len(run.worst(10)) == 3
