"""OCR for scanned pages and images: Tesseract (Debian's ``tesseract-ocr`` and its language data) through
pytesseract, PDF pages rendered with pypdfium2. Optional at install: ``pip install 'llama-indexer[ocr]'`` and
``apt-get install tesseract-ocr tesseract-ocr-eng`` (``make test`` does both). Without them, images and PDFs
without a text layer are reported as skipped with that command (code ``missing_library``), never a crash.

Each page has a time limit (``page_timeout``, default 30 s: Tesseract is stopped past it) and images a pixel cap
(``max_pixels``, default 100 million: a 30,000 x 30,000 image is refused before it is decoded). Languages are
Tesseract's codes joined by ``+`` (``lang``, default ``eng``; ``reader_options = {image = {lang = "eng+deu"}}``).
A file has at most ``max_ocr_pages`` pages OCR'd (default 1,000); the pages past it are named in the document's
notes (reported "partly read"). Each OCR'd page is a part (``indexer.plugin_api.parts``): the parse worker's
time limit bounds one page, not the whole scan.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexer.plugin_api import Document, ImageError, MediaPart, SourceError, SourceRef, prepare_image
from indexer.plugin_api.parts import part_done

INSTALL_HINT = (
    "OCR needs Tesseract and two Python packages: apt-get install tesseract-ocr tesseract-ocr-eng && "
    "pip install 'llama-indexer[ocr]' (pytesseract, pypdfium2)"
)
DEFAULT_DPI = 200
DEFAULT_PAGE_TIMEOUT = 30.0
DEFAULT_MAX_PIXELS = 100_000_000
DEFAULT_MAX_OCR_PAGES = 1_000  # per file (PDF pages without a text layer, TIFF frames): ~17 min at ~1 s a page
DEFAULT_LANG = "eng"
TESSERACT_MAX_SIDE = 32_767


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
    """The text Tesseract reads in a PIL image (one page). Each failure has its own reason (code in brackets):
    a side over Tesseract's limit (``too_large``), a language without its data (``missing_library``, with the
    ``apt-get`` command), the page timeout (``timeout``), an image Tesseract cannot read (``unreadable``)."""
    import pytesseract

    where = f" page {page}" if page is not None else ""
    check_side(image.width, image.height, ref, where)
    check_languages(lang, ref)
    try:
        text = pytesseract.image_to_string(image, lang=lang, timeout=timeout)
    except pytesseract.TesseractError as exc:  # a subclass of RuntimeError: caught before the timeout below
        raise tesseract_failure(ref, where, lang, str(exc.message)) from None
    except RuntimeError as exc:  # pytesseract's timeout ("Tesseract process timeout"), nothing else
        raise SourceError(ref.path, f"OCR of{where or ' the image'} took longer than {timeout:g} s (page_timeout); "
                          "stopped. Raise reader_options image.page_timeout if the scan is genuine",
                          code="timeout") from exc
    return "\n".join(line.rstrip() for line in str(text).replace("\f", "").split("\n")).strip("\n")


def check_side(width: float, height: float, ref: SourceRef, where: str = "") -> None:
    """Tesseract refuses an image wider or taller than 32,767 pixels ("Image too large"): refused before it
    runs (and before a PDF page is rendered)."""
    if max(width, height) > TESSERACT_MAX_SIDE:
        raise SourceError(ref.path, f"image{where} of {int(width)} x {int(height)} pixels is too large for OCR "
                          f"(Tesseract reads at most {TESSERACT_MAX_SIDE} pixels a side); split or shrink it",
                          code="too_large")


def install_command(lang: str) -> str:
    """Debian's package for each Tesseract language code (``chi_sim`` -> ``tesseract-ocr-chi-sim``)."""
    names = [code.strip().lower().replace("_", "-") for code in lang.split("+") if code.strip()]
    return "apt-get install " + " ".join(f"tesseract-ocr-{name}" for name in names)


