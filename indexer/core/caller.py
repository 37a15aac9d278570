"""Who is asking, for the stores that keep a stable view per caller: the HTTP server marks each request with its
caller (:func:`calling`), a store reads it (:func:`current`) while it answers (a Qdrant server store sends it as
``X-Qdrant-Route-Affinity``: setting ``qdrant_route_affinity``, docs/deploy.md#stateless-workers).

A context variable, so a request's mark goes with it into the thread that answers it and no further."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CALLER: ContextVar[str | None] = ContextVar("indexer_caller", default=None)


def current() -> str | None:
    """The caller of the request being answered, or None (not a request: the CLI, a watcher's batch)."""
    return _CALLER.get()


@contextmanager
def calling(who: str | None) -> Iterator[None]:
    """Answer as ``who`` (an HTTP caller's mark) inside the block."""
    token = _CALLER.set(who)
    try:
        yield
    finally:
        _CALLER.reset(token)
