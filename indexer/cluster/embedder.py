"""The engine adapter with large batches embedded on a Ray cluster (see the package docstring).

:class:`ClusterEmbedder` *is* the writer's llama.cpp adapter (it takes over the loaded
:class:`~indexer.engine.adapters.LlamaEmbedder`: same identity, tokenizer, limits and context), so everything
the collection asks of a model is answered as before; only :meth:`ClusterEmbedder.embed_batch` changes:

- a batch under :data:`MIN_CLUSTER_CHARS` (a watcher's edit, a query, the first small step of a run) is embedded
  here: a trip to the cluster would cost more than it saves;
- a larger one is cut into parts of about :data:`PART_CHARS`, handed to the workers as each becomes free
  (``ray.wait``: a slow node takes fewer parts), and put back in order.

**Workers.** One Ray actor per node with CPUs, holding one llama.cpp context with the node's CPUs as threads
(:class:`~indexer.cluster.worker.EmbedWorker`), all made from the collection's recorded weight file (its sha256),
never from a node's own model choice. Before its first part a worker embeds :data:`CANARY` and is **refused**
(said once, with its node and the reason) when its vectors differ from the writer's by more than the weight type
allows (:func:`tolerance`: min cosine 0.9999 for f32/f16/bf16 files, 0.999 for quantized ones).

**Faults.** A worker or node that dies mid-part: the part goes to another worker (ids are content-derived and
vectors are cached per text, so a redone part duplicates nothing). With no worker left, or no answer within
:data:`PART_TIMEOUT`, the cluster is given up for this process: the writer embeds the rest itself, said once
(decision: finishing locally keeps the run's promise; stopping would leave the user to re-run it). New nodes are
looked for at most every :data:`REFILL_SECONDS`.

**Bounded.** At most one part per worker is in flight, and the batch itself is bounded by the pipeline
(``embed_batch_chunks``, embedding steps of ~4k tokens): the writer's memory does not grow with the cluster.

:attr:`ClusterEmbedder.stats` counts texts, characters and seconds per node (progress, ``-v``, status).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexer.cluster import connect as _connect
from indexer.cluster.worker import EmbedWorker, WeightsSpec, spec_for
from indexer.core.normalization import Normalization
from indexer.engine.adapters import LlamaEmbedder
from indexer.errors import ClusterError

logger = logging.getLogger(__name__)

MIN_CLUSTER_CHARS = 4096  # about 1,000 tokens: smaller batches are embedded by the writer itself
PART_CHARS = 4096  # a part handed to one worker (about a second of work for MiniLM on one core)
PART_TIMEOUT = 300.0  # seconds without any part finishing before the cluster is given up
REFILL_SECONDS = 30.0
CANARY = (
    "The quick brown fox jumps over the lazy dog.",
    "Backups run nightly and are kept for thirty days; restore one with the restore command.",
    "def rotate_keys(store):\n    for key in store.expired():\n        store.replace(key)",
    "Ein Glas Wasser, bitte. Où est la gare ? 数据库的备份策略",
    "ERR_QUOTA_7731: the quota of the project was exceeded at 03:14 UTC",
    "a",
)


def tolerance(model_path: str) -> float:
    """Min cosine a worker's canary vectors must keep to the writer's, by the file's weight types."""
    from indexer.models.gguf_header import weight_types

    try:
        kinds = weight_types(model_path)
    except Exception:  # unreadable header: the stricter bound of the two
        return 0.9999
    return 0.9999 if kinds and kinds <= {"f32", "f16", "bf16"} else 0.999


