"""Every GGUF weight type proven before its first use (issue: Weight types).

The k-quants and i-quants are proven lazily, the first time a file holding one is opened, on a tiny model of
256-multiple widths written purely at that type by llama.cpp's own quantizer; only a native death excludes a
type (a SIGKILL, a hang, an exit leave it unknown, probed once more, then refused); every file a model opens
(model, projector) is checked; ``indexer models build --quant q4_K_M`` writes through the quantizer and refuses
a type the probe excluded; ``indexer models probe`` prints the table; ``INDEXER_NATIVE_PROBE=off`` is "f16,
unmeasured". Deaths are simulated with ``INDEXER_NATIVE_PROBE_KILL`` (``q4_K`` = SIGILL at its decode,
``bf16=SIGKILL``, ``f16=hang``), the same parent logic the real SIGILL of a stock AMX build meets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType

from indexer.errors import ModelError
from indexer.models import native, tiny_bert
from indexer.models.gguf_header import read_header, weight_types
from indexer.models.native_child import KILL_ENV
from indexer.models.quantize import canonical

pytestmark = pytest.mark.slow


@pytest.fixture
def fresh_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv("INDEXER_MODELS_DIR", str(folder))
    monkeypatch.delenv(native.PROBE_ENV, raising=False)
    native.forget_memo()
    yield folder
    native.forget_memo()


@pytest.fixture(scope="module")
def qk_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BERT checkpoint whose widths are multiples of 256 (hidden 256, FFN 1024): a k-quant file of it holds
    real k-quant tensors (MiniLM's 384 widths make llama.cpp fall back to q5_0/q8_0)."""
    root = tmp_path_factory.mktemp("qk") / "tiny-qk"
    tiny_bert.write_tiny_checkpoint(root, tiny_bert.QK, seed=3)
    return root


def _children(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    calls: list[dict[str, str]] = []
    real = native._run_child

    def counting(models: dict[str, str], *, timed: bool = True):  # type: ignore[no-untyped-def]
        calls.append(dict(models))
        return real(models, timed=timed)

    monkeypatch.setattr(native, "_run_child", counting)
    return calls


def _cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "indexer", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def test_a_q4_k_m_build_holds_k_quants_is_proven_lazily_and_then_embeds(
        fresh_models: Path, qk_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding

    # built with a models folder of its own: the build proves the types in its own probe cache, not in ours
    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models.parent / "build")}
    built = _cli("models", "build", "--from", str(qk_checkpoint), "--name", "tiny-qk", "--quant", "Q4_K_M", env=env)
    assert built.returncode == 0, built.stderr
    path = Path(built.stdout.strip().splitlines()[-1])
    assert path.name == "tiny-qk-q4_K_M.gguf"
    held = weight_types(path)
    assert {"q4_K", "q6_K"} <= held, held  # read back from the file: llama.cpp's own Q4_K_M mix
    native.forget_memo()
    before = native.probe()
    assert before.verdict("q4_K") is None  # lazy: not proven by the eager probe
    calls = _children(monkeypatch)
    model = LlamaEmbedding(str(path), verbose=False)  # proven in a child before this first use
    try:
        assert len(model.embed("the cat sat on the mat")) == 256
    finally:
        model.close()
    assert calls and set(calls[0]) >= {"q4_K", "q6_K", "f32"}
    after = native.probe()
    for quant in ("q4_K", "q6_K"):
        verdict = after.verdict(quant)
        assert verdict is not None and verdict.runs and verdict.lazy and verdict.min_cosine is not None
    cached = json.loads(next(native.probe_dir().glob("probe-*.json")).read_text())
    assert {"q4_K", "q6_K"} <= {v["quant"] for v in cached["verdicts"]}  # the next process reads it
    calls.clear()
    LlamaEmbedding(str(path), verbose=False).close()  # proven once: no second child
    assert calls == []


