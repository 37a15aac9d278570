"""A photo of any size through every front end of a running server, and hostile query images (issue 41).

A folder with a camera-sized JPEG (4000 x 3000 of noise, 5-8 MB: it does not compress), a TIFF and a few small
pictures is indexed with the tiny Qwen3-VL fixture (tests/vision.py: real GGUF model + projector, run by
llama.cpp) and served on loopback, announced in the data directory as `indexer serve` announces itself. The photo
is searched by the CLI (a subprocess whose model loader refuses, so only the server can answer), by
`/search`, MCP over HTTP and `/v1/embeddings` with the raw photo as a data URI (past `max_body_bytes`, within
`max_image_body_bytes`), and finds its indexed copy first. Then hostile images through the same three doors:
each gets its own 4xx and message, the server stays up and the collection is unchanged (zero 5xx).
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from PIL import Image

from tests import vision
from tests.integration.test_images_in_folders import make_folder
from tests.server.conftest import ServerHandle, start_server

pytestmark = pytest.mark.slow

NO_MODELS = (  # the CLI whose one model loader refuses: a model load in it fails, so an answer is the server's
    "import runpy, sys\n"
    "import indexer.engine.loader as loader\n"
    "def refuse(*args, **kwargs):\n"
    "    raise SystemExit('a model was loaded in the CLI')\n"
    "loader.load_embedder = loader.load_reranker = refuse\n"
    "sys.argv = ['indexer', *sys.argv[1:]]\n"
    "runpy.run_module('indexer.cli', run_name='__main__')\n"
)


def uri(data: bytes, kind: str = "") -> str:
    from indexer.codec import data_uri

    if kind:
        return f"data:image/{kind};base64," + base64.b64encode(data).decode()
    return data_uri(data)


def camera_jpeg(path: Path) -> Path:
    """4000 x 3000, smooth blocks plus pixel noise (a phone photo's size: noise keeps JPEG from shrinking it)."""
    rng = np.random.default_rng(41)
    base = Image.fromarray(rng.integers(0, 256, size=(750, 1000, 3), dtype=np.uint8)).resize(
        (4000, 3000), Image.Resampling.BILINEAR
    )
    noisy = np.asarray(base).astype(np.int16) + rng.integers(-40, 40, size=(3000, 4000, 3), dtype=np.int16)
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(path, format="JPEG", quality=85)
    return path


def png_header_only(width: int, height: int, rows: int | None = None) -> bytes:
    """A grey PNG of ``width`` x ``height`` whose IDAT holds ``rows`` rows of zeros (all when None: a real bomb,
    a few hundred KiB that decode to width x height bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    packer = zlib.compressobj(9)
    row = b"\x00" * (width + 1)
    idat = b"".join(packer.compress(row) for _ in range(height if rows is None else rows)) + packer.flush()
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def encoded(image: Image.Image, fmt: str, **kwargs: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


@pytest.fixture(scope="module")
def vl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, _projector = vision.build(tmp_path_factory.mktemp("vl"), "f16")
    return model


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("photos").resolve()
    small = make_folder(root, 4)
    photo = camera_jpeg(root / "camera" / "photo.jpg") if (root / "camera").mkdir() is None else None
    assert photo is not None
    tiff = root / "scan.tiff"
    Image.fromarray(np.random.default_rng(7).integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(tiff)
    (root / ".gitignore").write_text("private/\n")
    (root / "private").mkdir()
    Image.fromarray(np.full((32, 32, 3), 200, dtype=np.uint8)).save(root / "private" / "secret.png")
    return {"root": root, "small": small, "photo": photo, "tiff": tiff}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, folder: dict[str, Any], vl_model: Path) -> Iterator[ServerHandle]:
    from indexer.collection.facade import open_collection
    from indexer.server import announce
    from indexer.settings import Settings

    data = tmp_path_factory.mktemp("photos-data").resolve()
    settings = Settings(data_dir=data, embed_model=str(vl_model), threads=2, collection="pics")
    with open_collection("pics", settings=settings) as col:
        report = col.index([folder["root"]])
    assert report.failed == [] and report.skipped == [], report.to_dict()
    token = secrets.token_urlsafe(16)
    handle = start_server(settings, folder["root"], extra_admin_keys=(token,))
    ann = announce.Announcement(handle.url, os.getpid(), token, time.time(), str(data))
    announce.write(data, ann)
    yield handle
    announce.remove(data, ann)
    handle.stop()


def _counts(served: ServerHandle) -> tuple[int, int, int]:
    with served.client() as c:
        st = c.get("/status", params={"collection": "pics"}).json()["collections"][0]
    return st["files"], st["chunks"], st["points"]


def test_the_photo_is_camera_sized_and_indexed_as_an_image_point(folder, served):
    size = folder["photo"].stat().st_size
    assert 5_000_000 <= size <= 8_400_000, size
    assert size > served.settings.max_body_bytes * 4  # raw, it could never pass the text body cap
    with served.client() as c:
        hits = c.post("/search", json={"collection": "pics", "image": str(folder["photo"]), "k": 1}).json()["hits"]
    assert hits[0]["path"] == str(folder["photo"]) and (hits[0]["width"], hits[0]["height"]) == (4000, 3000)


def test_the_cli_searches_a_camera_photo_through_the_running_server_without_loading_a_model(folder, served, tmp_path):
    env = {**os.environ, "INDEXER_DATA_DIR": str(served.settings.data_dir), "INDEXER_CONFIG": str(tmp_path / "no"),
           "INDEXER_THREADS": "2"}
    done_before = served.service.worker.completed
    run = subprocess.run([sys.executable, "-c", NO_MODELS, "search", "--image", str(folder["photo"]), "-c", "pics",
                          "--json", "-k", "3", "-v"], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "in-process" not in run.stderr and "does not answer" not in run.stderr, run.stderr
    hits = json.loads(run.stdout)["hits"]
    assert hits[0]["path"] == str(folder["photo"]) and hits[0]["media"] == "image"
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert served.service.worker.completed > done_before  # the server's model worker answered it


def test_the_python_client_sends_a_downscaled_photo_that_embeds_as_the_raw_one(folder, served):
    from indexer.server.client import shrunk_image

    raw = uri(folder["photo"].read_bytes())
    small = shrunk_image(raw)
    assert small.startswith("data:image/png;base64,") and len(small) < len(raw) // 2
    with served.client() as c:
        answers = [c.post("/search", json={"collection": "pics", "image": image, "k": 3}) for image in (raw, small)]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["hits"][0]["path"] == str(folder["photo"])
    scores = [a.json()["hits"][0]["score"] for a in answers]
    assert scores[0] == pytest.approx(scores[1], abs=1e-6) == pytest.approx(1.0, abs=1e-4)
    timings = answers[0].json()["timings_ms"]
    assert timings["embed"] > timings["dense"]  # the image's decode and embedding count in the embed stage


def test_search_mcp_and_v1_embeddings_take_the_raw_photo(folder, served):
    from mcp import Client

    raw = uri(folder["photo"].read_bytes())
    assert len(raw) > 6_000_000

    async def by_mcp() -> Any:
        async with Client(served.url + "/mcp") as client:
            return await client.call_tool("search", {"image": raw, "collection": "pics", "k": 2})

    result = anyio.run(by_mcp)
    assert not result.is_error, result.content
    top = json.loads(result.content[0].text)["hits"][0]
    assert top["image"] == {"path": str(folder["photo"]), "width": 4000, "height": 3000}
    with served.client() as c:
        other_uri = uri(folder["small"][0].read_bytes())
        both = c.post("/v1/embeddings", json={"input": [{"image": raw}, {"image": other_uri}]})
        again = c.post("/v1/embeddings", json={"input": [{"image": raw}]})
    assert both.status_code == 200, both.text
    first, other = (np.asarray(d["embedding"]) for d in both.json()["data"])
    assert np.allclose(np.asarray(again.json()["data"][0]["embedding"]), first, atol=1e-5)
    assert float(first @ other) < 0.995


def test_a_tiff_gets_a_thumbnail_and_a_picture_replaced_by_a_link_to_an_ignored_one_is_not_served(folder, served):
    root = folder["root"]
    victim = folder["small"][0]
    with served.client() as c:
        tiff = c.get("/thumbnail", params={"collection": "pics", "path": str(folder["tiff"]), "size": 32})
        assert tiff.status_code == 200 and tiff.headers["content-type"] == "image/jpeg", tiff.text
        with Image.open(io.BytesIO(tiff.content)) as im:
            assert max(im.size) == 32
        hidden = c.get("/thumbnail", params={"collection": "pics", "path": str(root / "private" / "secret.png")})
        kept = victim.read_bytes()
        victim.unlink()
        victim.symlink_to(root / "private" / "secret.png")
        try:
            swapped = c.get("/thumbnail", params={"collection": "pics", "path": str(victim)})
        finally:
            victim.unlink()
            victim.write_bytes(kept)
    assert hidden.status_code == 404 and swapped.status_code == 404, (hidden.text, swapped.text)


# -- hostile query images ---------------------------------------------------------------------------------------
def _hostile(folder: dict[str, Any], tmp: Path) -> list[tuple[str, str, int, str]]:
    """(name, image value, /search status, words of its message); a 200 must find an image point."""
    rng = np.random.default_rng(3)
    photo = folder["photo"].read_bytes()
    frames = [Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)) for _ in range(8)]
    gif = io.BytesIO()
    frames[0].save(gif, format="GIF", save_all=True, append_images=[frames[i % 8] for i in range(1, 2000)],
                   duration=10)
    svg = (b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
           b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><svg xmlns="http://www.w3.org/2000/svg"><text>&c;</text></svg>')
    outside = tmp / "outside.png"
    outside.write_bytes(folder["small"][0].read_bytes())
    rgb = Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
    return [
        ("bomb", uri(png_header_only(11_000, 11_000)), 400, "exceeds the cap of 100,000,000 pixels"),
        ("header-bomb", uri(png_header_only(60_000, 60_000, rows=1)), 400, "decompression cap of 100,000,000"),
        ("truncated", uri(photo[: len(photo) // 3]), 400, "cannot decode the image"),
        ("1x1", uri(encoded(Image.new("RGB", (1, 1), (9, 9, 9)), "PNG")), 200, ""),
        ("sliver", uri(encoded(Image.new("RGB", (1, 4000), (9, 90, 9)), "PNG")), 200, ""),
        ("2000-frame gif", uri(gif.getvalue()), 200, ""),
        ("cmyk", uri(encoded(rgb.convert("CMYK"), "JPEG")), 200, ""),
        ("16-bit", uri(encoded(Image.fromarray(rng.integers(0, 65535, (40, 40), dtype=np.uint16)), "PNG")), 200, ""),
        ("tiff", uri(encoded(rgb, "TIFF"), "tiff"), 200, ""),
        ("svg with entities", uri(svg, "svg+xml"), 400, "the data URI's type is 'image/svg+xml'"),
        ("svg named png", uri(svg, "png"), 400, "not a picture in a format this server reads"),
        ("not base64", "data:image/png;base64,@@@@", 400, "not valid base64"),
        ("url", "https://example.org/cat.png", 400, "never fetches"),
        ("path outside the roots", str(outside), 404, "is not an indexed file"),
        ("ignored path inside", str(folder["root"] / "private" / "secret.png"), 404, "is not an indexed file"),
        ("relative path", "photo.jpg", 400, "is relative"),
    ]


def test_hostile_query_images_get_their_own_4xx_through_search_v1_and_mcp_and_change_nothing(folder, served, tmp_path):
    from mcp import Client

    cases = _hostile(folder, tmp_path)
    before = _counts(served)
    seen: dict[str, tuple[int, str]] = {}
    with served.client() as c:
        for name, image, status, words in cases:
            answer = c.post("/search", json={"collection": "pics", "image": image, "k": 3})
            seen[name] = (answer.status_code, answer.text[:300])
            assert answer.status_code == status, (name, answer.text[:300])
            if status == 200:
                assert answer.json()["hits"][0]["media"] == "image", name
            else:
                message = answer.json()["error"]["message"]
                assert words in message and " object at 0x" not in message, (name, message)
            assert c.get("/healthz").status_code == 200, name
            if image.startswith("data:"):
                v1 = c.post("/v1/embeddings", json={"input": [{"image": image}]})
                assert v1.status_code == (200 if status == 200 else 400), (name, v1.text[:300])
                if status != 200:
                    assert words in v1.json()["error"]["message"], (name, v1.text[:300])
        text_too_big = c.post("/search", json={"collection": "pics", "query": "x " * 600_000})
        image_too_big = c.post("/search", content=b'{"image": "data:image/png;base64,' + b"A" * (33 << 20) + b'"}',
                               headers={"content-type": "application/json"})
        over_decode_cap = c.post("/search", json={"collection": "pics", "image": uri(os.urandom(21 << 20), "png")})
        ready = c.get("/readyz")
    assert text_too_big.status_code == 413 and "(max_body_bytes)" in text_too_big.text
    assert image_too_big.status_code == 413 and "(max_image_body_bytes" in image_too_big.text
    assert over_decode_cap.status_code == 422 and "at most" in over_decode_cap.text
    assert ready.status_code == 200, ready.text

    async def by_mcp() -> dict[str, tuple[bool, str]]:
        out = {}
        async with Client(served.url + "/mcp") as client:
            for name, image, _status, _words in cases:
                result = await client.call_tool("search", {"image": image, "collection": "pics", "k": 2})
                out[name] = (bool(result.is_error), result.content[0].text if result.content else "")
        return out

    for (name, _image, status, words), (is_error, text) in zip(cases, anyio.run(by_mcp).values(), strict=True):
        assert is_error == (status != 200), (name, text[:300])
        if status != 200:
            assert words in text and " object at 0x" not in text, (name, text[:300])
    assert _counts(served) == before
    with served.client() as c:
        st = c.get("/status").json()["server"]
    assert not [e for e in st["last_errors"] if e["where"] != "warm-up"], st["last_errors"]
