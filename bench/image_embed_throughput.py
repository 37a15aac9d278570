"""Image embedding throughput (images/s) through ``LlamaEmbedding.embed_multimodal`` at a real model's dimensions.

Speed does not depend on the weights' values, so the model is Qwen3-VL-Embedding-2B's shape with random weights:
a checkpoint folder is written (f16 safetensors, streamed tensor by tensor) with Qwen3-VL-2B's text model (28
layers, hidden 2048, 16 heads / 8 KV heads of 128, FFN 6144, M-RoPE sections 24/20/20) and vision tower (24
blocks, hidden 1024, 16 heads, FFN 4096, patch 16, 2x2 merge, deepstack after blocks 5, 11 and 17, 2304
position embeddings), then converted by our converter (text GGUF + projector GGUF). The only reduced dimension
is the vocabulary (the tiny fixture's 4096-token tokenizer instead of 151,936): a pooled embedding has no output
head, so the vocabulary costs one row lookup per text token.

Each image is a request of its own (``"Represent this image: <__media__>"``), timed end to end (decode of the
bytes, preprocessing, the vision tower, the text model's pooled decode), after one warm-up request; the
projector's share is timed separately through ``MTMDBaseHandler.tokenize(...).encode()``.

    flock /tmp/indexer-tests.lock .venv/bin/python bench/image_embed_throughput.py [--quant q8_0] [--size 448]
        [--images 6] [--work /tmp/vl-bench]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import struct
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TINY = ROOT / "tests" / "fixtures" / "families" / "qwen3-vl-embedding" / "checkpoint"
TEXT = {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 262144}
MROPE = [24, 20, 20]
VISION = {"depth": 24, "hidden_size": 1024, "intermediate_size": 4096, "num_heads": 16, "out_hidden_size": 2048,
          "num_position_embeddings": 2304, "deepstack_visual_indexes": [5, 11, 17]}


def shapes(vocab: int) -> dict[str, tuple[int, ...]]:
    h, i, hd = TEXT["hidden_size"], TEXT["intermediate_size"], TEXT["head_dim"]
    q, kv = TEXT["num_attention_heads"] * hd, TEXT["num_key_value_heads"] * hd
    out: dict[str, tuple[int, ...]] = {"model.language_model.embed_tokens.weight": (vocab, h),
                                       "model.language_model.norm.weight": (h,)}
    for n in range(TEXT["num_hidden_layers"]):
        p = f"model.language_model.layers.{n}."
        out |= {p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i),
                p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)}
    d, vi, o = VISION["hidden_size"], VISION["intermediate_size"], VISION["out_hidden_size"]
    v = "model.visual."
    out |= {v + "patch_embed.proj.weight": (d, 3, 2, 16, 16), v + "patch_embed.proj.bias": (d,),
            v + "pos_embed.weight": (VISION["num_position_embeddings"], d)}
    for n in range(VISION["depth"]):
        p = f"{v}blocks.{n}."
        out |= {p + "attn.qkv.weight": (3 * d, d), p + "attn.qkv.bias": (3 * d,), p + "attn.proj.weight": (d, d),
                p + "attn.proj.bias": (d,), p + "mlp.linear_fc1.weight": (vi, d), p + "mlp.linear_fc1.bias": (vi,),
                p + "mlp.linear_fc2.weight": (d, vi), p + "mlp.linear_fc2.bias": (d,), p + "norm1.weight": (d,),
                p + "norm1.bias": (d,), p + "norm2.weight": (d,), p + "norm2.bias": (d,)}
    for j, prefix in [(None, v + "merger.")] + [(j, f"{v}deepstack_merger_list.{j}.") for j in range(3)]:
        norm = 4 * d if j is not None else d
        out |= {prefix + "linear_fc1.weight": (4 * d, 4 * d), prefix + "linear_fc1.bias": (4 * d,),
                prefix + "linear_fc2.weight": (o, 4 * d), prefix + "linear_fc2.bias": (o,),
                prefix + "norm.weight": (norm,), prefix + "norm.bias": (norm,)}
    return out


def write_checkpoint(folder: Path, seed: int = 0) -> int:
    """The random-weight checkpoint (f16), streamed; returns its parameter count."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(TINY, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    config = json.loads((TINY / "config.json").read_text())
    config["text_config"].update(TEXT)
    config["text_config"]["rope_parameters"]["mrope_section"] = MROPE
    config["vision_config"].update(VISION)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    specs = shapes(int(config["text_config"]["vocab_size"]))
    header, offset = {}, 0
    for name, shape in specs.items():
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    rng = np.random.default_rng(seed)
    with open(folder / "model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in specs.items():
            ones = len(shape) == 1 and ("norm" in name or "layernorm" in name) and name.endswith(".weight")
            arr = np.ones(shape, np.float16) if ones else (rng.standard_normal(shape, np.float32) * 0.02).astype(
                np.float16)
            fh.write(arr.tobytes())
    return sum(int(np.prod(s)) for s in specs.values())


def png(width: int, height: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * (seed + 3)) % 256, (y * (seed + 5)) % 256, (x + y) % 256], -1)
    img = img + rng.integers(0, 16, (height, width, 3))
    rows = b"".join(b"\x00" + np.clip(r, 0, 255).astype(np.uint8).tobytes() for r in img)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def main() -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding
    from indexer.models.cache import default_quant
    from indexer.models.convert import convert_checkpoint, projector_path
    from indexer.models.native import machine_line

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quant", default=None, help="weight type (default: this machine's default)")
    ap.add_argument("--size", type=int, default=448, help="image side in pixels (448: 196 merged patches)")
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--work", type=Path, default=Path("/tmp/vl-bench"))
    args = ap.parse_args()
    quant = args.quant or default_quant()
    print(machine_line(), flush=True)
    folder, model_path = args.work / "checkpoint", args.work / f"qwen3-vl-2b-shape-{quant}.gguf"
    if not model_path.is_file():
        t = time.perf_counter()
        n_params = write_checkpoint(folder)
        convert_checkpoint(folder, model_path, quant, name="qwen3-vl-2b-shape")
        print(f"built {n_params / 1e9:.2f}B parameters ({quant}) in {time.perf_counter() - t:.0f} s", flush=True)
    images = [png(args.size, args.size, seed) for seed in range(args.images + 1)]
    llm = LlamaEmbedding(str(model_path), mmproj_path=str(projector_path(model_path)), verbose=False,
                         n_batch=1024, n_ubatch=1024)
    try:
        prompt = "Represent this image: <__media__>"
        _, n_tokens = llm.embed_multimodal(prompt, [images[0]], return_count=True)  # warm-up (graph reservation)
        times = []
        for image in images[1:]:
            t = time.perf_counter()
            llm.embed_multimodal(prompt, [image])
            times.append(time.perf_counter() - t)
        handler = llm.embedding_handler
        enc = []
        for image in images[1:3]:
            with handler.tokenize(llm, prompt, [image]) as request:
                t = time.perf_counter()
                request.encode()
                enc.append(time.perf_counter() - t)
    finally:
        llm.close()
    med = statistics.median(times)
    print(f"qwen3-vl-2b shape ({quant}), {args.size}x{args.size} images, {n_tokens} tokens per request: "
          f"{1 / med:.3f} images/s (median {med:.2f} s per image, range {min(times):.2f}-{max(times):.2f} s over "
          f"{len(times)}); vision tower + projector {statistics.median(enc):.2f} s of it", flush=True)
    print(machine_line(), flush=True)


if __name__ == "__main__":
    main()
