"""Pictures have their own file-size cap (issue 41): a camera JPEG past `max_file_size` (10 MiB, meant for text
files) is indexed as an image point under `max_image_file_size` (64 MiB), found by itself, and shown as a
thumbnail; a text file past 10 MiB is still skipped with `max_file_size` named, and a picture past its own cap is
skipped with `max_image_file_size` named. Real files (13 and 27 MiB JPEGs of noise made by Pillow), the tiny Qwen3-VL
fixture (tests/vision.py: real GGUF model + projector, run by llama.cpp)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests import vision

pytestmark = pytest.mark.slow

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("large").resolve()
    photo = root / "camera.jpg"
    noise = np.random.default_rng(41).integers(0, 256, size=(3000, 4000, 3), dtype=np.uint8)
    Image.fromarray(noise).save(photo, format="JPEG", quality=95)  # noise does not compress: about 13 MiB
    large = root / "large.jpg"  # past the query cap (20 MiB) too: about 27 MiB
    Image.fromarray(np.random.default_rng(42).integers(0, 256, size=(4000, 6000, 3), dtype=np.uint8)).save(
        large, format="JPEG", quality=95)
    text = root / "huge.txt"
    line = "a line of a very long log file that nobody will ever read to its end\n"
    text.write_text(line * (11 * MIB // len(line) + 1))
    (root / "note.txt").write_text("A short note about the camera.\n")
    return {"root": root, "photo": photo, "large": large, "text": text}


@pytest.fixture(scope="module")
def vl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, _projector = vision.build(tmp_path_factory.mktemp("vl"), "f16")
    return model


def _settings(tmp_path: Path, vl_model: Path, **extra: Any) -> Any:
    from indexer.settings import Settings

    return Settings(data_dir=tmp_path / "data", embed_model=str(vl_model), threads=2, **extra)


def test_a_camera_jpeg_past_max_file_size_is_indexed_found_and_thumbnailed(folder, vl_model, tmp_path):
    from indexer.collection.facade import open_collection
    from indexer.core.images import MAX_IMAGE_BYTES, for_sending
    from indexer.errors import InputError

    settings = _settings(tmp_path, vl_model)
    size = folder["photo"].stat().st_size
    assert settings.max_file_size == 10 * MIB and settings.max_image_file_size == 64 * MIB
    assert 12 * MIB < size < 20 * MIB, size  # past the text cap, within the query cap
    with open_collection("big", settings=settings) as col:
        report = col.index([folder["root"]])
        skipped = dict(report.skipped)
        # the text file past 10 MiB is still skipped, naming the text files' setting
        assert report.failed == [] and set(skipped) == {str(folder["text"])}, report.to_dict()
        assert f"exceeds max_file_size {10 * MIB}" in skipped[str(folder["text"])]
        assert col.status()["image_points"] == 2
        hit = col.search(image=folder["photo"], k=1).hits[0]  # by its path: an indexed file inside a root
        assert hit.path == str(folder["photo"]) and hit.media == "image"
        assert (hit.width, hit.height) == (4000, 3000)
        same = col.search(image=folder["photo"].read_bytes(), k=1).hits[0]  # the bytes themselves
        assert same.path == hit.path and same.score == pytest.approx(hit.score, abs=1e-6)
        thumb = Image.open(io.BytesIO(col.thumbnail(str(folder["photo"]), 256)))
        assert thumb.format == "JPEG" and max(thumb.size) == 256
        # past the query cap: by its path the indexed file is downscaled first (as a client does) and finds
        # itself; its raw bytes are refused with the cap named (clients send the downscaled PNG)
        large = folder["large"]
        assert large.stat().st_size > MAX_IMAGE_BYTES
        hit = col.search(image=large, k=1).hits[0]
        assert hit.path == str(large) and (hit.width, hit.height) == (6000, 4000)
        sent = col.search(image=for_sending(large.read_bytes()), k=1).hits[0]
        assert sent.path == hit.path and sent.score == pytest.approx(hit.score, abs=1e-6)
        with pytest.raises(InputError, match=f"the limit is {MAX_IMAGE_BYTES:,}"):
            col.search(image=large.read_bytes(), k=1)
        assert max(Image.open(io.BytesIO(col.thumbnail(str(large), 128))).size) == 128


def test_a_picture_past_max_image_file_size_is_skipped_naming_that_setting(folder, vl_model, tmp_path):
    from indexer.collection.facade import open_collection

    cap = 5 * MIB
    settings = _settings(tmp_path, vl_model, max_image_file_size=cap, exclude=("huge.txt",))
    with open_collection("capped", settings=settings) as col:
        report = col.index([folder["root"]])
        skipped = dict(report.skipped)
        assert set(skipped) == {str(folder["photo"]), str(folder["large"])}, report.to_dict()
        assert f"exceeds max_image_file_size {cap}" in skipped[str(folder["photo"])]
        assert col.status()["image_points"] == 0
