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


def _hidden_below(path: bytes, top: bytes) -> bool:
    """Whether ``path`` has a hidden part (leading dot) below ``top`` (the watched root may itself be hidden)."""
    if path == top or not path.startswith(top.rstrip(b"/") + b"/"):
        return False
    return any(part.startswith(b".") for part in path[len(top.rstrip(b"/")) + 1 :].split(b"/"))


_OBSERVER_CLASS: Any = None


def new_observer() -> Any:
    """A watchdog inotify observer that puts no watch on hidden folders (``.git`` and the like: the scan never
    indexes them, and they held most of a repository's watches), or watchdog's own observer when its internals
    are not the ones this was written against (watchdog 7) or the platform has no inotify."""
    global _OBSERVER_CLASS
    if _OBSERVER_CLASS is None:
        _OBSERVER_CLASS = _visible_only_observer_class()
    return _OBSERVER_CLASS()


def _visible_only_observer_class() -> Any:
    from watchdog.observers import Observer

    try:
        from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT, BaseObserver
        from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
        from watchdog.observers.inotify_c import InotifyFD
    except ImportError:  # not Linux, or another watchdog layout: hidden folders are watched (events filtered)
        return Observer
    if not all(hasattr(InotifyWatchGroup, name) for name in ("_add_all_callbacks", "_recursive_simulate")):
        return Observer
    if not all(hasattr(InotifyFD, name) for name in ("_add_callback", "_get_or_create_watch")):
        return Observer

    class _QuietFD(InotifyFD):
        def _add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
            # A folder tree that appears (git clone, a move in) is walked from several events, so a watch group
            # registers itself again on a folder it watches: watchdog then warns with the whole watch (up to
            # 20 KB a line) that it "will be overwritten", by the very same callback. Only the same callback
            # is taken quietly; a different one still goes through watchdog's own warning.
            watch = self._get_or_create_watch(path, mask)
            if watch.callbacks.get(id_) is callback:
                return watch.wd
            return super()._add_callback(path, mask, callback, id_)

    class _VisibleGroup(InotifyWatchGroup):
        def _add_all_callbacks(self, path: bytes) -> None:
            if _hidden_below(path, self.path):
                return
            self._add_callback(path)
            if not (self.is_recursive and os.path.isdir(path)):
                return
            for top, dirnames, _ in os.walk(path, followlinks=self.follow_symlink):
                dirnames[:] = [d for d in dirnames if not d.startswith(b".")]  # not entered either
                for dirname in dirnames:
                    full = os.path.join(top, dirname)
                    if self.follow_symlink or not os.path.islink(full):
                        self._add_callback(full)

        def _recursive_simulate(self, src_path: bytes) -> list[Any]:
            if _hidden_below(src_path, self.path):
                return []
            events: list[Any] = super()._recursive_simulate(src_path)
            return events

    class _VisibleEmitter(InotifyEmitter):
        def on_thread_start(self) -> None:
            self._inotify = _VisibleGroup(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
            )

    class _VisibleObserver(InotifyObserver):
        def __init__(self, *, timeout: float = DEFAULT_OBSERVER_TIMEOUT) -> None:
            self._inotify_fd = _QuietFD()
            self._inotify_fd.start()
            BaseObserver.__init__(self, _VisibleEmitter, timeout=timeout, inotify_fd=self._inotify_fd)

    return _VisibleObserver
