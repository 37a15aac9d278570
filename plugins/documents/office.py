"""Microsoft Office files: Word (.docx, python-docx), PowerPoint (.pptx, python-pptx), Excel (.xlsx, openpyxl).

- Word: the body in reading order, paragraphs and tables interleaved; ``Heading N`` / ``Title`` styles become
  Markdown headings (the hit's heading path), list paragraphs ``- `` items, tables rows with their header.
  Metadata: author, title, subject, created, modified.
- PowerPoint: one section per slide (``slide 3: Results``; fields ``slide``, ``title``), the title as a heading,
  text frames in shape order, tables, then the speaker notes.
- Excel: one sheet after another, rows grouped into sections with their cell range (``Sales!A1:D12``; fields
  ``sheet``, ``range``), each row written with the sheet's header row. Cached values of formulas are read
  (what Excel last computed), not the formulas.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from indexer.plugin_api import Document, SourceError, SourceRef
from indexer.plugin_api.parts import part_done
from plugins.documents._common import (
    ROWS_PER_SECTION_CHARS,
    DocumentReader,
    TextBuilder,
    need,
    open_zip,
    table_lines,
)


def _core_metadata(props: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, attr in (("author", "author"), ("title", "title"), ("subject", "subject"), ("created", "created"),
                       ("modified", "modified")):  # fmt: skip
        value = getattr(props, attr, None) or (getattr(props, "creator", None) if name == "author" else None)
        if value:
            out[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return out


class DocxReader(DocumentReader):
    kind = "docx"
    extensions = (".docx", ".docm")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        import io

        docx = need("docx", "python-docx", ref)
        open_zip(ref, data, self.limits, "Word document")
        try:
            d = docx.Document(io.BytesIO(data))
        except Exception as exc:
            raise SourceError(ref.path, f"cannot read the Word document ({type(exc).__name__}: {exc})") from None
        out = TextBuilder(self.limits, ref)
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        in_list = False
        for block in d.iter_inner_content():
            if isinstance(block, Paragraph):
                in_list = self._paragraph(out, block, in_list)
            elif isinstance(block, Table):
                out.table(_docx_rows(block))
                in_list = False
        return out.document(ref, self.kind, _core_metadata(d.core_properties))

    @staticmethod
    def _paragraph(out: TextBuilder, p: Any, in_list: bool) -> bool:
        """Write one paragraph; returns whether it was a list item."""
        text = p.text
        if not text.strip():
            return in_list
        style = (p.style.name if p.style is not None else "") or ""
        lowered = style.lower()
        if lowered == "title":
            out.heading(1, text)
        elif lowered.startswith("heading"):
            level = "".join(ch for ch in style if ch.isdigit())
            out.heading(int(level) if level else 1, text)
        elif "list" in lowered or p._p.pPr is not None and p._p.pPr.numPr is not None:
            if not in_list:
                out.end_paragraph()
            out.line(f"{'1.' if 'number' in lowered else '-'} {text}")
            return True
        else:
            out.block(text)
        return False


def _docx_rows(table: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:  # a merged cell appears once per grid column it spans: keep it once
            if previous is not None and cell._tc is previous:
                cells.append("")
                continue
            previous = cell._tc
            cells.append(cell.text)
        rows.append(cells)
    return rows


class PptxReader(DocumentReader):
    kind = "pptx"
    extensions = (".pptx", ".pptm")

    def known_options(self) -> tuple[str, ...]:
        return ("notes",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        import io

        pptx = need("pptx", "python-pptx", ref)
        open_zip(ref, data, self.limits, "PowerPoint file")
        try:
            prs = pptx.Presentation(io.BytesIO(data))
        except Exception as exc:
            raise SourceError(ref.path, f"cannot read the PowerPoint file ({type(exc).__name__}: {exc})") from None
        with_notes = bool(self.options.get("notes", True))
        out = TextBuilder(self.limits, ref)
        for number, slide in enumerate(prs.slides, start=1):
            title_shape = slide.shapes.title
            title = " ".join((title_shape.text_frame.text if title_shape is not None else "").split())
            label = f"slide {number}: {title}" if title else f"slide {number}"
            out.section(label, (("slide", number), ("title", title)))
            if title:
                out.heading(2, title)
            for shape in _shapes(slide.shapes):
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                if getattr(shape, "has_table", False) and shape.has_table:
                    out.table([[cell.text for cell in row.cells] for row in shape.table.rows])
                elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                    for paragraph in shape.text_frame.paragraphs:
                        out.line(("- " if paragraph.level else "") + paragraph.text)
                    out.end_paragraph()
            if with_notes and slide.has_notes_slide:
                notes = slide.notes_slide.notes_text_frame.text if slide.notes_slide.notes_text_frame else ""
                if notes.strip():
                    out.block(f"Notes: {notes}")
        return out.document(ref, self.kind, _core_metadata(prs.core_properties) | {"slides": len(prs.slides)})


def _shapes(shapes: Any) -> Iterator[Any]:
    """Shapes in order, group shapes opened (reading order as the slide lists them: top to bottom as authored)."""
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6 and hasattr(shape, "shapes"):  # MSO_SHAPE_TYPE.GROUP
            yield from _shapes(shape.shapes)
        else:
            yield shape


def column_letter(index: int) -> str:
    """1 -> A, 27 -> AA."""
    letters = ""
    while index > 0:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _is_number(value: str) -> bool:
    try:
        float(value.replace(",", ""))
    except ValueError:
        return False
    return True


MAX_ROWS = 1_048_576  # rows per sheet (Excel's own limit): reader option max_rows
ROWS_PER_PART = 1_000  # a block of rows is a part: a heartbeat to the parse worker's stall limit


def rows_note(cap: int, total: int, sheet: str, kind: str) -> str:
    """The note for a sheet with more rows than ``max_rows``."""
    where = f"sheet {sheet!r}: " if sheet else ""
    return (f"{where}only the first {cap:,} of {total:,} rows were read (max_rows; raise reader_options "
            f"{kind}.max_rows)")


class XlsxReader(DocumentReader):
    kind = "xlsx"
    extensions = (".xlsx", ".xlsm")

    def known_options(self) -> tuple[str, ...]:
        return ("max_rows",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        import io

        openpyxl = need("openpyxl", "openpyxl", ref)
        open_zip(ref, data, self.limits, "Excel workbook")
        try:
            wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        except Exception as exc:
            raise SourceError(ref.path, f"cannot read the Excel workbook ({type(exc).__name__}: {exc})") from None
        out = TextBuilder(self.limits, ref)
        cap, notes = int(self.options.get("max_rows", MAX_ROWS)), []
        try:
            for ws in wb.worksheets:
                rows, width, total = _sheet_rows(ws, cap)
                if total > cap:
                    notes.append(rows_note(cap, total, ws.title, self.kind))
                write_sheet(out, ws.title, rows, width)
            meta = _core_metadata(wb.properties) | {"sheets": len(wb.worksheets)}
        finally:
            wb.close()
        return out.document(ref, self.kind, meta, notes)


def _sheet_rows(ws: Any, cap: int) -> tuple[list[tuple[int, list[str]]], int, int]:
    """A sheet's non-empty rows (``(row number, cells)``, at most ``cap``), its width, and how many it has."""
    rows: list[tuple[int, list[str]]] = []
    width = total = 0
    first_row = ws.min_row or 1  # values_only rows come one per row number from the first
    for number, values in enumerate(ws.iter_rows(values_only=True), start=first_row):
        if number % ROWS_PER_PART == 0:
            part_done()
        cells = [_cell_text(v) for v in values]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        total += 1
        if total <= cap:
            rows.append((number, cells))
            width = max(width, len(cells))
    return rows, width, total


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def compact_numbers(numbers: Sequence[int]) -> str:
    """``[2, 3, 4, 7]`` -> ``"2-4,7"`` (read back by :func:`indexer.search.rows.expand_numbers`)."""
    out: list[str] = []
    for n in numbers:
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == n - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        elif out and "-" not in out[-1] and int(out[-1]) == n - 1:
            out[-1] = f"{out[-1]}-{n}"
        else:
            out.append(str(n))
    return ",".join(out)


