"""Rebuilding a FAISS collection's index in the background (docs/stores.md#recall-that-holds): searches during a
long build are answered by the index that exists.

When the auto kind crosses into another structure (flat -> IVF at ``switch_at``; an IVF grown 4x past its
training; shrunk back), the new index is trained from the sidecar's exact vectors. Inline, that held the
collection for the whole training (3 s at 100k chunks, 60 s at 1M), and every search waited. From
``BACKGROUND_FROM`` vectors on, it is trained in a thread instead, from a snapshot of the sidecar taken on a
connection of its own (no lock of the store held); the previous index keeps answering and keeps taking every write
meanwhile. The next sync after the training puts the new index in place and replays the writes made since its
snapshot from the op log, as for any index behind the sidecar (a snapshot whose ops were pruned meanwhile is
dropped, and the build starts again). Below ``BACKGROUND_FROM`` (and on a first open, with no index to answer
from) the build stays inline: it takes under a second or two.

A build that this process's own writes started is finished before the store closes, put in place and saved with
the index: an ``indexer index`` that crossed a threshold near its end otherwise exited with the training thread
inside FAISS (native code under an exiting interpreter) and lost it, and the next open loaded the old structure,
kept until the collection's next write. A build a reader started (replaying another process's writes) is left:
a search must not wait for a training at exit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from plugins.faiss.index import AutoParams, HnswParams, VectorIndex
from plugins.faiss.sidecar import Sidecar

logger = logging.getLogger(__name__)

BACKGROUND_FROM = 50_000  # live vectors from which a rebuild is trained in the background
RETRY_S = 60.0  # after a failed background build, the next try waits this long


class FaissRebuild:
    """Background rebuilds (mixed into FaissStore, whose members these use)."""

    _lock: threading.RLock
    hnsw: HnswParams
    _collections: dict[str, Any]
    _rebuild: Callable[[Any, int], VectorIndex]
    _auto_for: Callable[[Any], AutoParams]
    _sync: Callable[[Any], VectorIndex]
    background_from = BACKGROUND_FROM

    def _init_rebuild(self) -> None:
        self._building: dict[str, threading.Thread] = {}
        self._built: dict[str, tuple[Any, VectorIndex]] = {}  # name -> (the collection object, its new index)
        self._failed_at: dict[str, float] = {}
        self._finish: set[str] = set()  # collections whose build a write of this process started: finished on close
        self.rebuilds: list[tuple[str, str, int, float]] = []  # (collection, structure, vectors, seconds) done

    def _rebuild_soon(self, coll: Any, index: VectorIndex, seq: int, written: bool = False) -> VectorIndex:
        """``index`` wants another structure: trained inline when small (returned), else in the background (the
        current ``index`` returned, answering until the new one is in place; call under the store lock).
        ``written``: this process's write crossed the threshold (the build is finished on close)."""
        if index.live < self.background_from:
            return self._rebuild(coll, seq)
        if written:
            self._finish.add(coll.name)
        if coll.name not in self._building and coll.name not in self._built and (
                time.monotonic() - self._failed_at.get(coll.name, float("-inf")) > RETRY_S):
            thread = threading.Thread(target=self._train, args=(coll,), daemon=True, name=f"faiss-build-{coll.name}")
            self._building[coll.name] = thread
            thread.start()
        return index

    def _train(self, coll: Any) -> None:
        started = time.monotonic()
        try:
            reader = Sidecar(coll.sidecar.path, create=False)  # its own connection: the snapshot holds no lock
            try:
                with reader.read():
                    seq = reader.sync_state().seq
                    ids, vectors = reader.all_vectors(coll.dim)
            finally:
                reader.close()
            index = VectorIndex.build(coll.kind, coll.dim, coll.metric.value != "euclid", self.hnsw, ids, vectors,
                                      seq, self._auto_for(coll))
            with self._lock:
                self._built[coll.name] = (coll, index)
            seconds = time.monotonic() - started
            self.rebuilds.append((coll.name, index.structure, len(ids), seconds))
            logger.info("built FAISS index %s (%s) in the background: %d vectors in %.1f s", coll.name,
                        index.structure, len(ids), seconds)
        except Exception as exc:  # only speed is at stake: the current index keeps answering
            self._failed_at[coll.name] = time.monotonic()
            logger.warning("building FAISS index %s in the background failed: %s; the current index keeps "
                           "answering", coll.name, exc)
        finally:
            with self._lock:
                self._building.pop(coll.name, None)

    def _take_built(self, coll: Any, pruned_through: int) -> VectorIndex | None:
        """A background build of ``coll`` that finished (call under the store lock): its index, to be brought up
        to date from the op log; None when there is none, or its snapshot's ops were pruned (built again)."""
        done = self._built.pop(coll.name, None)
        if done is None or done[0] is not coll:
            return None
        index = done[1]
        if pruned_through > index.seq:
            return None  # the writes since its snapshot are gone from the op log: the next sync starts again
        coll.rewrite_cache = True
        coll.dirty = max(coll.dirty, 1)
        return index

    def _finish_rebuilds(self) -> None:
        """Before closing (outside the store lock, which a build takes at its end): wait for the builds this
        process's writes started, then put every finished build in place for the flush to save."""
        with self._lock:
            waiting = [(name, thread) for name, thread in self._building.items() if name in self._finish]
        for name, thread in waiting:
            logger.info("finishing the background build of FAISS index %s before closing", name)
            thread.join()
        with self._lock:
            for name in list(self._built):
                coll = self._collections.get(name)
                if coll is None:
                    continue
                try:
                    with coll.sidecar.read():
                        self._sync(coll)  # takes the build, replays the writes made since its snapshot
                except Exception as exc:  # only speed is at stake: the next write starts it again
                    logger.warning("could not put the background build of FAISS index %s in place: %s", name, exc)

    def wait_rebuilds(self, timeout: float | None = None) -> bool:
        """Wait for the background builds in flight (tests, benchmarks); True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = list(self._building.values())
            if not threads:
                return True
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            threads[0].join(left)
            if deadline is not None and time.monotonic() >= deadline:
                with self._lock:
                    return not self._building
