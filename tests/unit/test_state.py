import sqlite3

import numpy as np
import pytest

from indexer.core.normalization import Normalization
from indexer.errors import StateError
from indexer.migrations import MIGRATIONS
from indexer.state.database import ChunkRecord, CollectionRecord, FileRecord, FileUpdate, StateStore


def _rec(name="c"):
    return CollectionRecord(name, "faiss", {"path": "/x"}, "cosine", "m", "/m.gguf", Normalization.L2, 4)


def test_migrations_are_applied_once_with_their_record(tmp_path):
    db = tmp_path / "s.sqlite"
    StateStore(db).close()
    st = StateStore(db)  # second open applies nothing
    assert st.applied_migrations() == sorted(m.__name__ for m in MIGRATIONS)
    st.close()


def test_a_failing_migration_leaves_no_record_and_no_partial_schema(tmp_path, monkeypatch):
    def m9999_broken(db):
        db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    monkeypatch.setattr("indexer.state.database.MIGRATIONS", [*MIGRATIONS, m9999_broken])
    with pytest.raises(RuntimeError):
        StateStore(tmp_path / "s.sqlite")
    con = sqlite3.connect(tmp_path / "s.sqlite")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    applied = {r[0] for r in con.execute("SELECT name FROM schema_migrations")}
    assert "half_done" not in names and "m9999_broken" not in applied and "m0001_initial" in applied


def test_a_database_from_a_newer_version_is_refused(tmp_path):
    StateStore(tmp_path / "s.sqlite").close()
    con = sqlite3.connect(tmp_path / "s.sqlite")
    con.execute("INSERT INTO schema_migrations VALUES ('m9999_future', 0)")
    con.commit()
    with pytest.raises(StateError, match="newer indexer"):
        StateStore(tmp_path / "s.sqlite")


def test_corrupt_database_is_a_state_error(tmp_path):
    (tmp_path / "s.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(StateError, match="move it aside"):
        StateStore(tmp_path / "s.sqlite")


def test_files_chunks_pending_round_trip(tmp_path):
    st = StateStore(tmp_path / "s.sqlite")
    st.create_collection(_rec())
    st.add_pending("c", [("id1", "/r/a"), ("id2", "/r/a")])
    assert sorted(st.pending_orphans("c")) == ["id1", "id2"]
    f = FileRecord("/r/a", "/r", 10, 5, "h", "indexed", kind="text")
    st.commit_files("c", [FileUpdate(f, (ChunkRecord("id1", "/r/a", 0, "ch", 7),))])
    assert st.pending_orphans("c") == []  # committed file clears its pending ids
    assert st.chunk_ids("c", ["/r/a"]) == {"/r/a": ["id1"]}
    assert st.counts("c") == {"files": 1, "failed": 0, "chunks": 1, "tokens": 7}
    # a failed file keeps its previous chunks
    st.commit_files("c", [FileUpdate(FileRecord("/r/a", "/r", 11, 6, "h", "failed", "boom"), ())])
    assert st.chunk_ids("c", ["/r/a"]) == {"/r/a": ["id1"]}
    assert st.counts("c")["failed"] == 1
    st.commit_files("c", [], removed=["/r/a"])
    assert st.files("c") == {} and st.counts("c")["chunks"] == 0
    st.close()


def test_vector_cache_and_gc(tmp_path):
    st = StateStore(tmp_path / "s.sqlite")
    st.create_collection(_rec())
    v = np.arange(4, dtype=np.float32)
    st.put_vectors("k", [("used", v), ("unused", v * 2)])
    f = FileRecord("/r/a", "/r", 1, 1, "h", "indexed")
    st.commit_files("c", [FileUpdate(f, (ChunkRecord("id", "/r/a", 0, "used", 1),))])
    got = st.cached_vectors("k", ["used", "unused", "missing"])
    assert set(got) == {"used", "unused"} and np.array_equal(got["unused"], v * 2)
    assert st.gc_vector_cache("k") == 1
    assert set(st.cached_vectors("k", ["used", "unused"])) == {"used"}
    st.close()


def test_drop_collection_removes_everything(tmp_path):
    st = StateStore(tmp_path / "s.sqlite")
    st.create_collection(_rec())
    st.add_root("c", "/r")
    st.commit_files("c", [FileUpdate(FileRecord("/r/a", "/r", 1, 1, "h", "indexed"), ())])
    st.drop_collection("c")
    assert st.get_collection("c") is None and st.roots("c") == [] and st.files("c") == {}
    st.close()


def test_normalization_is_recorded_by_name_and_old_integer_rows_still_read(tmp_path):
    st = StateStore(tmp_path / "s.sqlite")
    st.create_collection(_rec("new"))
    st.create_collection(CollectionRecord("dot", "faiss", {}, "dot", "m", "/m.gguf", Normalization.NONE, 4))
    # version 0.1 wrote llama.cpp's integer modes into the same column
    st._db.execute("INSERT INTO collections VALUES ('old', 'faiss', '{}', 'cosine', 'm', '/m.gguf', 2, 4, 0)")
    st._db.execute("INSERT INTO collections VALUES ('old_none', 'faiss', '{}', 'dot', 'm', '/m.gguf', -1, 4, 0)")
    raw = dict(st._db.execute("SELECT name, normalization FROM collections").fetchall())
    assert raw["new"] == "l2" and raw["dot"] == "none"
    got = {r.name: r.normalization for r in st.list_collections()}
    assert got == {
        "new": Normalization.L2,
        "dot": Normalization.NONE,
        "old": Normalization.L2,
        "old_none": Normalization.NONE,
    }
    st.close()


def test_file_stats_and_files_at_match_the_full_records(tmp_path):
    """The no-change check reads (size, mtime_ns, status, checked_ns) of the files below a root; the records
    of the few files a sync then reads come from files_at (in batches of 500)."""
    st = StateStore(tmp_path / "s.sqlite")
    st.create_collection(_rec())
    st.create_collection(_rec("other"))
    inside = ["/r/a", "/r/a/x.md", "/r/a/sub/y.md"] + [f"/r/a/many/{i:04d}.md" for i in range(600)]
    beside = ["/r/ab/z.md", "/r/a0/z.md", "/r/a-/z.md", "/r/a.md", "/r", "/q/a/x.md"]  # prefix collisions
    updates = [FileUpdate(FileRecord(p, "/r", len(p), 7, "h", "indexed", kind="text"), ()) for p in inside + beside]
    updates.append(FileUpdate(FileRecord("/r/a/bad.md", "/r", 3, 9, "", "failed", "unreadable"), ()))
    st.commit_files("c", updates)
    st.commit_files("other", [FileUpdate(FileRecord("/r/a/x.md", "/r", 1, 1, "h", "indexed"), ())])
    records = st.files("c")
    stats = st.file_stats("c", "/r/a")
    assert set(stats) == {*inside, "/r/a/bad.md"}
    for path, row in stats.items():
        rec = records[path]
        assert row == (rec.size, rec.mtime_ns, rec.status, rec.checked_ns) and rec.checked_ns > 0
    assert set(st.file_stats("c", "/r/a/")) == set(stats) - {"/r/a"}  # as pipeline.within: the folder's files
    assert set(st.file_stats("c", "/")) == set(records)
    wanted = [*inside[::-1], "/r/nowhere.md", "/r/a/x.md"]
    assert st.files_at("c", wanted) == {p: records[p] for p in inside}
    assert st.files_at("other", ["/r/a/x.md", "/r/a/sub/y.md"]) == {"/r/a/x.md": st.files("other")["/r/a/x.md"]}
    assert st.files_at("c", []) == {}
