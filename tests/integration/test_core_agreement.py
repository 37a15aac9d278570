"""Issue 7: state and store always agree (or say so), the facade owns the query contract, models are identified,
per-path sync, and concurrent searches from threads. Real model, real FAISS and embedded Qdrant, real files."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

import indexer
from indexer.errors import CollectionMismatchError, InputError, StoreError
from indexer.search.query import SearchRequest
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

STORES = ["faiss", "qdrant"]


def _names(result) -> list[str]:
    return [os.path.basename(h.path) for h in result.hits]


@pytest.mark.parametrize("store", STORES)
def test_lost_store_is_reported_and_repaired_without_reembedding(tmp_path, embed_model_path, store):
    corpus = write_corpus(tmp_path / "corpus")
    data = Path(os.environ["INDEXER_DATA_DIR"])
    with indexer.open_collection("c", store=store) as col:
        first = col.index([corpus])
        assert first.chunks_embedded > 0
        assert col.status()["health"]["ok"] is True
    shutil.rmtree(data / store / "c")
    with indexer.open_collection("c") as col:
        with pytest.raises(StoreError, match="indexer index"):
            col.search("rings of Saturn")
        assert col.status()["health"]["ok"] is False
    with indexer.open_collection("c") as col:
        repair = col.sync()
        assert repair.tokens_embedded == 0  # every vector came from the cache
        assert repair.files_indexed == first.files_indexed
        assert col.status()["health"] == {
            "ok": True, "store_points": first.points_upserted, "state_points": first.points_upserted,
            "missing_points": 0, "orphan_points": 0, "problem": None,
        }
        assert _names(col.search("rings of Saturn", k=1)) == ["planets.txt"]


def test_emptied_faiss_sidecar_is_not_papered_over(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    data = Path(os.environ["INDEXER_DATA_DIR"])
    with indexer.open_collection("c") as col:
        col.index([corpus])
    sidecars = list((data / "faiss" / "c").rglob("points.sqlite*"))
    assert sidecars
    for f in sidecars:
        f.unlink()
    with indexer.open_collection("c") as col, pytest.raises(StoreError, match="missing"):
        col.search("rings of Saturn")
    with indexer.open_collection("c") as col:
        assert col.sync().tokens_embedded == 0
        assert _names(col.search("rings of Saturn", k=1)) == ["planets.txt"]


def test_a_moved_data_directory_keeps_its_vectors_and_a_copy_is_independent(tmp_path, embed_model_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus")
    old = Path(os.environ["INDEXER_DATA_DIR"])
    with indexer.open_collection("c") as col:
        col.index([corpus])
    new = tmp_path / "moved-data"
    shutil.copytree(old, new)
    monkeypatch.setenv("INDEXER_DATA_DIR", str(new))
    (corpus / "extra.md").write_text("Penguins live in the southern hemisphere and cannot fly.\n")
    with indexer.open_collection("c") as col:
        assert _names(col.search("rings of Saturn", k=1)) == ["planets.txt"]
        col.sync()
        assert _names(col.search("birds that cannot fly", k=1)) == ["extra.md"]
    shutil.rmtree(new)
    monkeypatch.setenv("INDEXER_DATA_DIR", str(old))
    with indexer.open_collection("c") as col:  # the original did not receive the copy's writes
        assert "extra.md" not in _names(col.search("birds that cannot fly", k=10))
        assert col.status()["health"]["ok"] is True


@pytest.mark.parametrize("store", STORES)
def test_points_of_a_lost_state_are_removed(tmp_path, embed_model_path, store):
    a = write_corpus(tmp_path / "a")
    b = write_corpus(tmp_path / "b", {"whales.md": "Blue whales are the largest animals that ever lived."})
    data = Path(os.environ["INDEXER_DATA_DIR"])
    with indexer.open_collection("c", store=store) as col:
        col.index([a])
    for f in data.glob("state.sqlite*"):
        f.unlink()
    with indexer.open_collection("c", store=store) as col:
        report = col.index([b])
        assert report.points_deleted > 0
        hits = col.search("rings of Saturn", k=10).hits
        assert {os.path.basename(h.path) for h in hits} == {"whales.md"}
        assert col.status()["health"]["orphan_points"] == 0


def test_a_file_grown_past_the_cap_fails_and_keeps_its_points(tmp_path, embed_model_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus")
    with indexer.open_collection("c", max_file_size=2000) as col:
        col.index([corpus])
    planets = corpus / "astronomy" / "planets.txt"
    planets.write_text(planets.read_text() + "x" * 3000)
    with indexer.open_collection("c", max_file_size=2000) as col:
        report = col.sync()
        assert [p for p, _ in report.failed] == [str(planets.resolve())]
        assert "max_file_size" in report.failed[0][1]
        assert report.files_removed == 0
        assert _names(col.search("rings of Saturn", k=1)) == ["planets.txt"]
        assert col.status()["failures"][0]["path"] == str(planets.resolve())


def test_the_facade_owns_defaults_and_validation(tmp_path, embed_model_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus")
    config = tmp_path / "config.toml"
    config.write_text("top_k = 2\n")
    monkeypatch.setenv("INDEXER_CONFIG", str(config))
    with indexer.open_collection("c") as col:
        col.index([corpus])
        assert len(col.search("planets").hits) == 2  # top_k from the config file, through the Python API
        assert len(col.search(SearchRequest("planets", k=3)).hits) == 3
        with pytest.raises(InputError, match="unknown search option.*kk"):
            col.search("planets", kk=3)
        with pytest.raises(InputError, match=r"k=0 is out of range; use 1\.\.100"):
            col.search("planets", k=0)
        with pytest.raises(InputError, match="whole number"):
            col.search("planets", k="3")
        with pytest.raises(InputError, match="mode"):
            col.search("planets", mode="fuzzy")
        only_md = col.search("planets", file_types=(".MD",), k=5)
        assert only_md.hits and all(h.path.endswith(".md") for h in only_md.hits)
        under = col.search("planets", path_prefix=str(corpus / "garden" / ".." / "garden"), k=5)
        assert under.hits and all("/garden/" in h.path for h in under.hits)


def test_a_replaced_model_file_is_refused(tmp_path, embed_model_path, embed_model_alt_path):
    corpus = write_corpus(tmp_path / "corpus")
    model = tmp_path / "model.gguf"
    shutil.copy(embed_model_path, model)
    with indexer.open_collection("c", embed_model=str(model)) as col:
        col.index([corpus])
    shutil.copy(embed_model_alt_path, model)  # rebuilt in place: same path, other weights
    with indexer.open_collection("c") as col, pytest.raises(CollectionMismatchError) as exc:
        col.search("planets")
    message = str(exc.value)
    assert str(model) in message and "was embedded with" in message and "indexer drop" in message


@pytest.mark.parametrize("store", STORES)
def test_sync_paths_follows_every_kind_of_change(tmp_path, embed_model_path, store):
    corpus = write_corpus(tmp_path / "corpus")
    with indexer.open_collection("c", store=store) as col:
        col.index([corpus])
        # create + modify
        (corpus / "new.md").write_text("Octopuses have three hearts and blue blood.\n")
        planets = corpus / "astronomy" / "planets.txt"
        planets.write_text("Neptune is an ice giant with supersonic winds.\n")
        r = col.sync_paths([corpus / "new.md", planets])
        assert r.files_indexed == 2
        assert _names(col.search("animal with three hearts", k=1)) == ["new.md"]
        assert _names(col.search("ice giant winds", k=1)) == ["planets.txt"]
        # rename: nothing re-embedded
        moved = corpus / "renamed.md"
        (corpus / "new.md").rename(moved)
        r = col.sync_paths([corpus / "new.md", moved])
        assert r.tokens_embedded == 0 and r.files_indexed == 1 and r.files_removed == 1
        assert _names(col.search("animal with three hearts", k=1)) == ["renamed.md"]
        # a folder moved out of the root, then back in
        outside = tmp_path / "outside-baking"
        (corpus / "baking").rename(outside)
        r = col.sync_paths([corpus / "baking"])
        assert r.files_removed == 1
        assert "bread.md" not in _names(col.search("knead the dough", k=10))
        outside.rename(corpus / "baking")
        r = col.sync_paths([corpus / "baking"])
        assert r.files_indexed == 1 and r.tokens_embedded == 0
        assert _names(col.search("knead the dough", k=1)) == ["bread.md"]
        # an ignore-file edit: the newly ignored file loses its points
        (corpus / ".gitignore").write_text("*.rst\n")
        r = col.sync_paths([corpus])
        assert r.files_removed == 1
        assert "tomatoes.rst" not in _names(col.search("tomato seedlings", k=10))
        # deletes, and paths outside every root are ignored
        moved.unlink()
        r = col.sync_paths([moved, tmp_path / "elsewhere.md"])
        assert r.files_removed == 1
        assert col.status()["health"]["ok"] is True
        assert col.status()["files"] == 4  # bread, planets, retry, page


def test_concurrent_searches_from_threads(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    queries = {"rings of Saturn": "planets.txt", "knead the dough": "bread.md", "tomato seedlings": "tomatoes.rst"}
    errors: list[BaseException] = []
    results: list[tuple[str, str]] = []
    with indexer.open_collection("c") as col:
        col.index([corpus])

        def worker(q: str) -> None:
            try:
                for _ in range(5):
                    results.append((q, os.path.basename(col.search(q, k=1).hits[0].path)))
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(q,)) for q in queries for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert errors == []
    assert len(results) == 30 and all(queries[q] == name for q, name in results)


def test_binary_content_under_a_text_name_is_skipped_not_failed(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with indexer.open_collection("c") as col:
        report = col.index([corpus])
        assert report.failed == []
        assert [os.path.basename(p) for p, _ in report.skipped] == ["image.md"]
        planets = corpus / "astronomy" / "planets.txt"
        planets.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))  # a text file turned binary
        report = col.sync()
        assert report.failed == [] and report.files_removed == 1
        assert "planets.txt" not in _names(col.search("rings of Saturn", k=10))
        again = col.sync()  # stable: skipped again, nothing else changes
        assert again.failed == [] and again.files_removed == 0 and again.files_indexed == 0
