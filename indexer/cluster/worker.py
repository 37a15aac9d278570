"""What runs inside a Ray actor: one llama.cpp context of the collection's recorded weight file.

The actor is given the file's description (:class:`WeightsSpec`: name, size, sha256, the writer's path, the
tokenizer the collection embeds with) and a reference to its bytes in Ray's object store. It uses, in order:

1. the writer's path, when this node sees the same file there (a shared filesystem, or the writer's own node);
2. the node's cache (``<tmp>/indexer-ray-models/<sha256>-<name>``), filled by an earlier actor on this node;
3. the bytes from the object store (pulled to this node once, by Ray), written to the node's cache.

Each candidate file is checked against the sha256 before use, so a worker never embeds with other weights than
the writer's by accident. (The canary check in :mod:`indexer.cluster.embedder` also catches a worker that
computes differently: another build, a broken CPU path.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexer.core.normalization import Normalization
from indexer.errors import SourceError

CACHE_ENV = "INDEXER_RAY_MODEL_CACHE"  # where a node keeps the weight files it was sent (default: <tmp>)
_write_lock = threading.Lock()


@dataclass(frozen=True)
class WeightsSpec:
    """The weight file a worker must embed with (see the module docstring)."""

    name: str
    size: int
    sha256: str
    path: str  # on the writer's machine
    tokenizer: str  # indexer.engine.tokenization mode the collection embeds with
    threads: int | None = None  # llama.cpp threads (default: the CPUs Ray gives the actor)


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def spec_for(path: str | os.PathLike[str], tokenizer: str, threads: int | None = None) -> WeightsSpec:
    p = Path(path)
    return WeightsSpec(p.name, p.stat().st_size, file_sha256(p), str(p), tokenizer, threads)


def node_cache() -> Path:
    return Path(os.environ.get(CACHE_ENV) or tempfile.gettempdir()) / "indexer-ray-models"


def _matches(path: Path, spec: WeightsSpec) -> bool:
    try:
        return path.is_file() and path.stat().st_size == spec.size and file_sha256(path) == spec.sha256
    except OSError:
        return False


def weights_here(spec: WeightsSpec, weights: list[Any]) -> tuple[Path, str]:
    """The weight file on this node and how it got here ("shared", "node cache" or "object store")."""
    writer = Path(spec.path)
    if _matches(writer, spec):
        return writer, "shared"
    cached = node_cache() / f"{spec.sha256[:20]}-{spec.name}"
    with _write_lock:
        if _matches(cached, spec):
            return cached, "node cache"
        import ray

        data = ray.get(weights[0])
        if len(data) != spec.size or hashlib.sha256(data).hexdigest() != spec.sha256:
            raise RuntimeError(f"the weight file {spec.name} arrived damaged (size or sha256 differ)")
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_name(f"{cached.name}.{os.getpid()}.part")
        part.write_bytes(data)
        os.replace(part, cached)
    return cached, "object store"


class EmbedWorker:
    """The body of a Ray actor (``ray.remote`` is applied by :mod:`indexer.cluster.embedder`). Its ``embed`` calls
    run one at a time; ``parse`` (a heavy read: :mod:`indexer.cluster.parsing`) runs in the actor's ``parse``
    concurrency group beside them, so a document parses in its worker process while a part embeds; the tokenizer
    the chunking counts with is shared with ``embed`` under a lock."""

    def __init__(self, spec: WeightsSpec, weights: list[Any]) -> None:
        import ray

        from indexer.engine.adapters import LlamaEmbedder

        path, how = weights_here(spec, weights)
        threads = spec.threads or max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
        self.engine = LlamaEmbedder(path, n_threads=threads)
        self.engine.use_tokenizer(spec.tokenizer)
        self.lock = threading.Lock()
        self._splitters: dict[Any, Callable[[Any], list[Any]]] = {}
        self.info = {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                     "pid": os.getpid(), "weights": how, "threads": threads}

    def where(self) -> dict[str, Any]:
        """Which node and process this worker is, and how its weight file came."""
        return dict(self.info)

    def embed(self, texts: list[str], normalize: str) -> np.ndarray:
        with self.lock:
            return self.engine.embed_batch(texts, Normalization(normalize))

    def embed_timed(self, texts: list[str], normalize: str) -> tuple[np.ndarray, float]:
        """The vectors and the seconds the node spent making them (the rest of a part's trip is transfer)."""
        started = time.perf_counter()
        vectors = self.embed(texts, normalize)
        return vectors, time.perf_counter() - started

    def parse(self, job: Callable[[], Any], recipe: Any) -> tuple[Any, ...]:
        """Read, parse and chunk one document (``job``: a source's parse job; ``recipe``: the collection's
        indexer.index.splitting.SplitRecipe). ``("ok", document without its text, chunks, seconds)`` or
        ``("failed", reason, code)`` (the file's own error: a SourceError does not travel whole)."""
        started = time.perf_counter()
        try:
            doc = job()
        except SourceError as exc:
            return ("failed", exc.reason, exc.code)
        except Exception as exc:  # a reader's bug: the file's failure too, as a read in the writer says it
            return ("failed", f"{type(exc).__name__}: {exc}", "error")
        parsed = time.perf_counter()
        split = self._splitters.get(recipe)
        if split is None:
            split = self._splitters[recipe] = recipe.splitter(self.engine, self.lock)
        chunks = split(doc)
        seconds = {"parse": parsed - started, "chunk": time.perf_counter() - parsed}
        return ("ok", dataclasses.replace(doc, text="", media=(), outline=()), chunks, seconds)
