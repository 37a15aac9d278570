"""Embedded Qdrant on qdrant-edge (what `--store qdrant` without a URL builds): one process per folder, crash
safety through the engine's write-ahead log, and a real HNSW index once the optimizer runs."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from indexer.core import registry
from indexer.errors import StoreError
from indexer.settings import load_settings
from indexer.types import Metric, Point
from plugins.qdrant.edge import EdgeStore
from plugins.qdrant.edge_build import unindexed

DIM = 8


def _open(path: Path, metric: Metric = Metric.COSINE):
    return registry.open_store("qdrant", {"path": str(path)}, metric, load_settings())


def _points(n: int, seed: int = 0) -> list[Point]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")), vecs[i],
                  {"path": f"/r/d{i % 3}/f{i}.md", "text": f"text {i}", "file_type": "md"}) for i in range(n)]


def test_the_embedded_store_is_qdrant_edge(tmp_path):
    store = _open(tmp_path / "q")
    try:
        assert isinstance(store, EdgeStore)
        store.ensure_collection("c", DIM, {"indexer.model_id": "m"})
        assert (tmp_path / "q" / "edge" / "c" / "edge_config.json").is_file()
        assert store.collection_meta("c")["indexer.model_id"] == "m"
    finally:
        store.close()


def test_a_second_process_gets_a_clear_error_and_the_folder_is_released_on_close(tmp_path):
    store = _open(tmp_path / "q")
    store.ensure_collection("c", DIM, {})
    code = (
        "import sys\n"
        "from indexer.core import registry\nfrom indexer.settings import load_settings\n"
        "from indexer.types import Metric\nfrom indexer.errors import StoreError\n"
        f"s = registry.open_store('qdrant', {{'path': {str(tmp_path / 'q')!r}}}, Metric.COSINE, load_settings())\n"
        "try:\n    s.count('c')\nexcept StoreError as exc:\n    print(exc)\n    sys.exit(3)\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "another process holds" in proc.stdout and "indexer serve" in proc.stdout
    finally:
        store.close()
    again = _open(tmp_path / "q")
    assert again.count("c") == 0
    again.close()


def test_points_written_survive_a_killed_process(tmp_path):
    code = (
        "import os, uuid, numpy as np\n"
        "from indexer.core import registry\nfrom indexer.settings import load_settings\n"
        "from indexer.types import Metric, Point\n"
        f"s = registry.open_store('qdrant', {{'path': {str(tmp_path / 'q')!r}}}, Metric.COSINE, load_settings())\n"
        f"s.ensure_collection('c', {DIM}, {{}})\n"
        f"v = np.eye({DIM}, dtype=np.float32)\n"
        f"s.upsert('c', [Point(str(uuid.uuid4()), v[i % {DIM}], {{'path': f'/r/{{i}}.md'}}) for i in range(100)])\n"
        "print('written', flush=True)\n"
        "os._exit(9)  # no close, no flush of our own\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "written" in proc.stdout and proc.returncode == 9, proc.stderr
    store = _open(tmp_path / "q")
    try:
        assert store.count("c") == 100
    finally:
        store.close()


def test_search_after_the_optimizer_built_its_index_matches_exact(tmp_path):
    store = _open(tmp_path / "q")
    try:
        store.ensure_collection("c", DIM, {})
        points = _points(3000)
        store.upsert("c", points)
        store._require("c").optimize()  # segments merged, the HNSW index built (what a background build runs)
        query = points[7].vector
        exact = np.argsort([-float(np.dot(query, p.vector)) for p in points])[:10]
        hits = store.search("c", query, 10)
        assert hits[0].id == points[7].id and hits[0].score == pytest.approx(1.0, abs=1e-5)
        overlap = len({h.id for h in hits} & {points[i].id for i in exact})
        assert overlap >= 9
        only_d1 = store.search("c", query, 10, where=registry_filter("/r/d1"))
        assert only_d1 and all(h.payload["path"].startswith("/r/d1/") for h in only_d1)
    finally:
        store.close()


def registry_filter(prefix: str):
    from indexer.types import Filter

    return Filter(path_prefix=prefix)


def test_a_missing_collection_is_a_store_error(tmp_path):
    store = _open(tmp_path / "q")
    try:
        assert store.collection_meta("nope") is None
        with pytest.raises(StoreError, match="does not exist"):
            store.count("nope")
    finally:
        store.close()


def _indexed(store: EdgeStore, collection: str) -> int:
    """Dense vectors the shard's HNSW covers."""
    shard = store._require(collection)
    return int(shard.info().points_count) - unindexed(shard)


