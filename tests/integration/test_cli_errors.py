"""Every expected failure of the real `indexer` command: exactly one line on stderr (no traceback) and the
documented exit code (0 ok, 1 error, 2 usage error, 3 some files failed); with --json a JSON error object on
stdout. Plus: -v after the subcommand, and help without Python type tags where every parameter is described."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from indexer.core.locks import writer_lock
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

INDEXER = Path(sys.executable).with_name("indexer")
OK, ERROR, USAGE, FILES_FAILED = 0, 1, 2, 3
PAGE = 4096


def indexer(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    exe = [str(INDEXER)] if INDEXER.exists() else [sys.executable, "-m", "indexer.cli"]
    return subprocess.run(
        [*exe, *args], capture_output=True, text=True, env=env, input=stdin, timeout=600, cwd=env["HOME"]
    )


def check_one_error(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """Exactly one non-empty line on stderr, no traceback, the exit code, and the words in that line."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}: {proc.stderr}"
    line = lines[0]
    assert line.startswith("error: "), line
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    assert "Input should be" not in line and "errors.pydantic.dev" not in line
    return line


@dataclass
class World:
    """A home folder, an empty data dir and a corpus; ``env`` for the subprocess."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return Path(self.env["INDEXER_DATA_DIR"])

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"


def make_world(root: Path) -> World:
    (root / "home").mkdir(parents=True)
    write_corpus(root / "corpus")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("INDEXER_") or k == "INDEXER_MODELS_DIR"
    }
    env.update(
        HOME=str(root / "home"),
        INDEXER_DATA_DIR=str(root / "data"),
        INDEXER_CONFIG=str(root / "config.toml"),
        COLUMNS="200",
    )
    return World(root, env)


@pytest.fixture
def world(tmp_path) -> World:
    return make_world(tmp_path)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, embed_model_path) -> World:
    """A data dir with two indexed collections, 'default' and 'spare' (the latter gets damaged)."""
    w = make_world(tmp_path_factory.mktemp("indexed"))
    for name in ("default", "spare"):
        proc = indexer("index", str(w.corpus), "-c", name, env=w.env)
        assert proc.returncode == OK, proc.stderr
    return w


# --- usage errors: exit 2, one line ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["search"], ["QUERY", "indexer search --help"]),
        (["search", "q", "--bogus"], ["--bogus"]),
        (["search", "q", "-k", "abc"], ["-k"]),
        (["frobnicate"], ["frobnicate"]),
        (["index", "--metric"], ["--metric"]),
        (["drop"], ["NAME"]),
    ],
)
def test_usage_errors_exit_2_with_one_line(world, args, words):
    check_one_error(indexer(*args, env=world.env), USAGE, *words)


def test_usage_error_with_json_prints_a_json_error_object(world):
    proc = indexer("status", "--json", "--bogus", env=world.env)
    check_one_error(proc, USAGE, "--bogus")
    assert json.loads(proc.stdout)["error"]["type"] == "UsageError"


# --- errors without a collection: exit 1, one line ---------------------------------------------------------
def test_missing_collection_and_bad_paths(world):
    check_one_error(indexer("search", "anything", "-c", "ghost", env=world.env), ERROR, "ghost", "indexer index")
    check_one_error(indexer("status", "-c", "ghost", env=world.env), ERROR, "ghost")
    check_one_error(indexer("drop", "ghost", "--yes", env=world.env), ERROR, "ghost")
    check_one_error(indexer("forget", str(world.corpus), env=world.env), ERROR, "not a root")
    check_one_error(indexer("index", str(world.root / "nope"), env=world.env), ERROR, "does not exist")
    a_file = world.corpus / "baking" / "bread.md"
    check_one_error(indexer("index", str(a_file), env=world.env), ERROR, "is a file")
    check_one_error(indexer("status", "-c", "../etc", env=world.env), ERROR, "collection", "'../etc'")


def test_json_errors_go_to_stdout_as_one_object(world):
    proc = indexer("search", "anything", "-c", "ghost", "--json", env=world.env)
    check_one_error(proc, ERROR, "ghost")
    error = json.loads(proc.stdout)["error"]
    assert error["type"] == "NotFoundError" and "ghost" in error["message"] and "\n" not in error["message"]


def test_bad_settings_name_the_field_the_value_and_the_allowed_values(world):
    check_one_error(
        indexer("index", str(world.corpus), "--metric", "cosin", env=world.env),
        ERROR,
        "metric",
        "'cosin'",
        "'cosine'",
        "INDEXER_METRIC",
    )
    check_one_error(
        indexer("index", str(world.corpus), "--store", "bogus", env=world.env), ERROR, "store", "'bogus'", "faiss"
    )
    check_one_error(indexer("status", env={**world.env, "INDEXER_TOP_K": "many"}), ERROR, "top_k", "'many'", "whole")
    check_one_error(indexer("status", env={**world.env, "INDEXER_TOP_K": "0"}), ERROR, "top_k", "at least 1")
    Path(world.env["INDEXER_CONFIG"]).write_text("store = \n", encoding="utf-8")
    check_one_error(indexer("status", env=world.env), ERROR, "config.toml", "TOML")
    Path(world.env["INDEXER_CONFIG"]).write_text('metric = "manhattan-ish"\n', encoding="utf-8")
    check_one_error(indexer("status", env=world.env), ERROR, "metric", "manhattan-ish", "config.toml")


def test_an_unusable_data_dir_is_one_line(world):
    blocker = world.root / "not-a-dir"
    blocker.write_text("a file where the data folder should be")
    check_one_error(indexer("collections", env={**world.env, "INDEXER_DATA_DIR": str(blocker)}), ERROR, str(blocker))


def test_a_garbled_state_file_is_one_line_naming_it_and_the_fix(world):
    world.data.mkdir(parents=True)
    (world.data / "state.sqlite").write_bytes(b"not sqlite at all " * 1000)
    for args in (["status"], ["collections"], ["search", "q"], ["index", str(world.corpus)]):
        check_one_error(indexer(*args, env=world.env), ERROR, "state.sqlite", "move it aside")


def test_a_missing_model_is_one_line(world):
    check_one_error(
        indexer("index", str(world.corpus), "--model", str(world.root / "nope.gguf"), env=world.env),
        ERROR,
        "nope.gguf",
    )
    check_one_error(indexer("models", "build", "no-such-model", env=world.env), ERROR, "no-such-model")


def test_declined_drop_is_one_line_and_drops_nothing(indexed):
    before = json.loads(indexer("status", "--json", "-c", "default", env=indexed.env).stdout)
    proc = indexer("drop", "default", env=indexed.env, stdin="n\n")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == ERROR and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].endswith("not dropped"), proc.stderr  # the prompt, answered
    names = [c["collection"] for c in json.loads(indexer("collections", "--json", env=indexed.env).stdout)]
    after = json.loads(indexer("status", "--json", "-c", "default", env=indexed.env).stdout)
    assert "default" in names and after["files"] == before["files"] > 0 and after["points"] == before["points"]


# --- errors of an indexed collection ---------------------------------------------------------------------
def test_a_bad_search_request_is_a_usage_error_naming_the_range(indexed):
    # the request's values (k, mode, a filter field) are arguments: exit 2, as the README's exit codes say
    check_one_error(indexer("search", "bread", "-k", "100000", env=indexed.env), USAGE, "k", "100")
    check_one_error(indexer("search", "bread", "-k", "-3", env=indexed.env), USAGE, "k")
    check_one_error(indexer("search", "bread", "-k", "0", env=indexed.env), USAGE, "k")
    check_one_error(indexer("search", "bread", "--mode", "bogus", env=indexed.env), USAGE, "bogus", "dense")
    check_one_error(indexer("search", "bread", "--where", "colour=red", env=indexed.env), USAGE, "no field 'colour'")
    check_one_error(indexer("search", "bread", "--where", "size>huge", env=indexed.env), USAGE, "not a size")


def test_a_collection_written_by_another_process_is_refused_with_one_line(indexed):
    with writer_lock(indexed.data / "locks" / "default.lock", "collection 'default'"):
        proc = indexer("index", str(indexed.corpus), env=indexed.env)
    check_one_error(proc, ERROR, "being written by another")
    assert indexer("search", "bread", env=indexed.env).returncode == OK  # searching works meanwhile


def test_verbose_after_the_subcommand(indexed):
    proc = indexer("search", "saturn rings", "--no-rerank", "-v", env=indexed.env)
    assert proc.returncode == OK, proc.stderr
    assert "planets.txt" in proc.stdout and "timings (ms)" in proc.stderr


def test_a_corrupt_page_in_the_state_file_is_one_line(indexed, tmp_path):
    state = tmp_path / "state.sqlite"
    shutil.copy(indexed.data / "state.sqlite", state)
    con = sqlite3.connect(state)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(state.read_bytes())
    for page in range(1, len(data) // PAGE):
        data[page * PAGE : page * PAGE + 64] = b"\xa5" * 64
    state.write_bytes(bytes(data))
    env = {**indexed.env, "INDEXER_DATA_DIR": str(tmp_path)}
    for args in (["status"], ["search", "bread"], ["index", str(indexed.corpus)]):
        check_one_error(indexer(*args, env=env), ERROR, str(state), "move it aside")


def test_a_garbled_faiss_sidecar_is_one_line_naming_it_and_the_fix(indexed):
    folder = next(p for p in indexed.data.rglob("spare") if (p / "points.sqlite").exists())
    sidecar = folder / "points.sqlite"
    for extra in ("-wal", "-shm"):
        Path(str(sidecar) + extra).unlink(missing_ok=True)
    (folder / "index.faiss").unlink(missing_ok=True)
    sidecar.write_bytes(b"garbage " * 4000)
    for args in (["search", "bread", "-c", "spare"], ["status", "-c", "spare"]):
        line = check_one_error(indexer(*args, env=indexed.env), ERROR, "points.sqlite")
        assert "cannot rollback" not in line and "no transaction" not in line


def test_some_files_failed_exits_3(indexed, tmp_path):
    corpus = write_corpus(tmp_path / "more")
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4\n this is no PDF at all \n%%EOF\n")
    proc = indexer("index", str(corpus), "-c", "third", "--json", env=indexed.env)
    report = json.loads(proc.stdout)
    assert [f["path"] for f in report["failed"]] == [str((corpus / "broken.pdf").resolve())]
    assert proc.returncode == FILES_FAILED, proc.stderr


# --- help ------------------------------------------------------------------------------------------------
def _commands(command, path=()):
    subs = getattr(command, "commands", None) or {}
    if not subs:
        yield path, command
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


def test_every_command_takes_verbose_and_describes_every_parameter():
    from indexer.cli.main import cli_command

    leaves = list(_commands(cli_command()))
    assert {p for p, _ in leaves} >= {("index",), ("search",), ("status",), ("collections",), ("forget",), ("drop",)}
    for path, command in leaves:
        names = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert {"-v", "--verbose"} <= names, f"`indexer {' '.join(path)}` lacks -v/--verbose"
        for param in command.params:
            assert getattr(param, "help", None), f"`indexer {' '.join(path)}`: {param.name} has no description"


TYPE_TAG = re.compile(r"<(?:list|str|int|bool|path|Path|float)[^>]*>")


def test_help_shows_no_type_tags(capsys, monkeypatch):
    from indexer.cli.main import cli_command

    monkeypatch.setenv("COLUMNS", "200")
    root = cli_command()
    for path, _ in _commands(root):
        code = root.main(args=[*path, "--help"], prog_name="indexer", standalone_mode=False)
        text = capsys.readouterr().out
        assert code == OK and "Usage" in text, (path, text)
        assert not TYPE_TAG.search(text), text
