"""The document readers on real files written by the formats' own libraries (tests/documents.py): the text
(headings kept as headings, list items, tables as rows with their header, reading order), where each part lies
(sections: slides, sheet ranges, messages, cells, chapters), metadata, options, and hostile input."""

from __future__ import annotations

import sys
import time
import zipfile
from pathlib import Path

import pytest

from indexer.errors import SourceError
from indexer.index.chunking import TokenChunker
from indexer.types import Document, SourceRef
from plugins.documents._common import Limits
from plugins.documents.ebook import EpubReader
from plugins.documents.mail import MailReader
from plugins.documents.notebook import NotebookReader
from plugins.documents.office import DocxReader, PptxReader, XlsxReader
from plugins.documents.opendocument import OdpReader, OdsReader, OdtReader
from plugins.documents.rtf import RtfReader
from plugins.documents.tables import CsvReader
from plugins.filesystem.isolation import ParseWorker
from tests.documents import UNIQUE, make_all
from tests.unit.test_chunking import WordCounter

READERS = {
    "docx": DocxReader, "pptx": PptxReader, "xlsx": XlsxReader, "csv": CsvReader, "odt": OdtReader,
    "ods": OdsReader, "odp": OdpReader, "epub": EpubReader, "rtf": RtfReader, "eml": MailReader,
    "mbox": MailReader, "ipynb": NotebookReader,
}  # fmt: skip

# Where the unique phrase of each sample lies: (heading path, locator) of the chunk holding it.
WHERE = {
    "docx": (("Turbine report", "Maintenance"), ""),
    "pptx": (("Quarterly results",), "slide 2: Quarterly results"),
    "xlsx": (("Sales",), "Sales!A1:D4"),
    "csv": ((), "rows 1-3 (A1:D3)"),
    "odt": (("Anvil manual", "Safety"), ""),
    "ods": (("Budget",), "Budget!A1:D3"),
    "odp": (("Choir",), "slide 2: Choir"),
    "epub": (("The keeper",), "chapter 2: The keeper"),
    "rtf": ((), ""),
    "eml": (("Audit",), "message 1: Audit — Ada Lovelace <ada@example.org>, 2026-03-02"),
    "mbox": (("Budget",), "message 2: Budget — Linus Torvalds <linus@example.org>, 2026-03-04"),
    "ipynb": ((), "cell 3 (code)"),
}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> dict[str, Path]:
    return make_all(tmp_path_factory.mktemp("samples"))


def read(reader, path: Path, data: bytes | None = None) -> Document:
    data = path.read_bytes() if data is None else data
    return reader.read(SourceRef(str(path.parent), str(path), len(data), 0), data)


@pytest.mark.parametrize("ext", sorted(READERS))
def test_every_format_is_read_and_its_phrase_found_where_it_lies(samples, ext):
    doc = read(READERS[ext](), samples[ext])
    assert UNIQUE[ext] in doc.text
    assert doc.kind == READERS[ext].kind
    chunks = list(TokenChunker(WordCounter(64), overlap_tokens=8).chunk(doc))
    hit = next(c for c in chunks if UNIQUE[ext] in c.text)
    assert (hit.heading, hit.locator) == WHERE[ext]
    starts = [len(doc.text[: s.start].encode()) for s in doc.sections]  # section starts as byte offsets
    for chunk in chunks:  # no chunk crosses a section (slide, sheet range, message, cell, chapter)
        assert not [s for s in starts if chunk.start_byte < s < chunk.end_byte], f"{chunk.text!r} crosses a section"


def test_word_keeps_headings_lists_tables_and_order(samples):
    doc = read(DocxReader(), samples["docx"])
    text = doc.text
    order = ["# Turbine report", "## Maintenance", "- first checklist item", "- second checklist item",
             "Region | Owner | Revenue", "Region: North; Owner: Ada; Revenue: 1200", "## Appendix", "Closing words."]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)
    assert dict(doc.metadata)["author"] == "Ada Lovelace" and dict(doc.metadata)["title"] == "Turbine report"
    assert doc.markup == "markdown"


def test_powerpoint_slides_are_sections_with_title_table_and_notes(samples):
    doc = read(PptxReader(), samples["pptx"])
    assert [s.locator for s in doc.sections] == ["slide 1: Opening", "slide 2: Quarterly results", "slide 3: Regions"]
    assert dict(doc.sections[1].fields) == {"slide": 2, "title": "Quarterly results"}
    slide2 = doc.text[doc.sections[1].start : doc.sections[2].start]
    assert "Notes: Speaker notes: mention the auditors." in slide2  # notes stay with their slide
    assert "Region: South; Owner: Grace; Revenue: 950" in doc.text[doc.sections[2].start :]
    without = read(PptxReader().with_options({"notes": False}), samples["pptx"])
    assert "auditors" not in without.text


