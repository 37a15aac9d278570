"""The llama.cpp speed patches (indexer/engine/llama_cpp_patches): they apply to the sdist ``make setup`` builds,
the installed library has them, and the vectors they make are still the model's (f32 reference)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "build_llama_cpp.py"


def _tool():
    from indexer.engine import llama_build

    return llama_build


def test_every_patch_applies_to_the_vendored_llama_cpp(tmp_path: Path) -> None:
    tool = _tool()
    sdists = sorted((tool.cache_dir() / "sdist").glob(f"llama_cpp_python-{tool.VERSION}.tar.gz"))
    if not sdists:
        pytest.skip("no cached sdist: `make setup` downloads it")  # CI always has it (make setup runs first)
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / f"llama_cpp_python-{tool.VERSION}"
    tool.patch_source(root)
    vec = (root / "vendor/llama.cpp/ggml/src/ggml-cpu/vec.cpp").read_text()
    assert "void ggml_vec_gelu_f32(" in vec
    sgemm = (root / "vendor/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp").read_text()
    assert "inline __m128 hsum4(__m512" in sgemm
    # applied twice is refused with the patch's name (the tree already has it), not silently doubled
    with pytest.raises(SystemExit, match="01-vec-simd.patch"):
        tool.apply_patch(root / "vendor" / "llama.cpp", tool.speed_patches()[0])


def test_the_wheel_key_follows_the_patches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool()
    sdist = tmp_path / "x.tar.gz"
    sdist.write_bytes(b"sdist")
    with_patches = tool.wheel_key(sdist)
    assert tool.wheel_key(sdist, speed=False) != with_patches
    other = tmp_path / "patches"
    other.mkdir()
    for patch in tool.speed_patches():
        (other / patch.name).write_bytes(patch.read_bytes() + b"\n")
    monkeypatch.setattr(tool, "PATCHES", other)
    assert tool.wheel_key(sdist) != with_patches


def test_pip_users_get_the_builder_and_its_patches_in_the_wheel() -> None:
    """``python -m indexer.engine.llama_build`` is the documented way for pip users: the patches are package data."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '"indexer.engine" = ["llama_cpp_patches/*.patch"]' in text
    run = subprocess.run([sys.executable, "-m", "indexer.engine.llama_build", "--check"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 0 and "llama-cpp-python check" in run.stdout, run.stdout + run.stderr


def test_the_installed_library_has_the_speed_patches() -> None:
    flags = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    if " avx2 " not in flags:
        pytest.skip("the patched kernels are AVX2 / AVX-512 code; this CPU has neither")
    run = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "speed patches compiled in" in run.stdout, run.stdout


def test_patched_vectors_stay_within_the_weight_types_tolerance(embed_model_path: Path) -> None:
    """The default type's vectors against f32 weights on texts of every shape the patches touch (GELU, the
    bf16/f32 products, flash attention with packed sequences of several lengths): min cosine >= 0.999."""
    from indexer.core.normalization import Normalization
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.models import ensure_model

    texts = ["a", "short query about cells", "word " * 60, "mixed lengths in one pack. " * 12,
             " ".join(f"w{i}" for i in range(90))] * 6
    got = LlamaEmbedder(embed_model_path)
    ref = LlamaEmbedder(ensure_model(quant="f32"))
    try:
        a = np.asarray(got.embed_batch(texts, Normalization.L2))
        b = np.asarray(ref.embed_batch(texts, Normalization.L2))
    finally:
        got.close()
        ref.close()
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= 0.999, cos.min()
    alone = LlamaEmbedder(embed_model_path)
    try:  # the same text alone and inside a pack of others: flash attention's masks keep them apart
        single = np.asarray(alone.embed_batch([texts[3]], Normalization.L2))[0]
    finally:
        alone.close()
    assert float(single @ a[3] / (np.linalg.norm(single) * np.linalg.norm(a[3]))) >= 0.9999


def test_the_pack_is_measured_per_cpu_and_never_changes_a_vector(embed_model_path: Path) -> None:
    """No pack given: calls of many short inputs try each candidate pack, record its rate, and return the vectors a
    fixed pack gives (packing only groups sequences; masks keep them apart)."""
    from indexer.engine.llama_embedding import LlamaEmbedding

    queries = [f"query number {i} about cell biology and {'protein ' * (i % 5)}folding" for i in range(300)]
    free = LlamaEmbedding(str(embed_model_path), verbose=False)
    fixed = LlamaEmbedding(str(embed_model_path), pack_tokens=128, verbose=False)
    try:
        assert free._packs is not None and fixed._packs is None
        runs = [np.asarray(free.embed(queries)) for _ in range(3)]
        assert set(free._packs.rates) == set(free._packs.candidates)  # each candidate measured on this CPU
        ref = np.asarray(fixed.embed(queries))
    finally:
        free.close()
        fixed.close()
    for got in runs:
        cos = (got * ref).sum(axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
        assert cos.min() >= 0.9999, cos.min()


def test_a_query_on_warm_spare_cores_uses_the_team_and_keeps_its_vector(embed_model_path: Path) -> None:
    """Back-to-back queries on cores the gauge reports free run on the full team (the chooser's small-decode
    rule) and give the vector one thread gives; a gauge reporting a busy core keeps them on one thread."""
    import os

    from indexer.engine.llama_embedding import LlamaEmbedding

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no team to choose")

    class Gauge:
        value = 2.0

        def spare(self) -> float:
            return self.value

    query = "how are unchanged files skipped?"
    auto = LlamaEmbedding(str(embed_model_path), verbose=False)
    one = LlamaEmbedding(str(embed_model_path), n_threads=1, verbose=False)
    try:
        assert auto._threads is not None
        gauge = auto._threads.gauge = Gauge()
        gauge.value = float(len(os.sched_getaffinity(0)))
        # the warm-gap and stall rules are the unit tests' (a loaded CI machine may pause between calls)
        auto._threads.warm_gap, auto._threads.stall_factor = 60.0, float("inf")
        auto.embed(query)
        used = []
        for _ in range(5):
            vec = np.asarray(auto.embed(query))
            used.append(auto._current_threads)
        assert used == [auto._threads.candidates[0]] * 5
        gauge.value = 0.0
        auto.embed(query)
        assert auto._current_threads == auto._threads.candidates[-1]
        ref = np.asarray(one.embed(query))
    finally:
        auto.close()
        one.close()
    assert float(vec @ ref / (np.linalg.norm(vec) * np.linalg.norm(ref))) >= 0.99999
