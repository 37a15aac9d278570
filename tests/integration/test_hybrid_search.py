"""Lexical and hybrid search through the product: real model, real files, FAISS and embedded Qdrant."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import indexer
from indexer.errors import InputError
from indexer.ports import LexicalSearch
from tests.integration.corpus import DOCS, write_corpus, write_many

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "qdrant"}]
if os.environ.get("QDRANT_URL"):
    STORES.append({"store": "qdrant", "qdrant_url": os.environ["QDRANT_URL"]})

CODES = {  # near-identical codes: dense search blurs them, lexical search tells them apart
    "ops/sync-errors.md": "# Sync failures\n\nIf the nightly sync stops with QX7-4471, delete the local cache folder "
    "and start it again.\n",
    "ops/disk.md": "# Disk alarms\n\nAlarm QX7-4417 means the backup volume is almost full; prune old snapshots.\n",
    "ops/network.md": "# Network faults\n\nFault QX1-4471 is raised when the VPN tunnel drops for more than a "
    "minute.\n",
    "ops/power.md": "# Power events\n\nEvent QX7-4771 is logged when the server room switches to battery power.\n",
}


def _ids(opts: dict[str, str]) -> str:
    return "-".join(str(v).split("//")[0] for v in opts.values())


@pytest.fixture(params=STORES, ids=_ids)
def store_opts(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(request.param)


def _top(col: indexer.Collection, query: str, mode: str, n: int = 1) -> list[str]:
    result = col.search(query, k=n, mode=mode)
    assert result.mode == mode
    return [os.path.basename(h.path) for h in result.hits]


def test_identifier_is_found_by_lexical_and_hybrid_not_dense(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    with indexer.open_collection(f"ident-{_ids(store_opts)}".replace(":", ""), **store_opts) as col:
        col.index([corpus])
        for code, path in (("QX1-4471", "network.md"), ("QX7-4417", "disk.md")):
            assert _top(col, code, "lexical") == [path]
            assert _top(col, code, "hybrid") == [path]
            assert _top(col, code, "dense") != [path]
        assert col.search("QX7-4471", k=1).mode == "hybrid"  # the default mode


def test_paraphrase_is_found_by_dense_and_hybrid_not_lexical(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    query = "how often to irrigate vegetable crops"  # no word in common with the tomato notes
    with indexer.open_collection(f"para-{_ids(store_opts)}".replace(":", ""), **store_opts) as col:
        col.index([corpus])
        assert _top(col, query, "dense") == ["tomatoes.rst"]
        assert _top(col, query, "hybrid") == ["tomatoes.rst"]
        assert "tomatoes.rst" not in _top(col, query, "lexical", n=10)


def test_lexical_index_follows_edits_renames_and_deletes(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    with indexer.open_collection(f"edits-{_ids(store_opts)}".replace(":", ""), **store_opts) as col:
        col.index([corpus])
        (corpus / "ops" / "sync-errors.md").write_text("# Sync failures\n\nCode QX9-1234 replaced the old one.\n")
        (corpus / "ops" / "disk.md").rename(corpus / "ops" / "storage-alarms.md")
        (corpus / "ops" / "network.md").unlink()
        report = col.index([corpus])
        assert report.chunks_embedded == 1  # only the edited file; the renamed one reuses its vectors
        assert _top(col, "QX9-1234", "lexical") == ["sync-errors.md"]
        assert _top(col, "QX7-4417", "lexical") == ["storage-alarms.md"]
        for mode in ("lexical", "hybrid"):
            hits = col.search("QX7-4471 QX1-4471", k=20, mode=mode).hits
            assert hits and not [h for h in hits if "QX7-4471" in h.text or h.path.endswith("network.md")]
        _assert_lexical_matches_points(col)


def test_search_modes_are_validated(tmp_path, embed_model_path):
    corpus = write_corpus(tmp_path / "corpus")
    with indexer.open_collection("modes") as col:
        col.index([corpus])
        with pytest.raises(InputError, match="mode"):
            col.search("bread", mode="fuzzy")
        assert col.search("bread", mode="LEXICAL").mode == "lexical"


def test_an_old_collection_gets_its_lexical_index_without_re_embedding(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    name = f"old-{_ids(store_opts)}".replace(":", "")
    with indexer.open_collection(name, **store_opts) as col:
        col.index([corpus])
        embedded_qdrant = col.record.store == "qdrant" and not col.record.store_options.get("url")  # type: ignore[union-attr]
        if embedded_qdrant:
            _as_local_mode_folder(col)
        else:
            _strip_lexical(col)
    if embedded_qdrant:
        # an earlier version's embedded Qdrant (qdrant-client local mode, no lexical vector) moves onto
        # qdrant-edge on first use, with the lexical vector and without re-embedding
        with indexer.open_collection(name) as col:
            assert col.status()["lexical_index"] is True
            report = col.index([corpus])
            assert report.chunks_embedded == 0 and report.files_indexed == 0
            assert _top(col, "QX1-4471", "lexical") == ["network.md"]
            assert col.search("QX1-4471", k=1).mode == "hybrid"
            _assert_lexical_matches_points(col)
        return
    with indexer.open_collection(name) as col:
        assert col.status()["lexical_index"] is False
        assert col.search("QX1-4471", k=1).mode == "dense"  # the default falls back until the index is built
        with pytest.raises(InputError, match="indexer index"):
            col.search("QX1-4471", mode="lexical")
        report = col.index([corpus])
        assert report.chunks_embedded == 0 and report.files_indexed == 0
        assert _top(col, "QX1-4471", "lexical") == ["network.md"]
        assert col.search("QX1-4471", k=1).mode == "hybrid"
        assert col.status()["lexical_index"] is True
        _assert_lexical_matches_points(col)


def _as_local_mode_folder(col: indexer.Collection) -> None:
    """Turn an embedded Qdrant collection into the local-mode folder an indexer before qdrant-edge wrote."""
    import shutil

    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    store = col.store
    inner = getattr(store, "inner", store)
    path = inner.path
    records = [(h, p) for h, p in _all_points(inner, col.name)]
    meta = inner.collection_meta(col.name)
    col.close()
    shutil.rmtree(path / "edge")
    client = QdrantClient(path=str(path))
    client.create_collection(
        col.name, vectors_config=qm.VectorParams(size=int(meta["dimensions"]), distance=qm.Distance.COSINE),
        metadata=meta,
    )
    client.upsert(col.name, [qm.PointStruct(id=i, vector=v, payload=p) for i, (v, p) in records])
    client.close()


def _all_points(store, collection: str):
    import qdrant_edge as qe

    shard = store._require(collection)
    records, _ = shard.scroll(qe.ScrollRequest(limit=100_000, with_payload=True, with_vector=True))
    for r in records:
        yield str(r.id), (list(r.vector[""]), dict(r.payload or {}))


def _strip_lexical(col: indexer.Collection) -> None:
    """Make the collection look like one an indexer without lexical search wrote."""
    store = col.store
    if col.record.store == "faiss":  # type: ignore[union-attr]
        coll = store._require(col.name)  # type: ignore[attr-defined]
        with coll.sidecar.write():
            coll.sidecar.conn.execute("DROP TABLE lexical")
            coll.sidecar.conn.execute("DELETE FROM meta WHERE key = 'lexical'")
        return
    from qdrant_client import models as qm

    client = store.client  # type: ignore[attr-defined]
    records, _ = client.scroll(col.name, limit=1000, with_payload=True, with_vectors=True)
    info = client.get_collection(col.name)
    client.delete_collection(col.name)
    client.create_collection(
        col.name,
        vectors_config=qm.VectorParams(size=info.config.params.vectors.size, distance=qm.Distance.COSINE),
        metadata=info.config.metadata,
    )
    client.upsert(col.name, [qm.PointStruct(id=r.id, vector=r.vector[""], payload=r.payload) for r in records])
    store._lexical.clear()  # type: ignore[attr-defined]
    store._dims.clear()  # type: ignore[attr-defined]


def _lexical_snapshot(col: indexer.Collection, words: list[str]) -> dict[str, set[tuple[str, str]]]:
    store = col.store
    assert isinstance(store, LexicalSearch)
    n = max(1, store.count(col.name))  # type: ignore[attr-defined]
    return {
        w: {(str(h.payload["path"]), str(h.payload["text"])) for h in store.search_lexical(col.name, w, n)}
        for w in words
    }


def _assert_lexical_matches_points(col: indexer.Collection) -> None:
    """Every point is found by a word of its own text, and lexical hits are exactly existing points."""
    store = col.store
    assert isinstance(store, LexicalSearch)
    ids = store.list_ids(col.name)  # type: ignore[attr-defined]
    vec = col.embedder.embed_batch(["anything"], col.record.normalization)[0]  # type: ignore[union-attr]
    points = store.search(col.name, vec, max(1, len(ids)))  # type: ignore[attr-defined]
    for p in points:
        found = {h.id for h in store.search_lexical(col.name, str(p.payload["text"])[:300], len(ids))}
        assert p.id in found
        assert found <= ids


# --- SIGKILL ---------------------------------------------------------------------------------------------
def _start_index(data_dir: Path, corpus: Path, store: str) -> subprocess.Popen[str]:
    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir), "INDEXER_EMBED_BATCH_CHUNKS": "8", "INDEXER_STORE": store}
    return subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "index", str(corpus)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_after_files(proc: subprocess.Popen[str], data_dir: Path, files: int, timeout: float = 300) -> bool:
    import sqlite3

    deadline = time.monotonic() + timeout
    db = data_dir / "state.sqlite"
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            try:
                done = int(con.execute("SELECT COUNT(*) FROM files").fetchone()[0])
            finally:
                con.close()
        except sqlite3.OperationalError:
            done = 0
        if done >= files:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    proc.wait()
    return False


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_lexical_index_survives_sigkill_like_the_vectors(tmp_path, embed_model_path, store):
    corpus = write_many(tmp_path / "corpus", n_files=40, paragraphs=6)
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    kills = sum(_kill_after_files(_start_index(crashed, corpus, store), crashed, n) for n in (5, 22))
    assert kills >= 1, "the indexer finished before it could be killed; make the corpus bigger"
    (corpus / "d1" / "note-001.md").write_text("# Rewritten\n\nA brand new text about kites.\n")
    for data_dir in (crashed, clean):
        proc = _start_index(data_dir, corpus, store)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    words = ["rivers", "violins", "kites", "observation", "seasons", "glaciers", "Rewritten", "team"]
    snapshots = []
    for data_dir in (crashed, clean):
        with indexer.open_collection("default", data_dir=data_dir) as col:
            snapshots.append(_lexical_snapshot(col, words))
            _assert_lexical_matches_points(col)
    assert snapshots[0] == snapshots[1]
    assert snapshots[0]["kites"] and snapshots[0]["rivers"]


def test_rerank_runs_over_the_fused_candidates(tmp_path, embed_model_path, reranker_model_path):
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    with indexer.open_collection("rerank-fused", rerank_model=str(reranker_model_path)) as col:
        col.index([corpus])
        result = col.search("QX1-4471 VPN tunnel", k=3, candidates=4)
        assert result.mode == "hybrid" and result.reranked
        assert "reranked 4 candidates" in result.rerank_note
        assert all(h.rerank_score is not None for h in result.hits)
        fused = col.search("QX1-4471 VPN tunnel", k=4, candidates=4, rerank=False)
        assert {h.chunk_id for h in result.hits} <= {h.chunk_id for h in fused.hits}
        assert "network.md" in [os.path.basename(h.path) for h in result.hits]


def test_a_query_longer_than_the_model_limit_is_searched_not_refused(tmp_path, embed_model_path):
    """A pasted paragraph: the dense side embeds the longest prefix that fits the model's limit (the same vector
    as that prefix alone), the lexical side keeps every word, so a term only at its end still finds its file."""
    from indexer.search.query import fit_query

    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **CODES})
    with indexer.open_collection("long-query") as col:
        col.index([corpus])
        embedder = col.embedder
        limit = int(embedder.max_tokens)
        long = " ".join(["the nightly backup of the office files runs at two"] * 60) + " QX7-4771"
        assert embedder.count_tokens(long) > limit  # the engine alone refuses it
        with pytest.raises(InputError):
            embedder.embed_batch([long], col.record.normalization)
        cut = fit_query(long, embedder)
        assert embedder.count_tokens(cut) <= limit < embedder.count_tokens(long[: len(cut) + 12])
        dense = [(h.chunk_id, h.score) for h in col.search(long, k=3, mode="dense").hits]
        assert dense and dense == [(h.chunk_id, h.score) for h in col.search(cut, k=3, mode="dense").hits]
        assert os.path.basename(col.search(long, k=1, mode="lexical").hits[0].path) == "power.md"
        assert col.search(long, k=3, mode="hybrid").hits
