"""Real documents written by the real libraries (python-docx, python-pptx, openpyxl, odfpy, ebooklib, the standard
library's email and mailbox), for the reader tests and ``bench/formats.py``.

Every sample holds phrases only it contains (``UNIQUE[kind]``) at a known place (the expected locator), plus a
heading, a list and a table, so a reader's fidelity can be checked: headings kept as headings, the table's rows
with their header, list items in reading order.
"""

from __future__ import annotations

import csv
import io
import json
import mailbox
import os
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

# A phrase per sample that no other sample contains, and where it must be found.
UNIQUE = {
    "docx": "marmalade turbines hum",
    "pptx": "octopus ledger reconciled",
    "xlsx": "zircon invoice",
    "csv": "quokka shipment",
    "odt": "lavender anvil protocol",
    "ods": "tangerine voltage",
    "odp": "basalt choir rehearsal",
    "epub": "saffron lighthouse keeper",
    "rtf": "cobalt meadow whistle",
    "eml": "periwinkle audit deadline",
    "mbox": "walrus budget approval",
    "ipynb": "heliotrope regression slope",
}
TABLE_HEADER = ("Region", "Owner", "Revenue")
TABLE_ROWS = (("North", "Ada", "1200"), ("South", "Grace", "950"))


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.author = "Ada Lovelace"
    d.core_properties.title = "Turbine report"
    d.add_heading("Turbine report", level=1)
    d.add_paragraph("An introduction paragraph about the plant.")
    d.add_heading("Maintenance", level=2)
    d.add_paragraph(f"During the night the {UNIQUE['docx']} loudly.")
    d.add_paragraph("first checklist item", style="List Bullet")
    d.add_paragraph("second checklist item", style="List Bullet")
    table = d.add_table(rows=1, cols=3)
    for cell, name in zip(table.rows[0].cells, TABLE_HEADER, strict=True):
        cell.text = name
    for row in TABLE_ROWS:
        cells = table.add_row().cells
        for cell, value in zip(cells, row, strict=True):
            cell.text = value
    d.add_heading("Appendix", level=2)
    d.add_paragraph("Closing words.")
    d.save(path)
    return path


