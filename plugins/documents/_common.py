"""What every document reader shares: limits on what a file may unpack to, the install hint of a missing
library, Markdown text with sections, tables written as rows with their header, and HTML as Markdown.

Readers write Markdown (``#`` headings, ``- `` list items, table rows as ``Header: value; ...`` lines) and mark
the document ``markup="markdown"`` so the chunker keeps the heading path. A section (slide, sheet rows, message,
cell, chapter) starts on a line of its own after a blank line, so no paragraph straddles two sections.
"""

from __future__ import annotations

import importlib
import io
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from indexer.plugin_api import Document, Section, SourceError, SourceRef

# Decompressed size a container (zip: docx, pptx, xlsx, odt, ods, odp, epub) may reach: max_unpack_ratio times
# the file, at least MIN_UNPACKED_BYTES (a small file cannot be a bomb that matters), at most max_unpacked_bytes.
DEFAULT_MAX_UNPACKED_BYTES = 500 * 1024 * 1024
DEFAULT_MAX_UNPACK_RATIO = 50.0
MIN_UNPACKED_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_CHARS = 20_000_000  # extracted text per file
ROWS_PER_SECTION_CHARS = 480  # spreadsheet rows are grouped into sections of about this many characters


@dataclass(frozen=True)
class Limits:
    """A reader's bounds (settings ``max_unpacked_bytes``, ``max_unpack_ratio``; the source passes them)."""

    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
    max_unpack_ratio: float = DEFAULT_MAX_UNPACK_RATIO
    max_chars: int = DEFAULT_MAX_CHARS

    def unpacked_cap(self, packed: int) -> int:
        return int(min(self.max_unpacked_bytes, max(MIN_UNPACKED_BYTES, self.max_unpack_ratio * packed)))


