"""A document into the chunks the pipeline writes: its text cut by the collection's chunker, each chunk's heading
context in front when configured (:mod:`indexer.index.context`), then one point per picture when the model embeds
images. Under the watcher this runs in the file's reader thread (:mod:`indexer.index.reads`), without progress
calls; otherwise in the indexing thread, telling a progress that counts chunks as they come."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, cast

from indexer.index.chunking import chunker_for
from indexer.index.context import HeadingContext
from indexer.ports import Chunker, Embedder, Progress, embeds_images
from indexer.types import Chunk, Document


class Splitter:
    """The chunks of a document (see the module docstring); ``progress`` is told (``chunked``) when ``listening``."""

    def __init__(self, chunker: Chunker, embedder: Embedder, progress: Progress, listening: bool,
                 chunk_context: str = "none") -> None:  # fmt: skip
        self.chunker = chunker
        self.embedder = embedder
        self.progress = progress
        self._listening = listening
        # "heading": each chunk is embedded with its heading path in front (indexer.index.context)
        self._context = HeadingContext(embedder) if chunk_context == "heading" else None

    def chunks(self, doc: Document, quiet: bool = False) -> list[Chunk]:
        """Its chunks (with their heading context when configured), then its pictures' points. ``quiet``: no
        progress calls (a reader thread)."""
        chunks = self._yielding(doc) if quiet else self._chunk(doc)
        if self._context is not None:
            chunks = self._context(chunks)
        return chunks + self._pictures(doc, len(chunks))

    def _yielding(self, doc: Document) -> list[Chunk]:
        """(A reader thread.) The chunks, handing the interpreter over after each one: a 5 MB log chunked in the
        background must not hold the interpreter lock the batch's thread needs between each of its many short
        steps (Python lets a thread keep it up to 5 ms before handing it over)."""
        chunks: list[Chunk] = []
        for chunk in self.chunker.chunk(doc):
            chunks.append(chunk)
            time.sleep(0)  # releases the GIL: a thread waiting for it runs now
        return chunks

    def _chunk(self, doc: Document) -> list[Chunk]:
        """The document's chunks; a progress that counts them (``chunked``, optional) hears of the first at once
        and then every quarter second, so a large file's progress moves while it is still being split."""
        if not self._listening:
            return list(self.chunker.chunk(doc))
        chunked = self.progress.chunked
        chunks: list[Chunk] = []
        told, last = 0, time.monotonic()
        for chunk in self.chunker.chunk(doc):
            chunks.append(chunk)
            if told == 0 or time.monotonic() - last >= 0.25:  # the first chunk at once, then 4 times a second
                chunked(len(chunks) - told)
                told, last = len(chunks), time.monotonic()
        chunked(len(chunks) - told)
        return chunks

    def _pictures(self, doc: Document, start: int) -> list[Chunk]:
        """One point per picture the reader attached, after the text chunks, when the model embeds images (a
        text-only model indexes the text alone, as before media existed)."""
        if not doc.media or not embeds_images(self.embedder):
            return []
        lines = max(1, doc.text.count("\n") + 1) if doc.text else 1
        return [Chunk(doc.ref.path, start + i, "", 0, 0, 1, lines, 0, metadata=doc.metadata, media=part)
                for i, part in enumerate(doc.media) if part.kind == "image"]


@dataclass(frozen=True)
class SplitRecipe:
    """How a collection cuts its documents, for another process holding the same model (a Ray node:
    :mod:`indexer.cluster`): the chunks it makes are the ones this process would (same tokenizer, chunk size,
    overlap, heading context, and the document prompt counted in front of each text)."""

    chunk_tokens: int
    overlap_tokens: int
    chunk_context: str = "none"
    prompt: str = ""

    def splitter(self, engine: Any, lock: threading.Lock | None = None) -> Callable[[Document], list[Chunk]]:
        """``doc -> chunks`` over ``engine`` (a loaded llama.cpp adapter); ``lock`` guards its tokenizer when
        another thread embeds with it."""
        counter = cast(Embedder, _Prompted(engine, self.prompt, lock))
        chunker = chunker_for(counter, self.chunk_tokens, self.overlap_tokens)
        return Splitter(chunker, counter, Progress(), False, self.chunk_context).chunks


class _Prompted:
    """The model as the collection counts with it: the document prompt in front (collection/model.py's handle)."""

    def __init__(self, engine: Any, prompt: str, lock: threading.Lock | None) -> None:
        self.engine, self.prompt, self.lock = engine, prompt, lock
        self.max_tokens = int(engine.max_tokens)
        self.media_kinds = tuple(engine.media_kinds)

    def count_tokens(self, text: str) -> int:
        with self.lock or nullcontext():
            return int(self.engine.count_tokens(self.prompt + text))