@functools.lru_cache(maxsize=8)
def installed_languages(program: str | None) -> frozenset[str] | None:
    """The languages Tesseract has data for (``tesseract --list-langs``), None when it cannot say."""
    import pytesseract

    try:
        return frozenset(pytesseract.get_languages(config=""))
    except Exception:  # noqa: BLE001 - an unusual Tesseract: the OCR itself reports a missing language
        return None


def check_languages(lang: str, ref: SourceRef) -> None:
    """A language without its data is reported with the command that installs it, before Tesseract runs."""
    known = installed_languages(shutil.which("tesseract"))
    wanted = [code for code in lang.split("+") if code]
    absent = [code for code in wanted if known is not None and code not in known]
    if absent:
        raise SourceError(ref.path, f"Tesseract has no data for language {'+'.join(absent)!r} (lang); install it: "
                          f"{install_command('+'.join(absent))}", code="missing_library")


def tesseract_failure(ref: SourceRef, where: str, lang: str, message: str) -> SourceError:
    """Tesseract's error translated: missing language data, image too large, or an image it cannot read."""
    detail = " ".join(message.split())[:300]
    if "Failed loading language" in message or "couldn't load any languages" in message:
        return SourceError(ref.path, f"Tesseract has no data for language {lang!r} (lang); install it: "
                           f"{install_command(lang)} ({detail})", code="missing_library")
    if "Image too large" in message:
        return SourceError(ref.path, f"image{where} is too large for OCR ({detail}); split or shrink it",
                           code="too_large")
    return SourceError(ref.path, f"Tesseract cannot read the image{where} ({detail})", code="unreadable")


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
    """``lang``, ``dpi``, ``page_timeout``, ``max_pixels``, ``max_ocr_pages``, ``ocr`` (on/off), ``cache_dir``
    (module docstring)."""

    NAMES = ("lang", "dpi", "page_timeout", "max_pixels", "max_ocr_pages", "ocr", "cache_dir")

    def __init__(self, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - set(self.NAMES))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(self.NAMES)}")
        self.enabled = bool(options.get("ocr", True))
        self.lang = str(options.get("lang", DEFAULT_LANG))
        self.dpi = int(options.get("dpi", DEFAULT_DPI))
        self.page_timeout = float(options.get("page_timeout", DEFAULT_PAGE_TIMEOUT))
        self.max_pixels = int(options.get("max_pixels", DEFAULT_MAX_PIXELS))
        self.max_pages = int(options.get("max_ocr_pages", DEFAULT_MAX_OCR_PAGES))
        self.cache = OcrCache(str(options["cache_dir"]) if options.get("cache_dir") else None)

    def pages_note(self, done: int, total: int, kind: str) -> str:
        """The note for a file (``kind`` pdf or image) with more pages to OCR than ``max_ocr_pages``."""
        what = "frames" if kind == "image" else "pages without a text layer"
        return (f"only the first {done:,} of {total:,} {what} were read by OCR (max_ocr_pages; raise "
                f"reader_options {kind}.max_ocr_pages)")


def ocr_pdf_page(pdf: Any, index: int, options: OcrOptions, ref: SourceRef) -> str:
    """OCR of page ``index`` (0-based) of a pypdfium2 document, rendered at ``options.dpi``."""
    page = pdf[index]
    width, height = page.get_size()
    scale = options.dpi / 72
    check_side(width * scale, height * scale, ref, f" page {index + 1}")
    if width * scale * height * scale > options.max_pixels:
        raise SourceError(ref.path, f"page {index + 1} would render to more than {options.max_pixels} pixels "
                          "(max_pixels); lower dpi or raise the cap", code="too_large")
    image = page.render(scale=scale, grayscale=True).to_pil()
    text = ocr_image(image, options.lang, options.page_timeout, ref, index + 1)
    part_done()
    return text


