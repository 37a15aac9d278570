"""OCR of scanned pages (Tesseract through pytesseract; PDF pages rendered by pypdfium2): known text rendered at
200 dpi is read back, a scanned PDF gets its pages, and without Tesseract such files are skipped with the
command that installs it. ``make test`` installs Tesseract (tools/ensure_ocr.sh); elsewhere the OCR tests that
need it are skipped, the others still run."""

from __future__ import annotations

import struct
import time
import zlib
from pathlib import Path

import pytest

from indexer.errors import SourceError
from indexer.types import SourceRef
from plugins.filesystem import ocr
from plugins.filesystem.ocr import ImageReader
from plugins.filesystem.readers import PdfReader
from tests.documents import PAGE_TEXT, make_scanned_pdf, render_page

needs_ocr = pytest.mark.skipif(ocr.missing() is not None, reason=f"no OCR here: {ocr.missing()}")


def _read(reader, path: Path):
    data = path.read_bytes()
    return reader.read(SourceRef(str(path.parent), str(path), len(data), 0), data)


def cer(expected: str, got: str) -> float:
    """Character error rate: Levenshtein distance over the expected length (whitespace runs as one space)."""
    a, b = " ".join(expected.split()), " ".join(got.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(1, len(a))


@needs_ocr
def test_an_image_of_text_is_read_with_a_low_error_rate(tmp_path):
    path = tmp_path / "page.png"
    render_page(PAGE_TEXT).save(path)
    doc = _read(ImageReader(), path)
    assert doc.kind == "image" and dict(doc.metadata) == {"ocr": "eng"}
    assert cer("\n".join(PAGE_TEXT), doc.text) <= 0.02
    assert "audit of the filters" in doc.text


@needs_ocr
def test_a_scanned_pdf_is_read_page_by_page(tmp_path):
    path = make_scanned_pdf(tmp_path / "scan.pdf", [["A cover page about pumps."], list(PAGE_TEXT)])
    doc = _read(PdfReader(), path)
    assert len(doc.page_starts) == 2
    second = doc.text[doc.page_starts[1] :]
    assert "audit of the filters" in second and "cover page" in doc.text[: doc.page_starts[1]]


@needs_ocr
def test_ocr_has_a_time_limit_per_page(tmp_path):
    path = tmp_path / "page.png"
    render_page(PAGE_TEXT * 10).save(path)
    started = time.perf_counter()
    with pytest.raises(SourceError, match="page_timeout") as info:
        _read(ImageReader().with_options({"page_timeout": 0.05}), path)
    assert time.perf_counter() - started < 5
    assert info.value.code == "timeout"


@needs_ocr
def test_a_missing_language_is_reported_with_its_install_command_not_as_a_timeout(tmp_path):
    path = tmp_path / "page.png"
    render_page(["hello"]).save(path)
    started = time.perf_counter()
    with pytest.raises(SourceError) as info:
        _read(ImageReader().with_options({"lang": "eng+chi_sim"}), path)
    assert "apt-get install tesseract-ocr-chi-sim" in info.value.reason and "timeout" not in info.value.reason
    assert "'chi_sim'" in info.value.reason and info.value.code == "missing_library"  # skipped, like no Tesseract
    assert time.perf_counter() - started < 5


@needs_ocr
def test_an_image_too_wide_for_tesseract_is_reported_as_too_large_at_once(tmp_path):
    from PIL import Image

    path = tmp_path / "strip.png"
    Image.new("L", (40_000, 99), 255).save(path)  # 4 M pixels: under max_pixels, over Tesseract's 32,767 a side
    started = time.perf_counter()
    with pytest.raises(SourceError, match="40000 x 99 pixels is too large for OCR") as info:
        _read(ImageReader(), path)
    assert info.value.code == "too_large" and "page_timeout" not in info.value.reason
    assert time.perf_counter() - started < 2


@needs_ocr
def test_a_pdf_page_too_wide_for_tesseract_is_refused_before_it_is_rendered(tmp_path):
    from PIL import Image

    path = tmp_path / "banner.pdf"
    Image.new("RGB", (200, 10), "white").save(path, "PDF", resolution=1)  # a 200 x 10 inch page, no text layer
    with pytest.raises(SourceError, match="page 1 of 40000 x 2000 pixels is too large for OCR") as info:
        _read(PdfReader(), path)
    assert info.value.code == "too_large"


def test_tesseract_errors_are_translated_to_distinct_reasons():
    ref = SourceRef("/r", "/r/a.png", 1, 0)
    lang = ocr.tesseract_failure(ref, "", "deu", "Failed loading language 'deu' Tesseract couldn't load any languages!")
    assert lang.code == "missing_library" and "apt-get install tesseract-ocr-deu" in lang.reason
    large = ocr.tesseract_failure(ref, " page 3", "eng", "Image too large: (1000000, 99) Error during processing.")
    assert large.code == "too_large" and "page 3" in large.reason
    other = ocr.tesseract_failure(ref, "", "eng", "Error in pixReadMem: Unknown format: no pix returned")
    assert other.code == "unreadable" and "cannot read the image" in other.reason
    assert ocr.install_command("eng+chi_sim") == "apt-get install tesseract-ocr-eng tesseract-ocr-chi-sim"


def _png_header_only(path: Path, width: int, height: int) -> Path:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))  # fmt: skip
    return path


