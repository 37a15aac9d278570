"""Media kinds from their bytes (indexer.engine.media): what embed_multimodal accepts or refuses before any
native call."""

from __future__ import annotations

import pytest

from indexer.engine.media import Media, detect_media


@pytest.mark.parametrize("data, expected", [
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 8, Media("image", "png")),
    (b"\xff\xd8\xff\xe0" + b"\x00" * 8, Media("image", "jpeg")),
    (b"GIF89a" + b"\x00" * 8, Media("image", "gif")),
    (b"GIF87a" + b"\x00" * 8, Media("image", "gif")),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", Media("image", "webp")),
    (b"BM" + b"\x00" * 12, Media("image", "bmp")),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", Media("audio", "wav")),
    (b"ID3\x04\x00" + b"\x00" * 8, Media("audio", "mp3")),
    (b"\xff\xfb\x90\x00" + b"\x00" * 8, Media("audio", "mp3")),
    (b"fLaC" + b"\x00" * 8, Media("audio", "flac")),
    (b"OggS" + b"\x00" * 8, Media("audio", "ogg")),
    (b"\x00\x00\x00\x18ftypisom\x00\x00", Media("video", "mp4")),
    (b"\x00\x00\x00\x14ftypqt  \x00\x00", Media("video", "quicktime")),
    (b"\x00\x00\x00\x1cftypavif\x00\x00", Media("image", "heif")),
    (b"\x1a\x45\xdf\xa3" + b"\x00" * 8, Media("video", "matroska/webm")),
    (b"RIFF\x00\x00\x00\x00AVI LIST", Media("video", "avi")),
])
def test_signatures(data, expected):
    assert detect_media(data) == expected


@pytest.mark.parametrize("data", [b"", b"hello world", b"%PDF-1.7", b"\x00\x01\x02", b"RIFF"])
def test_unknown_bytes_are_none(data):
    assert detect_media(data) is None
