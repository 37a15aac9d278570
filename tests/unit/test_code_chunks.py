"""Code cut along its syntax tree: the code reader's tree-sitter outline and the chunker's packing of it.

A counter charging ten tokens a line (limit 42: four lines a chunk) makes every cut visible on the small samples of
tests/fixtures/code: each chunk must start where a definition (with its comments, decorators, export keyword)
starts, or at a statement of a definition too large for one chunk, with the enclosing names as heading."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.index.chunking import TokenChunker
from indexer.types import Document, SourceRef
from plugins.filesystem.readers import CodeReader
from plugins.filesystem.syntax import outline

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "code"


class LineCounter:
    """Ten tokens a line, plus two specials."""

    max_tokens = 42

    def count_tokens(self, text: str) -> int:
        return 10 * (text.count("\n") + 1) + 2 if text else 2


# (start line, heading) of every chunk, in order.
EXPECTED = {
    "sample.py": [(1, ()), (3, ("parse_header",)), (7, ("parse_header",)), (12, ("Parser",)),
                  (15, ("Parser", "__init__")), (18, ("Parser", "feed"))],
    "sample.js": [(1, ()), (3, ("alpha",)), (7, ("parseHeader",)), (11, ("Gamma", "delta")), (15, ("Gamma",))],
    "sample.ts": [(1, ()), (3, ("Shape",)), (7, ("Circle", "constructor")), (10, ("Circle", "area")),
                  (15, ("parseHeader",))],
    "sample.go": [(1, ()), (5, ("Greeter",)), (10, ("Greet",)), (14, ("parseHeader",))],
    "sample.rs": [(1, ()), (3, ("Point",)), (7, ("Point", "parse_header")), (11, ("Point",)), (13, ("main",))],
    "sample.java": [(1, ()), (3, ("Parser",)), (6, ("Parser", "Parser")), (10, ("Parser", "parseHeader"))],
    "sample.c": [(1, ()), (3, ("point",)), (7, ("parse_header",)), (12, ("main",))],
    "sample.cpp": [(1, ()), (3, ("net",)), (5, ("net", "Parser")), (7, ("net", "Parser", "parse_header")),
                   (12, ("net",)), (14, ("main",))],
    "sample.cs": [(1, ()), (3, ("Demo",)), (5, ("Demo", "Parser")), (7, ("Demo", "Parser", "ParseHeader")),
                  (11, ("Demo", "Parser"))],
    "sample.rb": [(1, ()), (3, ("Net",)), (4, ("Net", "Parser", "parse_header")), (8, ("Net", "Parser"))],
    "sample.php": [(1, ()), (3, ("Parser", "parseHeader")), (7, ("Parser",)), (9, ("helper",))],
    "sample.sh": [(1, ()), (4, ("parse_header",)), (8, ("main",))],
}  # fmt: skip


def _doc(name: str, text: str | None = None) -> Document:
    data = (SAMPLES / name).read_bytes() if text is None else text.encode()
    return CodeReader().read(SourceRef("/r", f"/r/{name}", len(data), 0), data)


def _check_line_aligned(doc: Document, chunks: list) -> None:
    text = doc.text
    assert text.isascii()  # so byte offsets are character offsets
    for chunk in chunks:
        start = chunk.start_byte
        assert text[start : chunk.end_byte] == chunk.text
        assert start == 0 or text[start - 1] == "\n", f"chunk starts mid-line: {chunk.text[:40]!r}"
        end = start + len(chunk.text)
        assert end == len(text) or text[end] == "\n", f"chunk ends mid-line: {chunk.text[-40:]!r}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_chunks_start_at_definitions_with_their_enclosing_names(name):
    doc = _doc(name)
    assert doc.outline, f"no syntax tree for {name}"
    chunks = list(TokenChunker(LineCounter(), overlap_tokens=4).chunk(doc))
    assert [(c.start_line, c.heading) for c in chunks] == EXPECTED[name]
    _check_line_aligned(doc, chunks)
    # nothing is lost: every non-blank line of the file is in exactly one chunk (no overlap for code)
    covered = [line for c in chunks for line in c.text.split("\n") if line.strip()]
    assert covered == [line for line in doc.text.split("\n") if line.strip()]


def test_a_unit_that_fits_is_one_chunk_whole():
    doc = _doc("sample.py")
    counter = LineCounter()
    counter.max_tokens = 200  # twenty lines: the class fits whole
    chunks = list(TokenChunker(counter, overlap_tokens=4).chunk(doc))
    by_heading = {c.heading: c for c in chunks}
    parser = by_heading[("Parser",)]
    assert parser.text.startswith("class Parser:") and parser.text.rstrip().endswith("self.items.append(x)")
    function = by_heading[("parse_header",)]
    assert "# Parses headers.\n@decorator\ndef parse_header(line):" in function.text
    assert function.text.rstrip().endswith("return name.strip(), value.strip()")


def test_a_large_function_is_cut_at_its_statements_never_mid_line():
    body = "\n".join(f"    value_{i} = compute({i}, {i + 1})  # step {i}" for i in range(60))
    text = f"import os\n\n\ndef parse_header(line):\n{body}\n    return value_59\n"
    doc = _doc("big.py", text)
    counter = LineCounter()
    counter.max_tokens = 102  # ten lines a chunk
    chunks = list(TokenChunker(counter, overlap_tokens=4).chunk(doc))
    assert len(chunks) >= 7
    assert all(c.heading == ("parse_header",) for c in chunks[1:])
    assert chunks[1].text.startswith("def parse_header(line):")
    _check_line_aligned(doc, chunks)
    assert all(c.n_tokens <= 102 for c in chunks)


def test_languages_without_a_grammar_fall_back_to_line_aligned_chunks():
    text = "\n".join(f"fun step{i}() = println(\"{i}\")" for i in range(30)) + "\n"
    doc = _doc("Main.kt", text)
    assert doc.outline == ()
    counter = LineCounter()
    counter.max_tokens = 52
    chunks = list(TokenChunker(counter, overlap_tokens=15).chunk(doc))
    assert len(chunks) > 3
    _check_line_aligned(doc, chunks)  # the overlap starts at a line too
    pairs = zip(chunks, chunks[1:], strict=False)
    assert any(a.text.split("\n")[-1] == b.text.split("\n")[0] for a, b in pairs)  # the overlap is kept


def test_a_file_that_does_not_parse_still_gets_an_outline_or_none_without_failing():
    assert isinstance(outline("def broken(:\n    pass\n", ".py"), tuple)
    assert outline("", ".py") == ()
    assert outline("anything", ".unknown") == ()