def write_sheet(out: TextBuilder, sheet: str, rows: Sequence[tuple[int, Sequence[str]]], width: int) -> None:
    """Write one sheet: rows (``(row number, cells)``) grouped into sections of about ROWS_PER_SECTION_CHARS
    characters with their cell range (``Sales!A2:D9``), every row written with the sheet's header row (the
    first non-empty row when none of its cells is a number; else column letters)."""
    kept = [(n, list(cells)) for n, cells in rows if any(cells)]
    if not kept:
        return
    first = [c for c in kept[0][1] if c]
    has_header = len(kept) > 1 and not any(_is_number(c) for c in first)
    header = kept[0][1] if has_header else [column_letter(i + 1) for i in range(width)]
    body = kept[1:] if has_header else kept
    last_col = column_letter(max(1, width))
    groups: list[tuple[int, int, list[str], list[int]]] = []
    for number, cells in body:
        lines = table_lines([cells], header)
        line = lines[-1] if lines else ""
        if not line:
            continue
        if groups and sum(len(x) for x in groups[-1][2]) + len(line) <= ROWS_PER_SECTION_CHARS:
            start, _, lines, numbers = groups[-1]
            groups[-1] = (start, number, [*lines, line], [*numbers, number])
        else:
            groups.append((number, number, [line], [number]))
    if not groups:  # a header row alone
        groups = [(kept[0][0], kept[0][0], [], [])]
    for index, (start, end, lines, numbers) in enumerate(groups):
        top = kept[0][0] if index == 0 and has_header else start
        cell_range = f"A{top}:{last_col}{end}"
        out.end_paragraph()
        # where each row's line is, so a hit names the rows it matched (indexer.search.rows)
        first_row_line = out.next_line() + (1 if sheet else 0) + (1 if has_header else 0)
        rows_at = (("row_numbers", compact_numbers(numbers)), ("first_row_line", first_row_line))
        if sheet:
            out.section(f"{sheet}!{cell_range}", (("sheet", sheet), ("range", cell_range), *rows_at))
            out.heading(2, sheet)
        else:  # a CSV file: one sheet without a name
            out.section(f"rows {top}-{end} ({cell_range})", (("range", cell_range), *rows_at))
        if has_header:
            out.line(" | ".join(h for h in header if h))
        for line in lines:
            out.line(line)
        out.end_paragraph()
