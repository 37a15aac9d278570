"""What a writer's run on a Ray cluster leaves in the data directory for ``indexer status``: one small file per
collection, ``<data_dir>/cluster/<collection>.json`` (written atomically every few seconds while the run goes on,
and once at its end): the cluster's address, nodes, workers, each node's rates and where its time went, the
writer's pid, when the run started and when the file was last written. :func:`read_run` adds ``running``: the
file says a run goes on, its process is alive and the file was written within :data:`STALE_SECONDS` (a killed
writer leaves it saying running, which this reads as ended).

Only the standard library is imported here: ``indexer status`` reads it without Ray.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from indexer.core.locks import process_alive
from indexer.state.watch_files import write_json_atomic

RECORD_SECONDS = 2.0  # how often a running writer writes the file
STALE_SECONDS = 30.0  # a "running" file not written for this long is a run that ended without saying so


def run_path(data_dir: str | os.PathLike[str], collection: str) -> Path:
    return Path(data_dir) / "cluster" / f"{collection}.json"


def write_run(data_dir: str | os.PathLike[str], collection: str, run: dict[str, Any]) -> None:
    write_json_atomic(run_path(data_dir, collection), {**run, "updated_at": time.time()})


def read_run(data_dir: str | os.PathLike[str], collection: str) -> dict[str, Any] | None:
    """The last run's record with ``running`` (see the module docstring); None when no run used a cluster."""
    try:
        data = json.loads(run_path(data_dir, collection).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fresh = time.time() - float(data.get("updated_at") or 0) < STALE_SECONDS
    data["running"] = bool(data.get("running")) and fresh and process_alive(int(data.get("pid") or 0))
    return data


