"""OCR for scanned pages and images: Tesseract (Debian's ``tesseract-ocr`` and its language data) through
pytesseract, PDF pages rendered with pypdfium2. Optional at install: ``pip install 'llama-indexer[ocr]'`` and
``apt-get install tesseract-ocr tesseract-ocr-eng`` (``make test`` does both). Without them, images and PDFs
without a text layer are reported as skipped with that command (code ``missing_library``), never a crash.

Each page has a time limit (``page_timeout``, default 30 s: Tesseract is stopped past it) and images a pixel cap
(``max_pixels``, default 100 million: a 30,000 x 30,000 image is refused before it is decoded). Languages are
Tesseract's codes joined by ``+`` (``lang``, default ``eng``; ``reader_options = {image = {lang = "eng+deu"}}``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from indexer.plugin_api import Document, SourceError, SourceRef

INSTALL_HINT = (
    "OCR needs Tesseract and two Python packages: apt-get install tesseract-ocr tesseract-ocr-eng && "
    "pip install 'llama-indexer[ocr]' (pytesseract, pypdfium2)"
)
DEFAULT_DPI = 200
DEFAULT_PAGE_TIMEOUT = 30.0
DEFAULT_MAX_PIXELS = 100_000_000
DEFAULT_LANG = "eng"


def missing() -> str | None:
    """Why OCR cannot run here (with the install command), or None when it can."""
    try:
        import pytesseract  # noqa: F401
    except ImportError:
        return f"pytesseract is not installed; {INSTALL_HINT}"
    if shutil.which("tesseract") is None:
        return f"the tesseract program is not installed; {INSTALL_HINT}"
    return None


def ocr_image(image: Any, lang: str, timeout: float, ref: SourceRef, page: int | None = None) -> str:
    """The text Tesseract reads in a PIL image (one page)."""
    import pytesseract

    where = f" page {page}" if page is not None else ""
    try:
        text = pytesseract.image_to_string(image, lang=lang, timeout=timeout)
    except RuntimeError as exc:  # pytesseract's timeout
        raise SourceError(ref.path, f"OCR of{where} took longer than {timeout:g} s (page_timeout); stopped") from exc
    except pytesseract.TesseractError as exc:
        raise SourceError(ref.path, f"OCR of{where} failed ({exc}); is the language data for {lang!r} "
                          f"installed (apt-get install tesseract-ocr-{lang.split('+')[0]})?") from exc
    return "\n".join(line.rstrip() for line in str(text).replace("\f", "").split("\n")).strip("\n")


class OcrCache:
    """OCR text by the file's content hash and the OCR settings, one JSON file each under ``folder`` (the
    filesystem source passes ``<data dir>/ocr-cache``): a file read again (its modification time changed, the
    file viewer) is not OCR'd again. Entries are small text; the folder can be deleted at any time."""

    def __init__(self, folder: str | None) -> None:
        self.folder = Path(folder) if folder else None

    def key(self, data: bytes, options: OcrOptions, what: str) -> str:
        h = hashlib.sha256(data)
        h.update(f"\0{what}\0{options.lang}\0{options.dpi}".encode())
        return h.hexdigest()

    def get(self, key: str) -> dict[str, str] | None:
        if self.folder is None:
            return None
        try:
            value = json.loads((self.folder / key[:2] / f"{key}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, pages: Mapping[str, str]) -> None:
        if self.folder is None:
            return
        target = self.folder / key[:2] / f"{key}.json"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(dict(pages), handle)
            os.replace(tmp, target)
        except OSError:
            pass  # a cache that cannot be written only costs time


class OcrOptions:
    """``lang``, ``dpi``, ``page_timeout``, ``max_pixels``, ``ocr`` (on/off), ``cache_dir`` (module docstring)."""

    NAMES = ("lang", "dpi", "page_timeout", "max_pixels", "ocr", "cache_dir")

    def __init__(self, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - set(self.NAMES))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(self.NAMES)}")
        self.enabled = bool(options.get("ocr", True))
        self.lang = str(options.get("lang", DEFAULT_LANG))
        self.dpi = int(options.get("dpi", DEFAULT_DPI))
        self.page_timeout = float(options.get("page_timeout", DEFAULT_PAGE_TIMEOUT))
        self.max_pixels = int(options.get("max_pixels", DEFAULT_MAX_PIXELS))
        self.cache = OcrCache(str(options["cache_dir"]) if options.get("cache_dir") else None)


def ocr_pdf_page(pdf: Any, index: int, options: OcrOptions, ref: SourceRef) -> str:
    """OCR of page ``index`` (0-based) of a pypdfium2 document, rendered at ``options.dpi``."""
    page = pdf[index]
    width, height = page.get_size()
    scale = options.dpi / 72
    if width * scale * height * scale > options.max_pixels:
        raise SourceError(ref.path, f"page {index + 1} would render to more than {options.max_pixels} pixels "
                          "(max_pixels); lower dpi or raise the cap")
    image = page.render(scale=scale, grayscale=True).to_pil()
    return ocr_image(image, options.lang, options.page_timeout, ref, index + 1)


class ImageReader:
    """PNG, JPEG and TIFF images read by OCR (each TIFF frame a page: ``Document.page_starts``)."""

    kind = "image"
    extensions = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
    isolated = True  # decoding an image can take memory: the source runs it in its parse worker

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self._ocr = OcrOptions({k: v for k, v in self.options.items() if k in OcrOptions.NAMES})

    def with_options(self, options: Mapping[str, Any]) -> ImageReader:
        own = {k: v for k, v in options.items() if k not in ("max_unpacked_bytes", "max_unpack_ratio")}
        OcrOptions(own)  # unknown names raise ValueError
        return ImageReader({**self.options, **own})

    def read(self, ref: SourceRef, data: bytes) -> Document:
        if not self._ocr.enabled:
            raise SourceError(ref.path, "OCR of images is off (reader_options image.ocr = false)", code="binary")
        why = missing()
        if why is not None:
            raise SourceError(ref.path, why, code="missing_library")
        key = self._ocr.cache.key(data, self._ocr, "image")
        cached = self._ocr.cache.get(key)
        if cached is not None:
            return self._document(ref, [cached[str(i)] for i in range(len(cached))])
        from PIL import Image, ImageSequence

        Image.MAX_IMAGE_PIXELS = self._ocr.max_pixels
        try:
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > self._ocr.max_pixels:
                raise SourceError(ref.path, f"image of {image.width} x {image.height} pixels exceeds max_pixels "
                                  f"{self._ocr.max_pixels}; shrink it or raise the cap")
            pages = []
            for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
                pages.append(ocr_image(frame.convert("L"), self._ocr.lang, self._ocr.page_timeout, ref, number))
        except SourceError:
            raise
        except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
            raise SourceError(ref.path, f"cannot decode the image ({type(exc).__name__}: {exc})") from None
        self._ocr.cache.put(key, {str(i): text for i, text in enumerate(pages)})
        return self._document(ref, pages)

    def _document(self, ref: SourceRef, pages: list[str]) -> Document:
        starts, offset = [], 0
        for text in pages:
            starts.append(offset)
            offset += len(text) + 2
        paged = tuple(starts) if len(pages) > 1 else ()
        return Document(ref=ref, text="\n\n".join(pages), kind=self.kind, page_starts=paged,
                        metadata=(("ocr", self._ocr.lang),))

    def __repr__(self) -> str:
        return f"ImageReader(lang={self._ocr.lang!r})"
