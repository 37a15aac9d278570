"""Building an embedded Qdrant shard's HNSW index in the background, without stopping searches or writes.

qdrant-edge builds its index in ``EdgeShard.optimize()``, which holds Python's GIL for the whole build (measured:
a 20,000-point build of 9 s let a sleeping thread run twice), so a build inside the serving process would stall
every search, the HTTP server and the watcher. The build therefore runs in a child process, on a copy:

1. with writes held back (searches go on): flush the live shard, copy its folder to ``edge/<name>.build``;
   from then on every update applied to the live shard is also recorded in a journal;
2. a child process (``nice``) loads the copy and runs ``optimize()``; the live shard keeps answering (exact
   over the points not yet indexed, HNSW over the rest) and keeps taking writes;
3. the child replays the journal into the built copy while it grows, in rounds, until what is left is small;
4. with writes held back: the child applies the rest, flushes and exits, and the store reads the built copy's
   int8 codes into the page cache; then, under the store lock, it closes the live shard, swaps the folders
   (live -> ``<name>.old``, build -> live, drop the old) and opens the new live shard once. Searches wait only
   for that close and open (``EdgeShard.load`` holds the GIL: 1.0 s at 1M chunks).

A crash at any step leaves the live folder complete (every write is flushed, and the built copy replaces it
only once it holds every write): :func:`recover` removes a leftover ``.build`` and puts a ``.old`` back when
the swap was cut between its two renames.

When: a build starts after a write once a shard holds :data:`INDEX_THRESHOLD` or more points that its HNSW does
not cover: at first sight as the engine counts them, then as many points written since the last build's copy
(written points land in the unindexed segment; the engine's count misses overwrites, whose old versions stay in
an indexed segment; and points it leaves unindexed never cause a build after every write). Below that, a search
scans them exactly (measured 2.4 ms p50 at 30,000 384-d points), so a small collection never pays for an index.
Shards are created with the engine's own indexing threshold at 1 KB, so a build indexes whatever it finds: this
rule alone decides. When a build ends with as many points written meanwhile, the next starts at once (the end of a
bulk load has no next write).

The journal is spooled to a file beside the shard (``edge/<name>.journal``, 1.5 KB a point), not held in memory, so
a build outrun by a bulk load is never dropped: it finishes, replays what was written meanwhile in batches, and
the next build indexes only that (the engine keeps the segments already indexed). Dropping such a build for a
fresh copy (what a cap in memory forced before) left most of a million points unindexed until the load ended, and
every search meanwhile an exact scan of them (docs/stores.md, "a bulk load through the store port"). Should the
spool fail (a full disk), the build is dropped and a fresh one follows; the live shard never depends on it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

INDEX_THRESHOLD = 20_000  # unindexed points that start a build
BUILD_SUFFIX = ".build"
OLD_SUFFIX = ".old"

CATCH_UP = 2_000  # journaled points left for the final round, under the lock
MAX_ROUNDS = 20
REPLAY_BATCH = 20_000  # journaled points sent to the build process at a time (its memory, not ours)
MAX_UNINDEXED = 200_000  # a write waits while a build runs and more points than this are unindexed (see hold())
HOLD_S = 600.0  # the longest one write waits for a build (then it goes on: a stuck build never stops indexing)
JOURNAL_SUFFIX = ".journal"
_CHILD = """
import pickle, sys, qdrant_edge as qe
shard = qe.EdgeShard.load(sys.argv[1])
shard.optimize()
shard.flush()
out = sys.stdout.buffer
out.write(b"built\\n"); out.flush()
while (rounds := pickle.load(sys.stdin.buffer)) is not None:  # journal rounds, then None
    for kind, items in rounds:
        if kind == "delete":
            shard.update(qe.UpdateOperation.delete_points(items))
            continue
        if kind == "set_payload":
            for ids, payload in items:
                shard.update(qe.UpdateOperation.set_payload(ids, payload))
            continue
        if kind == "unmark":
            keys = ["uncommitted"]
            marked = qe.Filter(must_not=[qe.IsEmptyCondition("uncommitted")])
            shard.update(qe.UpdateOperation.delete_payload(items, keys) if items else
                         qe.UpdateOperation.delete_payload_by_filter(marked, keys))
            continue
        if kind == "index":
            schemas = {"keyword": qe.KeywordIndexParams(prefix=True), "bool": qe.BoolIndexParams(),
                       "integer": qe.IntegerIndexParams(lookup=True, range=True), "float": qe.FloatIndexParams()}
            for key, schema in items:
                shard.update(qe.UpdateOperation.create_field_index(key, schemas[schema]))
            continue
        points = [qe.Point(id=i, payload=p, vector={n: qe.SparseVector(indices=v[0], values=v[1])
                                                     if isinstance(v, tuple) else v.tolist() for n, v in vec.items()})
                  for i, vec, p in items]
        shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    out.write(b"ok\\n"); out.flush()
