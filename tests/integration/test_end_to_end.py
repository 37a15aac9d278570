"""The product's main job, end to end: real files, the real default model, real FAISS and Qdrant storage."""

from __future__ import annotations

import os

import pytest

import indexer
from indexer.errors import CollectionMismatchError, InputError
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "faiss", "faiss_index": "hnsw"}, {"store": "qdrant"}]
if os.environ.get("QDRANT_URL"):
    STORES.append({"store": "qdrant", "qdrant_url": os.environ["QDRANT_URL"]})


def _ids(opts):
    return "-".join(str(v).split("//")[0] for v in opts.values())


@pytest.fixture(params=STORES, ids=_ids)
def store_opts(request):
    return request.param


def _top_paths(result, n=1):
    return [os.path.basename(h.path) for h in result.hits[:n]]


def test_index_search_and_stay_in_sync(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "corpus")
    name = f"e2e-{os.getpid()}-{_ids(store_opts)}".replace(":", "")
    with indexer.open_collection(name, **store_opts) as col:
        r1 = col.index([corpus])
        assert r1.failed == [] and r1.files_indexed == 5 and r1.chunks_embedded >= 5
        status = col.status()
        assert status["points"] == status["chunks"] == r1.points_upserted
        assert status["normalization"] == "l2" and status["roots"] == [str(corpus.resolve())]

        assert _top_paths(col.search("how do I make bread dough rise?")) == ["bread.md"]
        assert _top_paths(col.search("rings of Saturn")) == ["planets.txt"]
        assert _top_paths(col.search("exponential backoff when a call fails")) == ["retry.py"]
        html_hit = col.search("patch a punctured inner tube").hits[0]
        assert html_hit.path.endswith("page.html") and "never indexed" not in html_hit.text
        res = col.search("tomato plants", k=2)
        assert res.reranked is False and "no reranker" in res.rerank_note and len(res.hits) == 2
        assert res.hits[0].rerank_score is None and res.hits[0].start_line >= 1

        # filters
        only_md = col.search("planets and stars", file_types=("md",))
        assert {os.path.splitext(h.path)[1] for h in only_md.hits} == {".md"}
        under = col.search("planets", path_prefix=str((corpus / "garden").resolve()))
        assert all("/garden/" in h.path for h in under.hits) and under.hits
        globbed = col.search("planets", path_glob="*.py")
        assert [os.path.basename(h.path) for h in globbed.hits] == ["retry.py"]

        # a second run does no needless work
        r2 = col.index([corpus])
        assert (r2.files_indexed, r2.chunks_embedded, r2.points_upserted) == (0, 0, 0)
        assert r2.files_unchanged + r2.files_touched == 5

        # edit, rename, delete
        (corpus / "astronomy" / "planets.txt").write_text("Neptune is an ice giant with supersonic winds.\n")
        (corpus / "garden" / "tomatoes.rst").rename(corpus / "garden" / "tomato-care.rst")
        (corpus / "code" / "retry.py").unlink()
        r3 = col.index([corpus])
        assert r3.files_removed == 2 and r3.files_indexed == 2  # rename = remove + add
        assert r3.chunks_embedded == 1  # only Neptune; the renamed file's vectors were reused
        assert _top_paths(col.search("winds on an ice giant")) == ["planets.txt"]
        assert _top_paths(col.search("tomato seedlings")) == ["tomato-care.rst"]
        assert all(not h.path.endswith("retry.py") for h in col.search("retry with backoff", k=10).hits)
        status = col.status()
        assert status["points"] == status["chunks"] and status["files"] == 4


def test_other_roots_are_untouched_and_forget_removes_a_root(tmp_path, embed_model_path):
    a = write_corpus(tmp_path / "a", {"x.md": "# Whales\n\nBlue whales are the largest animals."})
    b = write_corpus(tmp_path / "b", {"y.md": "# Lighthouses\n\nLighthouses guide ships at night."})
    with indexer.open_collection("roots") as col:
        col.index([a])
        col.index([b])
        assert col.status()["roots"] == sorted([str(a.resolve()), str(b.resolve())])
        (a / "x.md").unlink()
        r = col.index([b])  # syncing b does not notice a's deletion
        assert r.files_removed == 0 and col.status()["files"] == 2
        f = col.forget(a)
        assert f.files_removed == 1 and col.status()["points"] == 1
        assert _top_paths(col.search("ships at night")) == ["y.md"]
        with pytest.raises(InputError, match="not a root"):
            col.forget(a)


def test_a_collection_refuses_other_metric_or_model(tmp_path, embed_model_path, embed_model_alt_path):
    corpus = write_corpus(tmp_path / "c", {"x.md": "hello world"})
    with indexer.open_collection("strict") as col:
        col.index([corpus])
    with indexer.open_collection("strict", metric="dot") as col, pytest.raises(CollectionMismatchError) as exc:
        col.index([corpus])
    assert "metric 'cosine'" in str(exc.value) and "--collection" in str(exc.value)
    with (
        indexer.open_collection("strict", embed_model=str(embed_model_alt_path)) as col,
        pytest.raises(CollectionMismatchError, match="model"),
    ):
        col.search("hello")


