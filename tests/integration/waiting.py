"""Waiting on a condition with a deadline (tests never sleep a fixed time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(predicate: Callable[[], Any], timeout: float, what: str = "condition", poll: float = 0.02) -> Any:
    """The first truthy value of ``predicate()``, polled every ``poll`` s; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:.0f}s")
        time.sleep(poll)