@dataclass
class NodeStats:
    """What one node's worker did (for progress and status)."""

    host: str
    texts: int = 0
    chars: int = 0
    seconds: float = 0.0
    files: int = 0  # documents read, parsed and chunked there (indexer.cluster.parsing)
    sent: int = 0  # bytes sent to it
    parse_seconds: float = 0.0  # reading and parsing (OCR included)
    chunk_seconds: float = 0.0
    transfer_seconds: float = 0.0  # trips minus the node's work (dispatch, bytes, queueing), parts and reads
    embed_seconds: float = 0.0  # the node's own embedding time (``seconds``: the parts' round trips)

    def as_dict(self) -> dict[str, Any]:
        rate = self.chars / self.seconds if self.seconds else 0.0
        return {"host": self.host, "texts": self.texts, "chars": self.chars, "seconds": round(self.seconds, 2),
                "chars_per_s": round(rate), "files": self.files, "bytes_sent": self.sent,
                "parse_seconds": round(self.parse_seconds, 2), "chunk_seconds": round(self.chunk_seconds, 2),
                "transfer_seconds": round(self.transfer_seconds, 2), "embed_seconds": round(self.embed_seconds, 2)}


@dataclass
class _Worker:
    actor: Any
    node: str
    host: str


@dataclass
class ClusterStats:
    workers: int = 0
    nodes: int = 0
    refused: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    local_texts: int = 0
    per_node: dict[str, NodeStats] = field(default_factory=dict)
    reads_resent: int = 0  # reads sent to another worker after theirs died (indexer.cluster.parsing)
    reads_given_back: int = 0  # reads the writer did itself after the cluster could not

    def as_dict(self) -> dict[str, Any]:
        return {"workers": self.workers, "nodes": self.nodes, "refused": list(self.refused), "lost": list(self.lost),
                "local_texts": self.local_texts, "per_node": {k: v.as_dict() for k, v in self.per_node.items()},
                "reads_resent": self.reads_resent, "reads_given_back": self.reads_given_back}