def test_bad_queries_get_clear_errors(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "c", {"x.md": "hello world"})
    with indexer.open_collection("q") as col:
        col.index([corpus])
        with pytest.raises(InputError, match="empty"):
            col.search("   ")
        with pytest.raises(InputError, match="k=1000"):
            col.search("hello", k=1000)
        with pytest.raises(InputError, match="candidates"):
            col.search("hello", candidates=10_000)
        with pytest.raises(InputError, match="no reranker"):
            col.search("hello", rerank=True)
    with indexer.open_collection("missing") as col, pytest.raises(InputError, match="index PATH"):
        col.search("hello")


def test_search_reranks_with_a_configured_cross_encoder(tmp_path, embed_model_path, reranker_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    with indexer.open_collection("rr") as col:
        col.index([corpus])
    with indexer.open_collection("rr", rerank_model=str(reranker_model_path), rerank_max_tokens=64) as col:
        res = col.search("how do I make bread dough rise?", k=3, candidates=5)
        assert res.reranked and "reranked 5 candidates" in res.rerank_note and "rerank" in res.timings_ms
        assert len(res.hits) == 3 and all(h.rerank_score is not None for h in res.hits)
        scores = [h.rerank_score for h in res.hits]
        assert scores == sorted(scores, reverse=True)
        assert res.hits[0].path.endswith("bread.md")
        # the rerank stage is on by default once configured, and can be turned off per query
        plain = col.search("how do I make bread dough rise?", k=3, candidates=5, rerank=False)
        assert not plain.reranked and plain.hits[0].rerank_score is None and "disabled" in plain.rerank_note


def test_sync_resyncs_every_root_and_keeps_a_vanished_one(tmp_path, embed_model_path):
    a = write_corpus(tmp_path / "a", {"x.md": "# Whales\n\nBlue whales are the largest animals."})
    b = write_corpus(tmp_path / "b", {"y.md": "# Lighthouses\n\nLighthouses guide ships at night."})
    with indexer.open_collection("sync") as col:
        col.index([a, b])
        (a / "x.md").write_text("# Whales\n\nHumpback whales sing long songs.")
        (b / "y.md").rename(tmp_path / "moved-away.md")
        b.rmdir()  # the whole root vanishes (an unmounted drive looks like this)
        r = col.sync()
        assert r.files_indexed == 1 and r.files_removed == 0
        assert any(p == str(b.resolve()) for p, _ in r.skipped)
        assert col.status()["points"] == 2  # b's point is kept until the root comes back or is forgotten
        assert _top_paths(col.search("whale songs")) == ["x.md"]
    with indexer.open_collection("never-made") as col, pytest.raises(InputError, match="index PATH"):
        col.sync()


def test_pdf_pages_reach_search_hits(tmp_path, embed_model_path):
    from tests.unit.test_readers import make_pdf

    corpus = tmp_path / "pdfs"
    corpus.mkdir()
    (corpus / "manual.pdf").write_bytes(
        make_pdf(["Chapter one explains how to assemble the wooden chair.", "Chapter two covers cleaning the oven."])
    )
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    with indexer.open_collection("pdf") as col:
        report = col.index([corpus])
        assert [p for p, _ in report.failed] == [str((corpus / "broken.pdf").resolve())]
        hit = col.search("cleaning an oven", k=1).hits[0]
        assert hit.path.endswith("manual.pdf") and hit.page == 2 and "oven" in hit.text
        assert col.search("assembling furniture", k=1).hits[0].page == 1


def test_a_changed_file_rewrites_only_the_points_that_changed(tmp_path, embed_model_path, store_opts):
    root = tmp_path / "logs"
    root.mkdir()
    log = root / "app.log"
    log.write_text("".join(f"line {i}: the {i % 7} worker handled request number {i * 13}\n" for i in range(400)))
    with indexer.open_collection(f"rewrite-{_ids(store_opts)}", **store_opts) as col:
        first = col.index([root])
        assert first.points_upserted > 5
        with open(log, "a") as fh:
            fh.write("line 400: an appended warning about glaciers\n")
        appended = col.sync_paths([str(log)])
        assert appended.files_indexed == 1 and 1 <= appended.points_upserted <= 2  # the last chunk (and a new one)
        health = col.health()
        assert health["ok"] and health["missing_points"] == 0 and health["orphan_points"] == 0, health
        assert "glaciers" in col.search("appended warning glaciers", k=1).hits[0].text

        log.write_text("new first line\n" + log.read_text())  # every later line moves down one
        shifted = col.sync_paths([str(log)])
        assert shifted.points_upserted == col.status()["chunks"]  # their lines changed: every point re-written
        hit = col.search("appended warning glaciers", k=1).hits[0]
        assert log.read_text().splitlines()[hit.start_line - 1 : hit.end_line][-1].endswith("glaciers")
        assert col.health()["ok"]
