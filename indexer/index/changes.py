"""What a sync decides before it reads a file: which scanned files changed (stat data, Git's racy rule) and what a
scan below a folder yields; and the pause of cyclic garbage collection a scan of many files runs under."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from indexer.core.paths import within
from indexer.ports import Source
from indexer.state.database import FileStat
from indexer.types import SourceRef

RACY_WINDOW_NS = 2_000_000_000  # stat data younger than this (vs. the state write) cannot prove "unchanged"


def refs_below(source: Source, folder: str) -> list[SourceRef]:
    """What a scan would yield below ``folder`` (a folder inside a root), by the source's own rules."""
    below = source.scan_below(folder)
    if below is not None:
        return list(below)
    return [ref for ref in source.scan() if within(ref.path, folder)]


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block. A re-run keeps two objects per file (a SourceRef and a
    state row) without reference cycles; each burst of allocations makes the collector traverse all of them, and
    every object of the loaded libraries, again (~15 % of a no-change re-run at 100k files). Only the caller
    that found the collector on turns it back on, so nested or concurrent pauses end with it on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def stat_unchanged(row: FileStat, ref: SourceRef) -> bool:
    """Whether an indexed file's recorded stat data prove it unchanged since it was read."""
    size, mtime_ns, status, checked_ns = row
    if status != "indexed" or size != ref.size or mtime_ns != ref.mtime_ns:
        return False
    # Git's racy rule: a file modified within the timestamp granularity of the state write may have changed
    # again without its mtime moving. Such files are re-hashed (and refreshed if unchanged).
    return mtime_ns < checked_ns - RACY_WINDOW_NS
