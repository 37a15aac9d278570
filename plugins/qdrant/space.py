"""Free space before an embedded Qdrant write: the engine (qdrant-edge) writes through memory maps into files it
creates sparse (write-ahead-log segments, payload pages and vector chunks of 32 MiB each, filled as points
arrive). On a full disk such a write is not an error the engine can return: the kernel sends SIGBUS and the
process dies with nothing said (measured: exit 135 after ~5 s on a 20 MB tmpfs, the shard left without its
settings). So every write first checks the free space of the store's filesystem, with a margin: at least
:data:`MIN_FREE` plus :data:`WRITE_FACTOR` times the batch's bytes (the write-ahead log, the payload and vector
storages and the payload indexes each take a copy of a batch), and a new shard :data:`CREATE_RESERVE` more.

Measured on a tmpfs (8,000 one-line files, 256-point batches, Intel Xeon 2 vCPUs): a new shard takes 42 MB at
once (its first 32 MiB payload page is allocated whole); a batch took at most 2.5 MiB; with a 4 MiB margin and
no factor every run on 50-100 MB filesystems stopped cleanly, with none the engine died of SIGBUS. The margin
kept (40 MiB + 4 x the batch) also covers the next whole 32 MiB page. Short of it the write is refused with a
StoreError naming the folder and the space needed; nothing is written, so nothing indexed is lost, and the same
command converges once space is freed. The margin covers what one batch can touch; another process filling the
disk during the batch is not covered (a background index build runs in a child process, which such a signal
would end alone)."""

from __future__ import annotations

import os
from pathlib import Path

from indexer.plugin_api import StoreError

MiB = 1024 * 1024
MIN_FREE = 40 * MiB  # a fresh 32 MiB storage page allocated whole, and the pages a batch touches
WRITE_FACTOR = 4
CREATE_RESERVE = 48 * MiB  # what a new shard allocates at once (measured 42 MB)


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged writer may still use on ``folder``'s filesystem."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def needed(batch_bytes: int, reserve: int = 0) -> int:
    return MIN_FREE + reserve + WRITE_FACTOR * max(0, batch_bytes)


def check(folder: Path, batch_bytes: int, what: str, reserve: int = 0) -> None:
    """Refuse ``what`` (``"write 256 points"``) unless ``folder``'s filesystem has the margin free."""
    need = needed(batch_bytes, reserve)
    try:
        free = free_bytes(folder)
    except OSError:
        return  # cannot tell (a filesystem without statvfs): the engine's own errors decide
    if free < need:
        raise StoreError(
            f"not enough free space to {what} in the embedded Qdrant store {folder}: {free / MiB:.1f} MiB free, "
            f"{need / MiB:.0f} MiB needed (the engine writes through memory maps, which a full disk would crash "
            "on). Free space on that disk, or move the data directory (data_dir, INDEXER_DATA_DIR), then run the "
            "same command again: what is indexed is kept, and the run picks up where this one stopped"
        )
