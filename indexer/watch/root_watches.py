"""The observers of one watcher's roots: inotify per root (hidden folders not watched), or polling where the
``polling`` option asks or a kernel limit refuses inotify; a root whose watch ended (deleted, unmounted) is
watched again after a rescan. The :class:`~indexer.watch.watcher.Watcher` owns one and hears every event through
``on_event``; what the events mean is its business (and watch/batch.py's)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from indexer.watch.observers import INOTIFY_LIMITS, event_filter, make_handler, new_observer, watch_alive
from indexer.watch.target import WatchError, WatchOptions

logger = logging.getLogger("indexer.watch")


class RootWatches:
    """Which observer watches which root, and the observers themselves (started lazily, stopped together)."""

    def __init__(self, options: WatchOptions, on_event: Callable[[str, Any], None],
                 observer_factory: Callable[[], Any] | None = None,
                 polling_factory: Callable[[], Any] | None = None) -> None:
        self.options = options
        self._on_event = on_event
        self._observer_factory = observer_factory
        self._polling_factory = polling_factory
        self._observers: list[Any] = []
        self._native: Any = None
        self._polling: Any = None
        self._handler: Any = None
        self._watches: dict[str, tuple[Any, Any]] = {}  # root -> (observer, its watch)
        self.polled_roots: list[str] = []

    def start(self, roots: list[str]) -> None:
        self._handler = make_handler(lambda path, what: self._on_event(path, what))  # looked up per event
        for root in roots:
            self.watch_root(root)

    def watch_root(self, root: str) -> None:
        """Watch ``root`` with inotify, or poll it (``polling`` option, or inotify refused by a kernel limit)."""
        if not self.options.polling:
            try:
                if self._native is None:
                    self._native = self._new_observer()
                    self._native.start()
                    self._observers.append(self._native)
                watch = self._native.schedule(self._handler, root, recursive=True, event_filter=event_filter())
                self._watches[root] = (self._native, watch)
                return
            except OSError as exc:
                sysctl = INOTIFY_LIMITS.get(exc.errno or 0)
                if sysctl is None:
                    raise WatchError(f"cannot watch {root}: {exc}") from exc
                logger.warning(
                    "cannot watch %s with inotify (%s): polling it every %.1fs instead; raise the limit with "
                    "`sudo sysctl %s=<higher>` (and in /etc/sysctl.d/) to get instant updates",
                    root,
                    exc.strerror or exc,
                    self.options.poll_seconds,
                    sysctl,
                )
        if self._polling is None:
            self._polling = self._new_polling_observer()
            self._polling.start()
            self._observers.append(self._polling)
        self._watches[root] = (self._polling, self._polling.schedule(self._handler, root, recursive=True))
        if root not in self.polled_roots:
            self.polled_roots.append(root)

    def refresh(self, roots: list[str]) -> None:
        """Watch each of ``roots`` that exists and has no live watch (new, or back after being gone)."""
        for root in roots:
            held = self._watches.get(root)
            if held is not None and watch_alive(*held):
                continue
            if not os.path.isdir(root):
                continue
            if held is not None:
                with contextlib.suppress(Exception):
                    held[0].unschedule(held[1])
            try:
                self.watch_root(root)
                logger.info("watching %s again", root)
            except (WatchError, OSError) as exc:
                logger.warning("cannot watch %s: %s (the periodic rescan covers it)", root, exc)

    def _new_observer(self) -> Any:
        if self._observer_factory is not None:
            return self._observer_factory()
        return new_observer()  # inotify without watches on hidden folders

    def _new_polling_observer(self) -> Any:
        if self._polling_factory is not None:
            return self._polling_factory()
        from watchdog.observers.polling import PollingObserver

        return PollingObserver(timeout=self.options.poll_seconds)

    def stop(self) -> None:
        observers, self._observers = self._observers, []
        self._native = self._polling = None
        self._watches = {}
        for observer in observers:
            try:
                observer.stop()
            except Exception:  # pragma: no cover - shutting down anyway
                logger.debug("observer stop failed", exc_info=True)
        for observer in observers:
            if observer.is_alive():
                observer.join(5.0)

