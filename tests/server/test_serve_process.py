"""`indexer serve` as a real process: it announces itself in the data directory, `indexer search` goes through
it, and the announcement is gone after SIGTERM (then `indexer search` runs in-process)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from indexer.server import announce
from tests.server.conftest import index_corpus, make_settings, wait_for, write_corpus

pytestmark = pytest.mark.slow


def _env(data_dir: Path, model: Path, tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        INDEXER_DATA_DIR=str(data_dir),
        INDEXER_EMBED_MODEL=str(model),
        INDEXER_THREADS="2",
        INDEXER_CONFIG=str(tmp / "none.toml"),
        INDEXER_SERVER_PORT="0",
    )
    env.pop("INDEXER_RERANK_MODEL", None)
    return env


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )


def _indexer(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The console script as users run it (``indexer``; ``python -m indexer`` runs the same entry point)."""
    script = Path(sys.executable).parent / "indexer"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "indexer"]
    return subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=300)


# `indexer search` through a server must not load the heavy stack (the 150 ms goal of bench/cli_latency.py).
_LIGHT = """
import sys
from indexer.cli.entry import fast_search
code = fast_search(sys.argv[1:])
heavy = ("numpy", "pydantic", "typer", "rich", "llama_cpp", "faiss", "indexer.cli.main")
heavy = sorted(m for m in heavy if m in sys.modules)
print(code, heavy)
"""


def _search_count(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    m = re.search(
        r'indexer_http_request_duration_seconds_count\{method="POST",route="/search",status="200"\} (\S+)', text
    )
    return float(m.group(1)) if m else 0.0


def test_serve_announces_cli_search_uses_it_and_exit_cleans_up(tmp_path: Path, embed_model_path: Path) -> None:
    root = write_corpus(tmp_path / "corpus").resolve()
    data = tmp_path / "data"
    index_corpus(make_settings(data, embed_model_path, None), root)
    env = _env(data, embed_model_path, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "serve", "--no-watch"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: announce.read(data) is not None or proc.poll() is not None, 180, "the announcement")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        ann = announce.read(data)
        assert ann is not None and ann.pid == proc.pid and ann.url.startswith("http://127.0.0.1:")
        assert (announce.path_for(data).stat().st_mode & 0o777) == 0o600
        wait_for(lambda: _answers(ann.url), 60, "the server to answer")

        before = _search_count(ann.url)
        out = _indexer("search", "nightly backups of the database", "-k", "1", "--json", env=env)
        assert out.returncode == 0, out.stderr
        hits = json.loads(out.stdout)["hits"]
        assert hits[0]["path"] == str(root / "docs" / "backup.md")
        assert _search_count(ann.url) == before + 1, httpx.get(ann.url + "/metrics").text  # answered by the server

        # The console script answered it without the heavy stack, and prints what the full CLI prints.
        light = subprocess.run(
            [sys.executable, "-c", _LIGHT, "nightly backups of the database", "-k", "2"],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert light.returncode == 0 and light.stdout.splitlines()[-1] == "0 []", (light.stdout, light.stderr)
        fast = _indexer("search", "nightly backups of the database", "-k", "2", "--type", "md", env=env)
        full = _cli("search", "nightly backups of the database", "-k", "2", "--type", "md", env=env)
        assert fast.returncode == full.returncode == 0 and fast.stdout == full.stdout
        assert "1. " + str(root / "docs" / "backup.md") in fast.stdout
        assert _search_count(ann.url) == before + 4

        missing = _indexer("search", "x", "-c", "missing", env=env)  # an error answer: the full CLI reports it
        assert missing.returncode == 1 and "does not exist" in missing.stderr

        local = _indexer("search", "nightly backups of the database", "-k", "1", "--json", "--local", env=env)
        assert local.returncode == 0, local.stderr
        assert [(h["path"], h["chunk_id"]) for h in json.loads(local.stdout)["hits"]] == [
            (h["path"], h["chunk_id"]) for h in hits
        ]
        assert _search_count(ann.url) == before + 4  # --local did not go through the server (a 404 is not counted)

        second = _cli("serve", "--no-watch", env=env)
        assert second.returncode == 1 and "already serves" in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert not announce.path_for(data).exists()
    after = _indexer("search", "nightly backups of the database", "-k", "1", "--json", env=env)
    assert after.returncode == 0 and json.loads(after.stdout)["hits"][0]["path"] == hits[0]["path"]


def test_a_stale_announcement_is_ignored(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    announce.write(tmp_path, announce.Announcement("http://127.0.0.1:9", dead.pid, "t", time.time(), str(tmp_path)))
    assert announce.read(tmp_path) is None
    from indexer.server.client import remote_search

    assert remote_search(tmp_path, {"query": "x"}) is None


def test_an_announced_server_that_does_not_answer_falls_back(tmp_path: Path) -> None:
    from indexer.server.client import remote_search

    # our own (live) pid, but nothing listens on the port: the CLI must fall back to in-process
    announce.write(tmp_path, announce.Announcement("http://127.0.0.1:9", os.getpid(), "t", time.time(), str(tmp_path)))
    assert remote_search(tmp_path, {"query": "x"}) is None


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_public_bind_says_which_host_names_it_answers(tmp_path: Path, embed_model_path: Path) -> None:
    """Bound to every interface, the server names the hosts it answers to (loopback until allowed_hosts lists
    more), and a request for another name is 421 while loopback works."""
    env = _env(tmp_path / "public-data", embed_model_path, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "serve", "--host", "0.0.0.0", "--public", "--no-watch"],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    try:
        lines = []
        assert proc.stderr is not None
        while not any("answering only" in line for line in lines):
            line = proc.stderr.readline()
            assert line, f"the server ended: {''.join(lines)}"
            lines.append(line)
        hint = next(line for line in lines if "answering only" in line)
        assert "allowed_hosts" in hint and "INDEXER_ALLOWED_HOSTS" in hint
        wait_for(lambda: announce.read(tmp_path / "public-data") is not None, 60, "the announcement")
        ann = announce.read(tmp_path / "public-data")
        assert ann is not None
        wait_for(lambda: httpx.get(ann.url + "/healthz").status_code == 200, 60, "the server to answer")
        other = httpx.get(ann.url + "/healthz", headers={"Host": "my-laptop.lan:8480"})
        assert other.status_code == 421 and "allowed_hosts" in other.json()["error"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_ctrl_c_stops_the_server_with_exit_130_and_its_announcement_gone(tmp_path: Path, embed_model_path: Path):
    """The README's exit codes: Ctrl-C (SIGINT to the process group, as a terminal sends it) ends `indexer serve`
    with 130, after its shutdown removed the announcement (so `indexer search` no longer goes to it)."""
    data = tmp_path / "sigint-data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer.cli", "serve", "--no-watch"], env=_env(data, embed_model_path, tmp_path),
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True,
        # as from a terminal: a suite started in the background ignores SIGINT, and Python keeps an inherited SIG_IGN
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(lambda: announce.read(data) is not None, 60, "the announcement")
        ann = announce.read(data)
        assert ann is not None
        wait_for(lambda: _answers(ann.url), 60, "the server to answer")
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert not (data / announce.FILE_NAME).exists(), err  # removed by the shutdown, not just stale
