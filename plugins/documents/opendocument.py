"""OpenDocument files (.odt text, .ods spreadsheet, .odp presentation), read from their ``content.xml`` and
``meta.xml`` with the standard library's zipfile and defusedxml (no entity expansion, no external entities).

- Text: headings (``text:h`` with its outline level) as Markdown headings, paragraphs, list items, tables as
  rows with their header, in document order. Metadata: title, author, created, modified.
- Spreadsheet: like Excel, rows in sections with their cell range (``Budget!A1:D3``).
- Presentation: one section per page (slide) with its title frame as heading, then the other frames, then the
  speaker notes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, Limits, TextBuilder, need, open_zip
from plugins.documents.office import write_sheet

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
}
MAX_REPEAT = 1024  # a repeated row or column counts this often at most (files repeat empty cells 16k times)


def _q(prefix: str, name: str) -> str:
    return f"{{{NS[prefix]}}}{name}"


def _text(node: Any) -> str:
    """The text of a paragraph-like element: spans, links and fields inline; ``text:s`` spaces, tabs, breaks."""
    parts: list[str] = [node.text or ""]
    for child in node:
        tag = child.tag
        if tag == _q("text", "s"):
            parts.append(" " * min(int(child.get(_q("text", "c"), "1") or 1), 64))
        elif tag == _q("text", "tab"):
            parts.append("\t")
        elif tag == _q("text", "line-break"):
            parts.append("\n")
        elif tag in (_q("text", "note"), _q("office", "annotation")):
            pass  # footnotes and comments are not the paragraph's text
        else:
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _parse(ref: SourceRef, data: bytes, limits: Limits, member: str, what: str) -> Any:
    defused = need("defusedxml.ElementTree", "defusedxml", ref)
    archive = open_zip(ref, data, limits, what)
    try:
        raw = archive.read(member)
    except KeyError:
        if member == "meta.xml":
            return None
        raise SourceError(ref.path, f"not a valid {what} (no {member})") from None
    except Exception as exc:
        raise SourceError(ref.path, f"damaged {what} ({type(exc).__name__}: {exc})") from None
    try:
        return defused.fromstring(raw)
    except Exception as exc:  # defusedxml's EntitiesForbidden, DTDForbidden, ParseError
        raise SourceError(ref.path, f"refused or broken XML in {member} of the {what} ({type(exc).__name__}: "
                          f"{exc})") from None


def _metadata(ref: SourceRef, data: bytes, limits: Limits, what: str) -> dict[str, object]:
    root = _parse(ref, data, limits, "meta.xml", what)
    out: dict[str, object] = {}
    if root is None:
        return out
    for name, tag in (("title", _q("dc", "title")), ("subject", _q("dc", "subject")),
                      ("author", _q("meta", "initial-creator")), ("author", _q("dc", "creator")),
                      ("created", _q("meta", "creation-date")), ("modified", _q("dc", "date"))):  # fmt: skip
        node = root.find(f".//{tag}")
        if node is not None and (node.text or "").strip() and name not in out:
            out[name] = node.text.strip()
    return out


def _table_rows(table: Any) -> Iterator[list[str]]:
    for row in table.iter(_q("table", "table-row")):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (_q("table", "table-cell"), _q("table", "covered-table-cell")):
                continue
            value = "\n".join(_text(p) for p in cell.iter(_q("text", "p")))
            repeat = min(int(cell.get(_q("table", "number-columns-repeated"), "1") or 1), MAX_REPEAT)
            cells.extend([value] * (repeat if value else min(repeat, 1)))
        while cells and not cells[-1]:
            cells.pop()
        repeat = min(int(row.get(_q("table", "number-rows-repeated"), "1") or 1), MAX_REPEAT)
        for _ in range(repeat if cells else 1):
            yield cells


def _flow(out: TextBuilder, node: Any) -> None:
    """Text content in document order: headings, paragraphs, lists, tables, sections."""
    for child in node:
        tag = child.tag
        if tag == _q("text", "h"):
            out.heading(int(child.get(_q("text", "outline-level"), "1") or 1), _text(child))
        elif tag == _q("text", "p"):
            out.block(_text(child))
        elif tag == _q("text", "list"):
            out.end_paragraph()
            for item in child.iter(_q("text", "list-item")):
                for p in item.findall(_q("text", "p")) + item.findall(_q("text", "h")):
                    out.line(f"- {_text(p)}")
            out.end_paragraph()
        elif tag == _q("table", "table"):
            out.table(list(_table_rows(child)))
        elif tag in (_q("text", "section"), _q("text", "soft-page-break"), _q("draw", "frame"), _q("draw", "text-box")):
            _flow(out, child)


class OdtReader(DocumentReader):
    kind = "odt"
    extensions = (".odt", ".ott")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        root = _parse(ref, data, self.limits, "content.xml", "OpenDocument text")
        out = TextBuilder(self.limits, ref)
        body = _office_body(root, ref, "text")
        _flow(out, body)
        return out.document(ref, self.kind, _metadata(ref, data, self.limits, "OpenDocument text"))


def _office_body(root: Any, ref: SourceRef, part: str) -> Any:
    """The ``office:body/office:<part>`` element, or a SourceError naming what the file is not."""
    body = root.find(f"{_q('office', 'body')}/{_q('office', part)}")
    if body is None:
        raise SourceError(ref.path, f"not an OpenDocument {part} (no office:{part} body)")
    return body


class OdsReader(DocumentReader):
    kind = "ods"
    extensions = (".ods", ".ots")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        root = _parse(ref, data, self.limits, "content.xml", "OpenDocument spreadsheet")
        out = TextBuilder(self.limits, ref)
        body = _office_body(root, ref, "spreadsheet")
        sheets = body.findall(_q("table", "table"))
        for sheet in sheets:
            rows = [(n, cells) for n, cells in enumerate(_table_rows(sheet), start=1)]
            width = max((len(c) for _, c in rows), default=0)
            write_sheet(out, sheet.get(_q("table", "name"), "Sheet"), rows, width)
        meta = _metadata(ref, data, self.limits, "OpenDocument spreadsheet") | {"sheets": len(sheets)}
        return out.document(ref, self.kind, meta)


class OdpReader(DocumentReader):
    kind = "odp"
    extensions = (".odp", ".otp")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        root = _parse(ref, data, self.limits, "content.xml", "OpenDocument presentation")
        out = TextBuilder(self.limits, ref)
        body = _office_body(root, ref, "presentation")
        pages = body.findall(_q("draw", "page"))
        for number, page in enumerate(pages, start=1):
            frames = page.findall(_q("draw", "frame"))
            title_frames = [f for f in frames if f.get(_q("presentation", "class")) == "title"]
            title = ""
            if title_frames:
                title = " ".join(" ".join(_text(p) for p in title_frames[0].iter(_q("text", "p"))).split())
            label = f"slide {number}: {title}" if title else f"slide {number}"
            out.section(label, (("slide", number), ("title", title)))
            if title:
                out.heading(2, title)
            for frame in frames:
                if frame in title_frames:
                    continue
                _flow(out, frame)
            notes = page.find(_q("presentation", "notes"))
            if notes is not None:
                text = " ".join(_text(p) for p in notes.iter(_q("text", "p"))).strip()
                if text:
                    out.block(f"Notes: {text}")
        meta = _metadata(ref, data, self.limits, "OpenDocument presentation") | {"slides": len(pages)}
        return out.document(ref, self.kind, meta)