def _start_build(tmp_path: Path, n: int, threshold: int) -> tuple[EdgeStore, list[Point]]:
    """A store with build threshold ``threshold`` whose collection "c" got ``n`` points: a build has started."""
    store = _open(tmp_path / "q")
    store.builder.threshold = threshold
    store.ensure_collection("c", DIM, {})
    points = _points(n)
    store.upsert("c", points)
    assert store.builder.building("c")
    return store, points


def test_the_hnsw_index_is_built_in_the_background_while_searches_and_writes_go_on(tmp_path):
    """A build runs in a child process on a copy: searches keep answering meanwhile (optimize() in-process holds
    the GIL for the whole build), writes made during the build are replayed into the built copy, and deletes
    too; nothing is lost or duplicated, and the swapped-in shard has an index."""
    store, first = _start_build(tmp_path, 2500, threshold=2000)
    try:
        assert _indexed(store, "c") == 0
        latencies: list[float] = []
        later = _points(300, seed=1)
        later = [Point(f"later-{i}", p.vector, p.payload) for i, p in enumerate(later)]
        later = [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, p.id)), p.vector, p.payload) for p in later]
        written = 0
        while store.builder.building("c"):
            t = time.perf_counter()
            store.search("c", first[written % 100].vector, 10)
            latencies.append((time.perf_counter() - t) * 1000)
            if written < len(later):
                store.upsert("c", later[written : written + 50])
                written += 50
            if written == 100:
                store.delete("c", [first[0].id, first[1].id])
            time.sleep(0.005)
        assert store.builder.completed and store.builder.completed[-1][0] == "c"
        assert len(latencies) >= 5 and statistics.median(latencies) < 50, latencies
        store.upsert("c", later[written:])
        assert store.count("c") == 2500 + 300 - 2
        ids = store.list_ids("c")
        assert first[0].id not in ids and first[2].id in ids and all(p.id in ids for p in later)
        assert _indexed(store, "c") >= 2000
        assert not (tmp_path / "q" / "edge" / "c.build").exists() and not (tmp_path / "q" / "edge" / "c.old").exists()
        query = first[7].vector
        hits = store.search("c", query, 10)
        assert hits[0].id == first[7].id
    finally:
        store.close()
    again = _open(tmp_path / "q")  # the swapped shard is the one on disk
    try:
        assert again.count("c") == 2500 + 300 - 2 and _indexed(again, "c") >= 2000
    finally:
        again.close()


