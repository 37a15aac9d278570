"""A writer's run on a Ray cluster, made visible while it goes on: every few seconds what the cluster has done so
far (``ClusterEmbedder.describe``: nodes, workers, each node's rates and where its time went) goes to the run's
progress listener (the progress bar's cluster line) and to the data directory for ``indexer status``
(:mod:`indexer.state.cluster_runs`), and once more at the run's end, marked ended."""

from __future__ import annotations

import logging
import os
import threading
import time
from types import TracebackType
from typing import Any

from indexer.collection.parts import CollectionParts
from indexer.ports import Progress
from indexer.state.cluster_runs import RECORD_SECONDS, write_run

logger = logging.getLogger(__name__)


class ClusterRun:
    """Records the run (see the module docstring); a no-op without the ``cluster`` setting."""

    def __init__(self, parts: CollectionParts, progress: Progress | None) -> None:
        self.parts, self.progress = parts, progress
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClusterRun:
        if self.parts.settings.cluster:
            self._thread = threading.Thread(target=self._loop, name="indexer-cluster-run", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self.record(running=False, outcome="interrupted" if kind is not None else "done")

    def _loop(self) -> None:
        while not self._stop.wait(RECORD_SECONDS):
            self.record(running=True)

    def record(self, *, running: bool, outcome: str | None = None) -> dict[str, Any] | None:
        work = self.parts.cluster_work()
        if work is None:  # the model is not loaded yet (nothing read, nothing embedded)
            return None
        run = {**work, "pid": os.getpid(), "started_at": self.started, "running": running, "outcome": outcome}
        try:
            write_run(self.parts.settings.data_dir, self.parts.name, run)
        except OSError as exc:  # status only: never the run's failure
            logger.debug("cannot record the cluster run: %s", exc)
        if self.progress is not None and running:
            try:
                self.progress.cluster(work)
            except Exception:  # a listener's failure must not end the recording
                logger.debug("the progress listener failed on the cluster line", exc_info=True)
        return run