def test_spreadsheet_rows_carry_their_header_and_cell_range(samples):
    doc = read(XlsxReader(), samples["xlsx"])
    assert [s.locator for s in doc.sections] == ["Summary!A1:A2", "Sales!A1:D4"]
    assert "Region: South; Owner: Grace; Revenue: 950; Note: zircon invoice" in doc.text
    fields = dict(doc.sections[1].fields)
    assert {k: fields[k] for k in ("sheet", "range", "row_numbers")} == {"sheet": "Sales", "range": "A1:D4",
                                                                         "row_numbers": "2-4"}
    lines = doc.text.split("\n")  # the row map points at the rows' lines (a hit names the rows it matched)
    assert lines[fields["first_row_line"] - 1].startswith("Region: North;")
    assert lines[fields["first_row_line"]].endswith("Note: zircon invoice")
    ods = read(OdsReader(), samples["ods"])
    assert "Region: South; Owner: Grace; Revenue: 950; Note: tangerine voltage" in ods.text


def test_large_sheets_are_cut_into_row_ranges(tmp_path):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Log"
    ws.append(["Day", "Event"])
    for day in range(1, 201):
        ws.append([day, f"event number {day} happened"])
    wb.save(tmp_path / "log.xlsx")
    doc = read(XlsxReader(), tmp_path / "log.xlsx")
    ranges = [dict(s.fields)["range"] for s in doc.sections]
    assert len(ranges) > 5 and ranges[0].startswith("A1:B") and ranges[-1].endswith(":B201")
    section = next(s for s in doc.sections if "event number 150 happened" in doc.text[s.start :].split("\n\n## ")[0])
    first, last = (int(x[1:]) for x in dict(section.fields)["range"].split(":"))
    assert first <= 151 <= last  # row 151 holds day 150 (row 1 is the header)


def test_opendocument_text_and_presentation(samples):
    odt = read(OdtReader(), samples["odt"])
    for part in ("# Anvil manual", "## Safety", "- goggles", "Region: North; Owner: Ada; Revenue: 1200"):
        assert part in odt.text
    odp = read(OdpReader(), samples["odp"])
    assert [s.locator for s in odp.sections] == ["slide 1: Welcome", "slide 2: Choir"]


def test_epub_chapters_in_spine_order_with_book_metadata(samples):
    doc = read(EpubReader(), samples["epub"])
    assert [s.locator for s in doc.sections] == ["chapter 1: Arrival", "chapter 2: The keeper"]
    assert "Arrival" not in doc.text[doc.sections[1].start :]  # the navigation page is not read as a chapter
    meta = dict(doc.metadata)
    assert meta["title"] == "The Lighthouse" and meta["author"] == "Mary Shelley"


def test_rtf_text_and_info(samples):
    doc = read(RtfReader(), samples["rtf"])
    assert "Café au lait." in doc.text and "\\par" not in doc.text
    assert dict(doc.metadata) == {"title": "Meadow notes", "author": "Jane Austen"}


def test_mail_messages_are_sections_with_their_headers_as_metadata(samples):
    doc = read(MailReader(), samples["mbox"])
    assert len(doc.sections) == 2
    budget = doc.sections[1]
    meta = dict(budget.metadata)
    assert meta["subject"] == "Budget" and "linus@example.org" in meta["sender"]
    assert meta["date"] == "2026-03-04T09:30:00+00:00"
    chunks = list(TokenChunker(WordCounter(64), overlap_tokens=8).chunk(doc))
    hit = next(c for c in chunks if UNIQUE["mbox"] in c.text)
    assert dict(hit.metadata)["sender"] == "Linus Torvalds <linus@example.org>"
    assert "<html>" not in doc.text  # the plain part is read, the HTML alternative is not repeated


def test_notebook_cells_outputs_by_default_and_optionally_not(samples):
    doc = read(NotebookReader(), samples["ipynb"])
    assert "```python\nimport numpy as np" in doc.text and "# Analysis" in doc.text
    assert "Output:\n2.0" in doc.text and UNIQUE["ipynb"] in doc.text
    assert "iVBOR" not in doc.text  # images are left out
    quiet = read(NotebookReader().with_options({"outputs": False}), samples["ipynb"])
    assert UNIQUE["ipynb"] not in quiet.text and "slope * 3" in quiet.text
    with pytest.raises(ValueError, match="outputs"):
        NotebookReader().with_options({"output": False})