def test_a_process_killed_during_a_build_loses_nothing_and_leaves_no_copy(tmp_path):
    code = (
        "import os, time, uuid, numpy as np\n"
        "from indexer.core import registry\nfrom indexer.settings import load_settings\n"
        "from indexer.types import Metric, Point\n"
        f"s = registry.open_store('qdrant', {{'path': {str(tmp_path / 'q')!r}}}, Metric.COSINE, load_settings())\n"
        "s.builder.threshold = 1000\n"
        f"s.ensure_collection('c', {DIM}, {{}})\n"
        f"v = np.random.default_rng(0).normal(size=(1500, {DIM})).astype(np.float32)\n"
        "v /= np.linalg.norm(v, axis=1, keepdims=True)\n"
        "s.upsert('c', [Point(str(uuid.uuid4()), v[i], {'path': f'/r/{i}.md'}) for i in range(1500)])\n"
        "assert s.builder.building('c')\n"
        "s.upsert('c', [Point(str(uuid.uuid4()), v[i], {'path': f'/r/late{i}.md'}) for i in range(20)])\n"
        "print('written', flush=True)\n"
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "written" in proc.stdout and proc.returncode == 9, proc.stderr
    store = _open(tmp_path / "q")
    try:
        assert store.count("c") == 1520
        assert not (tmp_path / "q" / "edge" / "c.build").exists()
    finally:
        store.close()


def test_a_swap_cut_between_its_renames_is_undone_on_open(tmp_path):
    store = _open(tmp_path / "q")
    store.ensure_collection("c", DIM, {})
    store.upsert("c", _points(50))
    store.close()
    edge = tmp_path / "q" / "edge"
    (edge / "c").rename(edge / "c.old")  # the first rename done, the second not
    (edge / "c.build").mkdir()
    (edge / "c.build" / "half-written").write_text("x")
    store = _open(tmp_path / "q")
    try:
        assert store.count("c") == 50
        assert not (edge / "c.old").exists() and not (edge / "c.build").exists()
    finally:
        store.close()


def test_small_collections_never_start_a_build(tmp_path):
    store = _open(tmp_path / "q")
    try:
        store.ensure_collection("c", DIM, {})
        store.upsert("c", _points(500))
        assert not store.builder.building("c") and store.builder.threshold >= 10_000
    finally:
        store.close()


def test_our_dbsf_fusion_ranks_as_the_engines_own(tmp_path):
    """fusion.fuse(method="dbsf", w=0.5) over the store's two sides gives qdrant-edge's in-engine Fusion.Dbsf
    ranking (prefetch of the same depth), so the rule measured in the engine is the one both stores run."""
    import qdrant_edge as qe

    from indexer.search import lexical
    from indexer.search.fusion import FusionConfig, fuse
    from plugins.qdrant.edge import LEXICAL, hnsw_ef

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    vecs = rng.normal(size=(300, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    points = [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"d{i}")), vecs[i],
                    {"path": f"/r/f{i}.md", "text": " ".join(rng.choice(words, 12)), "file_type": "md"})
              for i in range(300)]
    store = _open(tmp_path / "q")
    try:
        store.ensure_collection("c", DIM, {})
        store.upsert("c", points)
        for trial in range(5):
            qv = rng.normal(size=DIM).astype(np.float32)
            qv /= np.linalg.norm(qv)
            qt = " ".join(rng.choice(words, 3))
            depth = 40
            ours = fuse(store.search("c", qv, depth), store.search_lexical("c", qt, depth),
                        FusionConfig(method="dbsf", dense_weight=0.5))
            indices, values = lexical.sparse_query(qt)
            request = qe.QueryRequest(limit=10, query=qe.Fusion.Dbsf(), with_payload=False, prefetches=[
                qe.Prefetch(limit=depth, query=qe.Query.Nearest(qv.tolist()),
                            params=qe.SearchParams(hnsw_ef=hnsw_ef(depth))),
                qe.Prefetch(limit=depth, query=qe.Query.Nearest(qe.SparseVector(indices=indices, values=values),
                                                                using=LEXICAL))])
            engine = store._query("c", request)
            assert [2 * h.score for h in ours[:10]] == pytest.approx([p.score for p in engine], abs=1e-4), trial
            mine = [h.id for h in ours[:10]]
            theirs = [str(p.id) for p in engine]
            fused = {h.id: 2 * h.score for h in ours}
            for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):  # equal scores may come in either order
                tied = b in fused and abs(fused[b] - engine[i].score) < 1e-4  # (at the 10th: from the 11th)
                assert a == b or tied, (trial, i)
    finally:
        store.close()


def test_searches_go_on_while_a_build_copies_the_shard_and_writes_wait_for_it(tmp_path, monkeypatch):
    """The copy a build starts from is taken with writes held back (a torn copy would lose them) but not reads:
    a search during a slow copy answers at once, a write waits for the copy to end and is then journaled."""
    import threading

    from plugins.qdrant import edge_build

    copying = threading.Event()
    real_copy = edge_build.shutil.copy2

    def slow_copy(src, dst, **kw):
        copying.set()
        time.sleep(0.05)
        return real_copy(src, dst, **kw)

    monkeypatch.setattr(edge_build.shutil, "copy2", slow_copy)
    store, points = _start_build(tmp_path, 2000, threshold=1500)
    try:
        assert copying.wait(10), "the build's copy did not begin"
        t = time.perf_counter()
        hits = store.search("c", points[3].vector, 5)
        search_s = time.perf_counter() - t
        late = [Point(str(uuid.uuid4()), points[i].vector, {"path": f"/r/late{i}.md"}) for i in range(20)]
        t = time.perf_counter()
        store.upsert("c", late)
        write_s = time.perf_counter() - t
        assert hits[0].id == points[3].id and search_s < 0.05, search_s  # the copy of ~30 files takes > 1 s
        assert write_s > 0.1, write_s  # it waited for the copy
        assert store.builder.wait(120)
        assert store.builder.completed and _indexed(store, "c") >= 2000
        assert store.count("c") == 2020 and {p.id for p in late} <= store.list_ids("c")
    finally:
        store.close()


