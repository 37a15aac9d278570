"""``indexer watch``: a watcher in the foreground until SIGINT/SIGTERM, one log line per batch."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from indexer.collection.facade import open_collection
from indexer.watch.watcher import Watcher, WatchOptions

logger = logging.getLogger("indexer.watch")


def search_note(collection: Any) -> str | None:
    """How to search while this watcher runs, when other processes cannot open the store themselves."""
    if collection.single_process:
        return (
            "this collection's store (embedded Qdrant) admits one process at a time: while this watcher runs, "
            "`indexer search` and `indexer status` from another shell are refused. To search while the collection "
            "is kept live, run `indexer serve` instead of `indexer watch`: it runs this same watcher inside and "
            "`indexer search` goes through it. Or use a Qdrant server (--qdrant-url) or the FAISS store, which "
            "other processes can search while a watcher writes."
        )
    return None


def run_watch(
    collection: Any,
    paths: Sequence[str | os.PathLike[str]] | None = None,
    options: WatchOptions | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Watch in the foreground until SIGINT/SIGTERM; returns the exit code (0 after a clean stop)."""
    say = announce or logger.warning
    watcher = Watcher(collection, paths, options)
    stop_requested = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop_requested.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        watcher.start()
        how = "polling" if watcher.polled_roots == watcher.roots else "inotify"
        say(f"watching {', '.join(watcher.roots)} ({how}); status: `indexer status`; stop with Ctrl-C")
        note = search_note(collection)
        if note:
            say(note)
        while not stop_requested.wait(0.5):
            if not watcher.running:
                break
        say("stopping: finishing the current batch")
        watcher.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if stop_requested.is_set() else 1


def watch_command(
    paths: Sequence[str | os.PathLike[str]] | None,
    collection: str | None = None,
    polling: bool | None = None,
    rescan: float | None = None,
    announce: Callable[[str], None] | None = None,
    cluster: str | None = None,
) -> int:
    """``indexer watch``: open the collection, log one line per batch, watch until a signal. Returns the exit code."""
    logging.getLogger("indexer.watch").setLevel(logging.INFO)  # the batch lines are the command's output
    with open_collection(collection, watch_polling=polling, watch_rescan_seconds=rescan, cluster=cluster) as col:
        return run_watch(col, paths or None, announce=announce)
