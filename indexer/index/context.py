"""Chunk context: what the model embeds in front of a chunk's text, so that a chunk deep in a section still
carries the document's title and section names ("heading": the chunk's heading path, ``Title > Section``).

Measured as an index-time lever (docs/benchmarks.md#levers) and recorded per collection (store metadata
``chunk_context``: "heading" or "none"; a collection made before it was recorded is "none"), as the chunk size
is: files embedded two ways would rank unevenly, so a collection keeps what it was made with. The context is
part of the vector and of the chunk's content hash (the vector cache key), never of the text a hit shows or the
lexical index matches (which has the heading as its own field already).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from indexer.ports import Embedder
from indexer.types import Chunk

META_CHUNK_CONTEXT = "chunk_context"  # store collection metadata
CONTEXT_CHARS = 200  # a heading path is cut to this many characters


def heading_context(chunk: Chunk, count_tokens: Callable[[str], int], max_tokens: int) -> Chunk:
    """``chunk`` with its heading path as context. Unchanged when it has no heading, is an image, already opens
    with a heading line (the first chunk of a section shows its own), or would no longer fit the model."""
    if not chunk.heading or chunk.media is not None or chunk.text.lstrip().startswith("#"):
        return chunk
    context = " > ".join(" ".join(part.split()) for part in chunk.heading)[:CONTEXT_CHARS]
    if not context or chunk.n_tokens + count_tokens(context) > max_tokens:
        return chunk
    return dataclasses.replace(chunk, context=context)


class HeadingContext:
    """Adds the heading context to a document's chunks, counting each distinct heading path once."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._tokens: dict[str, int] = {}

    def __call__(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        limit = int(self.embedder.max_tokens)
        return [heading_context(c, self._count, limit) for c in chunks]

    def _count(self, context: str) -> int:
        n = self._tokens.get(context)
        if n is None:
            if len(self._tokens) > 4096:
                self._tokens.clear()
            n = self._tokens[context] = int(self.embedder.count_tokens(context))
        return n
