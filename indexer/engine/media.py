"""What kind of media a payload is, from its bytes alone (no decoding, no native call).

``embed_multimodal`` refuses what the projector cannot take before llama.cpp sees the bytes: video always (this
embedding path has no frame sampling), audio when the projector has no audio encoder, and anything that is not
one of the formats below. The signatures are the ones llama.cpp's MTMD helper itself tests (mtmd-helper.cpp:
``is_audio_file``, ``is_webp_file``; images go to stb_image).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Media", "detect_media"]

IMAGE = "image"
AUDIO = "audio"
VIDEO = "video"


@dataclass(frozen=True)
class Media:
    """A payload's kind (``image``, ``audio`` or ``video``) and format (``png``, ``wav``, ``mp4`` ...)."""

    kind: str
    format: str


def _riff(data: bytes, form: bytes) -> bool:
    return len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == form


def _iso_media(data: bytes) -> str | None:
    """ISO base media (MP4, MOV, 3GP; HEIF/AVIF images): the ``ftyp`` box's brand."""
    if len(data) < 12 or data[4:8] != b"ftyp":
        return None
    brand = data[8:12]
    if brand in (b"avif", b"avis", b"heic", b"heix", b"mif1", b"msf1"):
        return "heif"
    return "quicktime" if brand == b"qt  " else "mp4"


_IMAGES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)
_OTHER: tuple[tuple[bytes, Media], ...] = (
    (b"fLaC", Media(AUDIO, "flac")),
    (b"ID3", Media(AUDIO, "mp3")),
    (b"OggS", Media(AUDIO, "ogg")),
    (b"\x1a\x45\xdf\xa3", Media(VIDEO, "matroska/webm")),
    (b"BM", Media(IMAGE, "bmp")),
)


def detect_media(data: bytes) -> Media | None:
    """The media kind and format of ``data``, or None when no known signature matches."""
    for magic, fmt in _IMAGES:
        if data.startswith(magic):
            return Media(IMAGE, fmt)
    if _riff(data, b"WEBP"):
        return Media(IMAGE, "webp")
    if _riff(data, b"WAVE"):
        return Media(AUDIO, "wav")
    if _riff(data, b"AVI "):
        return Media(VIDEO, "avi")
    iso = _iso_media(data)
    if iso is not None:
        return Media(IMAGE if iso == "heif" else VIDEO, iso)
    for magic, media in _OTHER:
        if data.startswith(magic):
            return media
    if len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:  # an MPEG audio frame's sync word
        return Media(AUDIO, "mp3")
    if len(data) >= 4 and data[:4] == b"\x00\x00\x01\xba":
        return Media(VIDEO, "mpeg-ps")
    return None
