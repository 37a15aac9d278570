"""One image, made ready for the projector the same way wherever it comes from (a file read in the parse
worker, an image query, a ``/v1/embeddings`` item): the first frame, EXIF orientation applied, RGB, at most
:data:`MAX_SIDE` pixels a side (downscaled, aspect kept), re-encoded as PNG. The same bytes in give the same
PNG out, so an image used as a query embeds to exactly the vector it was indexed with.

Decoding is capped before it starts: more than :data:`MAX_PIXELS` pixels (the OCR path's decompression cap) or
:data:`MAX_IMAGE_BYTES` bytes is refused with :class:`ImageError` naming the cap. Pillow reads PNG, JPEG, GIF,
WebP (when built with it), BMP and TIFF. A client sends :func:`for_sending`'s bytes (a photo of any size is
downscaled before it travels).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = ["IMAGE_EXTENSIONS", "MAX_IMAGE_BYTES", "MAX_LOCAL_IMAGE_BYTES", "MAX_PIXELS", "MAX_SIDE", "ImageError",
           "PreparedImage", "for_sending", "prepare_image", "thumbnail"]

MAX_PIXELS = 100_000_000  # the OCR path's cap (plugins/filesystem/ocr.py DEFAULT_MAX_PIXELS)
MAX_SIDE = 1024  # longest side handed to the projector; larger images are downscaled first
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # an image query or /v1 item larger than this is refused
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".tif", ".tiff")  # what becomes an image point
MAX_LOCAL_IMAGE_BYTES = 512 * 1024 * 1024  # a client decoding the user's own file before sending it


class ImageError(ValueError):
    """An image that cannot be prepared; ``code`` is ``too_large`` or ``unreadable``."""

    def __init__(self, reason: str, code: str = "unreadable") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True)
class PreparedImage:
    """The PNG handed to the projector, its pixel size, and the original's size (as shown: EXIF orientation
    applied) and format."""

    data: bytes
    width: int
    height: int
    original_width: int
    original_height: int
    format: str


def _open(data: bytes, max_pixels: int, max_bytes: int = MAX_IMAGE_BYTES) -> PILImage:
    from PIL import Image

    if len(data) > max_bytes:
        raise ImageError(f"the image has {len(data):,} bytes; the limit is {max_bytes:,}", "too_large")
    try:
        with warnings.catch_warnings():  # between Pillow's warning level and its error: our cap below decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:
        raise ImageError(f"the image exceeds the decompression cap of {max_pixels:,} pixels (max_pixels); shrink it",
                         "too_large") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise ImageError(f"cannot decode the image ({_why(exc)}); PNG, JPEG, GIF, WebP, BMP and TIFF are read"
                         ) from None
    if image.width * image.height > max_pixels:
        raise ImageError(f"the image of {image.width} x {image.height} pixels exceeds the cap of {max_pixels:,} "
                         "pixels (max_pixels); shrink it", "too_large")
    return image


def _why(exc: BaseException) -> str:
    """Pillow's reason in words, without the reprs some of its messages carry (``cannot identify image file
    <_io.BytesIO object at 0x...>``)."""
    import re

    text = re.sub(r"\s*<[^<>]* at 0x[0-9a-fA-F]+>", "", str(exc)).strip() or type(exc).__name__
    if text.startswith("cannot identify image file"):
        return "not a picture in a format this server reads"
    return text


def _decoded(
    data: bytes, max_pixels: int, side: int, max_bytes: int = MAX_IMAGE_BYTES
) -> tuple[PILImage, str, int, int]:
    from PIL import Image, ImageOps

    image = _open(data, max_pixels, max_bytes)
    fmt = str(getattr(image, "format", "") or "").lower()
    width, height = int(image.width), int(image.height)  # the header's, before draft
    try:
        if image.getexif().get(0x0112) in (5, 6, 7, 8):  # shown turned a quarter
            width, height = height, width
        image.seek(0)  # a GIF's or WebP's first frame
        if fmt == "jpeg":
            image.draft("RGB", (side, side))  # DCT scaling: a huge JPEG never decodes whole
        with_orientation = ImageOps.exif_transpose(image)
        rgb = with_orientation.convert("RGB")
    except Image.DecompressionBombError:
        raise ImageError(f"the image exceeds the decompression cap of {max_pixels:,} pixels (max_pixels); shrink it",
                         "too_large") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageError(f"cannot decode the image ({_why(exc)})") from None
    if max(rgb.size) > side:
        rgb.thumbnail((side, side), Image.Resampling.LANCZOS)
    return rgb, fmt, width, height


def prepare_image(
    data: bytes, *, max_pixels: int = MAX_PIXELS, max_side: int = MAX_SIDE, max_bytes: int = MAX_IMAGE_BYTES
) -> PreparedImage:
    """The projector's PNG for ``data`` (module docstring); ImageError for what cannot be read."""
    rgb, fmt, width, height = _decoded(data, max_pixels, max_side, max_bytes)
    out = io.BytesIO()
    rgb.save(out, format="PNG", compress_level=1)
    w, h = rgb.size
    return PreparedImage(out.getvalue(), int(w), int(h), width, height, fmt)


def thumbnail(data: bytes, size: int, *, max_pixels: int = MAX_PIXELS, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """A JPEG at most ``size`` pixels a side (orientation applied), for showing a hit."""
    rgb, _fmt, _w, _h = _decoded(data, max_pixels, size, max_bytes)
    out = io.BytesIO()
    rgb.save(out, format="JPEG", quality=80)
    return out.getvalue()


def for_sending(data: bytes) -> bytes:
    """What a client (the CLI, the Python client) sends for an image query: the projector's PNG when it is the
    smaller (a camera photo becomes at most 1024 pixels a side), else ``data`` as it is. Both embed to the same
    vector: preparing the prepared PNG again changes no pixel, so an indexed photo sent this way finds itself
    with its own score. What cannot be prepared here is sent unchanged, for the server to name the problem."""
    try:
        prepared = prepare_image(data, max_bytes=MAX_LOCAL_IMAGE_BYTES)
    except ImageError:
        return data
    return prepared.data if len(prepared.data) < len(data) else data
