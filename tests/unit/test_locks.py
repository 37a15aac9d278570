"""indexer.core.locks, the one file-lock helper: exclusive across processes and threads, reentrant in a thread,
non-blocking writer lock with a clear error, blocking locks with a timeout, released when the holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from indexer.core.locks import FileLock, LifetimeLock, lock_for, writer_lock
from indexer.errors import LockedError, ModelError

ROOT = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent(
    """
    import sys
    from indexer.core.locks import lock_for
    with lock_for(sys.argv[1]).hold(timeout=0):
        print("HELD", flush=True)
        sys.stdin.readline()  # hold until the parent says so (or dies)
    print("RELEASED", flush=True)
    """
)


class Holder:
    """Another process holding the lock on ``path`` until ``release()``."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "HELD", self.proc.stderr.read() if self.proc.stderr else line

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "RELEASED"
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def test_the_writer_lock_of_another_process_is_refused_at_once_with_a_clear_error(tmp_path):
    path = tmp_path / "locks" / "notes.lock"
    holder = Holder(path)
    try:
        with pytest.raises(LockedError, match="collection 'notes' is being written by another indexer process"), \
                writer_lock(path, "collection 'notes'"):
            pass
    finally:
        holder.release()
    with writer_lock(path, "collection 'notes'"):  # free again once the other process let go
        assert lock_for(path).held


def test_a_blocking_lock_waits_up_to_its_timeout_then_names_the_problem(tmp_path):
    path = tmp_path / "writer.lock"
    holder = Holder(path)
    try:
        with pytest.raises(ModelError, match="someone else is building"), \
                lock_for(path).hold(timeout=0.2, message="someone else is building", error=ModelError):
            pass
    finally:
        holder.release()
    with lock_for(path).hold(timeout=5):
        pass


def test_a_lock_of_a_killed_process_is_free(tmp_path):
    path = tmp_path / "writer.lock"
    Holder(path).kill()
    with lock_for(path).hold(timeout=0):
        pass
    assert path.exists()  # the lock file stays (deleting it under a holder would break exclusion)


def test_reentrant_in_one_thread_exclusive_between_threads(tmp_path):
    lock = lock_for(tmp_path / "x.lock")
    assert lock is lock_for(tmp_path / "x.lock")  # one instance per path in a process
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            with lock.hold(timeout=0):
                pass
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    with lock.hold(timeout=0), lock.hold(timeout=0):  # nested: no deadlock
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert lock.held
    assert not lock.held
    assert len(errors) == 1 and isinstance(errors[0], LockedError)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert len(errors) == 1  # free once the first thread let go


def test_a_thread_waits_for_another_thread_within_its_timeout(tmp_path):
    lock = FileLock(tmp_path / "y.lock")
    inside = threading.Event()
    leave = threading.Event()
    order: list[str] = []

    def first() -> None:
        with lock.hold(timeout=0):
            order.append("first in")
            inside.set()
            leave.wait(30)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(30)
    leave.set()
    with lock.hold(timeout=30):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]


def test_an_unwritable_lock_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(LockedError, match="cannot create the lock folder"), lock_for(blocker / "sub" / "x.lock").hold(
        timeout=0
    ):
        pass


def test_a_lifetime_lock_refuses_a_second_holder_even_in_this_process_and_releases_from_any_thread(tmp_path):
    path = tmp_path / "watch" / "c.lock"
    first, second = LifetimeLock(path), LifetimeLock(path)
    first.take("taken")
    with pytest.raises(LockedError, match="a watcher already runs"):
        second.take("a watcher already runs")
    t = threading.Thread(target=first.release)  # stop() may run in another thread than start()
    t.start()
    t.join()
    assert not first.held
    second.take("taken")
    holder_refused = subprocess.run(
        [sys.executable, "-c", HOLDER, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert holder_refused.returncode != 0 and "LockedError" in holder_refused.stderr
    second.release()
    Holder(path).release()  # free for another process once released


def test_a_faiss_store_written_by_another_process_waits_then_says_so(tmp_path):
    import numpy as np

    from indexer.types import Point
    from plugins.faiss import FaissStore

    store = FaissStore(tmp_path / "faiss", lock_timeout=0.2)
    store.ensure_collection("c", 4, {"indexer.model_id": "m"})
    holder = Holder(tmp_path / "faiss" / "c" / "writer.lock")
    point = Point("00000000-0000-0000-0000-000000000001", np.array([1, 0, 0, 0], dtype=np.float32), {"path": "/a"})
    try:
        with pytest.raises(LockedError, match="another process has been writing .*faiss/c") as info:
            store.upsert("c", [point])
        assert "\n" not in str(info.value)
    finally:
        holder.release()
    store.upsert("c", [point])  # free again: the write goes through
    assert store.count("c") == 1
    store.close()