def test_a_busy_writer_is_caught_up_in_rounds_and_nothing_is_lost(tmp_path, monkeypatch):
    """Writes made while the index builds are replayed into the built copy by the build's own process in rounds,
    and only the last few under the store lock; the count and the ids are exact after the swap."""
    from plugins.qdrant import edge_build

    monkeypatch.setattr(edge_build, "CATCH_UP", 10)
    store, first = _start_build(tmp_path, 2500, threshold=2000)
    try:
        extra = _points(2000, seed=3)
        extra = [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"x{i}")), p.vector, p.payload) for i, p in enumerate(extra)]
        written = 0
        while store.builder.building("c") and written < len(extra):
            store.upsert("c", extra[written : written + 40])
            written += 40
            if written == 400:
                store.delete("c", [first[5].id])
            time.sleep(0.01)
        store.upsert("c", extra[written:])
        assert store.builder.wait(120) and store.builder.completed
        ids = store.list_ids("c")
        assert store.count("c") == len(ids) == 2500 + 2000 - (1 if written >= 400 else 0)
        assert _indexed(store, "c") >= 2500
        hits = store.search("c", extra[17].vector, 3)
        assert hits[0].id == extra[17].id
    finally:
        store.close()


def test_a_built_shard_searches_int8_codes_and_rescores_with_the_float_vectors(tmp_path):
    """After a build, search runs over the in-RAM int8 codes and rescores the best candidates with the float
    vectors: the scores returned are the exact ones."""
    store = _open(tmp_path / "q")
    try:
        store.ensure_collection("c", DIM, {})
        points = _points(3000)
        store.upsert("c", points)
        store._require("c").optimize()
        assert list((tmp_path / "q" / "edge" / "c").glob("segments/*/vector_storage*/quantized.data"))
        query = points[11].vector
        for hit in store.search("c", query, 10):
            vector = next(p.vector for p in points if p.id == hit.id)
            assert hit.score == pytest.approx(float(np.dot(query, vector)), abs=1e-5)
    finally:
        store.close()


def test_a_large_local_mode_collection_migrates_with_its_index_built(tmp_path):
    """A migrated collection goes live indexed (built in a child process before the rename), rather than
    answering exactly over every point while its first background build runs."""
    from qdrant_client import QdrantClient, models

    points = _points(1200)
    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("c", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    client.upsert("c", [models.PointStruct(id=p.id, vector=p.vector.tolist(), payload=p.payload) for p in points])
    client.close()
    store = EdgeStore(tmp_path / "q")
    store.builder.threshold = 1000
    try:
        assert store.count("c") == 1200
        assert _indexed(store, "c") == 1200 and not store.builder.building("c")
        assert store.search("c", points[9].vector, 1)[0].id == points[9].id
    finally:
        store.close()


def test_rewriting_indexed_points_starts_a_build_too(tmp_path):
    """Re-indexing edited files overwrites points an index already covers: the new versions are unindexed
    (the engine's own count still counts the old ones), so enough rewrites start a build."""
    store, points = _start_build(tmp_path, 1500, threshold=1000)
    try:
        assert store.builder.wait(120) and len(store.builder.completed) == 1
        edited = [Point(p.id, p.vector, {**p.payload, "text": "edited"}) for p in points[:1200]]
        for start in range(0, 1200, 200):
            store.upsert("c", edited[start : start + 200])
        assert store.builder.wait(120) and len(store.builder.completed) == 2
        assert store.count("c") == 1500
    finally:
        store.close()


def _building(tmp_path: Path) -> tuple[EdgeStore, list[Point]]:
    """A store whose collection "c" is building its index over 1,500 points, and 1,200 more points to write."""
    store, _ = _start_build(tmp_path, 1500, threshold=1000)
    more = [Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"m{i}")), p.vector, p.payload)
            for i, p in enumerate(_points(1200, seed=5))]
    return store, more


def test_the_end_of_a_bulk_load_is_indexed_without_another_write(tmp_path):
    """Points written during a build are unindexed in the new shard; when as many as the threshold came in, the
    next build starts as soon as this one is done, not at a next write that may never come."""
    store, more = _building(tmp_path)
    try:
        store.upsert("c", more)  # during the first build; then no write at all
        assert store.builder.wait(180)
        assert len(store.builder.completed) == 2
        assert unindexed(store._require("c")) == 0 and store.count("c") == 2700
    finally:
        store.close()