class DocumentReader:
    """Base of the document readers: options (``with_options``), limits, and the ``isolated`` flag that makes
    the filesystem source parse in a worker process with a time and memory limit."""

    kind: str = ""
    extensions: tuple[str, ...] = ()
    isolated: bool = True
    options: Mapping[str, Any] = {}

    def __init__(self, limits: Limits | None = None, **options: Any) -> None:
        self.limits = limits or Limits()
        self.options = dict(options)

    def with_options(self, options: Mapping[str, Any]) -> DocumentReader:
        """A copy with limits (``max_unpacked_bytes``, ``max_unpack_ratio``, ``max_chars``) and this reader's own
        options (e.g. ``outputs`` for notebooks) set; unknown names raise ValueError naming the valid ones."""
        fields = {"max_unpacked_bytes", "max_unpack_ratio", "max_chars"}
        limits = replace(self.limits, **{k: v for k, v in options.items() if k in fields})
        own = {k: v for k, v in options.items() if k not in fields}
        unknown = sorted(set(own) - set(self.known_options()))
        if unknown:
            valid = ", ".join(sorted(set(self.known_options()) | fields))
            raise ValueError(f"unknown option(s) {', '.join(unknown)} for the {self.kind} reader; valid: {valid}")
        return type(self)(limits, **{**self.options, **own})

    def known_options(self) -> tuple[str, ...]:
        return ()

    def read(self, ref: SourceRef, data: bytes) -> Document:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def need(module: str, package: str, ref: SourceRef) -> ModuleType:
    """Import a parsing library, or fail the file with the command that installs it (code ``missing_library``:
    reported as skipped, never a crash)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SourceError(
            ref.path, f"reading this format needs {package}: pip install {package} ({exc})", code="missing_library"
        ) from None


def open_zip(ref: SourceRef, data: bytes, limits: Limits, what: str) -> zipfile.ZipFile:
    """The zip container of an Office, OpenDocument or EPUB file, checked before any parser sees it: a
    truncated or corrupt archive, an encrypted one, or one whose members would unpack past the cap (a zip bomb)
    raises SourceError. The sizes checked are those the archive declares; the parsers read through zipfile,
    which stops at a member's declared size, so a lying header cannot unpack more."""
    if data[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":  # OLE2: an encrypted (password-protected) Office file
        raise SourceError(ref.path, f"encrypted or legacy-format {what} (OLE container); decrypt it or save it "
                          "as a current Office file", code="encrypted")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise SourceError(ref.path, f"not a valid {what} (damaged or truncated zip: {exc})") from None
    cap = limits.unpacked_cap(len(data))
    total = 0
    for info in members:
        if info.flag_bits & 0x1:
            raise SourceError(ref.path, f"encrypted {what}; decrypt it first or exclude it", code="encrypted")
        total += info.file_size
        if total > cap:
            raise SourceError(
                ref.path,
                f"{what} would unpack to more than {cap} bytes ({len(data)} bytes packed; a zip bomb?); raise "
                "max_unpacked_bytes / max_unpack_ratio if the file is genuine",
            )
    return archive


class TextBuilder:
    """Markdown text with its sections, written in order."""

    def __init__(self, limits: Limits | None = None, ref: SourceRef | None = None) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.newlines = 0
        self.sections: list[Section] = []
        self.limits = limits or Limits()
        self.ref = ref

    def section(self, locator: str, fields: Iterable[tuple[str, str | int]] = (),
                metadata: Iterable[tuple[str, str | int]] = ()) -> None:  # fmt: skip
        """Start a section here (a blank line first, so no paragraph straddles it)."""
        self._paragraph_break()
        self.sections.append(Section(self.length, locator, tuple(fields), tuple(metadata)))

    def heading(self, level: int, title: str) -> None:
        title = " ".join(title.split())
        if title:
            self.block(f"{'#' * max(1, min(6, level))} {title}")

    def block(self, text: str) -> None:
        """A paragraph (blank lines around it); empty text adds nothing."""
        text = "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip("\n")
        if not text.strip():
            return
        self._paragraph_break()
        self._add(text)

    def line(self, text: str) -> None:
        """One line, in the current paragraph (list items, table rows)."""
        text = " ".join(text.split())
        if not text:
            return
        if self.parts and not self.parts[-1].endswith("\n"):
            self._add("\n")
        self._add(text)

    def end_paragraph(self) -> None:
        self._paragraph_break()

    def next_line(self) -> int:
        """The 1-based line number (in the document's text) of the next character written."""
        return self.newlines + 1

    def table(self, rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> None:
        """A table as lines a model can read: the header row, then each row as ``Header: value; ...``."""
        self._paragraph_break()
        for line in table_lines(rows, header):
            self.line(line)
        self._paragraph_break()

    def _paragraph_break(self) -> None:
        if not self.parts:
            return
        tail = self.parts[-1]
        if tail.endswith("\n\n"):
            return
        self._add("\n" if tail.endswith("\n") else "\n\n")

    def _add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)
        self.newlines += text.count("\n")
        if self.length > self.limits.max_chars and self.ref is not None:
            raise SourceError(self.ref.path, f"extracted text exceeds {self.limits.max_chars} characters (max_chars); "
                              "split or exclude the file")

    def document(
        self, ref: SourceRef, kind: str, metadata: Mapping[str, object] | None = None, notes: Sequence[str] = ()
    ) -> Document:
        text = "".join(self.parts).rstrip() + "\n" if self.parts else ""
        meta = tuple(
            (k, v if isinstance(v, int) else str(v)) for k, v in (metadata or {}).items() if v not in (None, "")
        )
        return Document(ref=ref, text=text, kind=kind, sections=tuple(self.sections), metadata=meta,
                        markup="markdown", notes=tuple(notes))


def table_lines(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> list[str]:
    """``rows`` (the first one is the header unless ``header`` is given) as lines: ``A | B | C`` for the header,
    then ``A: 1; B: 2; C: 3`` per row (empty cells left out), so every row carries its header into any chunk."""
    cleaned = [[" ".join(str(c).split()) for c in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    if not cleaned:
        return []
    if header is None:
        header, body = cleaned[0], cleaned[1:]
    else:
        header, body = [" ".join(str(h).split()) for h in header], cleaned
    out = [" | ".join(h for h in header if h)] if any(header) else []
    for row in body:
        cells = []
        for i, value in enumerate(row):
            if not value:
                continue
            name = header[i] if i < len(header) and header[i] else ""
            cells.append(f"{name}: {value}" if name else value)
        if cells:
            out.append("; ".join(cells))
    return out


def html_to_markdown(builder: TextBuilder, markup: str | bytes, heading_offset: int = 0) -> str:
    """Write an (X)HTML page into ``builder`` as Markdown (headings, paragraphs, list items, tables with their
    header); returns the first heading's text (a chapter title), or ""."""
    from bs4 import BeautifulSoup, NavigableString, Tag

    soup = BeautifulSoup(markup, "html.parser")
    for tag in soup(["script", "style", "head", "noscript", "template", "svg"]):
        tag.decompose()
    first = ""
    blocks = {"p", "div", "pre", "blockquote", "section", "article", "dd", "dt", "figcaption", "address"}

    def walk(node: Tag) -> None:
        nonlocal first
        for child in node.children:
            if isinstance(child, NavigableString):
                if str(child).strip() and node.name in ("body", "[document]"):
                    builder.block(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in ("h1", "h2", "h3", "h4", "h5", "h6"):
                title = child.get_text(" ")
                first = first or " ".join(title.split())
                builder.heading(int(name[1]) + heading_offset, title)
            elif name in ("ul", "ol"):
                builder.end_paragraph()
                for number, item in enumerate(child.find_all("li", recursive=False), start=1):
                    marker = f"{number}." if name == "ol" else "-"
                    builder.line(f"{marker} {item.get_text(' ')}")
                builder.end_paragraph()
            elif name == "table":
                rows = [[c.get_text(" ") for c in tr.find_all(["td", "th"])] for tr in child.find_all("tr")]
                builder.table(rows)
            elif name in blocks and not child.find(["h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "table", "p"]):
                builder.block(child.get_text(" ") if name != "pre" else child.get_text())
            else:
                walk(child)

    walk(soup.body or soup)
    return first
