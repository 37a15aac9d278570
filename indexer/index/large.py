"""A file with more chunks than a batch, written slice by slice, and (under the watcher) over several calls.

One-shot runs (``indexer index``, a full sync) write such a file whole, after the small files of the run. Under
the watcher every change waits for the call in flight, so a call writes a large file's slices for about
:data:`LARGE_WRITE_SECONDS` and then stops: the file's progress (its prepared chunks, the next slice, the chunk
records so far, the ids it holds) stays in :class:`KeptWrites`, which the collection's writer keeps across its
calls, and the path is returned as unfinished (``IndexReport.unfinished``). The watcher queues it again at once;
the next call writes the small changes queued meanwhile first and then the next slices, without reading the file
again when its size and modification time are the same. The slices written so far are pending ids in the state
(a kill loses nothing committed: the next run's ``recover`` deletes them); a full sync, a change of the file or
its deletion drops the kept progress (:meth:`indexer.index.pipeline.Pipeline.drop_kept`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from indexer.index.points import Prepared
from indexer.state.database import ChunkRecord

# Under the watcher, a call writes a large file's slices for about this long (at least one slice per call), so a
# change saved while a 20,000-chunk file is written waits for one such stretch, not for the whole file.
LARGE_WRITE_SECONDS = 1.0


@dataclass
class LargeWrite:
    """A large file's write in progress."""

    prepared: Prepared
    old_ids: list[str]  # the ids its committed record owns (deleted once the new ones are all written)
    held: set[str]  # ids already in the store under the same payload (a committed, intact file): not re-written
    records: list[ChunkRecord] = field(default_factory=list)
    next: int = 0  # the first chunk of the next slice
    fresh: list[str] = field(default_factory=list)  # ids written by this progress (not committed yet)

    @property
    def path(self) -> str:
        return self.prepared.ref.path

    @property
    def key(self) -> tuple[int, int]:
        """The file's (size, mtime_ns) when it was read."""
        return (self.prepared.ref.size, self.prepared.ref.mtime_ns)

    @property
    def done(self) -> bool:
        return self.next >= self.prepared.size


class KeptWrites:
    """Large files part-written, by path: one object per collection writer, kept across its calls."""

    def __init__(self) -> None:
        self._writes: dict[str, LargeWrite] = {}

    def __len__(self) -> int:
        return len(self._writes)

    def __contains__(self, path: object) -> bool:
        return path in self._writes

    def get(self, path: str) -> LargeWrite | None:
        return self._writes.get(path)

    def keep(self, write: LargeWrite) -> None:
        self._writes[write.path] = write

    def pop(self, path: str) -> LargeWrite | None:
        return self._writes.pop(path, None)

    def paths(self) -> list[str]:
        return list(self._writes)

    def fresh(self) -> int:
        """How many points the kept writes put in the store that no committed chunk owns yet."""
        return sum(len(w.fresh) for w in self._writes.values())

    def progress(self) -> list[dict[str, object]]:
        """Path, chunks written and total of each (status)."""
        return [{"path": w.path, "chunks_written": w.next, "chunks_total": w.prepared.size}
                for w in self._writes.values()]  # fmt: skip


class SliceBudget:
    """How long one call may write large files' slices: None is no bound (one-shot runs). The clock starts with
    the first slice, so every call writes at least one."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._started: float | None = None

    def spent(self) -> bool:
        if self.seconds is None:
            return False
        now = time.perf_counter()
        if self._started is None:
            self._started = now
            return False
        return now - self._started >= self.seconds
