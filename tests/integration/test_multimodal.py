"""``LlamaEmbedding.embed_multimodal`` and the MTMD handlers as the seed documents them, on real files: the tiny
Qwen3-VL embedding model and its projector converted by our converter (tests/vision.py), run by llama.cpp.

The numbers against transformers are in tests/families/test_qwen3_vl.py; here: the constructor's rules, the
lazy projector, ownership and close order, the tokenize scopes and their owned results, every refusal (raised
before native work, never a dead process) and the release of native bitmaps and chunks on success and failure.
"""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.engine import mtmd_decode
from indexer.engine.media import detect_media
from indexer.llama_embedding import LLAMA_POOLING_TYPE_NONE, LlamaEmbedding, MTMDEmbeddingHandler
from indexer.llama_multimodal import MTMDBaseHandler, MTMDEncodedChunk
from tests import vision

REF = vision.reference()
IMAGES = vision.images()
PNG = IMAGES["gradient.png"]
JPEG = IMAGES["blocks.jpg"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return vision.build(tmp_path_factory.mktemp("mm"), "f16")


@pytest.fixture
def model(files: tuple[Path, Path]) -> Any:
    llm = vision.open_model(*files)
    yield llm
    llm.close()


def _wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(struct.pack("<800h", *([0, 1000] * 400)))
    return buf.getvalue()


MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00" * 64
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 28


# -- constructor and projector lifecycle ------------------------------------------------------------------------


def test_both_projector_arguments_are_a_value_error_and_another_handler_type_a_type_error(files):
    model, mmproj = files
    handler = MTMDEmbeddingHandler(str(mmproj))
    with pytest.raises(ValueError, match="either mmproj_path or embedding_handler"):
        LlamaEmbedding(str(model), mmproj_path=str(mmproj), embedding_handler=handler, verbose=False)
    with pytest.raises(TypeError, match="MTMDEmbeddingHandler"):
        LlamaEmbedding(str(model), embedding_handler=MTMDBaseHandler(str(mmproj)), verbose=False)
    with pytest.raises(TypeError, match="MTMDEmbeddingHandler"):
        LlamaEmbedding(str(model), embedding_handler=object(), verbose=False)


def test_the_projector_is_loaded_lazily_on_first_use(model):
    assert model.embedding_handler is None  # nothing native yet
    vector = model.embed_multimodal(parts=["A photo of ", PNG])
    assert len(vector) == model.n_embd_out
    assert model.embedding_handler is not None and not model.embedding_handler.projector.closed


def test_without_a_projector_embed_multimodal_says_how_to_give_one(files):
    llm = vision.open_model(files[0])
    try:
        with pytest.raises(ValueError, match="mmproj_path"):
            llm.embed_multimodal(parts=["x", PNG])
        assert len(llm.embed("text still works")) == llm.n_embd_out
    finally:
        llm.close()


class _Recording(MTMDEmbeddingHandler):
    closed_with_model_open: bool | None = None
    owner: Any = None

    def close(self) -> None:
        if self.owner is not None and self.closed_with_model_open is None:  # the context is freed to None
            self.closed_with_model_open = self.owner._ctx.ctx is not None and self.owner._model.model is not None
        super().close()


def test_a_handler_the_model_owns_is_closed_first_when_the_model_closes(files):
    handler = _Recording(str(files[1]))
    llm = vision.open_model(files[0], embedding_handler=handler)
    handler.owner = llm
    first = llm.embed_multimodal("A photo of <__media__>", [PNG])
    llm.close()
    assert handler.closed_with_model_open is True
    assert handler._projector is None
    with pytest.raises(RuntimeError, match="closed"):
        llm.embed_multimodal("A photo of <__media__>", [PNG])
    assert len(first) == 64
    llm.close()  # idempotent


def test_a_standalone_handler_serves_its_first_model_only(files):
    handler = MTMDEmbeddingHandler(str(files[1]))
    first, second = vision.open_model(files[0]), vision.open_model(files[0])
    try:
        assert len(handler.embed(first, parts=[PNG])) == 64
        with pytest.raises(ValueError, match="bound to another model"):
            handler.embed(second, parts=[PNG])
        handler.close()
        with pytest.raises(RuntimeError, match="closed"):
            handler.embed(first, parts=[PNG])
    finally:
        handler.close()
        first.close()
        second.close()


def test_a_projector_of_another_model_or_a_file_that_is_no_projector_is_a_clear_error(files, tmp_path):
    from tests.families import proof

    text_model = proof.convert("qwen3-embedding", tmp_path, "f16")  # n_embd 64, but the projector gives 128
    llm = vision.open_model(text_model, files[1])
    try:
        with pytest.raises(ValueError, match="could not load the projector") as refused:
            llm.embed_multimodal(parts=[PNG])
        # llama.cpp's own reason (its log, kept off stderr without -v) is in the error
        assert "llama.cpp said: " in str(refused.value) and "said: nothing" not in str(refused.value)
    finally:
        llm.close()
    llm = vision.open_model(files[0], files[0])  # the text model given as its own projector
    try:
        with pytest.raises(ValueError, match="not an MTMD projector"):
            llm.embed_multimodal(parts=[PNG])
        with pytest.raises(ValueError, match="does not exist"):
            MTMDEmbeddingHandler(str(tmp_path / "missing.gguf")).embed(llm, parts=[PNG])
    finally:
        llm.close()


# -- results -----------------------------------------------------------------------------------------------------


def test_prompt_with_markers_and_parts_give_the_same_vector_and_count(model):
    case = next(c for c in REF["cases"] if c["image"] == "rings.png" and c["segments"][0] and c["segments"][1])
    image = IMAGES["rings.png"]
    by_prompt, n1 = model.embed_multimodal(case["prompt"], [image], return_count=True)
    before, after = case["segments"]
    by_parts, n2 = model.embed_multimodal(parts=[before, image, after], return_count=True)
    np.testing.assert_allclose(by_prompt, by_parts, atol=1e-6)
    assert n1 == n2 == case["n_tokens"] > len(model.tokenize(before.encode(), add_bos=True, special=False)) + len(
        model.tokenize(after.encode(), add_bos=True, special=False)) + case["n_media_tokens"] - 1
    assert all(type(x) is float for x in by_prompt)


def test_normalize_modes_as_in_embed(model):
    raw = np.asarray(model.embed_multimodal(parts=["x", PNG], normalize=False))
    l2 = np.asarray(model.embed_multimodal(parts=["x", PNG]))
    l1 = np.asarray(model.embed_multimodal(parts=["x", PNG], normalize=1))
    assert np.linalg.norm(l2) == pytest.approx(1.0, rel=1e-6)
    assert np.abs(l1).sum() == pytest.approx(1.0, rel=1e-6)
    np.testing.assert_allclose(raw / np.linalg.norm(raw), l2, atol=1e-6)
    assert np.linalg.norm(raw) != pytest.approx(1.0, rel=1e-3)
    with pytest.raises(TypeError, match="normalize"):
        model.embed_multimodal(parts=["x", PNG], normalize="l2")


def test_two_images_in_one_request(model):
    vector, n = model.embed_multimodal("first <__media__> then <__media__>", [PNG, JPEG], return_count=True)
    counts = {c["image"]: c["n_media_tokens"] for c in REF["cases"]}
    assert n > counts["gradient.png"] + counts["blocks.jpg"]
    assert len(vector) == 64


def test_tokenize_scopes_give_owned_read_only_chunks_in_input_order(model):
    handler = model._handler()
    with handler.tokenize(model, "A photo of <__media__> here", [PNG]) as request:
        chunks = request.encode()
        n_tokens, n_pos = request.n_tokens, request.n_pos
    assert [c.kind for c in chunks] == ["text", "image", "text"]
    assert all(isinstance(c, MTMDEncodedChunk) for c in chunks)
    assert n_tokens == sum(c.n_tokens for c in chunks)
    image = chunks[1]
    assert image.embeddings is not None and image.embeddings.shape == (image.n_tokens, model.n_embd_inp)
    assert image.embeddings.dtype == np.float32 and not image.embeddings.flags.writeable
    assert image.positions.shape == (image.n_tokens, 4)  # M-RoPE: t, y, x, z
    assert chunks[0].positions.ndim == 1 and list(chunks[0].positions) == list(range(chunks[0].n_tokens))
    assert chunks[2].positions[0] == chunks[0].n_pos + image.n_pos  # text continues after the image's span
    assert n_pos == sum(c.n_pos for c in chunks) < n_tokens  # an image spans fewer positions than rows
    with pytest.raises(RuntimeError, match="scope has exited"):
        request.encode()
    with handler.tokenize_parts(model, ["A photo of ", PNG, " here"]) as again:
        second = again.encode()
    np.testing.assert_array_equal(second[1].embeddings, image.embeddings)  # still usable after more encodes
    assert second[0].tokens == chunks[0].tokens


# -- refusals before any native work -------------------------------------------------------------------------------


@pytest.mark.parametrize("payload, message", [
    (MP4, "video is not supported"),
    (b"\x1a\x45\xdf\xa3" + b"\x00" * 40, "video is not supported"),
    (b"just some text bytes", "unknown signature"),
    (PNG[:60], "cannot be decoded"),
    (b"\x89PNG\r\n\x1a\n" + b"\xff" * 200, "cannot be decoded"),
    (JPEG[:100] + b"\x00" * 10, "cannot be decoded"),
    (WEBP, "cannot be decoded"),
])
def test_bad_or_unsupported_media_is_a_value_error_and_the_process_lives(model, payload, message):
    with pytest.raises(ValueError, match=message):
        model.embed_multimodal(parts=["x", payload])
    assert len(model.embed_multimodal(parts=["x", PNG])) == 64  # still usable


def test_audio_is_refused_with_its_reason_by_a_vision_only_projector(model):
    assert detect_media(_wav()).kind == "audio"
    with pytest.raises(ValueError, match="no audio encoder"):
        model.embed_multimodal(parts=["listen", _wav()])


@pytest.mark.parametrize("kwargs, error, message", [
    ({"prompt": "no marker", "media": [PNG]}, ValueError, "1 media items"),
    ({"prompt": "<__media__> <__media__>", "media": [PNG]}, ValueError, "2 media markers"),
    ({"prompt": "x", "parts": ["y"]}, ValueError, "not both"),
    ({"prompt": "<__media__>", "media": PNG}, TypeError, "sequence of encoded files"),
    ({"prompt": "<__media__>", "media": ["/tmp/a.png"]}, TypeError, "load paths and URLs first"),
    ({"parts": [PNG, 3]}, TypeError, "media item 1"),
    ({"parts": []}, ValueError, "parts is empty"),
    ({"parts": ["x", b""]}, ValueError, "empty"),
    ({"prompt": 5}, TypeError, "prompt must be a str"),
    ({}, ValueError, "nothing to embed"),
])
def test_argument_errors(model, kwargs, error, message):
    with pytest.raises(error, match=message):
        model.embed_multimodal(**kwargs)


def test_unsupported_pooling_is_refused_before_anything_native(files):
    llm = vision.open_model(*files, pooling_type=LLAMA_POOLING_TYPE_NONE)
    try:
        with pytest.raises(ValueError, match="MEAN, CLS or LAST"):
            llm.embed_multimodal(parts=["x", PNG])
        assert llm.embedding_handler._projector is None  # refused before the projector was even loaded
    finally:
        llm.close()


def test_no_truncation_an_input_over_the_batch_is_refused_before_encoding(files, monkeypatch):
    llm = vision.open_model(*files, n_batch=16, n_ubatch=16)
    try:
        encoded = []
        monkeypatch.setattr("indexer.engine.mtmd_native.Projector.encode",
                            lambda *a: encoded.append(1) or pytest.fail("encoded"))
        with pytest.raises(ValueError, match=r"needs 20 tokens .* at most 16 .* never truncated"):
            llm.embed_multimodal("A photo of <__media__>", [PNG])
        assert not encoded
        monkeypatch.undo()
        assert len(llm.embed_multimodal(parts=[IMAGES["odd.png"]])) == 64  # 14 tokens fit
    finally:
        llm.close()


def test_a_bidirectional_chunk_in_a_causal_model_or_a_mixed_bidirectional_request_is_not_implemented():
    spans = [mtmd_decode_span(3, False), mtmd_decode_span(12, True)]
    with pytest.raises(NotImplementedError, match="bidirectional attention inside a media chunk"):
        mtmd_decode.check_decodable(spans, causal=True, limit=512, n_ctx=512)
    with pytest.raises(NotImplementedError, match="either token ids or embedding rows"):
        mtmd_decode.check_decodable([mtmd_decode_span(3, False), mtmd_decode_span(12, False)], causal=False,
                                    limit=512, n_ctx=512)
    mtmd_decode.check_decodable([mtmd_decode_span(12, False)], causal=False, limit=512, n_ctx=512)  # one chunk: fine


def test_why_a_bidirectional_model_is_refused_llama_cpp_batches_cannot_mix_tokens_and_embedding_rows(model):
    """The runtime fact behind the NotImplementedError above: one batch holding a text token and an image row (what
    a bidirectional model would need, all rows in one pass) is rejected by llama.cpp itself (an error code, not an
    abort); a causal model does not need it (tests/families/test_qwen3_vl.py decodes chunk after chunk)."""
    import ctypes

    import llama_cpp

    ctx = model._ctx.ctx
    batch = llama_cpp.llama_batch_ext_init(ctx)
    row = np.zeros(model.n_embd_inp, dtype=np.float32)
    try:
        token = llama_cpp.llama_batch_ext_add_token(batch, 0, 5)
        embd = llama_cpp.llama_batch_ext_add_embd(batch, 0, llama_cpp.llama_embd(
            row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, model.n_embd_inp))
        for idx, pos in ((token, 0), (embd, 1)):
            llama_cpp.llama_batch_ext_set_pos(batch, idx, (llama_cpp.llama_pos * 4)(pos, pos, pos, pos))
            llama_cpp.llama_batch_ext_set_output_embd(batch, idx, True)
        assert llama_cpp.llama_process(ctx, llama_cpp.LLAMA_PROCESS_TYPE_DECODE, batch) != 0
    finally:
        llama_cpp.llama_batch_ext_free(batch)
        model._clear_state()
    assert len(model.embed_multimodal(parts=["x", PNG])) == 64


def mtmd_decode_span(n: int, non_causal: bool) -> Any:
    from indexer.engine.multimodal import _Span

    return _Span(n, n, non_causal)


# -- native resources ------------------------------------------------------------------------------------------------


def _count_native(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    from llama_cpp import mtmd_cpp

    counts = {"bitmap": 0, "chunks": 0}
    for name, key, delta in (("mtmd_helper_bitmap_init_from_buf", "bitmap", 1), ("mtmd_bitmap_free", "bitmap", -1),
                             ("mtmd_input_chunks_init", "chunks", 1), ("mtmd_input_chunks_free", "chunks", -1)):
        real = getattr(mtmd_cpp, name)

        def wrapped(*args: Any, _real: Any = real, _key: str = key, _delta: int = delta) -> Any:
            out = _real(*args)
            if _delta < 0 or out:
                counts[_key] += _delta
            return out

        monkeypatch.setattr(mtmd_cpp, name, wrapped)
    return counts


def test_native_bitmaps_and_chunks_are_released_on_success_and_on_failure(model, monkeypatch):
    model.embed_multimodal(parts=[PNG])  # the projector loaded
    counts = _count_native(monkeypatch)
    model.embed_multimodal("a <__media__> b <__media__>", [PNG, JPEG])
    assert counts == {"bitmap": 0, "chunks": 0}
    with pytest.raises(ValueError):
        model.embed_multimodal(parts=["x", PNG, PNG[:50]])  # the second bitmap fails: the first is freed
    assert counts == {"bitmap": 0, "chunks": 0}
    from llama_cpp import mtmd_cpp

    monkeypatch.setattr(mtmd_cpp, "mtmd_encode_chunk", lambda *a: 7)  # a failing encode
    with pytest.raises(RuntimeError, match="mtmd_encode_chunk returned 7"):
        model.embed_multimodal(parts=["x", PNG])
    assert counts == {"bitmap": 0, "chunks": 0}
    monkeypatch.undo()
    before = model.embed_multimodal(parts=["x", PNG])
    np.testing.assert_allclose(model.embed_multimodal(parts=["x", PNG]), before, atol=1e-6)  # state was reset


def test_a_failed_decode_leaves_the_model_usable(model, monkeypatch):
    import llama_cpp

    good = model.embed_multimodal(parts=["x", PNG])
    monkeypatch.setattr(llama_cpp, "llama_decode", lambda *a: -1)
    with pytest.raises(RuntimeError, match="llama_decode returned -1"):
        model.embed_multimodal(parts=["x", PNG])
    monkeypatch.undo()
    np.testing.assert_allclose(model.embed_multimodal(parts=["x", PNG]), good, atol=1e-6)


# -- the CLI ---------------------------------------------------------------------------------------------------------


def test_models_build_from_a_vision_folder_writes_both_files_and_list_shows_the_projector():
    from typer.testing import CliRunner

    from indexer.cli.models import app
    from indexer.models import models_dir

    runner = CliRunner()
    built = runner.invoke(app, ["build", "--from", str(vision.ROOT / "checkpoint"), "--name", "tiny-vl-cli",
                                "--quant", "f16"])
    assert built.exit_code == 0, built.output
    model = Path(built.stdout.splitlines()[-1])
    projector = models_dir() / "tiny-vl-cli-f16.mmproj.gguf"
    assert model == models_dir() / "tiny-vl-cli-f16.gguf" and model.is_file() and projector.is_file()
    assert f"projector: {projector}" in built.stderr
    # the advice matches what the product does: `index --model NAME` finds the projector beside the model itself
    assert "found beside the model: `indexer index --model tiny-vl-cli` embeds pictures" in built.stderr
    lines = runner.invoke(app, ["list"]).stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if "tiny-vl-cli" in line and "local" in line)
    assert "projector" in lines[row + 1] and str(projector) in lines[row + 1]  # beside its model
    assert not any("tiny-vl-cli-f16.mmproj" in line and "local" in line for line in lines)  # not a model row
    llm = vision.open_model(model, projector)
    try:
        assert len(llm.embed_multimodal(parts=["A photo of ", PNG])) == 64
    finally:
        llm.close()