# -- hostile and broken input ----------------------------------------------------------------------------------


def test_truncated_container_fails_with_a_reason(samples):
    data = samples["docx"].read_bytes()
    with pytest.raises(SourceError, match="damaged or truncated"):
        read(DocxReader(), samples["docx"], data[: len(data) // 2])


def _bomb(path: Path, member: str, size: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open(member, "w") as handle:
        block = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            handle.write(block)
    return path


@pytest.mark.parametrize(("reader", "member"), [(DocxReader, "word/document.xml"), (OdtReader, "content.xml"),
                                                (EpubReader, "META-INF/container.xml")])  # fmt: skip
def test_zip_bomb_is_refused_before_unpacking(tmp_path, reader, member):
    path = _bomb(tmp_path / f"bomb{reader.extensions[0]}", member, 64 << 20)
    assert path.stat().st_size < 200_000
    started = time.perf_counter()
    with pytest.raises(SourceError, match="zip bomb"):
        read(reader(), path)
    assert time.perf_counter() - started < 2


def test_unpack_limits_are_configurable(samples):
    tight = DocxReader().with_options({"max_unpacked_bytes": 1000})
    with pytest.raises(SourceError, match="max_unpacked_bytes"):
        read(tight, samples["docx"])
    assert tight.limits.unpacked_cap(10) == 1000 and Limits().unpacked_cap(10) == 16 * 1024 * 1024


LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]>"
)


def _with_member(source: Path, target: Path, member: str, content: bytes) -> Path:
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info, content if info.filename == member else src.read(info.filename))
    return target


def test_xml_entity_expansion_is_refused(samples, tmp_path):
    body = (LAUGHS.replace("lolz", "office:document-content") + '<office:document-content xmlns:office='
            '"urn:oasis:names:tc:opendocument:xmlns:office:1.0"><office:body><office:text>&lol9;</office:text>'
            "</office:body></office:document-content>").encode()  # fmt: skip
    path = _with_member(samples["odt"], tmp_path / "laughs.odt", "content.xml", body)
    started = time.perf_counter()
    with pytest.raises(SourceError, match="refused or broken XML"):
        read(OdtReader(), path)
    assert time.perf_counter() - started < 2


def test_entity_expansion_in_word_is_refused(samples, tmp_path):
    original = zipfile.ZipFile(samples["docx"]).read("word/document.xml").decode()
    declaration_end = original.index("?>") + 2
    body = original[:declaration_end] + LAUGHS.replace("lolz", "w:document")[len('<?xml version="1.0"?>') :]
    body += original[declaration_end:].replace("Closing words.", "&lol9;", 1)
    path = _with_member(samples["docx"], tmp_path / "laughs.docx", "word/document.xml", body.encode())
    started = time.perf_counter()
    with pytest.raises(SourceError, match="amplification|entit"):  # libxml2 refuses it (python-docx uses lxml)
        read(DocxReader(), path)
    assert time.perf_counter() - started < 5


def test_encrypted_office_file_is_reported_as_such(tmp_path):
    path = tmp_path / "secret.docx"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 4096)  # how Office stores a protected file
    with pytest.raises(SourceError, match="encrypted") as info:
        read(DocxReader(), path)
    assert info.value.code == "encrypted"


def test_missing_library_names_the_install_command(samples, monkeypatch):
    monkeypatch.setitem(sys.modules, "docx", None)  # import docx now raises ImportError
    with pytest.raises(SourceError, match="pip install python-docx") as info:
        read(DocxReader(), samples["docx"])
    assert info.value.code == "missing_library"


