"""A tiny Qwen3-VL embedding checkpoint (random weights) and its transformers reference for images x prompts.

Run with a Python that has torch, transformers and tokenizers (under the tests' lock: it is CPU work)::

    flock /tmp/indexer-tests.lock nice -n 10 /work/benchvenv/bin/python tools/tiny_models/qwen3_vl.py

Writes ``tests/fixtures/families/qwen3-vl-embedding/``:

* ``checkpoint/``: a ``Qwen3VLForConditionalGeneration`` as Hugging Face saves it (f16 safetensors, tied
  embeddings, so no lm_head), with the shapes of Qwen3-VL (a vision tower with 2-D rotary attention, learned
  position embeddings interpolated to the image's grid, a 2x2 patch merger, one deepstack merger; an M-RoPE
  text model with interleaved sections) at toy sizes; the byte-level BPE tokenizer of
  ``tools/tiny_models/qwen3.py`` plus Qwen's vision tokens; a sentence-transformers Pooling module
  (lasttoken), which is how Qwen3-VL-Embedding pools (causal attention, LAST token);
  ``preprocessor_config.json`` with the pixel limits llama.cpp's qwen3vl projector uses (8 to 4096 merged
  tokens), so both sides pick the same image size;
* ``images/``: four small images (PNG and JPEG; sizes multiples of the 32-pixel merge block, and one that is
  not, to measure resizing);
* ``reference.json``: per image and prompt the text segments, their token ids, the image's media token count
  and grid, and the pooled, L2-normalized vector of transformers (float32, the f16 weights widened): LAST (the
  model's pooling), and MEAN and first-row (CLS) pooling of the same rows.

The reference input is built as llama.cpp's MTMD builds it: each text segment tokenized on its own, then
``<|vision_start|>``, one ``<|image_pad|>`` per merged patch, ``<|vision_end|>``. The vector is the last
token's final hidden state (LAST pooling), L2-normalized. The tests never import torch.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import AddedToken, Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FIXTURES  # noqa: E402
from qwen3 import CONFIG_VOCAB, save_tokenizer, train_tokenizer  # noqa: E402

FAMILY = "qwen3-vl-embedding"
SEED = 4321
INIT_RANGE = 0.1  # random weights that give distinct vectors per image
PATCH, MERGE, TEMPORAL = 16, 2, 2
MIN_PIXELS = 8 * (PATCH * MERGE) ** 2  # llama.cpp's qwen3vl limits: 8 .. 4096 merged tokens
MAX_PIXELS = 4096 * (PATCH * MERGE) ** 2
MEAN = STD = [0.5, 0.5, 0.5]
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# (file name, width, height): sizes that are multiples of 32 (no resize on either side), one that is not
IMAGES = (("gradient.png", 128, 96), ("rings.png", 96, 160), ("blocks.jpg", 160, 128), ("odd.png", 100, 75))
# prompts in MTMD's form: the marker where the image goes
MARKER = "<__media__>"
PROMPTS = ("A photo of " + MARKER, MARKER + " describe this picture", "Query: which image? " + MARKER + " Answer:")


def make_image(name: str, w: int, h: int) -> bytes:
    rng = np.random.default_rng(len(name) * 7919 + w * 31 + h)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    if name.startswith("gradient"):
        img = np.stack([x / w * 255, y / h * 255, (x + y) / (w + h) * 255], -1)
    elif name.startswith("rings"):
        r = np.hypot(x - w / 2, y - h / 2)
        img = np.stack([(np.sin(r / 4) + 1) * 127, (np.cos(r / 7) + 1) * 127, r / r.max() * 255], -1)
    elif name.startswith("blocks"):
        img = np.stack([((x // 32 + y // 32) % 2) * 200 + 30, (x // 16 % 3) * 80, (y // 16 % 4) * 60], -1)
    else:
        img = np.stack([np.sin(x / 9) * 100 + 128, np.cos(y / 5) * 100 + 128, (x * y) % 256], -1)
    img = np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format="JPEG" if name.endswith(".jpg") else "PNG", quality=92)
    return buf.getvalue()


def tokenizer() -> Tokenizer:
    tok = train_tokenizer()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS])
    return tok


def build_config(tok: Tokenizer) -> object:
    from transformers import Qwen3VLConfig

    text = dict(
        vocab_size=CONFIG_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
        rms_norm_eps=1e-6, initializer_range=INIT_RANGE, hidden_act="silu", attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                         "mrope_interleaved": True},
        bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    vision = dict(
        depth=2, hidden_size=32, hidden_act="gelu_pytorch_tanh", intermediate_size=64, num_heads=2,
        in_channels=3, patch_size=PATCH, spatial_merge_size=MERGE, temporal_patch_size=TEMPORAL,
        out_hidden_size=64, num_position_embeddings=64, deepstack_visual_indexes=[0], initializer_range=INIT_RANGE,
    )
    return Qwen3VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=True,
        image_token_id=tok.token_to_id("<|image_pad|>"), video_token_id=tok.token_to_id("<|video_pad|>"),
        vision_start_token_id=tok.token_to_id("<|vision_start|>"),
        vision_end_token_id=tok.token_to_id("<|vision_end|>"),
        architectures=["Qwen3VLForConditionalGeneration"],
    )


def image_processor() -> object:
    from transformers import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(
        do_resize=True, size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}, patch_size=PATCH,
        temporal_patch_size=TEMPORAL, merge_size=MERGE, image_mean=MEAN, image_std=STD, do_rescale=True,
        rescale_factor=1 / 255, do_normalize=True, do_convert_rgb=True,
    )


def write_checkpoint(out: Path, tok: Tokenizer) -> None:
    from transformers import Qwen3VLForConditionalGeneration

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    torch.manual_seed(SEED)
    model = Qwen3VLForConditionalGeneration(build_config(tok)).eval()
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    save_tokenizer(tok, out, append_eos=False)
    image_processor().save_pretrained(out)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=2) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_lasttoken": True, "include_prompt": True}, indent=2) + "\n")
    (out / "README.md").write_text("# tiny Qwen3-VL-Embedding\n\nRandom weights, for tests only "
                                   "(tools/tiny_models/qwen3_vl.py).\n")


def reference(out: Path, images: dict[str, bytes]) -> dict[str, object]:
    from transformers import AutoTokenizer, Qwen3VLModel

    tok = AutoTokenizer.from_pretrained(out)
    model = Qwen3VLModel.from_pretrained(out, dtype=torch.float32).eval()
    proc = image_processor()
    ids = {t: tok.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    cases = []
    for name, data in images.items():
        pil = Image.open(io.BytesIO(data)).convert("RGB")
        pix = proc(images=[pil], return_tensors="pt")
        grid = pix["image_grid_thw"]
        n_media = int(grid.prod()) // MERGE**2
        for prompt in PROMPTS:
            before, after = prompt.split(MARKER)
            seg_ids = [tok(s, add_special_tokens=False)["input_ids"] if s else [] for s in (before, after)]
            input_ids = (seg_ids[0] + [ids["<|vision_start|>"]] + [ids["<|image_pad|>"]] * n_media
                         + [ids["<|vision_end|>"]] + seg_ids[1])
            with torch.no_grad():
                ids_t = torch.tensor([input_ids])
                hidden = model(input_ids=ids_t, pixel_values=pix["pixel_values"], image_grid_thw=grid,
                               mm_token_type_ids=(ids_t == ids["<|image_pad|>"]).int()).last_hidden_state[0]
            vec = torch.nn.functional.normalize(hidden[-1], dim=0)
            mean = torch.nn.functional.normalize(hidden.mean(dim=0), dim=0)  # MEAN pooling of the same rows
            first = torch.nn.functional.normalize(hidden[0], dim=0)  # CLS pooling (the first row)
            cases.append({"image": name, "prompt": prompt, "segments": [before, after], "segment_ids": seg_ids,
                          "grid_thw": grid[0].tolist(), "n_media_tokens": n_media, "n_tokens": len(input_ids),
                          "vector": [round(float(v), 7) for v in vec],
                          "mean_vector": [round(float(v), 7) for v in mean],
                          "first_vector": [round(float(v), 7) for v in first]})
    text_only = ["a photo of a cat", "glaciers carve valleys"]
    text_vectors = []
    for text in text_only:
        tids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            hidden = model(input_ids=torch.tensor([tids])).last_hidden_state[0]
        text_vectors.append({"text": text, "token_ids": tids,
                             "vector": [round(float(v), 7) for v in torch.nn.functional.normalize(hidden[-1], dim=0)]})
    return {"family": FAMILY, "architecture": "Qwen3VLForConditionalGeneration", "marker": MARKER,
            "pooling": "last", "cases": cases, "texts": text_vectors,
            "processor": {"patch_size": PATCH, "merge_size": MERGE, "min_pixels": MIN_PIXELS,
                          "max_pixels": MAX_PIXELS, "mean": MEAN, "std": STD}}


def main() -> None:
    root = FIXTURES / FAMILY
    tok = tokenizer()
    write_checkpoint(root / "checkpoint", tok)
    img_dir = root / "images"
    shutil.rmtree(img_dir, ignore_errors=True)
    img_dir.mkdir(parents=True)
    images = {}
    for name, w, h in IMAGES:
        images[name] = make_image(name, w, h)
        (img_dir / name).write_bytes(images[name])
    ref = reference(root / "checkpoint", images)
    (root / "reference.json").write_text(json.dumps(ref, indent=1, ensure_ascii=False) + "\n")
    print("wrote", root, sum(p.stat().st_size for p in root.rglob("*") if p.is_file()), "bytes")


if __name__ == "__main__":
    main()