@needs_ocr
def test_a_huge_image_is_refused_before_it_is_decoded(tmp_path):
    path = _png_header_only(tmp_path / "huge.png", 30_000, 30_000)
    started = time.perf_counter()
    with pytest.raises(SourceError, match="max_pixels|decode") as info:
        _read(ImageReader(), path)
    assert time.perf_counter() - started < 2
    assert info.value.code in ("too_large", "unreadable")


@needs_ocr
def test_an_image_that_cannot_be_decoded_is_reported_unreadable(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(render_page(["hello"]).tobytes()[:1000])  # raw pixels under a .png name
    with pytest.raises(SourceError, match="cannot decode the image") as info:
        _read(ImageReader(), path)
    assert info.value.code == "unreadable"


def test_without_tesseract_images_and_scans_are_skipped_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr.shutil, "which", lambda name: None)
    image = tmp_path / "page.png"
    render_page(["hello"]).save(image)
    with pytest.raises(SourceError, match="apt-get install tesseract-ocr") as info:
        _read(ImageReader(), image)
    assert info.value.code == "missing_library"  # the pipeline reports it as skipped
    scan = make_scanned_pdf(tmp_path / "scan.pdf", [["hello"]])
    with pytest.raises(SourceError, match="scanned PDF without a text layer") as info:
        _read(PdfReader(), scan)
    assert info.value.code == "missing_library"


def test_ocr_options_are_checked():
    with pytest.raises(ValueError, match="lang"):
        ImageReader().with_options({"language": "deu"})
    assert ImageReader().with_options({"lang": "eng+deu"})._ocr.lang == "eng+deu"
    assert PdfReader().with_options({"dpi": 300, "max_chars": 10})._ocr.dpi == 300


@needs_ocr
def test_ocr_text_is_cached_by_content_so_a_file_read_again_is_not_ocrd_again(tmp_path, monkeypatch):
    image = tmp_path / "page.png"
    render_page(PAGE_TEXT).save(image)
    scan = make_scanned_pdf(tmp_path / "scan.pdf", [["A cover page about pumps."]])
    cache = tmp_path / "cache"
    reader = ImageReader().with_options({"cache_dir": str(cache)})
    pdf = PdfReader().with_options({"cache_dir": str(cache)})
    first, first_pdf = _read(reader, image), _read(pdf, scan)
    import pytesseract

    def refuse(*args, **kwargs):
        raise AssertionError("OCR ran again")

    monkeypatch.setattr(pytesseract, "image_to_string", refuse)
    assert _read(reader, image) == first and _read(pdf, scan) == first_pdf
    render_page(["Other text entirely."]).save(image)  # new content: a new key, OCR runs
    with pytest.raises(AssertionError, match="OCR ran again"):
        _read(reader, image)
