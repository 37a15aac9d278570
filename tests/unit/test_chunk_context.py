"""The heading context (indexer.index.context): what is embedded in front of a chunk, and when it is left out."""

from __future__ import annotations

from indexer.index.context import CONTEXT_CHARS, HeadingContext, heading_context
from indexer.types import Chunk, MediaPart


def _chunk(text: str, heading: tuple[str, ...], n_tokens: int = 10, media: MediaPart | None = None) -> Chunk:
    return Chunk("/r/a.md", 1, text, 0, len(text), 3, 4, n_tokens, heading=heading, media=media)


def _words(text: str) -> int:
    return len(text.split())


def test_a_chunk_inside_a_section_embeds_its_heading_path_in_front():
    chunk = heading_context(_chunk("Water twice a week.", ("Tomatoes", "Watering  plan")), _words, 64)
    assert chunk.context == "Tomatoes > Watering plan"
    assert chunk.embed_text == "Tomatoes > Watering plan\n\nWater twice a week."
    assert chunk.text == "Water twice a week."  # what a hit shows and the lexical index matches: unchanged


def test_the_context_changes_the_content_hash_so_the_vector_cache_never_mixes_them():
    plain = _chunk("Water twice a week.", ("Tomatoes",))
    assert heading_context(plain, _words, 64).content_hash != plain.content_hash
    other = heading_context(_chunk("Water twice a week.", ("Peppers",)), _words, 64)
    assert other.content_hash != heading_context(plain, _words, 64).content_hash


def test_no_context_without_a_heading_for_an_image_or_a_chunk_that_opens_with_its_heading():
    assert heading_context(_chunk("plain text", ()), _words, 64).context == ""
    image = _chunk("", ("Figures",), media=MediaPart("image", b"\x89PNG", 1, 1))
    assert heading_context(image, _words, 64).context == ""
    assert heading_context(_chunk("## Watering\n\nWater twice.", ("Tomatoes", "Watering")), _words, 64).context == ""


def test_no_context_when_it_would_not_fit_the_model_and_a_long_path_is_cut():
    assert heading_context(_chunk("text", ("A title of five words",), n_tokens=60), _words, 64).context == ""
    assert heading_context(_chunk("text", ("A title of five words",), n_tokens=59), _words, 64).context
    long = heading_context(_chunk("text", ("x" * 500,), n_tokens=1), lambda s: 1, 64)
    assert len(long.context) == CONTEXT_CHARS


class _Counting:
    max_tokens = 64

    def __init__(self) -> None:
        self.counted: list[str] = []

    def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        return _words(text)


def test_each_distinct_heading_path_is_counted_once():
    embedder = _Counting()
    context = HeadingContext(embedder)  # type: ignore[arg-type]
    chunks = [_chunk(f"part {i}", ("Guide", "Setup" if i < 3 else "Use")) for i in range(6)]
    out = context(chunks)
    assert [c.context for c in out] == ["Guide > Setup"] * 3 + ["Guide > Use"] * 3
    assert embedder.counted == ["Guide > Setup", "Guide > Use"]