def make_pptx(path: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    prs.core_properties.author = "Grace Hopper"
    layout = prs.slide_layouts[1]  # title and content
    s1 = prs.slides.add_slide(layout)
    s1.shapes.title.text = "Opening"
    s1.placeholders[1].text = "Welcome to the quarterly review."
    s2 = prs.slides.add_slide(layout)
    s2.shapes.title.text = "Quarterly results"
    s2.placeholders[1].text = f"The {UNIQUE['pptx']} at last."
    s2.notes_slide.notes_text_frame.text = "Speaker notes: mention the auditors."
    s3 = prs.slides.add_slide(prs.slide_layouts[5])  # title only
    s3.shapes.title.text = "Regions"
    shape = s3.shapes.add_table(3, 3, Inches(1), Inches(2), Inches(6), Inches(2))
    for c, name in enumerate(TABLE_HEADER):
        shape.table.cell(0, c).text = name
    for r, row in enumerate(TABLE_ROWS, start=1):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    prs.save(path)
    return path


def make_xlsx(path: Path) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws.append(["Overview"])
    ws.append(["Everything is on track."])
    sales = wb.create_sheet("Sales")
    sales.append(list(TABLE_HEADER) + ["Note"])
    sales.append(list(TABLE_ROWS[0]) + ["regular"])
    sales.append(list(TABLE_ROWS[1]) + [UNIQUE["xlsx"]])
    sales.append(["West", "Linus", 700, "=C2+C3"])
    wb.properties.creator = "Linus Torvalds"
    wb.save(path)
    return path


def make_csv(path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(TABLE_HEADER + ("Note",))
        writer.writerow(TABLE_ROWS[0] + ("regular",))
        writer.writerow(TABLE_ROWS[1] + (UNIQUE["csv"],))
    return path


def make_odt(path: Path) -> Path:
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, List, ListItem, P

    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.styles.addElement(bold)
    doc.text.addElement(H(outlinelevel=1, text="Anvil manual"))
    doc.text.addElement(P(text="How to hold the hammer."))
    doc.text.addElement(H(outlinelevel=2, text="Safety"))
    doc.text.addElement(P(text=f"Always follow the {UNIQUE['odt']} before striking."))
    items = List()
    for word in ("goggles", "gloves"):
        item = ListItem()
        item.addElement(P(text=word))
        items.addElement(item)
    doc.text.addElement(items)
    table = Table(name="Owners")
    table.addElement(TableColumn(numbercolumnsrepeated=3))
    for row in (TABLE_HEADER, *TABLE_ROWS):
        tr = TableRow()
        for value in row:
            cell = TableCell()
            cell.addElement(P(text=value))
            tr.addElement(cell)
        table.addElement(tr)
    doc.text.addElement(table)
    doc.save(str(path))
    return path


def make_ods(path: Path) -> Path:
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    for name, rows in (
        ("Intro", [("Read me first",)]),
        ("Budget", [(*TABLE_HEADER, "Note"), (*TABLE_ROWS[0], "regular"), (*TABLE_ROWS[1], UNIQUE["ods"])]),
    ):
        table = Table(name=name)
        for row in rows:
            tr = TableRow()
            for value in row:
                is_number = value.isdigit()
                cell = TableCell(valuetype="float", value=value) if is_number else TableCell(valuetype="string")
                cell.addElement(P(text=value))
                tr.addElement(cell)
            table.addElement(tr)
        doc.spreadsheet.addElement(table)
    doc.save(str(path))
    return path


def make_odp(path: Path) -> Path:
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    for title, body in (("Welcome", "An opening slide."), ("Choir", f"The {UNIQUE['odp']} is on Friday.")):
        page = Page(masterpagename=master, name=title)
        for presentation_class, text in (("title", title), ("outline", body)):
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", presentation_class)
            box = TextBox()
            box.addElement(P(text=text))
            frame.addElement(box)
            page.addElement(frame)
        doc.presentation.addElement(page)
    doc.save(str(path))
    return path


def make_epub(path: Path) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("indexer-test-book")
    book.set_title("The Lighthouse")
    book.set_language("en")
    book.add_author("Mary Shelley")
    chapters = []
    for number, (title, body) in enumerate(
        (("Arrival", "The ship came in at dawn."), ("The keeper", f"Meet the {UNIQUE['epub']} and his lamp.")),
        start=1,
    ):
        chapter = epub.EpubHtml(title=title, file_name=f"chap_{number}.xhtml", lang="en")
        chapter.content = f"<html><body><h1>{title}</h1><p>{body}</p><ul><li>oil</li><li>wick</li></ul></body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = tuple(chapters)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)
    return path


def make_rtf(path: Path) -> Path:
    text = (
        r"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}{\info{\title Meadow notes}{\author Jane Austen}}"
        "\n" r"\pard\b Meadow notes\b0\par" "\n"
        rf"\pard In spring the {UNIQUE['rtf']} is heard across the fields.\par" "\n"
        r"\pard Caf\'e9 au lait.\par}"
    )  # fmt: skip
    path.write_text(text, encoding="ascii")
    return path


def _message(subject: str, sender: str, body: str, day: int) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = "team@example.org"
    msg["Date"] = format_datetime(datetime(2026, 3, day, 9, 30, tzinfo=timezone.utc))
    msg.set_content(body)
    msg.add_alternative(f"<html><body><p>{body}</p></body></html>", subtype="html")
    return msg


def make_eml(path: Path) -> Path:
    msg = _message("Audit", "Ada Lovelace <ada@example.org>", f"Remember the {UNIQUE['eml']} on Monday.", 2)
    path.write_bytes(msg.as_bytes())
    return path


def make_mbox(path: Path) -> Path:
    box = mailbox.mbox(str(path))
    box.add(_message("Lunch", "Grace Hopper <grace@example.org>", "Shall we have lunch on Tuesday?", 3))
    box.add(_message("Budget", "Linus Torvalds <linus@example.org>", f"The {UNIQUE['mbox']} came through.", 4))
    box.flush()
    box.close()
    return path


def make_ipynb(path: Path) -> Path:
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "markdown", "id": "a1", "metadata": {}, "source": ["# Analysis\n", "We fit a line."]},
            {
                "cell_type": "code", "id": "a2", "metadata": {}, "execution_count": 1,
                "source": ["import numpy as np\n", "slope = np.polyfit([1, 2], [2, 4], 1)[0]\n", "print(slope)"],
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["2.0\n"]}],
            },
            {
                "cell_type": "code", "id": "a3", "metadata": {}, "execution_count": 2, "source": ["slope * 3"],
                "outputs": [{
                    "output_type": "execute_result", "execution_count": 2, "metadata": {},
                    "data": {"text/plain": [f"'{UNIQUE['ipynb']} is 6.0'"], "image/png": "iVBORw0KGgo="},
                }],
            },
        ],
    }  # fmt: skip
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path


