"""Progress of a long file inside its reader: a reader that works part by part (a PDF page, an OCR'd page, an
e-mail message, a block of sheet rows) calls :func:`part_done` after each part. In the filesystem source's parse
worker each call becomes a heartbeat to the indexer, so ``parse_timeout`` bounds a stall (no part finished
within it), not the whole file: a 3,000-page scan may take as long as its pages need, a page that hangs is
stopped. Outside a worker the call costs one attribute lookup and does nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

HEARTBEAT_SECONDS = 0.25  # at most this often a heartbeat leaves the worker, however many parts end
_listener: Callable[[int], None] | None = None
_parts = 0
_last = 0.0


def part_done(count: int = 1) -> None:
    """``count`` more parts of the file being read are done."""
    global _parts, _last
    if _listener is None:
        return
    _parts += count
    now = time.monotonic()
    if now - _last >= HEARTBEAT_SECONDS:
        _last = now
        _listener(_parts)


def listen(listener: Callable[[int], None] | None) -> None:
    """Set (or clear, with None) what hears the parts of the next file; the count starts again at zero."""
    global _listener, _parts, _last
    _listener, _parts, _last = listener, 0, time.monotonic()