def test_a_k_quant_whose_decode_dies_is_refused_with_the_fix_and_nothing_dies(
        fresh_models: Path, qk_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding

    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models), KILL_ENV: "q4_K"}
    refused = _cli("models", "build", "--from", str(qk_checkpoint), "--name", "tiny-qk", "--quant", "q4_K_M",
                   env=env)
    assert refused.returncode == 1, refused.stderr
    assert "q4_K_M files hold q4_K weights, which cannot run on this machine" in refused.stderr
    assert "killed by SIGILL" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    forced = _cli("models", "build", "--from", str(qk_checkpoint), "--name", "tiny-qk", "--quant", "q4_K_M",
                  "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    path = Path(forced.stdout.strip().splitlines()[-1])
    monkeypatch.setenv(KILL_ENV, "q4_K")
    native.forget_memo()
    with pytest.raises(ModelError) as info:
        LlamaEmbedding(str(path), verbose=False)
    message = str(info.value)
    assert "q4_K weights, which llama.cpp on this machine cannot run" in message and "killed by SIGILL" in message
    assert "indexer reindex --model" in message and "indexer models probe --refresh" in message
    verdicts = native.probe()
    assert verdicts.verdict("q4_K").state == native.EXCLUDED  # type: ignore[union-attr]
    assert verdicts.verdict("q6_K").runs  # type: ignore[union-attr]  # the other type of the file: proven, runs
    # indexing with that file through the CLI: one clear line, exit 1, no dead process
    docs = fresh_models.parent / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Cats\n\nThe cat sat on the mat.\n")
    run = _cli("index", str(docs), "--model", str(path), env={**env, "INDEXER_DATA_DIR": str(docs.parent / "d")})
    assert run.returncode == 1 and "q4_K weights, which llama.cpp on this machine cannot run" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_sigkill_in_the_probe_excludes_nothing_and_the_type_is_tried_once_more_then_refused(
        fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KILL_ENV, "bf16=SIGKILL")
    calls = _children(monkeypatch)
    result = native.probe()
    bf16 = result.verdict("bf16")
    assert bf16 is not None and bf16.state == native.UNKNOWN and "SIGKILL" in bf16.reason
    assert "not a native fault" in bf16.reason and bf16.tries == 1
    assert result.excluded == []  # nothing excluded
    # the types after it in the same child were not tried: unknown too, never excluded
    assert result.verdict("f16").state == native.UNKNOWN  # type: ignore[union-attr]
    assert "not tried" in result.verdict("f16").reason  # type: ignore[union-attr]
    assert len(calls) == 1  # no restart after a death that says nothing of the rest
    assert result.chosen == "q8_0"  # the fallback is a type that ran (q8_0 decoded before bf16)
    # a file of bf16: probed once more, then refused with the reason
    models = native.tiny_models(native.probe_dir())
    with pytest.raises(ModelError) as info:
        native.check_model_file(models["bf16"])
    assert "could not prove" in str(info.value) and "SIGKILL" in str(info.value)
    assert len(calls) == 2 and "bf16" in calls[1]
    assert native.probe().verdict("bf16").tries == 2  # type: ignore[union-attr]
    with pytest.raises(ModelError):  # refused now without another child
        native.check_model_file(models["bf16"])
    assert len(calls) == 2


def test_a_hung_probe_child_excludes_nothing(fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KILL_ENV, "f16=hang")
    monkeypatch.setattr(native, "CHILD_TIMEOUT", 8.0)
    result = native.probe()
    f16 = result.verdict("f16")
    assert f16 is not None and f16.state == native.UNKNOWN and "hung for over 8 s" in f16.reason
    assert result.excluded == []
    assert result.verdict("q8_0").runs and result.verdict("bf16").runs  # type: ignore[union-attr]


def test_when_no_type_runs_the_error_says_so_and_names_the_refresh(
        fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KILL_ENV, "q8_0,bf16,f16,f32")
    result = native.probe()
    assert result.chosen == "" and len(result.excluded) == 4
    with pytest.raises(ModelError) as info:
        native.chosen_quant()
    assert "no weight type ran" in str(info.value) and "indexer models probe --refresh" in str(info.value)
    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models), KILL_ENV: "q8_0,bf16,f16,f32"}
    run = _cli("models", "build", env=env, timeout=300)
    assert run.returncode == 1 and "no weight type ran" in run.stderr and "Traceback" not in run.stderr


