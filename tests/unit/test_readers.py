"""Readers on real bytes: UTF-8 rules, HTML visible text, PDF text layer and page starts."""

from __future__ import annotations

import codecs
import io

import pytest

from indexer.errors import SourceError
from indexer.types import SourceRef
from plugins.filesystem import (
    CodeReader,
    HtmlReader,
    MarkdownReader,
    PdfReader,
    RstReader,
    TextReader,
    default_readers,
)
from plugins.filesystem.readers import decode_utf8, looks_like_text


def ref(path: str = "/r/file", size: int = 0) -> SourceRef:
    return SourceRef(root="/r", path=path, size=size, mtime_ns=0)


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one Helvetica text line per page (hand-written objects, exact xref)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    font_id = 3 + 2 * n_pages
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    for i, text in enumerate(pages):
        page_id, content_id = 3 + 2 * i, 4 + 2 * i
        del page_id
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def test_decode_strips_bom_and_normalises_newlines() -> None:
    assert decode_utf8(ref(), b"\xef\xbb\xbfa\r\nb\rc\n") == "a\nb\nc\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("café au lait\r\n".encode("latin-1"), "café au lait\n"),  # before: "invalid UTF-8 at byte 3"
        ("# Notes\n\nThe café served crème brûlée – naïve coöperation.\n".encode("cp1252"),
         "# Notes\n\nThe café served crème brûlée – naïve coöperation.\n"),
        (codecs.BOM_UTF16_LE + "héllo wörld ✓\r\nline 2\n".encode("utf-16-le"), "héllo wörld ✓\nline 2\n"),
        (codecs.BOM_UTF16_BE + "héllo\n".encode("utf-16-be"), "héllo\n"),
        (codecs.BOM_UTF32_LE + "x ✓\n".encode("utf-32-le"), "x ✓\n"),
        ("Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.\n".encode("cp1250"),
         "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.\n"),
        ("Привет, как дела? Это тестовый файл с текстом.\n".encode("cp1251"),
         "Привет, как дела? Это тестовый файл с текстом.\n"),
    ],
)
def test_legacy_and_bom_encodings_are_read(data: bytes, expected: str) -> None:
    assert looks_like_text(data)
    for reader in (TextReader(), MarkdownReader(), CodeReader()):
        assert reader.read(ref("/r/legacy.txt"), data).text == expected


def test_control_bytes_are_not_text_even_when_valid_utf8() -> None:
    assert not looks_like_text(bytes(range(1, 32)) * 40)
    assert looks_like_text(b"\x1b[1mbold\x1b[0m\ttab\x0cpage\n" * 20)  # escapes, tabs, form feeds are text


def test_invalid_text_under_a_bom_names_the_byte_and_the_fix() -> None:
    with pytest.raises(SourceError) as info:
        TextReader().read(ref("/r/bad.txt"), codecs.BOM_UTF16_LE + "ok".encode("utf-16-le") + b"\x00\xd8")
    assert info.value.path == "/r/bad.txt"
    assert "invalid UTF-16-LE at byte 6" in info.value.reason
    assert "re-save the file or exclude it" in info.value.reason


@pytest.mark.parametrize(
    "data",
    [b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, bytes(range(128, 256)) * 8, b"\x89PNG\r\n\x1a\n\x00\x00"],
)
def test_binary_content_is_not_text(data: bytes) -> None:
    assert not looks_like_text(data)
    assert not looks_like_text(data[:100], complete=False)
    with pytest.raises(SourceError, match="binary content"):
        TextReader().read(ref("/r/blob.txt"), data)


def test_invalid_utf8_offset_counts_the_bom() -> None:
    with pytest.raises(SourceError, match="at byte 4"):
        MarkdownReader().read(ref(), b"\xef\xbb\xbfa\xc3")


@pytest.mark.parametrize(
    "reader,kind",
    [(TextReader(), "text"), (MarkdownReader(), "markdown"), (RstReader(), "rst"), (CodeReader(), "code")],
)
def test_text_readers_keep_text_verbatim(reader: TextReader, kind: str) -> None:
    data = "héllo\n\n# x\n  indented\n".encode()
    doc = reader.read(ref(), data)
    assert doc.kind == kind
    assert doc.text.encode() == data
    assert doc.page_starts == ()


def test_reader_extensions_cover_the_brief() -> None:
    by_ext = {ext: r.kind for r in default_readers() for ext in r.extensions}
    for ext in (".txt", ".text", ".md", ".markdown", ".rst", ".html", ".htm", ".pdf"):
        assert ext in by_ext
    for ext in (".py", ".js", ".ts", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".rb", ".sh", ".toml", ".yaml"):
        assert by_ext[ext] == "code"
    for ext in (".yml", ".json", ".ini", ".cfg", ".sql"):
        assert by_ext[ext] == "code"
    assert all(ext == ext.lower() and ext.startswith(".") for ext in by_ext)


def test_html_visible_text_only_with_headings() -> None:
    html = b"""<!DOCTYPE html><html><head><title>Page Title</title>
    <style>body { color: red; }</style><script>var secret = "hidden-js";</script></head>
    <body><h1>Main   Heading</h1><p>First <b>bold</b> paragraph.</p>
    <!-- a comment --><noscript>no script text</noscript><template>tmpl text</template>
    <div hidden>hidden div</div><h2>Sub</h2><ul><li>one</li><li>two</li></ul>
    <pre>  keep
    indent</pre><script>more()</script></body></html>"""
    doc = HtmlReader().read(ref("/r/p.html"), html)
    assert doc.kind == "html"
    for invisible in ("color: red", "hidden-js", "a comment", "no script text", "tmpl text", "hidden div", "more()"):
        assert invisible not in doc.text
    assert "# Page Title" in doc.text
    assert "# Main Heading" in doc.text
    assert "## Sub" in doc.text
    assert "First bold paragraph." in doc.text
    assert "one\ntwo" in doc.text
    assert "  keep\n    indent" in doc.text
    assert "\n\n\n" not in doc.text


def test_html_in_a_declared_legacy_charset() -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>café</p></body></html>'.encode("latin-1")
    assert "café" in HtmlReader().read(ref(), html).text


def test_pdf_two_pages_page_starts() -> None:
    doc = PdfReader().read(ref("/r/a.pdf"), make_pdf(["Hello first page", "Second page text"]))
    assert doc.kind == "pdf"
    assert len(doc.page_starts) == 2 and doc.page_starts[0] == 0
    first = doc.text[doc.page_starts[0] : doc.page_starts[1]]
    second = doc.text[doc.page_starts[1] :]
    assert "Hello first page" in first and "Second" not in first
    assert "Second page text" in second


def test_corrupt_pdf_raises_source_error() -> None:
    for junk in (b"this is not a pdf at all", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", b""):
        with pytest.raises(SourceError, match="PDF"):
            PdfReader().read(ref("/r/bad.pdf"), junk)


def test_truncated_pdf_raises_source_error() -> None:
    data = make_pdf(["some text"])
    with pytest.raises(SourceError):
        PdfReader().read(ref("/r/cut.pdf"), data[: len(data) // 3])


def test_encrypted_pdf_raises_source_error() -> None:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf(["secret text"]))))
    writer.encrypt(user_password="s3cret", owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(SourceError, match="encrypted PDF needs a password"):
        PdfReader().read(ref("/r/locked.pdf"), out.getvalue())


def test_pdf_text_cap() -> None:
    with pytest.raises(SourceError, match="exceeds 10 characters"):
        PdfReader(max_chars=10).read(ref(), make_pdf(["a fairly long line of text"]))