MAKERS = {
    "docx": make_docx, "pptx": make_pptx, "xlsx": make_xlsx, "csv": make_csv, "odt": make_odt, "ods": make_ods,
    "odp": make_odp, "epub": make_epub, "rtf": make_rtf, "eml": make_eml, "mbox": make_mbox, "ipynb": make_ipynb,
}  # fmt: skip


def make_all(folder: Path) -> dict[str, Path]:
    """One sample of every format in ``folder`` (``sample.<ext>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    return {ext: make(folder / f"sample.{ext}") for ext, make in MAKERS.items()}


# -- scanned pages: text rendered into images, as a scanner would give them -----------------------------------
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
PAGE_TEXT = (
    "The committee met on Tuesday to review the annual maintenance budget.",
    "Every pump in the eastern station was inspected and two were replaced.",
    "The new schedule moves the audit of the filters to the first week of May.",
    "Questions about the report should be sent to the operations office.",
)


def render_page(lines: tuple[str, ...] | list[str], dpi: int = 200, points: float = 12.0):  # -> PIL.Image.Image
    """An A4 page at ``dpi`` with ``lines`` in black on white (a clean scan)."""
    from PIL import Image, ImageDraw, ImageFont

    width, height = int(8.27 * dpi), int(11.69 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    size = int(points / 72 * dpi)
    font = ImageFont.truetype(FONT, size) if Path(FONT).exists() else ImageFont.load_default(size)
    y = dpi  # one-inch margin
    for line in lines:
        draw.text((dpi, y), line, fill=0, font=font)
        y += int(size * 1.6)
    return image


def make_scanned_pdf(path: Path, pages: list[list[str]], dpi: int = 200) -> Path:
    """A PDF whose pages are images only (no text layer), like a scanner's."""
    images = [render_page(lines, dpi).convert("RGB") for lines in pages]
    images[0].save(path, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return path


HOSTILE_LAUGHS = (
    '<!DOCTYPE w:document [<!ENTITY lol "lollollollollollollollollollol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]>"
)


def hostile_files(folder: Path) -> dict[str, bytes]:
    """The three files of issue 31's item 6, as bytes (made once, copied under fresh names per edit)."""
    from docx import Document

    out: dict[str, bytes] = {"png": b"\x89PNG\r\n\x1a\n" + os.urandom(4096)}  # a PNG signature, then garbage
    pdf = folder / "poster.pdf"
    # one 20,000 x 20,000 image, made in a child (400 MB of pixels that must not count in this process's peak)
    code = ("import sys; from PIL import Image; "
            "Image.new('L', (20_000, 20_000), 255).save(sys.argv[1], 'PDF', resolution=600)")  # fmt: skip
    subprocess.run([sys.executable, "-c", code, str(pdf)], check=True)
    out["pdf"] = pdf.read_bytes()
    pdf.unlink()
    plain = folder / "plain.docx"
    doc = Document()
    doc.add_paragraph("Closing words.")
    doc.save(str(plain))
    with zipfile.ZipFile(plain) as src:
        body = src.read("word/document.xml").decode()
        end = body.index("?>") + 2
        body = body[:end] + HOSTILE_LAUGHS + body[end:].replace("Closing words.", "&lol9;", 1)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                data = body.encode() if info.filename == "word/document.xml" else src.read(info.filename)
                dst.writestr(info, data)
    out["docx"] = buf.getvalue()
    plain.unlink()
    return out
