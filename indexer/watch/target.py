"""What a :class:`~indexer.watch.watcher.Watcher` drives and how it is tuned: the :class:`WatchTarget` protocol
(a collection's writer, :class:`~indexer.collection.writer.CollectionWriter`, is one), :class:`WatchOptions`, and
which errors leave a batch queued for a retry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from indexer.errors import IndexerError, LockedError, StoreUnavailableError
from indexer.ports import Progress, Source
from indexer.types import IndexReport
from indexer.watch.batch import BatchTiming

if TYPE_CHECKING:
    from indexer.settings import Settings

# Errors after which the same batch is simply retried later (nothing is wrong with its paths).
RETRYABLE: tuple[type[BaseException], ...] = (StoreUnavailableError, LockedError)

def is_retryable(exc: BaseException) -> bool:
    """Errors after which the same batch is retried as is: the store is unreachable, another writer holds the
    collection."""
    return isinstance(exc, RETRYABLE)


class WatchError(IndexerError):
    """The watcher cannot start (another watcher runs, a root cannot be watched)."""


@dataclass(frozen=True)
class WatchOptions:
    """Watcher tunables; the defaults come from settings (``watch_*``)."""

    polling: bool = False
    poll_seconds: float = 1.0
    rescan_seconds: float = 600.0
    timing: BatchTiming = BatchTiming()


class _Roots(Protocol):
    def roots(self, collection: str, /) -> list[str]: ...


class WatchTarget(Protocol):
    """What a :class:`Watcher` drives: a collection's writer (:class:`~indexer.collection.writer.CollectionWriter`;
    the HTTP service gives it the one its index thread writes with; a ``Collection`` is one too)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def state(self) -> _Roots: ...

    @property
    def record(self) -> object | None: ...

    def index(self, paths: Sequence[str | Path], progress: Progress | None = None) -> IndexReport: ...

    def sync(self, progress: Progress | None = None) -> IndexReport: ...

    def sync_paths(self, paths: Iterable[str | Path], progress: Progress | None = None) -> IndexReport: ...

    def warm_up(self) -> None: ...

    def source_for(self, root: str) -> Source: ...

    def follow_reads(self, listener: Callable[[str], None] | None) -> None:
        """Leave a slow read running in the background; ``listener(path)`` hears when it ends (None: stop)."""
        ...

    def reading(self) -> list[dict[str, Any]]:
        """Files being read in the background (path, seconds so far), for the watcher's status."""
        ...


def options_from_settings(settings: Settings) -> WatchOptions:
    return WatchOptions(
        polling=bool(settings.watch_polling),
        poll_seconds=float(settings.watch_poll_seconds),
        rescan_seconds=float(settings.watch_rescan_seconds),
    )
