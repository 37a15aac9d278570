"""The native probe: every weight type proven in a child before its first real use, the verdict cached per
machine and build, a type whose decode kills the child never used, and every front end answering instead of
dying (issue: every CPU it installs on).

The real crash (llama-cpp-python 0.3.36 built natively on an AMX CPU dies with SIGILL on its first q8_0 decode)
exists only on such a build; ``test_the_probe_agrees_with_an_unguarded_decode`` runs the real unguarded decode
in a child on whatever build is installed and holds the probe to its outcome. The other tests simulate the death
with ``INDEXER_NATIVE_PROBE_KILL`` (the probe child kills itself with SIGILL at that type's first decode), which
exercises the same parent logic on every CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.errors import ModelError
from indexer.models import native, tiny_bert
from indexer.models.native_child import KILL_ENV

pytestmark = pytest.mark.slow


@pytest.fixture
def fresh_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty models folder (the probe's cache lives in it) and no verdict in this process's memory."""
    folder = tmp_path / "models"
    monkeypatch.setenv("INDEXER_MODELS_DIR", str(folder))
    native.forget_memo()
    yield folder
    native.forget_memo()


def _count_children(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    calls: list[dict[str, str]] = []
    real = native._run_child

    def counting(models: dict[str, str], *, timed: bool = True):  # type: ignore[no-untyped-def]
        calls.append(models)
        return real(models, timed=timed)

    monkeypatch.setattr(native, "_run_child", counting)
    return calls


def test_the_probe_agrees_with_an_unguarded_decode(fresh_models: Path) -> None:
    """The probe's verdict for each type is what a plain llama_cpp decode of that type does in a child."""
    result = native.probe()
    models = native.tiny_models(native.probe_dir())
    for quant in ("q8_0", "bf16", "f16"):
        code = ("import llama_cpp, sys; m = llama_cpp.Llama(sys.argv[1], embedding=True, n_threads=1, "
                "verbose=False); m.embed(['hello world ' * 40] * 4); print('survived')")
        raw = subprocess.run([sys.executable, "-c", code, str(models[quant])], capture_output=True, text=True,
                             timeout=120, check=False)
        assert result.runs(quant) == (raw.returncode == 0), (quant, raw.returncode, result.summary())
        if raw.returncode < 0:  # the real death: the probe names its signal
            assert "killed by SIG" in result.verdict(quant).reason  # type: ignore[union-attr]


AMX_TYPES = ("q4_0", "q4_1", "q4_K", "q5_K", "q6_K", "iq4_xs")  # llama.cpp's AMX path takes these (and q8_0)


def test_the_lazy_proof_of_each_amx_type_agrees_with_an_unguarded_decode(fresh_models: Path) -> None:
    """Each type llama.cpp's AMX kernels take, on the probe's 256-wide file of that type: the verdict is what a
    plain decode in a child does (on a stock native build on an AMX CPU the plain decode dies, and the probe must
    exclude it; elsewhere both run)."""
    result = native.prove(AMX_TYPES)
    _, files = tiny_bert.quantized_models(native.probe_dir(), list(AMX_TYPES), native.PROBE_VERSION)
    for quant in AMX_TYPES:
        path = files[quant]
        assert isinstance(path, Path) and quant in native.weight_types(path), (quant, path)
        code = ("import llama_cpp, sys; m = llama_cpp.Llama(sys.argv[1], embedding=True, n_threads=1, "
                "verbose=False); m.embed(['the cat sat on the mat ' * 10] * 4); print('survived')")
        raw = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                             timeout=120, check=False)
        verdict = result.verdict(quant)
        assert verdict is not None and verdict.lazy
        assert verdict.runs == (raw.returncode == 0), (quant, raw.returncode, result.summary())
        if raw.returncode < 0:
            assert verdict.state == native.EXCLUDED and "killed by SIG" in verdict.reason


def test_the_probe_times_the_types_and_checks_their_vectors(fresh_models: Path) -> None:
    result = native.probe()
    assert result.seconds < 20  # 2 s on a quiet machine (docs/benchmarks.md); bounded here under load
    runnable = [v for v in result.verdicts if v.runs and v.quant != "f32"]
    assert runnable and "f16" in {v.quant for v in runnable}
    for verdict in runnable:
        assert verdict.tokens_per_s and verdict.tokens_per_s > 100
        assert verdict.min_cosine is not None and verdict.min_cosine >= 0.999
    assert result.chosen in {v.quant for v in runnable}
    assert result.chosen == native.choose(result.verdicts)
    # the cache holds the verdict under its key; the next call in another process reads it
    (cached,) = (native.probe_dir()).glob("probe-*.json")
    data = json.loads(cached.read_text())
    assert data["key"] == native.machine_key() and data["chosen"] == result.chosen


def test_a_type_that_kills_the_child_is_excluded_and_the_rest_still_timed(
        fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KILL_ENV, "q8_0")
    calls = _count_children(monkeypatch)
    result = native.probe()
    q8 = result.verdict("q8_0")
    assert q8 is not None and not q8.runs and "killed by SIGILL" in q8.reason
    assert len(calls) == 2 and "q8_0" not in calls[1]  # a second child for the survivors, without the culprit
    assert result.chosen != "q8_0"
    for quant in ("f16", "bf16"):
        verdict = result.verdict(quant)
        assert verdict is not None and verdict.runs and verdict.tokens_per_s, result.summary()
    assert "q8_0 excluded (killed by SIGILL" in result.summary()


