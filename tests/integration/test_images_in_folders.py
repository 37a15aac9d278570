"""Images in folders, found by what they show: a folder of generated images and text files indexed with the tiny
Qwen3-VL fixture (tests/vision.py: real GGUF model + MTMD projector, run by llama.cpp), each image used as the
query through the Python API, the CLI (a subprocess), HTTP (a real server on loopback) and MCP (the SDK's client)
finds itself first with the same score; ``/v1/embeddings`` image items, the thumbnail endpoint, a text-only model
over the same folder (as before images were embedded), and ``reindex --model`` to the multimodal model.

Random weights cannot show retrieval quality: nothing here depends on it (an image finds itself because its
vector is its own; different images' vectors are only checked not to coincide).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from PIL import Image

from tests import vision
from tests.server.conftest import ServerHandle, start_server

SMALL = 8  # images (and text files) in the default test; 200 in the slow one
FORMATS = ("png", "jpg", "gif", "webp")


def make_folder(root: Path, n: int, seed: int = 0) -> list[Path]:
    """``n`` images (PNG, JPEG, GIF with two frames, WebP; random blocks, each different; one JPEG with an EXIF
    rotation, one large PNG that is downscaled) and ``n`` text files; returns the images."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    images = []
    for i in range(n):
        fmt = FORMATS[i % len(FORMATS)]
        w, h = int(rng.integers(24, 80)), int(rng.integers(24, 80))
        blocks = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
        pic = Image.fromarray(blocks).resize((w, h), Image.Resampling.NEAREST)
        path = root / ("pictures" if i % 2 else "more") / f"image-{i:03d}.{fmt}"
        path.parent.mkdir(exist_ok=True)
        if fmt == "gif":
            other = Image.fromarray(255 - blocks).resize((w, h), Image.Resampling.NEAREST)
            pic.save(path, save_all=True, append_images=[other], duration=100)
        elif fmt == "jpg" and i == 1:
            exif = Image.Exif()
            exif[0x0112] = 6  # rotate 90 degrees when shown
            pic.save(path, exif=exif.tobytes(), quality=90)
        elif fmt == "png" and i == 4:
            pic.resize((2400, 1600), Image.Resampling.NEAREST).save(path)  # downscaled to 1024 a side
        else:
            pic.save(path)
        images.append(path.resolve())
        (root / f"note-{i:03d}.txt").write_text(f"Note {i}: the meeting about topic {i * 7 % 13} is on day {i}.\n")
    return images


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode() if path.suffix == ".png" else (
        f"data:image/{'jpeg' if path.suffix == '.jpg' else path.suffix[1:]};base64,"
        + base64.b64encode(path.read_bytes()).decode())