shard.close()
out.write(b"done\\n"); out.flush()
"""


def recover(folder: Path) -> None:
    """Undo what a killed build left beside the live shard ``folder``."""
    old = folder.with_name(folder.name + OLD_SUFFIX)
    if not folder.exists() and (old / "edge_config.json").exists():
        os.replace(old, folder)  # cut between the two renames: the old folder holds every flushed write
        logger.warning("restored the embedded Qdrant shard %s after an interrupted index build", folder)
    shutil.rmtree(folder.with_name(folder.name + BUILD_SUFFIX), ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.with_name(folder.name + JOURNAL_SUFFIX).unlink()


def build_now(folder: Path) -> None:
    """Build the index of the closed shard in ``folder`` in a child process, and wait (a migration: the new
    shard goes live with its index rather than answering exactly over every point during its first build)."""
    with tempfile.TemporaryFile() as errors:
        done = subprocess.run(  # noqa: S603 - our own interpreter and script
            [sys.executable, "-c", _CHILD, str(folder)], input=pickle.dumps(None), stdout=subprocess.PIPE,
            stderr=errors, preexec_fn=_lower_priority if os.name == "posix" else None, check=False,  # noqa: PLW1509
        )
        if done.returncode != 0 or not done.stdout.endswith(b"done\n"):
            errors.seek(0)
            raise RuntimeError(f"exit {done.returncode}: {errors.read()[-500:].decode(errors='replace').strip()}")


def graph_of(folder: Path) -> dict[str, int]:
    """The HNSW ``m`` and ``ef_construct`` of the shard in ``folder`` (its edge_config.json); {} unreadable."""
    try:
        hnsw = json.loads((folder / "edge_config.json").read_text()).get("hnsw_config") or {}
        return {key: int(hnsw[key]) for key in ("m", "ef_construct") if key in hnsw}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def set_graph(folder: Path, graph: dict[str, int]) -> None:
    """Give the (copied, closed) shard in ``folder`` another HNSW ``m`` / ``ef_construct``: its next optimize()
    builds the graph of every segment again with them."""
    path = folder / "edge_config.json"
    config = json.loads(path.read_text())
    if all(config.get("hnsw_config", {}).get(key) == value for key, value in graph.items()):
        return
    config.setdefault("hnsw_config", {}).update(graph)
    path.write_text(json.dumps(config))


def unindexed(shard: Any, vectors_per_point: int = 2) -> int:
    """Dense vectors no HNSW covers. The engine's ``indexed_vectors_count`` counts every named vector and a
    sparse vector is always indexed, so with our lexical vector beside the dense one it is
    ``points + indexed dense``."""
    info = shard.info()
    points = int(info.points_count)
    return max(0, points - (int(info.indexed_vectors_count) - (vectors_per_point - 1) * points))


class Journal:
    """The updates applied to the live shard since a build's copy, in order, spooled to ``path``: one pickle frame
    per update, appended under the store lock; the build reads them back in batches from where it left off."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._in = open(path, "rb")  # noqa: SIM115
        self.pending = 0  # points appended and not yet marked
        self.total = 0  # points appended since the copy

    def append(self, kind: str, items: list[Any], points: int) -> None:
        pickle.dump((kind, items, points), self._out, protocol=pickle.HIGHEST_PROTOCOL)
        self.pending += points
        self.total += points

    def mark(self) -> tuple[int, int]:
        """(end offset, points appended since the last mark); called under the store lock."""
        self._out.flush()
        pending, self.pending = self.pending, 0
        return self._out.tell(), pending

    def batches(self, end: int, size: int) -> Any:
        """The updates up to offset ``end`` not read yet, in lists of about ``size`` points (read without the lock:
        the writer only appends past ``end``)."""
        batch: list[tuple[str, Any]] = []
        points = 0
        while self._in.tell() < end:
            kind, items, n = pickle.load(self._in)  # noqa: S301 - our own spool, written above
            batch.append((kind, items))
            points += max(n, 1)
            if points >= size:
                yield batch
                batch, points = [], 0
        if batch:
            yield batch

    def close(self) -> None:
        for handle in (self._out, self._in):
            with contextlib.suppress(OSError):
                handle.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass
class _Build:
    journal: Journal | None = None  # None until the copy is taken
    copied_unindexed: int = 0  # points the copy holds that the live shard's HNSW does not cover
    process: subprocess.Popen[bytes] | None = None
    thread: threading.Thread | None = None
    cancelled: bool = False
    abandoned: bool = False  # its journal could not be written: a fresh build follows
    timings: dict[str, float] = field(default_factory=dict)
    errors: Any = field(default_factory=tempfile.TemporaryFile)  # the child's stderr


class BuildCancelled(Exception):
    pass


class BackgroundBuilder:
    """Runs at most one build per collection. The store calls :meth:`record` for every update it applies (with
    ``write_gate`` and ``lock`` held) and :meth:`maybe_start` after a write; writers take ``write_gate`` before
    ``lock``, readers only ``lock``. ``swap(collection, built_folder)`` is the store's callback that puts the
    built folder in place and opens it (called with writes held back; it takes the lock itself)."""

    def __init__(self, lock: threading.RLock, write_gate: threading.RLock, live: Callable[[str], Any | None],
                 threshold: int = INDEX_THRESHOLD, graph: Callable[[str], dict[str, int]] | None = None) -> None:
        self._lock = lock
        self._gate = write_gate
        self._live_shard = live
        self.threshold = threshold
        self._builds: dict[str, _Build] = {}
        # points written since the last build's copy (every written point lands unindexed; the engine's own
        # count cannot tell: points deleted from an indexed segment stay in it)
        self._written: dict[str, int] = {}
        self.completed: list[tuple[str, float, dict[str, float]]] = []  # (collection, seconds, steps) of builds
        self.graph = graph  # the HNSW m / ef_construct of the next build (the store's choice from the estimate)
        self.max_unindexed = MAX_UNINDEXED
        self._closed = False  # set by close(): no build starts after the store's close began
        self._ended = threading.Condition(threading.Lock())  # notified when a build ends
        self.held_s = 0.0  # time writes waited in hold() (benchmarks, status)

    def unindexed_now(self, collection: str) -> int | None:
        """Points of ``collection``'s live shard that no HNSW covers while a build runs (those it copied and those
        written since), else None; without the engine's count, which takes the store lock."""
        build = self._builds.get(collection)
        if build is None or build.journal is None:
            return None
        return build.copied_unindexed + build.journal.total

    def hold(self, collection: str) -> float:
        """Called by a writer before it takes the write gate: while a build of ``collection`` runs and more than
        ``max_unindexed`` points of the live shard are unindexed, wait for that build to end (at most
        :data:`HOLD_S`). Every search scans the unindexed points exactly (87 ms at 1M on the AMD EPYC Zen 4
        here), so a bulk load that outruns the build would leave searches there for the whole load; held back,
        it goes at the pace the index is built, which is when it would have been indexed anyway. An embedder's
        pace (hundreds of chunks a second on a CPU) never reaches it. Returns the seconds waited."""
        if self.max_unindexed <= 0:
            return 0.0
        started = time.monotonic()
        with self._ended:
            while True:
                now = self.unindexed_now(collection)
                if now is None or now <= self.max_unindexed or time.monotonic() - started > HOLD_S:
                    break
                self._ended.wait(timeout=1.0)
        waited = time.monotonic() - started
        self.held_s += waited
        return waited

    def building(self, collection: str) -> bool:
        return collection in self._builds

    def record(self, collection: str, kind: str, items: list[Any], points: int = 0) -> None:
        """Called with the gate and the lock held for each update applied to the live shard: ``("upsert",
        [(id, {vector name: list | (indices, values)}, payload)])``, ``("delete", [id, ...])``, ``("set_payload",
        [(ids, payload)])``, ``("unmark", [id, ...])`` (none: every marked point) or ``("index", [(key, schema
        name)])`` (plugins/qdrant/edge_fields.py)."""
        build = self._builds.get(collection)
        if build is not None and build.journal is not None and not build.cancelled:
            try:
                build.journal.append(kind, items, max(points, 1))
            except Exception as exc:  # e.g. a full disk: the write stands, this build cannot hold it
                logger.warning("abandoned the index build of embedded Qdrant collection %s: its journal could not "
                               "be written (%s); a fresh build follows", collection, exc)
                build.abandoned = build.cancelled = True
                if build.process is not None and build.process.poll() is None:
                    build.process.kill()
        if collection in self._written:
            self._written[collection] += points or 1

    def rebuild(self, collection: str, folder: Path, swap: Callable[[str, Path], None]) -> bool:
        """Build now, whatever was written since the last build (another HNSW graph was chosen: the whole index is
        built again); False when a build runs already (the next one takes the choice)."""
        with self._gate, self._lock:
            shard = self._live_shard(collection)
            if shard is None:
                return False
            self._written[collection] = max(self._written.get(collection, 0), self.threshold, 1)
            return self.maybe_start(collection, shard, folder, swap)

    def maybe_start(self, collection: str, shard: Any, folder: Path, swap: Callable[[str, Path], None]) -> bool:
        """Start a build of ``collection`` if its shard needs one and none runs (called under the store lock);
        the copy is taken by the build's thread, as soon as this write has returned."""
        if collection in self._builds or self.threshold <= 0 or self._closed:
            return False
        written = self._written.get(collection)
        if written is None:  # first sight in this process: what the engine reports unindexed
            written = self._written[collection] = unindexed(shard)
        if written < self.threshold:
            return False
        self._written[collection] = 0
        build = self._builds[collection] = _Build()
        build.thread = threading.Thread(target=self._run, args=(collection, folder, build, swap),
                                        name=f"qdrant-edge-build-{collection}", daemon=True)
        build.thread.start()
        return True

    def _run(self, collection: str, folder: Path, build: _Build, swap: Callable[[str, Path], None]) -> None:
        started = time.monotonic()
        target = folder.with_name(folder.name + BUILD_SUFFIX)
        try:
            self._copy(collection, folder, target, build)
            build.timings["copy, writes held back"] = time.monotonic() - started
            if self.graph is not None and (graph := self.graph(collection)):
                set_graph(target, graph)  # another graph: the engine builds every segment's HNSW again
            process = build.process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
                [sys.executable, "-c", _CHILD, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=build.errors, preexec_fn=_lower_priority if os.name == "posix" else None,  # noqa: PLW1509
            )
            self._expect(build, b"built")
            build.timings["index built at"] = time.monotonic() - started
            journal = build.journal
            assert journal is not None
            unsent = 0
            for _ in range(MAX_ROUNDS):  # catch up without the lock while writes go on
                with self._lock:
                    end, pending = journal.mark()
                unsent += pending
                if unsent <= CATCH_UP:  # left for the final round, with writes held back
                    break
                self._replay(build, end)
                unsent = 0
            build.timings["journal replayed at"] = time.monotonic() - started
            stalled = time.monotonic()
            with self._gate:  # writes held back; searches go on until swap() takes the lock
                with self._lock:
                    if build.cancelled:
                        raise BuildCancelled
                    end, _ = journal.mark()
                self._replay(build, end)
                build.timings["last round"] = time.monotonic() - stalled
                self._send(build, None, b"done")
                process.wait(timeout=60)
                build.timings["child closed"] = time.monotonic() - stalled
                swap(collection, target)
            build.timings["swap, writes held back"] = time.monotonic() - stalled
            seconds = time.monotonic() - started
            self.completed.append((collection, seconds, dict(build.timings)))
            logger.info("built the HNSW index of embedded Qdrant collection %s in %.1f s (%s; %d points written "
                        "meanwhile)", collection, seconds,
                        ", ".join(f"{k} {v:.1f} s" for k, v in build.timings.items()),
                        journal.total)
        except BuildCancelled:
            pass
        except Exception as exc:  # a failed build costs speed, never data: the live shard is untouched
            if not build.cancelled:
                logger.warning("building the HNSW index of embedded Qdrant collection %s failed: %s; searches stay "
                               "exact over the points it would have indexed", collection, exc)
        finally:
            if build.process is not None and build.process.poll() is None:
                build.process.kill()
                build.process.wait()
            shutil.rmtree(target, ignore_errors=True)
            with self._lock:  # one step: building() never reads False between this build and the next
                if self._builds.get(collection) is build:
                    del self._builds[collection]
                spool, build.journal = build.journal, None  # no append after this
                if spool is not None:
                    spool.close()  # before the next build opens its journal under the same name
                if build.abandoned or not build.cancelled:
                    self._again(collection, folder, swap)
            with self._ended:
                self._ended.notify_all()
            build.errors.close()

    def _again(self, collection: str, folder: Path, swap: Callable[[str, Path], None]) -> None:
        """After a build (under the lock): if as many points were written meanwhile (they are unindexed in the new
        shard), build again now rather than at the next write, which may never come (the end of a bulk load)."""
        with contextlib.suppress(Exception):
            shard = self._live_shard(collection)
            if shard is not None and not self._closed:
                self.maybe_start(collection, shard, folder, swap)

    def _copy(self, collection: str, folder: Path, target: Path, build: _Build) -> None:
        """Copy the live folder with writes held back but searches going on (reads change no file); the
        journal starts with the copy."""
        def copy(src: str, dst: str) -> None:
            if build.cancelled:
                raise BuildCancelled
            shutil.copy2(src, dst)

        with self._gate:
            with self._lock:
                if build.cancelled:
                    raise BuildCancelled
                shutil.rmtree(target, ignore_errors=True)
                shard = self._live(collection)
                shard.flush()
                build.copied_unindexed = unindexed(shard)
                build.journal = Journal(folder.with_name(folder.name + JOURNAL_SUFFIX))
            shutil.copytree(folder, target, copy_function=copy)

    def _live(self, collection: str) -> Any:
        shard = self._live_shard(collection)
        if shard is None:
            raise BuildCancelled
        return shard

    def _replay(self, build: _Build, end: int) -> None:
        """Send the journal up to offset ``end`` to the build process, :data:`REPLAY_BATCH` points at a time."""
        assert build.journal is not None
        for batch in build.journal.batches(end, REPLAY_BATCH):
            self._send(build, batch, b"ok")

    def _send(self, build: _Build, rounds: list[tuple[str, Any]] | None, reply: bytes) -> None:
        process = build.process
        assert process is not None and process.stdin is not None
        if build.cancelled:
            raise BuildCancelled
        pickle.dump(rounds, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        process.stdin.flush()
        self._expect(build, reply)

    def _expect(self, build: _Build, reply: bytes) -> None:
        process = build.process
        assert process is not None and process.stdout is not None
        line = process.stdout.readline().strip()
        if build.cancelled:
            raise BuildCancelled
        if line != reply:
            code = process.wait(timeout=10) if not line else process.poll()
            build.errors.seek(0)
            said = build.errors.read()[-500:].decode(errors="replace").strip()
            raise RuntimeError(f"the build process stopped (exit {code}): {said or line!r}")

    def close(self) -> None:
        """The store closes: every build stops and none starts again."""
        with self._lock:
            self._closed = True
        self.cancel()

    def cancel(self, collection: str | None = None, wait: bool = True) -> None:
        """Stop the build of ``collection`` (every build when None); its copy is removed."""
        with self._lock:
            builds = [b for c, b in self._builds.items() if collection is None or c == collection]
            for build in builds:
                build.cancelled = True
                if build.process is not None and build.process.poll() is None:
                    build.process.kill()
        if wait:
            for build in builds:
                if build.thread is not None and build.thread is not threading.current_thread():
                    build.thread.join(timeout=60)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running builds to finish (tests, benchmarks); True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = [b.thread for b in self._builds.values() if b.thread is not None]
            if not threads:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            threads[0].join(timeout=left)


def _lower_priority() -> None:
    """In the child before exec: below the server's priority, and killed with its parent (Linux), so a build
    never outlives the process whose shard it copies."""
    os.nice(10)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