def test_broken_notebook_and_mail_fail_with_reasons(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    with pytest.raises(SourceError, match="not a valid notebook"):
        read(NotebookReader(), bad)
    empty = tmp_path / "empty.mbox"
    empty.write_text("\n\n")
    with pytest.raises(SourceError, match="no e-mail message"):
        read(MailReader(), empty)


# -- the parse worker: time and memory limits ------------------------------------------------------------------


class SlowReader:
    kind = "slow"
    extensions = (".slow",)
    isolated = True

    def read(self, ref: SourceRef, data: bytes) -> Document:
        if data == b"hang":
            time.sleep(60)
        if data == b"hog":
            hog = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB
            return Document(ref=ref, text=str(len(hog)), kind=self.kind)
        return Document(ref=ref, text=data.decode(), kind=self.kind)


def _reads_then_stops_a_hang(worker: ParseWorker, ref: SourceRef) -> None:
    """A file that parses at once is read; a parse that hangs is stopped at the limit (well within 10 s)."""
    assert worker.read(SlowReader(), ref, b"fine").text == "fine"
    started = time.perf_counter()
    with pytest.raises(SourceError, match="parse_timeout"):
        worker.read(SlowReader(), ref, b"hang")
    assert time.perf_counter() - started < 10


def test_the_worker_stops_a_parse_that_runs_too_long_and_goes_on():
    worker = ParseWorker(timeout=2.0, memory_mb=512)
    ref = SourceRef("/r", "/r/x.slow", 4, 0)
    try:
        _reads_then_stops_a_hang(worker, ref)
        assert worker.read(SlowReader(), ref, b"next").text == "next"  # a fresh worker took over
        with pytest.raises(SourceError, match="memory"):
            worker.read(SlowReader(), ref, b"hog")
        assert worker.read(SlowReader(), ref, b"after").text == "after"
    finally:
        worker.close()


def test_a_slow_start_of_the_worker_is_not_counted_as_the_parse(tmp_path, monkeypatch):
    """A loaded machine starts the worker's interpreter slowly (here a ``sitecustomize`` that sleeps 1.5 s at its
    start, on the path the worker inherits): the parse's 1 s limit starts once the job is loaded, so a file that
    parses at once is read, and a parse that hangs is still stopped at its limit."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(1.5)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    worker = ParseWorker(timeout=1.0, memory_mb=512)
    try:
        _reads_then_stops_a_hang(worker, SourceRef("/r", "/r/x.slow", 4, 0))
    finally:
        worker.close()


def test_worker_results_equal_in_process_results(samples):
    worker = ParseWorker(timeout=30.0)
    try:
        for ext in ("docx", "pptx", "mbox"):
            path = samples[ext]
            data = path.read_bytes()
            ref = SourceRef(str(path.parent), str(path), len(data), 0)
            assert worker.read(READERS[ext](), ref, data) == READERS[ext]().read(ref, data)
    finally:
        worker.close()


def test_csv_dialects(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("name;city\nAda;London\nGrace;Arlington\n")
    doc = read(CsvReader(), path)
    assert "name: Grace; city: Arlington" in doc.text


def test_a_notebook_with_huge_outputs_is_cut_per_cell(tmp_path):
    import json

    big = "x" * 1000 + "\n"
    nb = {"nbformat": 4, "metadata": {}, "cells": [
        {"cell_type": "code", "source": "print('lots')", "metadata": {},
         "outputs": [{"output_type": "stream", "name": "stdout", "text": [big] * 8000}]},  # 8 MB of output
        {"cell_type": "markdown", "source": "after the noise", "metadata": {}},
    ]}  # fmt: skip
    path = tmp_path / "noisy.ipynb"
    path.write_text(json.dumps(nb))
    started = time.perf_counter()
    doc = read(NotebookReader(), path)
    assert time.perf_counter() - started < 5
    assert len(doc.text) < 25_000 and "[output cut]" in doc.text and "after the noise" in doc.text


def test_reader_options_and_limits_reach_the_readers_from_the_settings(tmp_path):
    from indexer.errors import ConfigError
    from indexer.settings import Settings
    from plugins.filesystem.reader_options import configure_readers
    from plugins.filesystem.readers import CodeReader, PdfReader

    settings = Settings(data_dir=tmp_path, max_unpacked_bytes=1234, reader_options={"ipynb": {"outputs": False}})
    readers = configure_readers([NotebookReader(), DocxReader(), CodeReader(), PdfReader()], settings)
    notebook, word, code, pdf = readers
    assert notebook.options == {"outputs": False} and word.limits.max_unpacked_bytes == 1234
    assert isinstance(code, CodeReader) and pdf._ocr.cache.folder == tmp_path / "ocr-cache"
    for bad, match in (({"ipynb": {"output": False}}, "valid: .*outputs"), ({"nosuch": {}}, "unknown reader kind"),
                       ({"code": {"x": 1}}, "takes no options")):  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            configure_readers([NotebookReader(), CodeReader()], Settings(data_dir=tmp_path, reader_options=bad))