class ClusterEmbedder(LlamaEmbedder):
    """The writer's adapter with large batches embedded on the cluster (see the module docstring)."""

    address: str
    stats: ClusterStats
    _weights_for: dict[int, Path]
    _min_chars: int | None
    _workers: list[_Worker]
    _pool_lock: threading.Lock
    _started: bool
    _given_up: str | None
    _refilled: float
    _canary: np.ndarray | None
    _spec: WeightsSpec | None
    _weights_ref: Any

    @classmethod
    def around(cls, local: LlamaEmbedder, address: str, *, weights_for: dict[int, Path] | None = None,
               min_chars: int | None = None) -> ClusterEmbedder:
        """Take over the loaded ``local`` adapter (do not use ``local`` afterwards). ``weights_for`` gives a
        worker (by its order) another weight file: the canary test's way of proving the refusal."""
        out = cls.__new__(cls)
        out.__dict__.update(local.__dict__)
        local._engine = None  # moved: closing the old object must not close the context this one now owns
        out.address = address
        out.stats = ClusterStats()
        out._weights_for = dict(weights_for or {})
        out._min_chars = min_chars
        out._workers = []
        out._pool_lock = threading.Lock()
        out._started = False
        out._given_up = None
        out._refilled = 0.0
        out._canary = None
        out._spec = None
        out._weights_ref = None
        return out

    # -- the one changed member ----------------------------------------------------------------------------------
    def embed_batch(self, texts: Sequence[str], normalize: Normalization) -> np.ndarray:
        least = MIN_CLUSTER_CHARS if self._min_chars is None else self._min_chars
        if isinstance(texts, str) or self._given_up is not None or sum(map(len, texts)) < least:
            self.stats.local_texts += 0 if isinstance(texts, str) else len(texts)
            return super().embed_batch(texts, normalize)
        try:
            return self._on_cluster(list(texts), Normalization(normalize))
        except _Lost as exc:
            self._give_up(str(exc))
            self.stats.local_texts += len(texts)
            return super().embed_batch(texts, normalize)

    def close(self) -> None:
        with self._pool_lock:
            workers, self._workers = self._workers, []
        for w in workers:
            _kill(w.actor)
        super().close()

    def describe(self) -> dict[str, Any]:
        """Nodes, workers, refusals, losses and the rate per node (status, ``-v``)."""
        return {"address": self.address, "given_up": self._given_up, **self.stats.as_dict()}

    # -- the pool ----------------------------------------------------------------------------------------------------
    def _give_up(self, reason: str) -> None:
        if self._given_up is None:
            self._given_up = reason
            logger.warning("the Ray cluster at %s is lost (%s): the writer embeds the rest of this run itself",
                           self.address, reason)

    def _ensure_pool(self) -> list[_Worker]:
        with self._pool_lock:
            now = time.monotonic()
            if not self._started or (now - self._refilled >= REFILL_SECONDS):
                self._refill()
                self._started, self._refilled = True, now
            if not self._workers:
                raise _Lost("no worker could be started or every worker was refused")
            return list(self._workers)

    def _refill(self) -> None:
        """One worker on each live node with CPUs that has none yet (canary-checked before use)."""
        ray = _connect.connect(self.address)
        if self._spec is None:
            self._spec = spec_for(self.model_path, self.tokenizer_mode)
            self._weights_ref = ray.put(Path(self.model_path).read_bytes())
            self._canary = super().embed_batch(list(CANARY), Normalization.L2)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        have = {w.node for w in self._workers}
        nodes = [n for n in ray.nodes() if n.get("Alive") and n["NodeID"] not in have
                 and n.get("Resources", {}).get("CPU", 0) >= 1]
        # reads parse in their own concurrency group, beside the parts being embedded (indexer.cluster.parsing)
        remote = ray.remote(max_restarts=0, max_task_retries=0, concurrency_groups={"parse": 1})(EmbedWorker)
        started: list[tuple[Any, dict[str, Any]]] = []
        for n in nodes:
            cpus = int(n["Resources"]["CPU"])
            order = len(self._workers) + len(started)
            spec = self._spec
            other = self._weights_for.get(order)
            if other is not None:  # the canary test: this worker is sent another weight file
                spec = spec_for(other, self.tokenizer_mode)
                weights = [ray.put(Path(other).read_bytes())]
            else:
                weights = [self._weights_ref]
            actor = remote.options(
                num_cpus=cpus, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(spec, weights)
            started.append((actor, n))
        for actor, n in started:
            where = f"node {n['NodeID'][:12]} ({n.get('NodeManagerAddress', '?')})"
            try:
                info = ray.get(actor.where.remote(), timeout=PART_TIMEOUT)
                got = np.asarray(ray.get(actor.embed.remote(list(CANARY), Normalization.L2.value),
                                         timeout=PART_TIMEOUT))
            except Exception as exc:
                self._refuse(actor, where, f"it could not start: {' '.join(str(exc).split())[:300]}")
                continue
            reason = self._canary_fault(got)
            if reason:
                self._refuse(actor, where, reason)
                continue
            host = f"{info['host']}:{n['NodeID'][:8]}"
            self._workers.append(_Worker(actor, n["NodeID"], host))
            self.stats.per_node.setdefault(n["NodeID"], NodeStats(host))
            logger.info("Ray worker on %s ready (%s threads, weights by %s)", where, info["threads"], info["weights"])
        self.stats.workers = len(self._workers)
        self.stats.nodes = len({w.node for w in self._workers})

    def _canary_fault(self, got: np.ndarray) -> str:
        want = self._canary
        assert want is not None
        if got.shape != want.shape:
            return f"its vectors have shape {got.shape}, the writer's {want.shape} (another model)"
        cos = float(np.min(np.sum(got * want, axis=1)))  # both L2-normalized
        bound = tolerance(self.model_path)
        if cos < bound:
            return (f"its canary vectors differ from the writer's (min cosine {cos:.6f} < {bound} allowed for this "
                    "weight file): another weight file or another llama.cpp build on that node")
        return ""

    def _refuse(self, actor: Any, where: str, reason: str) -> None:
        _kill(actor)
        line = f"{where}: {reason}"
        if line not in self.stats.refused:
            self.stats.refused.append(line)
            logger.warning("Ray worker refused on %s", line)

    def pool(self) -> list[_Worker]:
        """The live workers (made on the first call; the reads' lane shares them): ClusterError when none."""
        if self._given_up is not None:
            raise ClusterError(f"the Ray cluster at {self.address} was given up: {self._given_up}")
        try:
            return self._ensure_pool()
        except _Lost as exc:
            self._give_up(str(exc))
            raise ClusterError(str(exc)) from exc

    def live(self) -> list[_Worker]:
        with self._pool_lock:
            return list(self._workers)

    def _lose(self, worker: _Worker, exc: BaseException) -> None:
        with self._pool_lock:
            if worker not in self._workers:
                return  # already said (the reads' lane and the embedding both met its death)
            self._workers.remove(worker)
            self.stats.workers = len(self._workers)
        line = f"{worker.host}: {' '.join(str(exc).split())[:200]}"
        self.stats.lost.append(line)
        logger.warning("Ray worker lost on %s; its part goes to another worker", line)
        _kill(worker.actor)

    # -- one batch -------------------------------------------------------------------------------------------------
    def _on_cluster(self, texts: list[str], normalize: Normalization) -> np.ndarray:
        workers = self._ensure_pool()
        ray = _connect.require_ray()
        from ray.exceptions import RayTaskError

        parts = _cut(texts, PART_CHARS, len(workers))
        results: list[np.ndarray | None] = [None] * len(parts)
        queue = deque(range(len(parts)))
        idle = deque(workers)
        pending: dict[Any, tuple[int, _Worker, float]] = {}
        while queue or pending:
            while queue and idle:
                w = idle.popleft()
                i = queue.popleft()
                pending[w.actor.embed_timed.remote(parts[i], normalize.value)] = (i, w, time.perf_counter())
            if not pending:
                raise _Lost("every worker died")
            done, _ = ray.wait(list(pending), num_returns=1, timeout=PART_TIMEOUT)
            if not done:
                raise _Lost(f"no part finished in {PART_TIMEOUT:.0f} s")
            ref = done[0]
            i, w, started = pending.pop(ref)
            try:
                vectors, took = ray.get(ref)
                results[i] = np.asarray(vectors, dtype=np.float32)
            except RayTaskError:  # the part's input, not the worker: embedded here, where its error is raised
                results[i] = super().embed_batch(parts[i], normalize)
                idle.append(w)
                continue
            except Exception as exc:  # the actor, its process or its node died
                self._lose(w, exc)
                queue.appendleft(i)
                continue
            stats = self.stats.per_node.setdefault(w.node, NodeStats(w.host))
            stats.texts += len(parts[i])
            stats.chars += sum(map(len, parts[i]))
            trip = time.perf_counter() - started
            stats.seconds += trip
            stats.embed_seconds += took
            stats.transfer_seconds += max(0.0, trip - took)
            idle.append(w)
        return np.concatenate([r for r in results if r is not None], axis=0)


class _Lost(Exception):
    """The cluster cannot embed this batch (caught inside this module)."""


def _cut(texts: list[str], part_chars: int, workers: int) -> list[list[str]]:
    """Consecutive parts of about ``part_chars`` characters, at least one per worker when there are enough texts."""
    total = sum(map(len, texts))
    n = max(min(len(texts), workers), math.ceil(total / part_chars))
    n = max(1, min(n, len(texts)))
    target = total / n
    parts: list[list[str]] = [[]]
    size = 0
    for t in texts:
        if parts[-1] and size + len(t) / 2 > target and len(parts) < n:
            parts.append([])
            size = 0
        parts[-1].append(t)
        size += len(t)
    return parts


def _kill(actor: Any) -> None:
    try:
        import ray

        ray.kill(actor, no_restart=True)
    except Exception:  # already gone, or the cluster with it
        pass


__all__ = ["ClusterEmbedder", "ClusterError", "CANARY", "tolerance"]
