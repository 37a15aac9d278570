"""Every reader inside the parse worker's limits: PDF and CSV/TSV are read in the worker like the other
documents (a parse that eats memory fails there, the indexer's own process is untouched); the time limit bounds
a stall (no page, message or block of rows finished within it), so a long file that keeps making progress is
read whole while one that hangs is stopped; the per-file caps (rows per sheet, OCR pages per file) read up to
the cap and say so in the document's notes. Files are made by their real libraries (csv, openpyxl, pypdf via
the samples, PIL's PDF writer)."""

from __future__ import annotations

import csv
import resource
import time
from pathlib import Path

import pytest

from indexer.errors import SourceError
from indexer.plugin_api.parts import part_done
from indexer.types import Document, SourceRef
from plugins.documents.office import MAX_ROWS, XlsxReader
from plugins.documents.tables import CsvReader
from plugins.filesystem import ocr
from plugins.filesystem.isolation import ParseWorker
from plugins.filesystem.readers import PdfReader
from plugins.filesystem.source import FilesystemSource
from tests.documents import make_scanned_pdf

needs_ocr = pytest.mark.skipif(ocr.missing() is not None, reason=f"no OCR here: {ocr.missing()}")


class PagedReader:
    """``parts:seconds`` reads that many parts of that many seconds each, then ``hang`` if asked."""

    kind = "paged"
    extensions = (".paged",)
    isolated = True

    def read(self, ref: SourceRef, data: bytes) -> Document:
        parts, seconds, *rest = data.decode().split(":")
        for _ in range(int(parts)):
            time.sleep(float(seconds))
            part_done()
        if rest == ["hang"]:
            time.sleep(60)
        return Document(ref=ref, text=f"{parts} parts", kind=self.kind)


def _ref(path: Path | str, data: bytes = b"") -> SourceRef:
    path = Path(path)
    return SourceRef(str(path.parent), str(path), len(data), 0)


def test_the_time_limit_bounds_a_stall_not_a_long_file_that_keeps_going():
    worker = ParseWorker(timeout=1.5, memory_mb=512)
    try:
        started = time.perf_counter()
        doc = worker.read(PagedReader(), _ref("/r/long.paged"), b"8:0.4")  # 3.2 s in all, 0.4 s a part
        assert doc.text == "8 parts" and time.perf_counter() - started > 3
        started = time.perf_counter()
        with pytest.raises(SourceError, match=r"stalled: no part .* within 1.5 s \(parse_timeout\) after \d+ part"):
            worker.read(PagedReader(), _ref("/r/stuck.paged"), b"3:0.3:hang")
        assert time.perf_counter() - started < 8
        with pytest.raises(SourceError, match="took longer than 1.5 s") as info:  # no part at all: as before
            worker.read(PagedReader(), _ref("/r/mute.paged"), b"0:0:hang")
        assert info.value.code == "timeout"
        assert worker.read(PagedReader(), _ref("/r/next.paged"), b"1:0").text == "1 parts"  # a fresh worker
    finally:
        worker.close()


def test_pdf_and_csv_readers_run_in_the_parse_worker():
    assert PdfReader.isolated is True and CsvReader.isolated is True


def _big_csv(path: Path, rows: int) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "name", "note"])
        for i in range(rows):
            writer.writerow([i, f"name {i}", "x" * 40])
    return path


def test_a_csv_past_the_memory_limit_fails_in_the_worker_not_in_the_indexer(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    big = _big_csv(folder / "big.csv", 400_000)  # ~22 MB of text: hundreds of MB as rows and Markdown
    (folder / "small.csv").write_text("id,name\n1,Ada\n")
    source = FilesystemSource([folder], max_file_size=100 << 20, parse_timeout=60, parse_memory_mb=200)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with pytest.raises(SourceError, match="memory|parser process died"):
            source.read(_ref(big, b"x" * big.stat().st_size))
        small = folder / "small.csv"
        assert "name: Ada" in source.read(_ref(small, small.read_bytes())).text
    finally:
        source._worker.close()  # type: ignore[union-attr]
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 150, grown_mb  # the file's bytes (22 MB) pass through; the parse did not happen here


def test_a_csv_past_max_rows_is_read_to_the_cap_and_says_so(tmp_path):
    path = _big_csv(tmp_path / "rows.csv", 2_500)
    data = path.read_bytes()
    doc = CsvReader().with_options({"max_rows": 1_000}).read(_ref(path, data), data)
    assert dict(doc.metadata)["rows"] == 1_000 and "id: 998;" in doc.text and "id: 1000;" not in doc.text
    assert doc.notes == ("only the first 1,000 of 2,501 rows were read (max_rows; raise reader_options "
                         "csv.max_rows)",)  # fmt: skip
    assert CsvReader().read(_ref(path, data), data).notes == () and MAX_ROWS == 1_048_576


def test_a_sheet_past_max_rows_is_read_to_the_cap_and_says_so(tmp_path):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Log"
    ws.append(["id", "event"])
    for i in range(1_500):
        ws.append([i, f"event {i}"])
    path = tmp_path / "log.xlsx"
    wb.save(path)
    data = path.read_bytes()
    doc = XlsxReader().with_options({"max_rows": 1_000}).read(_ref(path, data), data)
    assert "event: event 997" in doc.text and "event: event 1200" not in doc.text
    assert doc.notes == ("sheet 'Log': only the first 1,000 of 1,501 rows were read (max_rows; raise "
                         "reader_options xlsx.max_rows)",)  # fmt: skip


def test_a_pdf_with_a_huge_image_is_parsed_in_the_worker_the_indexer_stays_small(tmp_path):
    from PIL import Image

    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "poster.pdf"
    Image.new("L", (12_000, 12_000), 255).save(path, "PDF", resolution=600)  # a 20 x 20 inch page, 144 M pixels
    source = FilesystemSource([folder], max_file_size=100 << 20, parse_timeout=60, parse_memory_mb=1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        try:
            doc = source.read(_ref(path, path.read_bytes()))
            assert doc.kind == "pdf"
        except SourceError as exc:  # without OCR: skipped; with it: past max_pixels at 200 dpi
            assert exc.code in ("missing_library", "too_large"), exc
    finally:
        source._worker.close()  # type: ignore[union-attr]
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 100


@needs_ocr
def test_a_scan_past_max_ocr_pages_is_read_to_the_cap_and_says_so(tmp_path):
    path = make_scanned_pdf(tmp_path / "scan.pdf", [["First page about pumps."], ["Second page about valves."],
                                                    ["Third page about filters."]])  # fmt: skip
    data = path.read_bytes()
    doc = PdfReader().with_options({"max_ocr_pages": 2}).read(_ref(path, data), data)
    assert "pumps" in doc.text and "valves" in doc.text and "filters" not in doc.text
    assert doc.notes == ("only the first 2 of 3 pages without a text layer were read by OCR (max_ocr_pages; "
                         "raise reader_options pdf.max_ocr_pages)",)  # fmt: skip
