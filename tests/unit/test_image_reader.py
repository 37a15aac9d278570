"""The image reader with and without ``media`` (the source's switch for a collection whose model embeds images),
and the source passing it only to readers that say ``reads_media``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from indexer.errors import SourceError
from indexer.settings import Settings
from indexer.types import SourceRef
from plugins.filesystem.ocr import ImageReader, missing
from plugins.filesystem.reader_options import configure_readers


def _ref(name: str = "a.png") -> SourceRef:
    return SourceRef("/r", f"/r/{name}", 1, 1)


def _image(fmt: str, size: tuple[int, int] = (30, 20), **kw) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (5, 120, 200)).save(out, fmt, **kw)
    return out.getvalue()


def test_with_media_each_format_gives_one_picture_as_shown_and_no_failure_without_ocr():
    reader = ImageReader().with_options({"media": True, "max_unpacked_bytes": 1, "max_unpack_ratio": 1.0})
    assert {".gif", ".webp"} <= set(reader.extensions)
    for fmt in ("PNG", "JPEG", "GIF", "WEBP"):
        doc = reader.read(_ref(), _image(fmt))
        assert len(doc.media) == 1, fmt
        part = doc.media[0]
        assert (part.kind, part.width, part.height) == ("image", 30, 20)
        assert part.data.startswith(b"\x89PNG") and part.format == fmt.lower()
        if missing() is not None:  # no OCR here: the picture alone, nothing reported
            assert doc.text == "" and doc.notes == ()


def test_without_media_the_reader_is_as_before():
    reader = ImageReader().with_options({"media": False})
    assert ".gif" not in reader.extensions and ".webp" not in reader.extensions
    why = missing()
    if why is None:
        pytest.skip("OCR installed here: the reader OCRs as before (tests/unit/test_ocr.py)")
    with pytest.raises(SourceError) as exc:
        reader.read(_ref(), _image("PNG"))
    assert exc.value.code == "missing_library"


def test_a_picture_over_max_pixels_is_too_large_and_garbage_unreadable():
    reader = ImageReader({"media": True, "max_pixels": 100})
    with pytest.raises(SourceError) as exc:
        reader.read(_ref(), _image("PNG"))
    assert exc.value.code == "too_large" and "max_pixels" in exc.value.reason
    with pytest.raises(SourceError) as bad:
        ImageReader({"media": True}).read(_ref(), b"\x89PNG\r\n\x1a\nbroken")
    assert bad.value.code == "unreadable"


class _OldReader:
    kind = "old"
    extensions = (".old",)

    def __init__(self, options: dict | None = None) -> None:
        self.options = dict(options or {})

    def with_options(self, options: dict) -> _OldReader:
        if set(options) - {"max_unpacked_bytes", "max_unpack_ratio"}:
            raise ValueError(f"unknown options {sorted(options)}")
        return _OldReader(options)

    def read(self, ref, data):  # pragma: no cover - never called here
        raise NotImplementedError


def test_the_source_passes_media_only_to_readers_that_read_media(tmp_path: Path):
    settings = Settings(data_dir=tmp_path).model_copy(update={"embed_media": True})
    old, image = configure_readers([_OldReader(), ImageReader()], settings)
    assert isinstance(old, _OldReader) and "media" not in old.options  # an old reader never sees the option
    assert isinstance(image, ImageReader) and image.media
    (plain,) = configure_readers([ImageReader()], Settings(data_dir=tmp_path))
    assert isinstance(plain, ImageReader) and not plain.media
