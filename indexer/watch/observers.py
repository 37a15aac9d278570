"""The watchdog side of live sync: events translated into (path, What), the handler, the inotify limits, and the
listener that turns watchdog's "queue overflow" log line into a rescan. One module per backend concern, as in
watchdog itself; :mod:`indexer.watch.watcher` owns the loop and the retry policy."""

from __future__ import annotations

import errno
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any

from indexer.watch.batch import What

logger = logging.getLogger("indexer.watch")

INOTIFY_LIMITS = {
    errno.ENOSPC: "fs.inotify.max_user_watches",
    errno.EMFILE: "fs.inotify.max_user_instances",
}


class _OverflowListener(logging.Filter):
    """The kernel drops inotify events when its queue overflows; watchdog only logs it. This filter (it never
    drops a record) turns that log record into an immediate rescan of every running watcher."""

    logger_name = "watchdog.observers.inotify_c"

    def __init__(self) -> None:
        super().__init__()
        self.watchers: weakref.WeakSet[Any] = weakref.WeakSet()  # running Watchers (request_rescan)
        logging.getLogger(self.logger_name).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if "queue overflow" in record.getMessage().lower():
            for watcher in list(self.watchers):
                if watcher.running:
                    watcher.request_rescan("the inotify queue overflowed and events were lost")
        return True


OVERFLOW = _OverflowListener()


def watch_alive(observer: Any, watch: Any) -> bool:
    """Whether ``observer`` still has a running emitter for ``watch`` (one ends when its root is deleted)."""
    return any(getattr(e, "watch", None) == watch and e.is_alive() for e in getattr(observer, "emitters", ()))


def event_filter() -> list[type[Any]]:
    from watchdog import events as ev

    return [
        ev.FileCreatedEvent,
        ev.FileModifiedEvent,
        ev.FileAttribEvent,
        ev.FileClosedEvent,
        ev.FileDeletedEvent,
        ev.FileMovedEvent,
        ev.DirCreatedEvent,
        ev.DirDeletedEvent,
        ev.DirMovedEvent,
    ]


def translate(event: Any) -> list[tuple[str, What]]:
    """What a watchdog event says, as (path, What) pairs; folder modifications and opens say nothing."""
    from watchdog import events as ev

    src = os.fsdecode(event.src_path) if event.src_path else ""
    dest = os.fsdecode(event.dest_path) if getattr(event, "dest_path", "") else ""
    kind = event.event_type
    if kind in (ev.EVENT_TYPE_OPENED, ev.EVENT_TYPE_CLOSED_NO_WRITE):
        return []
    if event.is_directory:
        if kind in (ev.EVENT_TYPE_CREATED,):
            return [(src, What.FOLDER)]
        if kind == ev.EVENT_TYPE_DELETED:
            return [(src, What.GONE)]
        if kind == ev.EVENT_TYPE_MOVED:
            return [(p, w) for p, w in ((src, What.GONE), (dest, What.FOLDER)) if p]
        return []
    if kind == ev.EVENT_TYPE_CLOSED:
        return [(src, What.CLOSED)]
    if kind == ev.EVENT_TYPE_DELETED:
        return [(src, What.GONE)]
    if kind == ev.EVENT_TYPE_MOVED:
        return [(p, w) for p, w in ((src, What.GONE), (dest, What.CLOSED)) if p]
    return [(src, What.WRITE)]  # created, modified, attrib


def make_handler(on_event: Callable[[str, What], None]) -> Any:
    """A watchdog handler that hands every change on to ``on_event(path, what)``."""
    from watchdog.events import FileSystemEventHandler

    class _Handler(FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            try:
                for path, what in translate(event):
                    on_event(path, what)
            except Exception:  # an observer thread must never die on one odd event
                logger.exception("cannot handle file event %r", event)

    return _Handler()
