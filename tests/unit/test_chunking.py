"""TokenChunker with a fake counter: whitespace words plus two special tokens (like [CLS] ... [SEP])."""

from __future__ import annotations

import random
import re

import pytest

from indexer.errors import ConfigError
from indexer.index.chunking import TokenChunker
from indexer.types import Chunk, Document, SourceRef


class WordCounter:
    """Exactly additive: each whitespace-separated word is one token, plus 2 specials."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.calls = 0
        self.chars = 0

    def count_tokens(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return len(text.split()) + 2


class PunctCounter(WordCounter):
    """Not additive: punctuation and newlines cost tokens too, so sums of parts underestimate wholes."""

    def count_tokens(self, text: str) -> int:
        self.calls += 1
        return len(re.findall(r"\w+|[^\w\s]|\n", text)) + 2


def make_doc(text: str, kind: str = "text", path: str = "/r/doc", page_starts: tuple[int, ...] = ()) -> Document:
    return Document(ref=SourceRef("/r", path, len(text), 0), text=text, kind=kind, page_starts=page_starts)


def check_spans(doc: Document, chunks: list[Chunk], counter: WordCounter, limit: int) -> None:
    encoded = doc.text.encode("utf-8")
    for number, chunk in enumerate(chunks):
        assert chunk.index == number
        assert chunk.path == doc.ref.path
        assert encoded[chunk.start_byte : chunk.end_byte].decode("utf-8") == chunk.text
        assert chunk.n_tokens == counter.count_tokens(chunk.text)
        assert chunk.n_tokens <= limit
        assert chunk.start_line == doc.text.count("\n", 0, len(encoded[: chunk.start_byte].decode())) + 1
        assert chunk.end_line == chunk.start_line + chunk.text.count("\n")
        assert chunk.text == chunk.text.rstrip() and chunk.text.strip()


def words_in_order(chunks: list[Chunk]) -> list[str]:
    """Every word of the document, dropping the overlap each chunk repeats from the previous one."""
    out: list[str] = []
    last_end = -1
    for chunk in chunks:
        for match in re.finditer(r"\S+", chunk.text):
            position = chunk.start_byte + len(chunk.text[: match.start()].encode())
            if position >= last_end:
                out.append(match.group())
        last_end = chunk.end_byte
    return out


def test_small_document_is_one_chunk() -> None:
    counter = WordCounter(128)
    doc = make_doc("hello world\n\nsecond paragraph\n")
    chunks = list(TokenChunker(counter).chunk(doc))
    assert len(chunks) == 1
    assert chunks[0].text == "hello world\n\nsecond paragraph"
    assert (chunks[0].start_line, chunks[0].end_line, chunks[0].n_tokens) == (1, 3, 6)
    assert chunks[0].page is None and chunks[0].heading == ()


def test_empty_and_blank_documents_give_no_chunks() -> None:
    chunker = TokenChunker(WordCounter(128))
    assert list(chunker.chunk(make_doc(""))) == []
    assert list(chunker.chunk(make_doc("  \n\n \t\n"))) == []


@pytest.mark.parametrize("limit,overlap", [(16, 0), (16, 4), (40, 8), (9, 3)])
def test_never_exceeds_limit_and_covers_every_word(limit: int, overlap: int) -> None:
    rng = random.Random(limit * 100 + overlap)
    paragraphs = []
    for p in range(30):
        n_lines = rng.randint(1, 6)
        lines = [" ".join(f"p{p}l{k}w{w}" for w in range(rng.randint(1, 25))) for k in range(n_lines)]
        paragraphs.append("\n".join(lines))
    text = "\n\n".join(paragraphs) + "\n"
    counter = WordCounter(limit)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=overlap).chunk(doc))
    check_spans(doc, chunks, counter, limit)
    assert words_in_order(chunks) == text.split()


def test_paragraphs_are_not_split_when_they_fit() -> None:
    paragraphs = [" ".join(f"p{p}w{w}" for w in range(8)) for p in range(10)]
    text = "\n\n".join(paragraphs)
    counter = WordCounter(30)  # 28 content tokens: three 8-word paragraphs per chunk
    chunks = list(TokenChunker(counter, overlap_tokens=0).chunk(make_doc(text)))
    for chunk in chunks:
        for part in chunk.text.split("\n\n"):
            assert part in paragraphs
    assert [c.text.count("\n\n") + 1 for c in chunks] == [3, 3, 3, 1]


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    counter = WordCounter(22)
    chunks = list(TokenChunker(counter, overlap_tokens=5).chunk(make_doc(text)))
    assert len(chunks) > 3
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start_byte < before.end_byte
        overlap = text.encode()[after.start_byte : before.end_byte].decode()
        assert 4 <= len(overlap.split()) <= 5  # at most overlap_tokens, and close to it
        assert before.text.endswith(overlap)
    assert words_in_order(chunks) == text.split()


def test_no_overlap_across_headings() -> None:
    section = " ".join(f"s{i}" for i in range(12))
    text = f"# A\n\n{section}\n\n# B\n\n{section.replace('s', 't')}\n"
    chunks = list(TokenChunker(WordCounter(128), overlap_tokens=8).chunk(make_doc(text, "markdown")))
    assert [c.heading for c in chunks] == [("A",), ("B",)]
    assert chunks[1].text.startswith("# B")
    assert chunks[0].end_byte <= chunks[1].start_byte


def test_markdown_heading_paths_and_fenced_code() -> None:
    code = "```python\ndef f():\n\n    return 1\n```"
    text = (
        "# Guide\n\nIntro words here.\n\n## Install\n\nRun the installer.\n\n"
        f"### Linux\n\n{code}\n\n## Use\nCall it.\n\nSetext Title\n============\n\nBody.\n"
    )
    counter = WordCounter(128)
    doc = make_doc(text, "markdown")
    chunks = list(TokenChunker(counter).chunk(doc))
    check_spans(doc, chunks, counter, 128)
    by_heading = {c.heading: c.text for c in chunks}
    assert by_heading[("Guide",)] == "# Guide\n\nIntro words here."
    assert by_heading[("Guide", "Install")] == "## Install\n\nRun the installer."
    assert by_heading[("Guide", "Install", "Linux")] == f"### Linux\n\n{code}"
    assert by_heading[("Guide", "Use")] == "## Use\nCall it."
    assert by_heading[("Setext Title",)] == "Setext Title\n============\n\nBody."


def test_fenced_code_block_with_blank_lines_stays_whole_when_it_fits() -> None:
    code = "```\n" + "\n\n".join(f"line{i} x y" for i in range(6)) + "\n```"
    text = f"# Code\n\nbefore para words\n\n{code}\n\nafter para words\n"
    counter = WordCounter(24)
    chunks = list(TokenChunker(counter, overlap_tokens=0).chunk(make_doc(text, "markdown")))
    assert any(code in c.text for c in chunks)


def test_heading_only_section_merges_into_the_next() -> None:
    text = "# Title\n\n## Part\n\nBody text.\n"
    chunks = list(TokenChunker(WordCounter(128)).chunk(make_doc(text, "markdown")))
    assert len(chunks) == 1
    assert chunks[0].heading == ("Title", "Part")
    assert chunks[0].text.startswith("# Title")


def test_front_matter_is_not_a_setext_heading() -> None:
    text = "---\ntitle: x\n---\n\n# Real\n\nbody\n"
    chunks = list(TokenChunker(WordCounter(128)).chunk(make_doc(text, "markdown")))
    assert [c.heading for c in chunks] == [(), ("Real",)]


def test_rst_section_titles() -> None:
    text = "=====\nTitle\n=====\n\nIntro.\n\nFirst\n-----\n\nOne.\n\nSub\n~~~\n\nDeep.\n\nSecond\n------\n\nTwo.\n"
    chunks = list(TokenChunker(WordCounter(128)).chunk(make_doc(text, "rst")))
    assert [c.heading for c in chunks] == [
        ("Title",),
        ("Title", "First"),
        ("Title", "First", "Sub"),
        ("Title", "Second"),
    ]
    assert chunks[3].text == "Second\n------\n\nTwo."


def test_code_is_not_read_for_headings() -> None:
    text = "# a comment\n\nx = 1\n"
    chunks = list(TokenChunker(WordCounter(128)).chunk(make_doc(text, "code", "/r/a.py")))
    assert len(chunks) == 1 and chunks[0].heading == ()


def test_oversized_paragraph_splits_at_lines_first() -> None:
    lines = [" ".join(f"l{k}w{w}" for w in range(5)) for k in range(12)]
    text = "\n".join(lines)
    counter = WordCounter(20)  # 18 content tokens: three 5-word lines
    chunks = list(TokenChunker(counter, overlap_tokens=0).chunk(make_doc(text)))
    check_spans(make_doc(text), chunks, counter, 20)
    for chunk in chunks:
        assert all(line in lines for line in chunk.text.split("\n"))
    assert len(chunks) == 4


class CharCounter(WordCounter):
    """A token per started 10 characters of each word, plus 2 specials."""

    def count_tokens(self, text: str) -> int:
        self.calls += 1
        return sum(-(-len(w) // 10) for w in text.split()) + 2


def test_oversized_line_splits_at_spaces() -> None:
    words = [f"{i:02d}" + "y" * 26 for i in range(60)]  # 3 tokens each
    text = " ".join(words)
    counter = CharCounter(50)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=0).chunk(doc))
    check_spans(doc, chunks, counter, 50)
    assert [w for c in chunks for w in c.text.split(" ")] == words  # every cut fell between words
    assert all(c.n_tokens >= 40 for c in chunks[:-1])  # and pieces are not tiny


def test_word_longer_than_a_chunk_splits_at_characters() -> None:
    text = "start " + "x" * 5000 + " end"
    counter = CharCounter(50)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=0).chunk(doc))
    check_spans(doc, chunks, counter, 50)
    assert len(chunks) >= 5000 // 480
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_non_additive_counter_is_verified_exactly() -> None:
    text = "\n\n".join(", ".join(f"a{i}.b{i}" for i in range(k, k + 6)) for k in range(0, 300, 6))
    counter = PunctCounter(40)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=6).chunk(doc))
    for chunk in chunks:
        assert counter.count_tokens(chunk.text) == chunk.n_tokens <= 40
        assert doc.text.encode()[chunk.start_byte : chunk.end_byte].decode() == chunk.text


def test_byte_offsets_with_multibyte_text_and_lines() -> None:
    text = "ünïcödé wörds " * 40 + "\n\n" + "日本語 テキスト " * 40 + "\n\nemoji 🎉 end\n"
    counter = WordCounter(24)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=4).chunk(doc))
    check_spans(doc, chunks, counter, 24)
    assert chunks[-1].end_line == 5 and chunks[-1].text.endswith("🎉 end")


def test_pdf_pages_are_chunk_boundaries_and_numbered() -> None:
    pages = ["page one words " * 3, "page two words " * 3, "", "page four words"]
    pages = [p.strip() for p in pages]
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2
    text = "\n\n".join(pages)
    chunks = list(TokenChunker(WordCounter(100)).chunk(make_doc(text, "pdf", page_starts=tuple(starts))))
    assert [(c.page, c.text.split()[1]) for c in chunks] == [(1, "one"), (2, "two"), (4, "four")]


def test_output_is_deterministic() -> None:
    rng = random.Random(7)
    text = "\n\n".join(" ".join(str(rng.random()) for _ in range(rng.randint(1, 40))) for _ in range(50))
    doc = make_doc(text)
    first = list(TokenChunker(WordCounter(32), overlap_tokens=6).chunk(doc))
    second = list(TokenChunker(WordCounter(32), overlap_tokens=6).chunk(doc))
    assert first == second


def test_counting_work_is_linear_in_text_size() -> None:
    # counts characters handed to the tokenizer (deterministic); the wall-clock side is bench/scan_chunk_speed.py
    def work(n_paragraphs: int) -> int:
        text = "\n\n".join(" ".join(f"w{p}_{i}" for i in range(30)) for p in range(n_paragraphs))
        counter = WordCounter(128)
        chunks = list(TokenChunker(counter, overlap_tokens=16).chunk(make_doc(text)))
        assert chunks
        return counter.chars

    small_chars = work(200)
    big_chars = work(2000)
    text_ratio = 10
    assert big_chars / small_chars < text_ratio * 1.3  # no quadratic re-tokenisation


def test_one_huge_line_is_split_in_linear_work() -> None:
    text = " ".join(f"w{i}" for i in range(50_000))
    counter = WordCounter(256)
    doc = make_doc(text)
    chunks = list(TokenChunker(counter, overlap_tokens=32).chunk(doc))
    assert all(c.n_tokens <= 256 for c in chunks)
    assert words_in_order(chunks) == text.split()
    assert counter.chars < len(text) * 40  # bounded probes per piece, not the whole remainder each time


def test_config_errors() -> None:
    counter = WordCounter(64)
    with pytest.raises(ConfigError, match="exceeds the model's limit"):
        TokenChunker(counter, max_tokens=65)
    with pytest.raises(ConfigError, match="overlap_tokens"):
        TokenChunker(counter, overlap_tokens=32)
    with pytest.raises(ConfigError, match="too small"):
        TokenChunker(counter, max_tokens=4, overlap_tokens=0)
    assert TokenChunker(counter, max_tokens=32, overlap_tokens=0).max_tokens == 32


def test_the_first_chunk_comes_before_the_whole_document_is_counted():
    """Segments are counted as the packer asks for them (indexer.core.pulled): a large file's first chunk (and so
    its first progress) does not wait for the tokenizer to go through the whole file."""
    counter = WordCounter(64)
    text = "\n\n".join(" ".join(f"w{p}x{i}" for i in range(40)) for p in range(500))
    chunks = TokenChunker(counter, 64, overlap_tokens=0).chunk(make_doc(text))
    next(chunks)
    early = counter.chars
    rest = list(chunks)
    assert len(rest) >= 400 and early < counter.chars / 50  # the first chunk counted a sliver of the text


def test_pulled_reads_its_iterator_only_as_far_as_asked():
    from indexer.core.pulled import Pulled

    made: list[int] = []

    def numbers():
        for n in range(5):
            made.append(n)
            yield n

    pulled = Pulled(numbers())
    assert pulled.has(1) and made == [0, 1] and pulled[1] == 1 and pulled[0:2] == [0, 1]
    assert not pulled.has(7) and made == [0, 1, 2, 3, 4] and not pulled.has(5)
