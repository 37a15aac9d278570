"""Qwen3-VL embedding (causal attention, LAST pooling, an M-RoPE text model fed by a qwen3vl projector with a
deepstack merger) against transformers, through our converter and llama.cpp's MTMD.

Fixture made by ``tools/tiny_models/qwen3_vl.py``: random weights at toy sizes, four images (three whose sizes
are multiples of the 32-pixel merge block, one of 100x75 that both sides resize to 128x96 with their own bicubic
filters) times three prompts with the image at the start, the end and in the middle. The reference is
transformers' ``Qwen3VLModel`` on the input MTMD builds (text segments tokenized separately,
``<|vision_start|>``, one ``<|image_pad|>`` per merged patch, ``<|vision_end|>``): its last row, L2-normalized.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from tests import vision
from tests.twins import refused_here

REF = vision.reference()
IMAGES = vision.images()
MIN_COSINE = {"f32": 0.999, "f16": 0.999, "bf16": 0.999, "q8_0": 0.995}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    out = tmp_path_factory.mktemp("qwen3-vl")
    return {quant: vision.build(out, quant) for quant in ("f32", "f16", "bf16", "q8_0")}


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.ggml.")}
    meta["tensors"] = {t.name: (t.tensor_type, [int(n) for n in t.shape]) for t in reader.tensors}
    return meta


# -- conversion ------------------------------------------------------------------------------------------------


def test_the_text_model_is_written_as_llama_cpp_writes_qwen3vl(built):
    meta = _fields(built["f16"][0])
    assert meta["general.architecture"] == "qwen3vl"
    assert meta["qwen3vl.rope.dimension_sections"] == [4, 2, 2, 0]  # mrope_section padded to four
    assert meta["qwen3vl.n_deepstack_layers"] == 1
    assert meta["qwen3vl.pooling_type"] == int(gguf.PoolingType.LAST)
    assert not any(name.startswith(("v.", "mm.")) for name in meta["tensors"])  # the tower is the projector's


def test_the_projector_is_written_as_llama_cpp_writes_a_qwen3vl_mmproj(built):
    meta = _fields(built["f16"][1])
    assert meta["general.architecture"] == "clip" and meta["general.type"] == "mmproj"
    assert meta["clip.projector_type"] == "qwen3vl_merger"
    assert meta["clip.vision.projection_dim"] == 64 and meta["clip.vision.image_size"] == 128  # sqrt(64) * 16
    assert meta["clip.vision.is_deepstack_layers"] == [True, False]
    assert meta["clip.vision.spatial_merge_size"] == 2 and meta["clip.use_gelu"] is True
    tensors = meta["tensors"]
    # the Conv3D patch embedding split along its temporal axis into two Conv2D kernels
    assert tensors["v.patch_embd.weight"][1] == tensors["v.patch_embd.weight.1"][1] == [16, 16, 3, 32]
    assert tensors["v.position_embd.weight"][0] == gguf.GGMLQuantizationType.F32  # interpolated: F32 only
    assert {"mm.0.weight", "mm.2.weight", "v.post_ln.weight", "v.deepstack.0.fc1.weight",
            "v.blk.1.attn_qkv.weight"} <= set(tensors)


# -- numerics against transformers ----------------------------------------------------------------------------


def _run(model: Any, case: dict[str, Any]) -> tuple[list[float], int]:
    result: tuple[list[float], int] = model.embed_multimodal(case["prompt"], [IMAGES[case["image"]]],
                                                             return_count=True)
    return result


def _spread(vectors: dict[str, list[np.ndarray]]) -> float:
    """The largest cosine between vectors of different images for the same prompt."""
    names = sorted(vectors)
    worst = -1.0
    for p in range(len(REF["cases"]) // len(names)):
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                worst = max(worst, float(np.dot(vectors[a][p], vectors[b][p])))
    return worst


@pytest.mark.parametrize("quant", ["f32", "f16", "bf16", "q8_0"])
def test_pooled_vectors_match_transformers_on_4_images_x_3_prompts(built, quant, capsys):
    if refused_here(built[quant][0], quant):
        return  # the refusal is what this machine can prove (tests/twins.py)
    model = vision.open_model(*built[quant])
    try:
        cosines, vectors = [], {}
        for case in REF["cases"]:
            vector, n_tokens = _run(model, case)
            assert n_tokens == case["n_tokens"], (case["image"], case["prompt"])  # media tokens counted
            cosines.append(float(np.dot(vector, case["vector"])))
            vectors.setdefault(case["image"], []).append(np.asarray(vector))
    finally:
        model.close()
    spread = _spread(vectors)
    with capsys.disabled():
        print(f"\nqwen3-vl {quant}: cosine to transformers min {min(cosines):.6f} mean {np.mean(cosines):.6f} "
              f"over {len(cosines)} cases; largest cosine between different images {spread:.4f}")
    assert min(cosines) >= MIN_COSINE[quant], cosines
    assert spread < 0.99, "the vectors of different images are near-identical"


def test_media_token_counts_and_text_tokens_equal_the_reference(built):
    model = vision.open_model(*built["f16"])
    handler = model._handler()
    try:
        for case in REF["cases"]:
            with handler.tokenize(model, case["prompt"], [IMAGES[case["image"]]]) as request:
                raw = request.raw
            media = [c for c in raw if c.kind == "image"]
            assert [c.n_tokens for c in media] == [case["n_media_tokens"]]
            text = [list(c.tokens) for c in raw if c.kind == "text"]
            before, after = case["segment_ids"]
            vision_start, vision_end = text[0][-1], text[1][0]  # MTMD's markers around the image
            assert text[0][:-1] == before and text[1][1:] == after
            assert (vision_start, vision_end) == (4005, 4006)  # the config's vision_start/end token ids
            assert request.n_tokens == case["n_tokens"]
    finally:
        model.close()


def test_text_only_results_are_unchanged(built):
    model = vision.open_model(*built["f16"])
    try:
        for entry in REF["texts"]:
            assert model.tokenize(entry["text"].encode(), add_bos=True, special=False) == entry["token_ids"]
            text_vector = model.embed(entry["text"])
            assert float(np.dot(text_vector, entry["vector"])) >= 0.999
            np.testing.assert_allclose(model.embed_multimodal(entry["text"]), text_vector, atol=1e-5)
    finally:
        model.close()


def test_the_resized_image_is_within_the_bound_too(built, capsys):
    """100x75 is resized to 128x96 on both sides (llama.cpp's bicubic vs PIL's): the difference, measured."""
    model = vision.open_model(*built["f32"])
    try:
        cos = {case["prompt"]: float(np.dot(_run(model, case)[0], case["vector"]))
               for case in REF["cases"] if case["image"] == "odd.png"}
    finally:
        model.close()
    with capsys.disabled():
        print(f"\nresized image (100x75 -> 128x96): cosines {sorted(round(c, 6) for c in cos.values())}")
    assert min(cos.values()) >= 0.999


@pytest.mark.parametrize("pooling, key", [(1, "mean_vector"), (2, "first_vector")])  # MEAN, CLS
def test_mean_and_cls_pooling_across_chunks_match_transformers(built, pooling, key):
    """A request is decoded chunk by chunk; MEAN is the row-weighted mean of the chunks' means and CLS the first
    chunk's first row: both equal transformers' pooling of the same rows in one pass."""
    model = vision.open_model(*built["f32"], pooling_type=pooling)
    try:
        assert model.pooling == pooling
        cosines = [float(np.dot(_run(model, case)[0], case[key])) for case in REF["cases"]]
    finally:
        model.close()
    assert min(cosines) >= 0.999, cosines