def test_a_build_outrun_by_writes_finishes_and_replays_them_from_its_spool(tmp_path, monkeypatch):
    """Every write during a build is spooled to a file beside the shard, not held in memory, and replayed into the
    built copy in batches while writes go on: the build finishes however much was written meanwhile (dropping it
    for a fresh copy left a bulk load unindexed until it ended); the spool is gone after; nothing is lost."""
    from plugins.qdrant import edge_build

    monkeypatch.setattr(edge_build, "REPLAY_BATCH", 150)
    monkeypatch.setattr(edge_build, "CATCH_UP", 100)
    store, more = _building(tmp_path)
    spool = store._dir("c").with_name("c" + edge_build.JOURNAL_SUFFIX)
    try:
        seen = False
        for start in range(0, 1200, 100):
            store.upsert("c", more[start : start + 100])
            seen = seen or spool.is_file()
        assert seen, "writes during a build are spooled beside the shard"
        assert store.builder.wait(180) and store.builder.completed
        first = store.builder.completed[0][2]
        assert "journal replayed at" in first and first["journal replayed at"] >= first["index built at"]
        assert not spool.exists()
        assert store.count("c") == 2700 and unindexed(store._require("c")) < store.builder.threshold
        assert {p.id for p in more} <= store.list_ids("c")
    finally:
        store.close()


def test_a_journal_that_cannot_be_written_drops_the_build_not_the_write(tmp_path, monkeypatch, caplog):
    """A full disk under the spool: the write to the live shard stands, the build is dropped and a fresh one
    follows from a new copy; nothing is lost."""
    from plugins.qdrant import edge_build

    real_append = edge_build.Journal.append
    failures = iter([OSError(28, "No space left on device")])

    def append(self, kind, items, points):
        error = next(failures, None)
        if error is not None:
            raise error
        real_append(self, kind, items, points)

    monkeypatch.setattr(edge_build.Journal, "append", append)
    store, more = _building(tmp_path)
    try:
        with caplog.at_level("WARNING", logger="plugins.qdrant.edge_build"):
            store.upsert("c", more[:600])
            store.upsert("c", more[600:])
            assert store.builder.wait(180) and store.builder.completed
        assert any("journal could not be written" in r.getMessage() for r in caplog.records)
        assert store.count("c") == 2700 and {p.id for p in more} <= store.list_ids("c")
        assert unindexed(store._require("c")) < store.builder.threshold
    finally:
        store.close()


def test_a_bulk_load_that_outruns_the_build_waits_for_it(tmp_path):
    """Searches scan unindexed points exactly, so a bulk load may not pile up more than ``max_unindexed`` of them
    while a build runs: the next write waits for the build to end, then goes on; nothing is lost."""
    store, more = _building(tmp_path)
    store.builder.max_unindexed = 1600  # the build copied 1,500 unindexed points
    try:
        peaks = []
        for start in range(0, 1200, 100):
            store.upsert("c", more[start : start + 100])
            peaks.append(store.builder.unindexed_now("c") or 0)
        assert store.builder.held_s > 0, "a write waited for the build"
        assert max(peaks) <= 1600 + 100  # at most one write past the bound before the next waits
        assert store.builder.wait(180)
        assert store.count("c") == 2700 and {p.id for p in more} <= store.list_ids("c")
    finally:
        store.close()


def test_a_write_never_waits_longer_than_the_hold_limit(tmp_path, monkeypatch):
    """A build that never ends (stuck) holds a write back for at most HOLD_S: indexing goes on."""
    import threading

    from plugins.qdrant import edge_build

    monkeypatch.setattr(edge_build, "HOLD_S", 0.3)
    builder = edge_build.BackgroundBuilder(threading.RLock(), threading.RLock(), lambda name: None, threshold=10)
    stuck = edge_build._Build(copied_unindexed=10**6)
    stuck.journal = edge_build.Journal(tmp_path / "c.journal")
    builder._builds["c"] = stuck
    try:
        assert builder.unindexed_now("c") == 10**6
        waited = builder.hold("c")
        assert 0.3 <= waited < 5
        builder.max_unindexed = 0  # off: never waits
        assert builder.hold("c") == 0.0
        assert builder.hold("other") == 0.0 and builder.unindexed_now("other") is None
    finally:
        stuck.journal.close()
