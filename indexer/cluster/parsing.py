"""Heavy reads on the cluster's nodes: a document read, parsed (OCR included) and chunked by a Ray worker.

:class:`ClusterReads` is the read-ahead's far lane (:class:`indexer.index.reads.FarLane`), set by the collection's
writer with the ``cluster`` setting. For a heavy read (a PDF, an Office document, an image to OCR) the source makes
a parse job (:meth:`indexer.ports.Source.parse_job`): the file's bytes, read by the writer and put once in Ray's
object store (the files may exist only on the writer's machine), or with ``cluster_shared_roots`` (the roots are
visible at the same paths on the nodes) only its path. A worker of the embedding pool
(:class:`~indexer.cluster.worker.EmbedWorker`, one per node) runs it in its ``parse`` concurrency group, beside
the parts it embeds: the job parses in the node's own parse worker process (the same time and memory limits as
here), and the worker cuts the document with the collection's chunker (:class:`~indexer.index.splitting.
SplitRecipe`: same tokenizer, chunk size, overlap, heading context and document prompt, so the same chunks and
ids as a read here). The document comes back without its text (the chunks carry it) and with its chunks.

**Bounded.** At most :data:`PER_WORKER` reads per worker are sent (one parsing, one waiting with its bytes
already there); the read-ahead keeps no more in flight than :meth:`ClusterReads.capacity`, so the writer holds
a bounded number of jobs whatever the cluster's or the folder's size; their bytes wait in Ray's object store,
which spills to disk when full.

**Faults.** A worker or node that dies mid-read: the read goes to another worker (the job's bytes are still in
the writer's object store), up to :data:`ATTEMPTS` times; with no worker left, no answer within
:data:`~indexer.cluster.embedder.PART_TIMEOUT`, or any other failure than the file's own, the read-ahead reads the
file here. The file's own failure (unreadable, hostile, a parse timeout) is reported as a read here would be.
A shared path that a node does not see comes back once as ``not_shared``: the bytes are sent instead, said once.
A node without a parser library (``missing_library``) gives the document back to the writer, said once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from indexer.cluster.connect import require_ray
from indexer.cluster.embedder import PART_TIMEOUT, ClusterEmbedder, NodeStats
from indexer.errors import ClusterError, SourceError
from indexer.ports import Source
from indexer.types import Chunk, Document, SourceRef

logger = logging.getLogger(__name__)

PER_WORKER = 2  # reads sent to one worker at a time: one parsing, one waiting with its bytes already there
ATTEMPTS = 3  # workers a read is sent to before it is read by the writer


@dataclass
class _Read:
    source: Source
    ref: SourceRef
    job: Any  # the job's ObjectRef (its bytes in the writer's object store)
    size: int
    shared: bool
    out: Future[tuple[Document, list[Chunk]]] = field(default_factory=Future)
    attempts: int = 0


class ClusterReads:
    """The far lane of the read-ahead on a Ray cluster (see the module docstring)."""

    def __init__(self, embedder: Callable[[], Any], recipe: Callable[[], Any], *, shared: bool = False) -> None:
        """``embedder()``: the collection's loaded engine (a ClusterEmbedder: its pool of workers is shared);
        ``recipe()``: the collection's SplitRecipe (asked at the start of each call)."""
        self._embedder = embedder
        self._recipe = recipe
        self.recipe: Any = None
        self.shared = shared
        self._inbox: queue.SimpleQueue[_Read | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._waiting: list[_Read] = []
        self._pending: dict[Any, tuple[_Read, Any, float]] = {}
        self._told_unshared = False
        self._told_lacking = False
        self._closed = False

    def _engine(self) -> ClusterEmbedder:
        engine = self._embedder()
        if not isinstance(engine, ClusterEmbedder):
            raise ClusterError("the collection's model does not embed on a Ray cluster")
        return engine

    # -- the FarLane port ------------------------------------------------------------------------------------
    def capacity(self) -> int:
        """Reads in flight at once: :data:`PER_WORKER` per live worker (starting the pool on the first call)."""
        self.recipe = self._recipe()
        return PER_WORKER * len(self._engine().pool())

    def start(self, source: Source, ref: SourceRef) -> Future[tuple[Document, list[Chunk]]] | None:
        job = source.parse_job(ref, shared=self.shared)
        if job is None or self._closed:
            return None
        read = _Read(source, ref, require_ray().put(job), 0 if self.shared else ref.size, self.shared)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="indexer-cluster-reads", daemon=True)
                self._thread.start()
        self._inbox.put(read)
        return read.out

    def close(self) -> None:
        """Stop: reads not finished fail (the read-ahead is closing too)."""
        self._closed = True
        self._inbox.put(None)

    # -- the dispatcher ----------------------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a bug here must not lose a read: each is read by the writer instead
            logger.exception("the cluster's read lane failed; its reads are read by the writer")
            self._fail_all(ClusterError(f"the cluster's read lane failed ({type(exc).__name__}: {exc})"))
        if self._closed:
            self._fail_all(ClusterError("the writer closed"))

    def _fail_all(self, exc: Exception) -> None:
        reads = self._waiting + [read for read, _, _ in self._pending.values()]
        self._waiting, self._pending = [], {}
        for read in reads:
            if not read.out.done():
                read.out.set_exception(exc)

    def _run(self) -> None:
        ray = require_ray()
        engine = self._engine()
        waiting, pending = self._waiting, self._pending
        last = time.monotonic()
        while not self._closed:
            try:
                item = self._inbox.get(timeout=0.05 if pending or waiting else 1.0)
                while item is not None or not self._inbox.empty():  # whatever else came meanwhile
                    if item is not None:
                        waiting.append(item)
                    item = self._inbox.get_nowait()
            except queue.Empty:
                pass
            self._dispatch(engine, waiting, pending)
            if not pending:
                last = time.monotonic()
                continue
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.05, fetch_local=True)
            for ref in done:
                read, worker, sent = pending.pop(ref)
                self._finished(engine, ray, ref, read, worker, sent, waiting)
                last = time.monotonic()
            if pending and time.monotonic() - last > PART_TIMEOUT:  # nothing finished for that long: read here
                stalled = ClusterError(f"no read finished on the cluster in {PART_TIMEOUT:.0f} s")
                for read, _, _ in pending.values():
                    self._give_back(engine, read, stalled)
                pending.clear()

    def _dispatch(self, engine: ClusterEmbedder, waiting: list[_Read], pending: dict[Any, Any]) -> None:
        """Send waiting reads to the live workers with fewer than PER_WORKER in flight; none left: read here."""
        if not waiting:
            return
        workers = engine.live()
        if not workers:
            for read in waiting:
                self._give_back(engine, read, ClusterError("no Ray worker is left"))
            waiting.clear()
            return
        load = {id(w): 0 for w in workers}
        for _, worker, _ in pending.values():
            if id(worker) in load:
                load[id(worker)] += 1
        while waiting:
            worker = min(workers, key=lambda w: load[id(w)])
            if load[id(worker)] >= PER_WORKER:
                return
            read = waiting.pop(0)
            read.attempts += 1
            ref = worker.actor.parse.options(concurrency_group="parse").remote(read.job, self.recipe)
            pending[ref] = (read, worker, time.perf_counter())
            load[id(worker)] += 1

    def _finished(self, engine: ClusterEmbedder, ray: Any, ref: Any, read: _Read, worker: Any, sent: float,
                  waiting: list[_Read]) -> None:
        from ray.exceptions import RayTaskError

        try:
            answer = ray.get(ref)
        except RayTaskError as exc:  # the worker's code failed on this file (not the file's error): read here
            self._give_back(engine, read, ClusterError(" ".join(str(exc).split())[:300]))
            return
        except Exception as exc:  # the actor, its process or its node died: another worker, or here
            engine._lose(worker, exc)
            if read.attempts < ATTEMPTS and not self._closed:
                engine.stats.reads_resent += 1
                waiting.insert(0, read)
            else:
                self._give_back(engine, read, ClusterError(f"lost on {read.attempts} workers"))
            return
        if answer[0] == "failed":
            reason, code = answer[1], answer[2]
            if code == "not_shared" and read.shared:
                self._unshared(worker, reason)
                try:
                    job = read.source.parse_job(read.ref, shared=False)
                except Exception as exc:  # vanished, unreadable: the writer's read says why
                    self._give_back(engine, read, ClusterError(str(exc)))
                    return
                if job is not None:
                    read.job, read.shared, read.size, read.attempts = ray.put(job), False, read.ref.size, 0
                    waiting.insert(0, read)
                    return
            if code == "missing_library":  # the node lacks a parser the writer may have: the node's fault
                self._lacking(worker, reason)
                self._give_back(engine, read, ClusterError(f"{worker.host} cannot parse it: {reason}"))
                return
            read.out.set_exception(SourceError(read.ref.path, reason, code))
            return
        _, doc, chunks, seconds = answer
        stats = engine.stats.per_node.setdefault(worker.node, NodeStats(worker.host))
        took = time.perf_counter() - sent
        stats.files += 1
        stats.sent += read.size
        stats.parse_seconds += seconds["parse"]
        stats.chunk_seconds += seconds["chunk"]
        stats.transfer_seconds += max(0.0, took - seconds["parse"] - seconds["chunk"])
        read.out.set_result((doc, chunks))

    @staticmethod
    def _give_back(engine: ClusterEmbedder, read: _Read, exc: Exception) -> None:
        """The writer reads this file itself (the read-ahead does, on this failure)."""
        engine.stats.reads_given_back += 1
        read.out.set_exception(exc)

    def _lacking(self, worker: Any, reason: str) -> None:
        if not self._told_lacking:
            self._told_lacking = True
            logger.warning("%s lacks a parser (%s): such documents are read by the writer; install the same extras "
                           "(and tesseract for OCR) on every node", worker.host, reason)

    def _unshared(self, worker: Any, reason: str) -> None:
        if not self._told_unshared:
            self._told_unshared = True
            logger.warning("cluster_shared_roots is set, but %s does not see the roots at the same paths (%s): "
                           "files are sent to the nodes instead", worker.host, reason)
