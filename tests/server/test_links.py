"""Links inside a root never index, find or serve what the rules keep out (issue 41), through a real server.

A root holds `.env`, a `.gitignore` listing `private.txt`, `a.md -> .env` and `b.md -> private.txt`: neither
secret is indexed, found by a lexical search through the server, or served by `/files` and `/thumbnail`. An
indexed `c.md` later replaced by a link to the ignored file is not served either (the resolved path must itself
be an indexed record), and the next sync drops its record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, make_settings, start_server

SECRET = "zebraquartz7731"
PRIVATE = "walrus diary"


@pytest.fixture(scope="module")
def linked(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    from indexer.collection.facade import open_collection

    root = (isolated_env / "linked").resolve()
    root.mkdir()
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / ".gitignore").write_text("private.txt\n")
    (root / "private.txt").write_text(f"The {PRIVATE} mentions the code 4417.\n")
    (root / "notes.md").write_text("# Notes\n\nOtters hold hands while they sleep.\n")
    (root / "c.md").write_text("Cats sleep sixteen hours a day.\n")
    (root / "a.md").symlink_to(root / ".env")
    (root / "b.md").symlink_to(root / "private.txt")
    settings = make_settings(isolated_env / "linked-data", embed_model_path, None)
    with open_collection("default", settings=settings) as col:
        report = col.index([root])
    assert report.failed == [], report.to_dict()
    handle = start_server(settings, root, mcp=False)
    yield handle
    handle.stop()


def test_links_to_a_hidden_or_ignored_file_are_neither_indexed_nor_found_nor_served(linked: ServerHandle) -> None:
    root = linked.root
    with linked.client() as c:
        status = c.get("/status").json()["collections"][0]
        hits = {
            words: c.post("/search", json={"query": words, "k": 10, "mode": "lexical"}).json()["hits"]
            for words in (SECRET, PRIVATE, "TOKEN")
        }
        served = {name: c.get("/files", params={"path": str(root / name)}) for name in ("a.md", "b.md", ".env",
                                                                                         "private.txt")}
        thumbs = {name: c.get("/thumbnail", params={"path": str(root / name)}) for name in ("a.md", ".env")}
    assert status["files"] == 2  # notes.md and c.md
    assert hits == {SECRET: [], PRIVATE: [], "TOKEN": []}
    for name, answer in {**served, **thumbs}.items():
        assert answer.status_code == 404, (name, answer.text)
        assert SECRET not in answer.text and PRIVATE not in answer.text


def test_an_indexed_file_replaced_by_a_link_is_not_served_and_the_next_sync_drops_it(linked: ServerHandle) -> None:
    root = linked.root
    with linked.client() as c:
        before = c.get("/files", params={"path": str(root / "c.md")})
        assert before.status_code == 200 and "Cats sleep" in before.json()["text"]
        (root / "c.md").unlink()
        (root / "c.md").symlink_to(root / "private.txt")
        text = c.get("/files", params={"path": str(root / "c.md")})
        thumb = c.get("/thumbnail", params={"path": str(root / "c.md")})
        synced = c.post("/collections/default/sync")
        status = c.get("/status").json()["collections"][0]
        lexical = c.post("/search", json={"query": PRIVATE, "k": 10, "mode": "lexical"}).json()["hits"]
    assert text.status_code == 404 and PRIVATE not in text.text, text.text
    assert thumb.status_code == 404, thumb.text  # not found, before any question of whether it is a picture
    assert synced.status_code == 200, synced.text
    assert synced.json()["report"]["files_removed"] == 1
    assert status["files"] == 1 and lexical == []


def test_sync_paths_of_a_replaced_file_drops_its_record(tmp_path: Path, embed_model_path: Path) -> None:
    """The watcher's per-path sync re-checks a link under its own name (not only at its target's path)."""
    from indexer.collection.facade import open_collection

    root = (tmp_path / "root").resolve()
    root.mkdir()
    (root / ".gitignore").write_text("private.txt\n")
    (root / "private.txt").write_text(f"The {PRIVATE}.\n")
    (root / "c.md").write_text("Cats sleep sixteen hours a day.\n")
    settings = make_settings(tmp_path / "data", embed_model_path, None)
    with open_collection("default", settings=settings) as col:
        col.index([root])
        assert [os.path.basename(p) for p in col.state.files("default")] == ["c.md"]
        (root / "c.md").unlink()
        (root / "c.md").symlink_to(root / "private.txt")
        report = col.sync_paths([root / "c.md"])
        assert report.files_removed == 1 and not col.state.files("default")
        assert not col.search(PRIVATE, mode="lexical").hits