class ImageReader:
    """PNG, JPEG and TIFF images read by OCR (each TIFF frame a page: ``Document.page_starts``).

    With ``media`` on (the source sets it when the collection's model embeds images: ``reads_media``), GIF and
    WebP are claimed too and each image also carries its picture (``Document.media``: first frame, EXIF
    orientation applied, downscaled to at most 1024 pixels a side, decoded here in the parse worker under its
    limits and the ``max_pixels`` cap); OCR text, when Tesseract finds some, is kept beside it, and a missing or
    failing OCR no longer keeps the image out of the index."""

    kind = "image"
    extensions: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
    media_extensions = (".gif", ".webp")
    isolated = True  # decoding an image can take memory: the source runs it in its parse worker
    reads_media = True  # asked for ``media`` (docs/plugins.md)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self.media = bool(self.options.get("media", False))
        if self.media:
            self.extensions = (*type(self).extensions, *self.media_extensions)
        self._ocr = OcrOptions({k: v for k, v in self.options.items() if k in OcrOptions.NAMES})

    def with_options(self, options: Mapping[str, Any]) -> ImageReader:
        own = {k: v for k, v in options.items() if k not in ("max_unpacked_bytes", "max_unpack_ratio")}
        OcrOptions({k: v for k, v in own.items() if k != "media"})  # unknown names raise ValueError
        return ImageReader({**self.options, **own})

    def read(self, ref: SourceRef, data: bytes) -> Document:
        if self.media:
            return self._read_media(ref, data)
        return self._read_ocr(ref, data)

    def _read_media(self, ref: SourceRef, data: bytes) -> Document:
        """The picture (one image point) and, beside it, the OCR text when there is any."""
        try:
            # the bytes were capped by the source (max_image_file_size); the pixel cap still applies
            image = prepare_image(data, max_pixels=self._ocr.max_pixels, max_bytes=len(data))
        except ImageError as exc:
            raise SourceError(ref.path, exc.reason, code="too_large" if exc.code == "too_large" else "unreadable"
                              ) from None
        part_done()
        media = (MediaPart("image", image.data, image.original_width, image.original_height, image.format),)
        notes: tuple[str, ...] = ()
        text_doc: Document | None = None
        if self._ocr.enabled and missing() is None and image.format in ("png", "jpeg", "tiff"):
            try:
                text_doc = self._read_ocr(ref, data)
            except SourceError as exc:
                if exc.code not in ("missing_library",):
                    notes = (f"OCR failed ({exc.reason}); the image is indexed as a picture",)
        if text_doc is None or not text_doc.text.strip():
            return Document(ref=ref, text="", kind=self.kind, notes=notes, media=media)
        return replace(text_doc, media=media, notes=text_doc.notes + notes)

    def _read_ocr(self, ref: SourceRef, data: bytes) -> Document:
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
                                  f"{self._ocr.max_pixels}; shrink it or raise the cap", code="too_large")
            check_side(image.width, image.height, ref)
            check_languages(self._ocr.lang, ref)
            pages = []
            frames = getattr(image, "n_frames", 1)
            for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
                if number > self._ocr.max_pages:
                    break
                pages.append(ocr_image(frame.convert("L"), self._ocr.lang, self._ocr.page_timeout, ref, number))
                part_done()
        except SourceError:
            raise
        except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
            raise SourceError(ref.path, f"cannot decode the image ({type(exc).__name__}: {exc})",
                              code="unreadable") from None
        self._ocr.cache.put(key, {str(i): text for i, text in enumerate(pages)})
        notes = (self._ocr.pages_note(len(pages), frames, self.kind),) if frames > len(pages) else ()
        return self._document(ref, pages, notes)

    def _document(self, ref: SourceRef, pages: list[str], notes: tuple[str, ...] = ()) -> Document:
        starts, offset = [], 0
        for text in pages:
            starts.append(offset)
            offset += len(text) + 2
        paged = tuple(starts) if len(pages) > 1 else ()
        return Document(ref=ref, text="\n\n".join(pages), kind=self.kind, page_starts=paged,
                        metadata=(("ocr", self._ocr.lang),), notes=notes)

    def __repr__(self) -> str:
        return f"ImageReader(lang={self._ocr.lang!r}, media={self.media})"
