"""Images in a folder: indexing throughput (images/s) at a real model's dimensions, and the thumbnail endpoint's
latency.

1. **Indexing.** The model is Qwen3-VL-Embedding-2B's shape with random weights (built by
   ``bench/image_embed_throughput.py``'s ``write_checkpoint`` and our converter; speed does not depend on the
   values). A folder of ``--images`` PNGs (``--size`` pixels a side) is indexed through the facade
   (``open_collection(...).index``) exactly as ``indexer index`` does: scan, the image reader in the parse worker
   (decode, orientation, downscale, PNG), one image point each through the projector, FAISS write, commit.
   images/s is the files over the whole run's wall time.
2. **Thumbnails.** A real server on loopback over a collection indexed with the tiny Qwen3-VL fixture (no model
   runs for a thumbnail): ``GET /thumbnail?size=256`` for 4000x3000 JPEG photos and 1024x1024 PNGs, each asked
   twice: the first answer is made (decode, shrink, JPEG), the second comes from the cache.

    flock /tmp/indexer-tests.lock .venv/bin/python bench/image_index_throughput.py [--quant q8_0] [--size 448]
        [--images 6] [--work /tmp/vl-bench] [--thumbs 12]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def model_file(work: Path, quant: str) -> Path:
    from image_embed_throughput import write_checkpoint  # type: ignore[import-not-found]

    from indexer.models.convert import convert_checkpoint

    path = work / f"qwen3-vl-2b-shape-{quant}.gguf"
    if not path.is_file():
        t = time.perf_counter()
        n = write_checkpoint(work / "checkpoint")
        convert_checkpoint(work / "checkpoint", path, quant, name="qwen3-vl-2b-shape")
        print(f"built {n / 1e9:.2f}B parameters ({quant}) in {time.perf_counter() - t:.0f} s", flush=True)
    return path


def index_images(model: Path, n: int, size: int) -> None:
    from image_embed_throughput import png

    from indexer.collection.facade import open_collection
    from indexer.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        folder, warm = Path(tmp) / "pictures", Path(tmp) / "warm-up"
        folder.mkdir()
        warm.mkdir()
        for i in range(n):
            (folder / f"p{i:03d}.png").write_bytes(png(size, size, i))
        (warm / "w.png").write_bytes(png(size, size, 999))
        settings = Settings(data_dir=Path(tmp) / "data", embed_model=str(model), threads=None, collection="pics")
        with open_collection("pics", settings=settings) as col:
            col.index([warm])  # warm-up: model and projector loaded, graph reserved (not counted)
            t = time.perf_counter()
            report = col.index([folder])
            wall = time.perf_counter() - t
        done = report.files_indexed
        assert not report.failed, report.failed
        print(f"indexing: {done} images of {size}x{size} in {wall:.1f} s = {done / wall:.3f} images/s "
              f"(embedding {report.embed_seconds:.1f} s of it; {report.points_upserted} points)", flush=True)


def thumbnails(count: int) -> None:
    import httpx
    from PIL import Image

    from indexer.collection.facade import open_collection
    from indexer.settings import Settings
    from tests import vision
    from tests.server.conftest import start_server

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        model, _ = vision.build(Path(tmp), "f16")
        folder = Path(tmp) / "photos"
        folder.mkdir()
        kinds: dict[str, list[Path]] = {"4000x3000 JPEG": [], "1024x1024 PNG": []}
        for i in range(count):
            blocks = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
            photo = Image.fromarray(blocks).resize((4000, 3000), Image.Resampling.BILINEAR)
            path = folder / f"photo{i:02d}.jpg"
            photo.save(path, quality=88)
            kinds["4000x3000 JPEG"].append(path)
            path = folder / f"shot{i:02d}.png"
            Image.fromarray(blocks).resize((1024, 1024), Image.Resampling.BILINEAR).save(path)
            kinds["1024x1024 PNG"].append(path)
        settings = Settings(data_dir=Path(tmp) / "data", embed_model=str(model), threads=2, collection="pics")
        with open_collection("pics", settings=settings) as col:
            col.index([folder])
        handle = start_server(settings, folder)
        try:
            with httpx.Client(base_url=handle.url, timeout=120) as http:
                http.get("/thumbnail", params={"collection": "pics", "path": str(kinds["1024x1024 PNG"][0])})
                for kind, paths in kinds.items():
                    cold, warm = [], []
                    for path in paths:
                        for bucket in (cold, warm):
                            t = time.perf_counter()
                            answer = http.get("/thumbnail", params={"collection": "pics", "path": str(path),
                                                                    "size": 200})
                            bucket.append((time.perf_counter() - t) * 1000)
                            assert answer.status_code == 200, answer.text
                    with Image.open(io.BytesIO(answer.content)) as im:
                        shape = f"{im.width}x{im.height}, {len(answer.content):,} bytes"
                    print(f"thumbnail of a {kind} ({shape}): made p50 {statistics.median(cold):.1f} ms "
                          f"(max {max(cold):.1f}), cached p50 {statistics.median(warm):.2f} ms "
                          f"(max {max(warm):.2f}) over {len(paths)}", flush=True)
        finally:
            handle.stop()


def main() -> None:
    from indexer.models.cache import default_quant
    from indexer.models.native import machine_line

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quant", default=None, help="weight type (default: this machine's default)")
    ap.add_argument("--size", type=int, default=448)
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--thumbs", type=int, default=12)
    ap.add_argument("--work", type=Path, default=Path("/tmp/vl-bench"))
    ap.add_argument("--skip-index", action="store_true")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if not args.skip_index:
        index_images(model_file(args.work, args.quant or default_quant()), args.images, args.size)
    thumbnails(args.thumbs)
    print(machine_line(), flush=True)


if __name__ == "__main__":
    main()
