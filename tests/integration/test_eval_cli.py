"""`indexer eval` on a real collection (the default model, a small corpus) in a real subprocess: every mode,
the hand-checkable figures of an easy query set, --json, a saved report compared with a later run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.corpus import write_corpus
from tests.integration.test_cli import run

pytestmark = pytest.mark.slow

QUERIES = [
    {"id": "bread", "query": "how do I bake a loaf of bread", "relevant": {"baking/bread.md": 2}},
    {"id": "rings", "query": "which planet has rings", "relevant": {"astronomy/*.txt": 1}},
    {"id": "tyre", "query": "fix a flat bicycle tire", "relevant": {"web/page.html": 1, "garden/tomatoes.rst": 0}},
]


def test_eval_scores_a_collection_and_compares_runs(tmp_path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    assert run("index", str(corpus)).returncode == 0
    qrels = tmp_path / "queries.jsonl"
    qrels.write_text("".join(json.dumps(q) + "\n" for q in QUERIES), encoding="utf-8")

    first = run("eval", str(qrels), "--json", "--recall-k", "3")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["judged"] == 3 and report["root"] == str(corpus.resolve())
    summary = {row["run"]: row for row in report["summary"]}
    assert set(summary) == {"dense", "lexical", "hybrid"}  # no reranker configured: no rerank runs
    for row in summary.values():  # five distinct topics: each query finds its file first
        assert (row["ndcg@10"], row["recall@3"], row["mrr"]) == (1.0, 1.0, 1.0), row
    assert report["never_found"] == []

    saved = tmp_path / "first.json"
    saved.write_text(first.stdout, encoding="utf-8")
    again = run("eval", str(qrels), "--mode", "hybrid", "--compare", str(saved))
    assert again.returncode == 0, again.stderr
    assert "hybrid: ndcg@10 1.0000 -> 1.0000" in again.stdout and "within noise" in again.stdout

    wrong_root = run("eval", str(qrels), "--root", str(tmp_path), "--mode", "dense", "--json")
    assert wrong_root.returncode == 0
    bad = json.loads(wrong_root.stdout)
    assert bad["summary"][0]["ndcg@10"] == 0.0 and "baking/bread.md" in bad["never_found"]

    assert "never found: baking/bread.md: no such file under" in run(
        "eval", str(qrels), "--root", str(tmp_path), "--mode", "dense").stdout.replace("\n", " ")
    assert bad["never_found_why"]["baking/bread.md"].startswith("no such file under")

    refused = run("eval", str(qrels), "--rerank", "on")
    assert refused.returncode == 1 and "needs a reranker" in refused.stderr
    missing = run("eval", str(qrels), "--compare", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "--compare" in missing.stderr and "no such file" in missing.stderr
    assert "Errno" not in missing.stderr
    fuzzy = run("eval", str(qrels), "--mode", "fuzzy")
    assert fuzzy.returncode == 2 and "--mode fuzzy: use dense, lexical, hybrid" in fuzzy.stderr


def test_a_relevant_document_ranked_4th_is_found_not_never_found(tmp_path) -> None:
    """The document ranked 4th by the collection itself (found by `indexer search`), judged relevant: `indexer eval`
    counts it found (recall 1.0) and never lists it as "never found" (it once kept only each query's top 3 files)."""
    corpus = write_corpus(tmp_path / "corpus")
    assert run("index", str(corpus)).returncode == 0
    query = "which planet has rings"
    found = run("search", query, "--mode", "dense", "--no-rerank", "-k", "10", "--json")
    assert found.returncode == 0, found.stderr
    files = list(dict.fromkeys(h["path"] for h in json.loads(found.stdout)["hits"]))
    assert len(files) >= 4
    fourth = str(Path(files[3]).relative_to(corpus.resolve()))
    qrels = tmp_path / "queries.jsonl"
    qrels.write_text(json.dumps({"id": "q", "query": query, "relevant": {fourth: 1}}) + "\n", encoding="utf-8")

    out = run("eval", str(qrels), "--mode", "dense", "--json", "--recall-k", "10")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["never_found"] == [] and report["never_found_why"] == {}
    (saved,) = report["runs"][0]["queries"]
    assert saved["found"] == [fourth] and saved["recall"] == 1.0 and saved["first_relevant"] == 4
    assert report["summary"][0]["mrr"] == 0.25
    text = run("eval", str(qrels), "--mode", "dense", "--recall-k", "10")
    assert text.returncode == 0 and "never found" not in text.stdout, text.stdout
