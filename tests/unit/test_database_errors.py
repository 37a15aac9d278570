"""Database errors of the state store and the FAISS sidecar reach callers as one StateError/StoreError line that
names the file and the fix; never sqlite3's raw text alone, never "cannot rollback"."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from indexer.errors import StateError, StoreError
from indexer.state.database import CollectionRecord, FileRecord, FileUpdate, StateStore
from indexer.types import Point
from plugins.faiss import FaissStore

PAGE = 4096


def _garble(path: Path, pages: range | None = None) -> None:
    """Overwrite the middle of the given pages (all but the first by default) with garbage."""
    data = bytearray(path.read_bytes())
    n = len(data) // PAGE
    for page in pages if pages is not None else range(1, n):
        start = page * PAGE
        data[start : start + 64] = b"\xa5" * 64  # the b-tree page header and cell pointers
    path.write_bytes(bytes(data))


def _state_with_rows(path: Path, files: int = 400) -> None:
    st = StateStore(path)
    st.create_collection(CollectionRecord("c", "faiss", {"path": "x"}, "cosine", "m", "/m.gguf", 2, 4))
    updates = [
        FileUpdate(FileRecord(f"/r/{i:05d}-{'x' * 100}.md", "/r", 1, 1, f"h{i}", "indexed"), ()) for i in range(files)
    ]
    st.commit_files("c", updates)
    st.close()  # checkpoints the WAL into the main file


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


def test_a_garbled_state_file_is_one_clear_error(tmp_path):
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 200)
    with pytest.raises(StateError) as info:
        StateStore(path)
    text = _one_line(info.value)
    assert str(path) in text and "damaged" in text and "move it aside" in text and "indexer index" in text
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_a_corrupt_page_inside_the_state_file_is_a_state_error_on_use(tmp_path):
    path = tmp_path / "state.sqlite"
    _state_with_rows(path)
    n = path.stat().st_size // PAGE
    _garble(path, range(n - 3, n))  # data pages of the files table; the schema pages stay readable
    try:
        st = StateStore(path)
    except StateError as exc:  # some SQLite builds notice at open: equally fine
        text = _one_line(exc)
    else:
        with pytest.raises(StateError) as info:
            st.files("c")
        st.close()
        text = _one_line(info.value)
    assert str(path) in text and "restore it from a backup, or move it aside" in text


def test_a_failing_write_in_a_corrupt_state_file_reports_the_corruption_not_the_rollback(tmp_path):
    path = tmp_path / "state.sqlite"
    _state_with_rows(path)
    n = path.stat().st_size // PAGE
    st = StateStore(path)
    _garble(path, range(2, n))
    with pytest.raises(StateError) as info:
        st.commit_files("c", [], removed=[f"/r/{i:05d}-{'x' * 100}.md" for i in range(400)])
    st.close()
    assert "cannot rollback" not in str(info.value) and str(path) in str(info.value)


def test_a_locked_state_database_is_waited_for_then_reported_as_locked(tmp_path):
    path = tmp_path / "state.sqlite"
    st = StateStore(path)
    st.create_collection(CollectionRecord("c", "faiss", {"path": "x"}, "cosine", "m", "/m.gguf", 2, 4))
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")
    try:
        st._db.execute("PRAGMA busy_timeout=50")  # the real one is 30 s
        with pytest.raises(StateError) as info:
            st.add_root("c", "/r")
        text = _one_line(info.value)
        assert "is locked" in text and str(path) in text and "retry" in text
        # released within the busy timeout: no error at all
        st._db.execute("PRAGMA busy_timeout=30000")
        t = threading.Timer(0.2, lambda: other.execute("ROLLBACK"))
        t.start()
        st.add_root("c", "/r")  # waits for the other writer instead of failing
        t.join()
        assert st.roots("c") == ["/r"]
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
        st.close()


def test_an_unwritable_data_dir_is_a_state_error(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(StateError, match="cannot use the state database"):
        StateStore(blocker / "state.sqlite")


def _faiss_with_points(root: Path) -> Path:
    store = FaissStore(root)
    store.ensure_collection("c", 8, {"indexer.model_id": "m"})
    vectors = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)  # cosine collections take unit vectors
    store.upsert(
        "c",
        [Point(f"00000000-0000-0000-0000-{i:012d}", vectors[i], {"path": f"/r/{i}.md"}) for i in range(300)],
    )
    store.close()
    sidecar = root / "c" / "points.sqlite"
    con = sqlite3.connect(sidecar)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sidecar


def test_a_garbled_faiss_sidecar_is_one_clear_store_error(tmp_path):
    sidecar = _faiss_with_points(tmp_path / "faiss")
    for extra in ("-wal", "-shm"):
        Path(str(sidecar) + extra).unlink(missing_ok=True)
    sidecar.write_bytes(b"garbage " * 4000)
    store = FaissStore(tmp_path / "faiss")
    with pytest.raises(StoreError) as info:
        store.count("c")
    text = _one_line(info.value)
    assert "cannot rollback" not in text and "no transaction" not in text
    assert str(sidecar) in text and "damaged" in text and "move it aside" in text


def test_a_corrupt_page_inside_the_faiss_sidecar_is_a_store_error(tmp_path):
    sidecar = _faiss_with_points(tmp_path / "faiss")
    n = sidecar.stat().st_size // PAGE
    _garble(sidecar, range(2, n))
    store = FaissStore(tmp_path / "faiss")
    with pytest.raises(StoreError) as info:
        store.search("c", np.ones(8, dtype=np.float32) / np.sqrt(8), 5)
        store.list_ids("c")
    text = _one_line(info.value)
    assert "cannot rollback" not in text and str(sidecar) in text


def test_sidecar_busy_timeout_then_locked_error(tmp_path):
    sidecar = _faiss_with_points(tmp_path / "faiss")
    other = sqlite3.connect(sidecar, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    from plugins.faiss.sidecar import Sidecar

    sc = Sidecar(sidecar)
    sc.conn.execute("PRAGMA busy_timeout=50")
    try:
        with pytest.raises(StoreError) as info, sc.write():
            pass
        assert "is locked" in str(info.value) and str(sidecar) in str(info.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
        sc.close()


def test_a_reader_never_brings_back_a_dropped_faiss_sidecar(tmp_path, monkeypatch):
    """A search that checked the sidecar exists, then opened it after a drop removed it, used to create an empty
    file (sqlite's default) that kept the dropped folder alive; a reader opens existing files only."""
    from plugins.faiss.sidecar import Sidecar

    folder = tmp_path / "lone"
    folder.mkdir()
    with pytest.raises(StoreError, match="FAISS store file"):
        Sidecar(folder / "points.sqlite", create=False)
    assert list(folder.iterdir()) == []
    store = FaissStore(tmp_path / "faiss")
    store.ensure_collection("c", 3, {})
    point = Point("00000000-0000-4000-8000-000000000001", np.array([1.0, 0, 0], np.float32), {"path": "/a"})
    store.upsert("c", [point])
    other = FaissStore(tmp_path / "faiss")  # another process's store, about to open the collection
    real = Sidecar.__init__

    def dropped_meanwhile(self, path, create=True):
        store.drop("c")  # between the reader's check and its open
        real(self, path, create)

    monkeypatch.setattr(Sidecar, "__init__", dropped_meanwhile)
    assert other._open("c") is None
    assert not (tmp_path / "faiss" / "c").exists()
    store.close()
    other.close()