@pytest.fixture(scope="module")
def vl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, projector = vision.build(tmp_path_factory.mktemp("vl"), "f16")
    assert projector.is_file()
    return model


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("folder")
    return root.resolve(), make_folder(root, SMALL)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, folder, vl_model) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The folder indexed with the multimodal model into collection 'pics' (OCR on: noise reads as no text)."""
    from indexer.collection.facade import open_collection
    from indexer.settings import Settings

    data = tmp_path_factory.mktemp("data")
    settings = Settings(data_dir=data, embed_model=str(vl_model), threads=2, collection="pics")
    with open_collection("pics", settings=settings) as col:
        report = col.index([folder[0]])
    yield settings, report.to_dict()


def _api_scores(settings: Any, images: list[Path]) -> dict[Path, tuple[str, float, int | None]]:
    from indexer.collection.facade import open_collection

    out = {}
    with open_collection("pics", settings=settings) as col:
        for path in images:
            hit = col.search(image=path.read_bytes(), k=3).hits[0]
            out[path] = (hit.path, hit.score, hit.width)
    return out


def test_the_folder_indexes_one_image_point_per_image_beside_the_text(indexed, folder):
    from indexer.collection.facade import open_collection

    settings, report = indexed
    assert report["failed"] == [] and report["skipped"] == []
    assert report["files_indexed"] == 2 * SMALL
    with open_collection("pics", settings=settings) as col:
        status = col.status()
        hits = col.search(image=folder[1][0].read_bytes(), k=2 * SMALL).hits
    assert status["points"] == status["chunks"] >= 2 * SMALL
    pictures = [h for h in hits if h.media == "image"]
    assert {h.path for h in pictures} == {str(p) for p in folder[1]}  # every image is one image point
    assert all(h.text == "" for h in pictures)


def test_each_image_finds_itself_first_through_the_python_api(indexed, folder):
    settings, _ = indexed
    found = _api_scores(settings, folder[1])
    for path, (hit, score, _width) in found.items():
        assert hit == str(path) and score == pytest.approx(1.0, abs=1e-4), (path, hit, score)
    big = folder[1][4]
    assert found[big][2] == 2400  # the original's size is reported, though 1024 a side reached the projector
    rotated = folder[1][1]
    with Image.open(rotated) as im:
        assert found[rotated][2] == im.height  # EXIF orientation 6: shown turned, so width and height swap


def test_vectors_of_different_images_are_not_near_identical(indexed, folder):
    from indexer.collection.facade import open_collection

    settings, _ = indexed
    with open_collection("pics", settings=settings) as col:
        for path in folder[1][:4]:
            hits = [h for h in col.search(image=path.read_bytes(), k=2 * SMALL).hits if h.media]
            assert hits[0].path == str(path)
            assert max(h.score for h in hits[1:]) < 0.995, [(h.path, h.score) for h in hits[:3]]


def test_an_image_query_by_path_must_be_an_indexed_file_inside_a_root(indexed, folder, tmp_path):
    from indexer.collection.facade import open_collection
    from indexer.errors import InputError, NotFoundError

    settings, _ = indexed
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(folder[1][0].read_bytes())
    with open_collection("pics", settings=settings) as col:
        assert col.search(image=str(folder[1][2]), k=1).hits[0].path == str(folder[1][2])
        with pytest.raises(NotFoundError):
            col.search(image=str(outside))
        with pytest.raises(InputError, match="not both"):
            col.search("words", image=folder[1][0].read_bytes())
        with pytest.raises(InputError, match="lexical"):
            col.search(image=folder[1][0].read_bytes(), mode="lexical")
        with pytest.raises(InputError, match="cannot decode"):
            col.search(image=b"not an image at all")


def test_the_cli_prints_path_and_pixel_size_and_finds_each_image_first(indexed, folder, tmp_path):
    settings, _ = indexed
    api = _api_scores(settings, folder[1][:3])
    env = {**os.environ, "INDEXER_DATA_DIR": str(settings.data_dir), "INDEXER_CONFIG": str(tmp_path / "none.toml"),
           "INDEXER_THREADS": "2"}
    for path in folder[1][:3]:
        done = subprocess.run([sys.executable, "-m", "indexer.cli", "search", "--image", str(path), "-c", "pics",
                               "--local", "--json", "-k", "3"], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        hits = json.loads(done.stdout)["hits"]
        assert hits[0]["path"] == str(path) and hits[0]["media"] == "image"
        assert hits[0]["score"] == pytest.approx(api[path][1], abs=1e-6)
    plain = subprocess.run([sys.executable, "-m", "indexer.cli", "search", "--image", str(folder[1][0]), "-c",
                            "pics", "--local", "-k", "1"], capture_output=True, text=True, env=env, timeout=300)
    with Image.open(folder[1][0]) as im:
        assert f"{folder[1][0]}  [image {im.width} x {im.height} px]" in plain.stdout, plain.stdout
    missing = subprocess.run([sys.executable, "-m", "indexer.cli", "search", "--image", str(tmp_path / "no.png"),
                              "-c", "pics", "--local"], capture_output=True, text=True, env=env, timeout=300)
    assert missing.returncode == 2 and "cannot read it" in missing.stderr


def test_status_names_pictures_weights_and_chunks_and_native_logs_stay_behind_v(indexed, folder, tmp_path):
    """`indexer status` says the collection embeds pictures (and how many image points), the model's weight type,
    chunk size and context; an in-process image search prints none of llama.cpp's MTMD lines without -v (they
    were on every projector load: "Qwen-VL models require at minimum 1024 image tokens"), and shows its
    warnings as log lines with -v."""
    settings, _ = indexed
    env = {**os.environ, "INDEXER_DATA_DIR": str(settings.data_dir), "INDEXER_CONFIG": str(tmp_path / "none.toml"),
           "INDEXER_THREADS": "2"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    plain = cli("status", "-c", "pics")
    assert plain.returncode == 0, plain.stderr
    rows = dict(line.split(None, 1) for line in plain.stdout.splitlines() if line.strip())
    assert rows["pictures"] == f"yes, {SMALL} image points (the model embeds images)", plain.stdout
    assert rows["model"].endswith("; weights f16)"), rows["model"]
    assert rows["chunks"] == "512 tokens each, context: none", rows["chunks"]
    data = json.loads(cli("status", "-c", "pics", "--json").stdout)
    assert data["pictures"] is True and data["image_points"] == SMALL
    assert data["weights"]["weight_types"] == ["f16"] and data["chunk_context"] == "none"
    assert data["chunk_tokens"] == 512

    quiet = cli("search", "--image", str(folder[1][0]), "-c", "pics", "--local", "-k", "1")
    assert quiet.returncode == 0 and quiet.stdout.startswith(f"1. {folder[1][0]}"), quiet.stderr
    assert "load_hparams" not in quiet.stderr and "clip_" not in quiet.stderr and "mtmd" not in quiet.stderr, \
        quiet.stderr
    loud = cli("-v", "search", "--image", str(folder[1][0]), "-c", "pics", "--local", "-k", "1")
    assert loud.returncode == 0, loud.stderr
    assert "INFO indexer.engine.mtmd_native: load_hparams: Qwen-VL models require" in loud.stderr, loud.stderr
    assert "tensor[0]" not in loud.stderr  # MTMD's narration (every tensor it loads) stays at DEBUG


@pytest.fixture(scope="module")
def served(indexed, folder) -> Iterator[ServerHandle]:
    settings, _ = indexed
    handle = start_server(settings, folder[0])
    yield handle
    handle.stop()


def test_http_and_mcp_find_each_image_first_with_the_same_score(indexed, folder, served):
    from mcp import Client

    settings, _ = indexed
    api = _api_scores(settings, folder[1])
    with served.client() as http:
        for path in folder[1]:
            for image in (data_uri(path), str(path)):
                answer = http.post("/search", json={"collection": "pics", "image": image, "k": 3})
                assert answer.status_code == 200, answer.text
                top = answer.json()["hits"][0]
                assert top["path"] == str(path) and top["media"] == "image"
                assert top["score"] == pytest.approx(api[path][1], abs=1e-6)
        url = http.post("/search", json={"collection": "pics", "image": "https://example.org/cat.png"})
        assert url.status_code == 400 and "never fetches" in url.json()["error"]["message"]

    async def main() -> list[dict[str, Any]]:
        async with Client(served.url + "/mcp") as client:
            out = []
            for path in folder[1]:
                result = await client.call_tool("search", {"image": data_uri(path), "collection": "pics", "k": 2})
                assert not result.is_error, result.content
                out.append(json.loads(result.content[0].text))
            return out

    for path, answer in zip(folder[1], anyio.run(main), strict=True):
        top = answer["hits"][0]
        with Image.open(path) as im:
            size = (im.width, im.height) if path != folder[1][1] else (im.height, im.width)
        assert top["image"] == {"path": str(path), "width": size[0], "height": size[1]}
        assert top["score"] == pytest.approx(round(api[path][1], 4), abs=1e-9)


def test_v1_embeddings_take_image_data_uris_and_refuse_anything_else(folder, served):
    png = folder[1][0]
    with served.client() as http:
        ok = http.post("/v1/embeddings", json={"input": [{"image": data_uri(png)}, "a note about a meeting"]})
        assert ok.status_code == 200, ok.text
        vectors = [np.asarray(d["embedding"]) for d in ok.json()["data"]]
        assert all(abs(np.linalg.norm(v) - 1) < 1e-4 for v in vectors) and abs(float(vectors[0] @ vectors[1])) < 0.99
        again = http.post("/v1/embeddings", json={"input": [{"image": data_uri(png)}]}).json()["data"][0]["embedding"]
        assert np.allclose(again, vectors[0], atol=1e-5)
        for bad, words in (({"image": "https://example.org/a.png"}, "data URI"),
                           ({"image": "data:text/plain;base64,aGk="}, "image/png"),
                           ({"image": "data:image/png;base64,@@@"}, "base64"),
                           ({"image": "data:image/png;base64," + base64.b64encode(b"nope").decode()}, "decode")):
            answer = http.post("/v1/embeddings", json={"input": [bad]})
            assert answer.status_code == 400, (bad, answer.text)
            assert words in answer.json()["error"]["message"]


def test_thumbnails_are_served_for_indexed_images_only_capped_and_cached(folder, served, tmp_path):
    big = folder[1][4]
    with served.client() as http:
        started = time.perf_counter()
        first = http.get("/thumbnail", params={"collection": "pics", "path": str(big), "size": 128})
        cold = time.perf_counter() - started
        assert first.status_code == 200 and first.headers["content-type"] == "image/jpeg"
        with Image.open(io.BytesIO(first.content)) as im:
            assert max(im.size) == 128
        started = time.perf_counter()
        second = http.get("/thumbnail", params={"collection": "pics", "path": str(big), "size": 128})
        assert second.content == first.content and time.perf_counter() - started < cold
        outside = tmp_path / "secret.png"
        outside.write_bytes(big.read_bytes())
        assert http.get("/thumbnail", params={"collection": "pics", "path": str(outside)}).status_code == 404
        note = folder[0] / "note-000.txt"
        assert http.get("/thumbnail", params={"collection": "pics", "path": str(note)}).status_code == 400
        assert http.get("/thumbnail", params={"collection": "pics", "path": str(big), "size": 4096}).status_code == 422


def test_with_a_text_only_model_the_folder_is_indexed_as_before(folder, embed_model_path, tmp_path):
    """PNG and JPEG OCR'd (noise reads as no text) or skipped, GIF and WebP not taken; no image point, and an image
    query says the model embeds text only."""
    from indexer.collection.facade import open_collection
    from indexer.errors import InputError
    from indexer.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", embed_model=str(embed_model_path), threads=2)
    with open_collection("text", settings=settings) as col:
        report = col.index([folder[0]]).to_dict()
        assert report["failed"] == []
        taken = {Path(p) for p in col.parts.state.files("text")}
        assert not any(p.suffix in (".gif", ".webp") for p in taken)
        hits = col.search("meeting about topic", k=2 * SMALL).hits
        assert hits and not any(h.media for h in hits)
        status = col.status()
        assert status["pictures"] is False and status["image_points"] == 0
        with pytest.raises(InputError, match="embeds text only"):
            col.search(image=folder[1][0].read_bytes())


def test_reindex_to_the_multimodal_model_reads_the_images_again(folder, embed_model_path, vl_model, tmp_path):
    from indexer.collection import reindex
    from indexer.collection.facade import open_collection
    from indexer.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", embed_model=str(embed_model_path), threads=2)
    with open_collection("switch", settings=settings) as col:
        col.index([folder[0]])
        before = col.status()["model"]
        report = reindex.run(col, str(vl_model))
        assert report.switched
    with open_collection("switch", settings=settings) as col:
        status = col.status()
        assert status["model"] != before and "+mmproj-" in status["model"]  # the projector is in the identity
        for path in folder[1][:4]:  # GIF and WebP included: a text-only model never took them
            assert col.search(image=path.read_bytes(), k=1).hits[0].path == str(path)


@pytest.mark.slow
def test_200_images_and_200_text_files_index_without_a_failure_and_each_finds_itself_in_every_front_end(
        vl_model, tmp_path):
    """Python API and HTTP for all 200 images, MCP for all 200 in one session, the CLI for every 20th (a process
    each); the same score everywhere."""
    from mcp import Client

    from indexer.collection.facade import open_collection
    from indexer.settings import Settings

    images = make_folder(tmp_path / "big", 200, seed=7)
    settings = Settings(data_dir=tmp_path / "data", embed_model=str(vl_model), threads=2, collection="big",
                        reader_options={"image": {"ocr": False}})  # the picture alone: OCR would only cost time
    api: dict[Path, float] = {}
    with open_collection("big", settings=settings) as col:
        report = col.index([tmp_path / "big"]).to_dict()
        assert report["failed"] == [] and report["skipped"] == [] and report["files_indexed"] == 400
        for path in images:
            hits = col.search(image=path.read_bytes(), k=2).hits
            assert hits[0].path == str(path) and hits[0].score == pytest.approx(1.0, abs=1e-4)
            assert hits[1].score < 0.995
            api[path] = hits[0].score
    handle = start_server(settings, tmp_path / "big")
    try:
        with handle.client() as http:
            for path in images:
                top = http.post("/search", json={"collection": "big", "image": data_uri(path), "k": 1}).json()
                assert top["hits"][0]["path"] == str(path)
                assert top["hits"][0]["score"] == pytest.approx(api[path], abs=1e-6)

        async def mcp_all() -> list[dict[str, Any]]:
            async with Client(handle.url + "/mcp") as client:
                return [json.loads((await client.call_tool("search", {"image": data_uri(p), "collection": "big",
                                                                       "k": 1})).content[0].text) for p in images]

        for path, answer in zip(images, anyio.run(mcp_all), strict=True):
            assert answer["hits"][0]["image"]["path"] == str(path)
            assert answer["hits"][0]["score"] == pytest.approx(round(api[path], 4), abs=1e-9)
    finally:
        handle.stop()
    env = {**os.environ, "INDEXER_DATA_DIR": str(settings.data_dir), "INDEXER_CONFIG": str(tmp_path / "none.toml"),
           "INDEXER_THREADS": "2"}
    for path in images[::20]:
        done = subprocess.run([sys.executable, "-m", "indexer.cli", "search", "--image", str(path), "-c", "big",
                               "--local", "--json", "-k", "1"], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        top = json.loads(done.stdout)["hits"][0]
        assert top["path"] == str(path) and top["score"] == pytest.approx(api[path], abs=1e-6)


def test_an_image_points_hybrid_rank_is_never_above_its_dense_rank_unless_its_words_earn_it(indexed, folder):
    """A text query in hybrid mode: an image point has no words, so the lexical side can find it only by its file
    name. One the lexical side does not find never ranks above its dense rank in the fused list (fusion may only
    push it down), and no fused score leaves the documented 0..1 range (issue: Filters as documented)."""
    from indexer.collection.facade import open_collection

    settings, _ = indexed
    n = 4 * SMALL
    queries = ["the meeting about topic 3 is on day 2", "colored blocks in a small picture", "note on day 5",
               "image 002", "pictures more"]
    checked = 0
    with open_collection("pics", settings=settings) as col:
        for query in queries:
            dense = col.search(query, k=n, candidates=n, mode="dense", rerank=False).hits
            hybrid = col.search(query, k=n, candidates=n, mode="hybrid", rerank=False).hits
            lexical = {h.chunk_id for h in col.search(query, k=n, candidates=n, mode="lexical", rerank=False).hits}
            assert all(0.0 <= h.score <= 1.0 + 1e-9 for h in hybrid), [(h.path, h.score) for h in hybrid]
            dense_rank = {h.chunk_id: i for i, h in enumerate(dense)}
            for i, hit in enumerate(hybrid):
                if hit.media != "image" or hit.chunk_id in lexical or hit.chunk_id not in dense_rank:
                    continue
                assert i >= dense_rank[hit.chunk_id], (query, hit.path, i, dense_rank[hit.chunk_id])
                checked += 1
    assert checked >= SMALL  # the pictures were compared, not skipped
