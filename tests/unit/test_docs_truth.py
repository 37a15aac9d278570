"""Docs that said what is not so, each checked against what is: the registered stores, the lock table, the
systemd steps, the watcher inside the server, and the backup/restore example."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def test_plugins_md_names_every_registered_store():
    section = (ROOT / "pyproject.toml").read_text().split('[project.entry-points."indexer.stores"]')[1].split("[")[0]
    stores = re.findall(r"^(\w+) = ", section, flags=re.M)
    assert "qdrant_attach" in stores
    row = next(line for line in (DOCS / "plugins.md").read_text().splitlines() if line.startswith("| `indexer.stores`"))
    assert all(f"`{name}`" in row for name in stores), (sorted(stores), row)


def test_indexing_md_counts_the_locks_it_lists():
    text = (DOCS / "indexing.md").read_text()
    said = re.search(r"(\w+) locks use it:", text)
    assert said, "the lock table's sentence is gone"
    table = text[said.end():].split("\n\n")[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| lock", "| ---"))]
    assert NUMBERS[said.group(1).lower()] == len(rows), (said.group(0), rows)


def test_deploy_md_creates_the_systemd_folder_before_copying_into_it():
    for line in (DOCS / "deploy.md").read_text().splitlines():
        if re.search(r"\bcp\b.*~/.config/systemd/user", line):
            assert "mkdir -p ~/.config/systemd/user" in line.split("cp ")[0], line


def test_server_md_says_the_watcher_runs_inside_the_server_for_embedded_qdrant():
    text = (DOCS / "server.md").read_text()
    assert "watcher is not run inside the server" not in text
    assert "watcher inside the server shares" in text


def test_the_readme_never_restores_into_the_data_directory_it_backed_up():
    for line in (ROOT / "README.md").read_text().splitlines():
        if "indexer restore" in line:
            assert "indexer backup" not in line and "INDEXER_DATA_DIR=" in line, line
