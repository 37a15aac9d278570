"""Write batches bounded by count and by time, so one huge file never holds back its neighbours.

A batch of small files is written once it holds ``batch_chunks`` chunks or has been open ``batch_seconds``
(checked before each file is read, so files read quickly after a slow one are not kept waiting for a full batch).
A file with more chunks than one batch is written on its own, slice by slice (each slice's vectors cached and
its points recorded as pending before they are written: a kill loses at most the slice in flight, and the re-run
takes the written slices' vectors from the cache). Such files are deferred until the small files of the run are
written, up to :data:`MAX_DEFERRED_CHUNKS` chunks held in memory; past that one is written when it comes.
Inside a batch, chunks are embedded in steps of about a second of work (:func:`embed_steps`), so progress moves
inside a large file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from indexer.types import Chunk

BATCH_SECONDS = 2.0
MAX_DEFERRED_CHUNKS = 200_000


class Sized(Protocol):
    @property
    def size(self) -> int: ...


T = TypeVar("T", bound=Sized)


@dataclass
class Batch(Generic[T]):
    """The files read and not yet written, with when the first came."""

    limit_chunks: int
    limit_seconds: float = BATCH_SECONDS
    clock: Callable[[], float] | None = None  # time.monotonic when None
    items: list[T] = field(default_factory=list)
    chunks: int = 0
    opened: float | None = None

    def add(self, item: T) -> None:
        if self.opened is None:
            self.opened = self._now()
        self.items.append(item)
        self.chunks += item.size

    def due(self) -> bool:
        if not self.items:
            return False
        return self.chunks >= self.limit_chunks or self._now() - (self.opened or 0.0) >= self.limit_seconds

    def seconds_left(self) -> float:
        """Seconds until the open batch is due by time (0 when it is; the limit when it is empty)."""
        if self.opened is None:
            return self.limit_seconds
        return max(0.0, self.opened + self.limit_seconds - self._now())

    def _now(self) -> float:
        return (self.clock or time.monotonic)()

    def take(self) -> list[T]:
        items, self.items, self.chunks, self.opened = self.items, [], 0, None
        return items


@dataclass
class Deferred(Generic[T]):
    """Files too large for one batch, kept for after the small ones (at most ``limit_chunks`` chunks)."""

    limit_chunks: int = MAX_DEFERRED_CHUNKS
    items: list[T] = field(default_factory=list)
    chunks: int = 0

    def offer(self, item: T) -> bool:
        """Keep ``item`` for later; False when it would hold too many chunks in memory (write it now)."""
        if self.chunks + item.size > self.limit_chunks:
            return False
        self.items.append(item)
        self.chunks += item.size
        return True


# Chunks are embedded (and their vectors cached) in steps of about this many tokens (about a second of work for
# the default model on a 2-core Xeon), so progress moves inside a large file and a kill loses at most a step's
# embedding. Far above the engine's packs (128 tokens), so packing is as good as in one call. The first step is
# smaller, so the first movement comes sooner.
EMBED_STEP_TOKENS = 4096
# With a Ray cluster's workers embedding (indexer.cluster) a step is cut into parts spread over them, and each step
# ends when its last part does: larger steps leave the workers idle less often (measured: 2 nodes x 1 CPU made
# 1.11x the tokens/s with 16,384-token steps; docs/benchmarks.md#ray-indexing).
CLUSTER_STEP_TOKENS = 16384
FIRST_STEP_TOKENS = 256


def embed_steps(todo: list[Chunk], step_tokens: int | None = None) -> Iterator[list[Chunk]]:
    """``todo`` in embedding steps of about ``step_tokens`` (default :data:`EMBED_STEP_TOKENS`) tokens (the first
    :data:`FIRST_STEP_TOKENS`)."""
    step: list[Chunk] = []
    tokens, limit = 0, FIRST_STEP_TOKENS
    for chunk in todo:
        step.append(chunk)
        tokens += 1024 if chunk.media is not None else max(1, chunk.n_tokens)  # an image: up to ~1,024 tokens
        if tokens >= limit:
            yield step
            step, tokens, limit = [], 0, step_tokens or EMBED_STEP_TOKENS
    if step:
        yield step