def test_a_file_of_an_excluded_type_is_refused_before_any_native_call(
        fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer.engine.llama_embedding import LlamaEmbedding

    monkeypatch.setenv(KILL_ENV, "bf16")
    models = native.tiny_models(native.probe_dir())
    with pytest.raises(ModelError) as info:
        LlamaEmbedding(str(models["bf16"]), verbose=False)
    message = str(info.value)
    assert "bf16 weights, which llama.cpp on this machine cannot run" in message
    assert "indexer reindex --model" in message and "killed by SIGILL" in message
    model = LlamaEmbedding(str(models["f16"]), verbose=False)  # other types are untouched
    try:
        assert len(model.embed("hello world")) == native.TINY_HIDDEN
    finally:
        model.close()


def test_a_changed_build_or_cpu_probes_again(fresh_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[dict[str, str]] = []
    real_run = native.run_probe
    monkeypatch.setattr(native, "run_probe", lambda key=None, folder=None: probes.append(key) or real_run(key, folder))
    first = native.probe()
    native.forget_memo()
    native.probe()  # same key: read from the cache file, no new probe
    assert len(probes) == 1
    real_key = native.machine_key
    for change in ({"llama_build": "another-build"}, {"cpu": "Another CPU"}, {"kernel": "7.0.0"}):
        monkeypatch.setattr(native, "machine_key", lambda change=change: {**real_key(), **change})
        native.forget_memo()
        again = native.probe()
        assert again.key != first.key and {k: again.key[k] for k in change} == change
    assert len(probes) == 4  # one new probe per changed key
    assert len(list(native.probe_dir().glob("probe-*.json"))) == 4


def test_two_first_runs_at_once_share_one_probe(fresh_models: Path) -> None:
    code = "from indexer.models import native; import json; print(json.dumps(native.probe().to_json()))"
    env = {**os.environ, "INDEXER_MODELS_DIR": str(fresh_models)}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0]["created"] == outs[1]["created"]  # the second waited for the first's verdict


def test_models_cli_refuses_a_type_this_machine_cannot_run(embed_model_q8_path: Path) -> None:
    """``indexer models build --quant q8_0`` is refused where q8_0 dies (simulated), ``--force`` builds it, and
    ``models list`` says which types cannot run here."""
    env = {**os.environ, KILL_ENV: "q8_0"}
    cli = [sys.executable, "-m", "indexer", "models"]
    refused = subprocess.run([*cli, "build", "--quant", "q8_0"], capture_output=True, text=True, env=env,
                             timeout=300, check=False)
    assert refused.returncode == 1
    assert "q8_0 files hold q8_0 weights, which cannot run on this machine" in refused.stderr
    assert "--force" in refused.stderr
    forced = subprocess.run([*cli, "build", "--quant", "q8_0", "--force"], capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    assert forced.returncode == 0 and str(embed_model_q8_path) in forced.stderr
    listed = subprocess.run([*cli, "list"], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert listed.returncode == 0
    assert "q8_0 excluded (killed by SIGILL" in listed.stderr
    q8_line = next(line for line in listed.stdout.splitlines() if " q8_0" in line and "all-MiniLM" in line)
    assert "cannot run here" in q8_line


def test_a_collection_on_an_excluded_type_answers_with_the_fix(
        tmp_path: Path, embed_model_q8_path: Path) -> None:
    """Indexing with a model file this machine cannot run is one clear error line, never a dead process."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Glaciers\n\nGlaciers carve valleys over thousands of years.\n")
    env = {**os.environ, KILL_ENV: "q8_0", "INDEXER_DATA_DIR": str(tmp_path / "data")}
    run = subprocess.run([sys.executable, "-m", "indexer", "index", str(docs), "--model", str(embed_model_q8_path)],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    assert run.returncode == 1, run.stderr
    assert "q8_0 weights, which llama.cpp on this machine cannot run" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_installed_llama_cpp_passes_the_build_check() -> None:
    """``make setup`` installs llama-cpp-python through tools/build_llama_cpp.py; its check holds the installed
    library to the fix: where ggml's AMX kernels are compiled in, the fixed tile configuration is there too."""
    tool = Path(__file__).resolve().parents[2] / "tools" / "build_llama_cpp.py"
    run = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "fixed tile configuration" in run.stdout or "not compiled in" in run.stdout


def test_status_shows_the_weight_type_and_the_machines_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               embed_model_path: Path) -> None:
    import indexer

    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Glaciers\n\nGlaciers carve valleys over thousands of years.\n")
    with indexer.open_collection("w", embed_model=str(embed_model_path)) as col:
        col.index([docs])
        weights = col.status()["weights"]
    result = native.probe()
    assert weights["weight_types"] == sorted(native.weight_types(embed_model_path))
    assert weights["runs_here"] is True and weights["machine_default"] == result.chosen
    assert weights["probe"] == result.summary() and weights["cpu"] == result.key["cpu"]
    shown = subprocess.run([sys.executable, "-m", "indexer", "status", "-c", "w", "--json"], capture_output=True,
                           text=True, timeout=120, check=False, env={**os.environ})
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["weights"]["machine_default"] == result.chosen


def test_an_unwritable_models_folder_still_gets_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe runs in a temporary folder when the models folder cannot be written (a file stands in its way:
    root ignores permission bits); nothing is cached there, and models still open."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("INDEXER_MODELS_DIR", str(blocker / "models"))
    native.forget_memo()
    try:
        result = native.probe()
        assert result.runs("f16") and result.chosen in {"f16", "bf16", "q8_0"}
        assert blocker.read_text() == "x"
    finally:
        native.forget_memo()