def test_the_projector_is_checked_and_refused_when_its_type_is_excluded(
        fresh_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import vision

    text_f16, _ = vision.build(tmp_path / "f16", "f16")
    _, projector_q8 = vision.build(tmp_path / "q8", "q8_0")
    assert "q8_0" in weight_types(projector_q8)
    monkeypatch.setenv(KILL_ENV, "q8_0")
    native.forget_memo()
    with pytest.raises(ModelError) as info:
        vision.open_model(text_f16, projector_q8)
    assert projector_q8.name in str(info.value) and "q8_0 weights, which llama.cpp on this machine cannot run" \
        in str(info.value)
    model = vision.open_model(text_f16)  # the text model alone (f16) still opens
    model.close()


def test_models_probe_prints_the_table_and_refresh_probes_again(fresh_models: Path) -> None:
    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models)}
    first = _cli("models", "probe", "--json", env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    verdict = json.loads(first.stdout)
    assert {v["quant"] for v in verdict["verdicts"]} == set(native.EAGER_QUANTS)
    again = json.loads(_cli("models", "probe", "--json", env=env, timeout=300).stdout)
    assert again["created"] == verdict["created"]  # cached
    table = _cli("models", "probe", "--refresh", env=env, timeout=300)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("machine: ") and any(line.startswith("f16 ") and " runs " in line for line in lines)
    assert any(line.startswith("not yet probed") and "q4_K" in line for line in lines)
    assert lines[-1].startswith("default weight type: ")
    refreshed = json.loads(_cli("models", "probe", "--json", env=env, timeout=300).stdout)
    assert refreshed["created"] > verdict["created"]


def test_probe_off_is_f16_unmeasured_and_runs_no_child(fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.PROBE_ENV, "off")
    monkeypatch.setenv(KILL_ENV, "q8_0")  # would die if probed: off trusts it, unproven
    calls = _children(monkeypatch)
    result = native.probe()
    assert result.trusted and result.chosen == "f16" and native.chosen_quant() == "f16"
    assert "f16, unmeasured" in result.summary()
    native.check_model_file(native.tiny_models(fresh_models / "tiny")["q8_0"])  # trusted: not refused
    assert calls == []
    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models), native.PROBE_ENV: "off"}
    shown = _cli("models", "probe", env=env, timeout=120)
    assert shown.returncode == 0 and "f16, unmeasured" in shown.stdout


def test_a_file_written_by_llama_cpp_itself_goes_through_the_same_check(
        fresh_models: Path, qk_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GGUF of the kind people download (written by llama.cpp's tools, here its quantizer, from an f16 file),
    opened by path: its types are read from the file, proven, and an excluded one refused."""
    from indexer.engine.llama_embedding import LlamaEmbedding
    from indexer.models.convert import convert_checkpoint
    from indexer.models.quantize import quantize_file

    base = convert_checkpoint(qk_checkpoint, tmp_path / "base-f16.gguf", "f16")
    downloaded = tmp_path / "Some-Model-Q5_K_M.gguf"
    quantize_file(base, downloaded, "q5_K_M")
    assert "q5_K" in weight_types(downloaded)
    model = LlamaEmbedding(str(downloaded), verbose=False)
    model.close()
    assert native.probe().verdict("q5_K").runs  # type: ignore[union-attr]
    monkeypatch.setenv(KILL_ENV, "q5_K")
    native.forget_memo()
    with pytest.raises(ModelError, match="Some-Model-Q5_K_M.gguf holds q5_K weights"):
        LlamaEmbedding(str(downloaded), verbose=False)


def test_the_minilm_q4_k_m_is_mostly_q5_0_and_every_type_it_holds_is_proven(
        fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue model at q4_K_M: MiniLM's 384 widths make llama.cpp fall back per tensor; the file's real mix
    is what the check proves (each type of it), not the name."""
    from tests.conftest import models_dir_for_tests

    env = {**os.environ, "INDEXER_MODELS_DIR": str(models_dir_for_tests())}
    built = _cli("models", "path", "all-MiniLM-L6-v2", "--quant", "q4_K_M", env=env)
    assert built.returncode == 0, built.stderr
    path = Path(built.stdout.strip())
    held = weight_types(path)
    counts: dict[str, int] = {}
    for dims, kind in read_header(path).tensors:
        if len(dims) >= 2 and int(dims[1]) > 1:
            name = canonical(GGMLQuantizationType(kind).name)
            counts[name] = counts.get(name, 0) + 1
    # the 384-wide matrices fall back to q5_0 (q6_K ones to q8_0); only the FFN down projections (1536 wide)
    # keep k-quants
    assert max(counts, key=counts.__getitem__) == "q5_0" and {"q5_0", "q8_0"} <= held, counts
    assert counts.get("q4_K", 0) + counts.get("q6_K", 0) <= 6, counts
    native.check_model_file(path)
    result = native.probe()
    assert all(result.runs(t) for t in held), result.summary()
