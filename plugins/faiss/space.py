"""What a FAISS index save that failed says: on a full disk, the folder, the space needed and what to do (the
store keeps what was indexed: the points are in its SQLite sidecar, the index file is rebuilt from them)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def save_failure(cache: Path, size: int, exc: OSError) -> str:
    """Why the index file could not be saved; on a full disk, the folder, the space needed and what to do."""
    if exc.errno != errno.ENOSPC:
        return f"cannot save FAISS cache {cache}: {exc}; check disk space"
    try:
        st = os.statvfs(cache.parent)
        free = f"{st.f_bavail * st.f_frsize / (1 << 20):.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return (
        f"no space left on the device to save the FAISS index {cache}: about {size / (1 << 20):.1f} MiB needed "
        f"for it ({free}). Free space on that disk, or move the data directory (data_dir, INDEXER_DATA_DIR), then "
        "run the same command again: what is indexed is kept, and the run picks up where this one stopped"
    )
