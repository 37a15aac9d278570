"""An iterator's items, pulled as far as they are asked for and kept: a list-like view for an algorithm that looks
ahead (the chunker's packer) over items that are costly to make (segments counted with the tokenizer), so the
first result comes before the last item is made."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class Pulled(Generic[T]):
    """``has(i)`` pulls items until the i-th exists (False when the iterator ends first); ``[i]`` and ``[i:j]``
    read what was pulled."""

    def __init__(self, items: Iterable[T]) -> None:
        self._source = iter(items)
        self._items: list[T] = []
        self._done = False

    def has(self, i: int) -> bool:
        while len(self._items) <= i and not self._done:
            try:
                self._items.append(next(self._source))
            except StopIteration:
                self._done = True
        return i < len(self._items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        return self._items[i]
