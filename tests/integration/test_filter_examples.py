"""Every example of the filter sections of docs/search.md and docs/formats.md, on a folder a new user has (Markdown
notes with YAML and TOML front matter, mails from "Name <addr>" and bare senders, CSVs), on FAISS and embedded
Qdrant, through the Python API, `POST /search` (texts and objects), MCP (texts and objects) and the CLI through the
running server: each gives the same files or the same clear refusal. A docs check keeps the list complete: a
clause written in those sections and not tested here fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.conftest import ServerHandle, make_settings, start_server

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
QUERY = "budget notes tomatoes setup"

GARDEN = ("---\ntitle: Garden log\nauthor: Ada Lovelace\ndate: 2025-03-04\ntags: [garden, tomatoes]\n---\n"
          "# Watering\n\nThe tomatoes in the garden need water twice a week in summer.\n")
WEEKLY = ('+++\ntitle = "Weekly notes"\nauthor = "Linus Torvalds"\ndate = 2024-12-01\npages = 12\n+++\n'
          "# Plans\n\nPlanning the budget for the new year, and the garden.\n")


def _mail(sender: str, date: str, subject: str, body: str) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Date"], msg["Subject"] = sender, "team@example.org", date, subject
    msg.set_content(body)
    return msg.as_bytes()


def _csv(rows: int) -> str:  # the header is a row (the reader's `rows` counts it)
    return "region,owner,revenue\n" + "".join(f"north{i},ada,{i * 10}\n" for i in range(rows - 1))


def write_folder(root: Path) -> Path:
    files: dict[str, str | bytes] = {
        "notes/garden.md": GARDEN,
        "notes/weekly.md": WEEKLY,
        "docs/setup.md": "# Setup\n\nInstall the package and run the setup command once.\n",
        "mail/ada.eml": _mail("Ada Lovelace <ada@example.org>", "Tue, 04 Mar 2025 09:30:00 +0000",
                              "Budget approval", "The budget for the analytical engine is approved."),
        "mail/linus.eml": _mail("linus@example.org", "Wed, 15 Jan 2025 10:00:00 +0000", "Budget numbers",
                                "Here are the budget numbers for the kernel summit."),
        "mail/eve.eml": _mail("eve@example.org", "Sat, 01 Jun 2024 08:00:00 +0000", "Old budget",
                              "Last year's budget, for the record."),
        "data/small.csv": _csv(5),
        "data/big.csv": _csv(15),
    }
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


ALL = {"notes/garden.md", "notes/weekly.md", "docs/setup.md", "mail/ada.eml", "mail/linus.eml", "mail/eve.eml",
       "data/small.csv", "data/big.csv"}
MAILS = {"mail/ada.eml", "mail/linus.eml", "mail/eve.eml"}

# clauses -> the files every front end returns, or the message of the refusal (a substring)
EXAMPLES: list[tuple[tuple[Any, ...], set[str] | str]] = [
    # search.md: the examples
    (("sender in ada,linus", "date>=2025-01"), {"mail/ada.eml", "mail/linus.eml"}),
    (("sender in ada@example.org,linus@example.org",), {"mail/ada.eml", "mail/linus.eml"}),
    (("sender==(ada@example.org, linus@example.org)",), {"mail/linus.eml"}),  # the whole value: only the bare one
    (("modified>=-7d", "not type=pdf", "size<1M"), ALL),
    (("path~docs/*.md",), {"docs/setup.md"}),
    (("author=lovelace", "date==2025-03"), {"notes/garden.md"}),  # front matter; the mail of March has no author
    (("sender=ada", "date>=2025-01"), {"mail/ada.eml"}),
    (("modified>=2025-01-01", {"field": "size", "op": "<", "value": "1M", "not": False}), ALL),
    (("not type=pdf sender in ada,linus title==Weekly notes",), "no chunk matches 'title==Weekly notes'"),
    (('subject="Budget approval" type=eml',), {"mail/ada.eml"}),
    # the table, each operator on each kind
    (("type=md",), {"notes/garden.md", "notes/weekly.md", "docs/setup.md"}),
    (("date=2025-03",), {"mail/ada.eml", "notes/garden.md"}),
    (("modified=2025-03-14",), "no chunk matches 'modified=2025-03-14'"),
    (("rows=5",), {"data/small.csv"}),  # by value: not the 15-row CSV
    (("size=1k",), "no chunk matches 'size=1k'"),
    (("date==2025-03-04T09:30+00:00",), {"mail/ada.eml"}),  # that minute: the mail, not the note's day
    (("date==2025-03-04T10:30+01:00",), {"mail/ada.eml"}),  # the same instant in another time zone
    (("date!=2025",), {"mail/eve.eml", "notes/weekly.md"}),
    (("not author==ada lovelace",), ALL - {"notes/garden.md"}),
    (("path^=./docs",), {"docs/setup.md"}),
    (("path^=notes",), {"notes/garden.md", "notes/weekly.md"}),
    (("path~*.md",), {"notes/garden.md", "notes/weekly.md", "docs/setup.md"}),
    (("path==NOTES/Garden.md",), {"notes/garden.md"}),
    (('sender in "Lovelace, Ada",eve',), {"mail/eve.eml"}),
    (("date in 2024-12,2025-01",), {"mail/linus.eml", "notes/weekly.md"}),
    (("size in 1k,2k",), "no chunk matches 'size in 1k,2k'"),
    (("title>5",), "title is a text field"),
    (("date<2024",), "no chunk matches 'date<2024'"),
    (("size>10k",), "no chunk matches 'size>10k'"),
    (("pages>10",), {"notes/weekly.md"}),
    (("date<2025", "type=eml"), {"mail/eve.eml"}),
    (("tags in garden,roses",), {"notes/garden.md"}),
    # formats.md
    (("sender=linus", "date=2026-03"), "no chunk matches 'date=2026-03'"),
    (("date>=2025-01",), {"mail/ada.eml", "mail/linus.eml", "notes/garden.md"}),
    # refusals: one clear message, never a server error
    (("sendr=ada",), "did you mean sender"),
    (("date=03",), "date is a date field"),
    (("size<99999999999999999999999G",), "the size is out of range"),
    (("path^=../elsewhere",), "leaves the collection's roots"),
    (("sender=a\x00b",), "holds a control character"),
    (("sender=" + "x" * 20_000,), "a filter clause has 20,007 characters"),
    (({"field": {"a": 1}, "value": "x"},), "field must be a field name"),
    (({"field": "sender", "value": {"x": 1}},), "value must be text, a number or a list"),
]
TEXT_EXAMPLES = [(w, want) for w, want in EXAMPLES if all(isinstance(c, str) for c in w)]


@pytest.fixture(scope="module", params=["faiss", "qdrant"])
def world(request, tmp_path_factory, embed_model_path) -> Iterator[tuple[ServerHandle, dict[int, Any]]]:
    """The folder indexed into a store; each example's answer in-process (the Python API), then the server."""
    from indexer.collection.facade import open_collection

    base = tmp_path_factory.mktemp(f"examples-{request.param}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INDEXER_CONFIG", str(base / "no-config.toml"))
        root = write_folder(base / "folder").resolve()
        settings = make_settings(base / "data", embed_model_path, None, store=request.param)
        local: dict[int, Any] = {}
        with open_collection("default", settings=settings) as col:
            report = col.index([root])
            assert report.failed == [] and report.files_indexed == len(ALL), report.to_dict()
            for i, (where, _) in enumerate(EXAMPLES):
                local[i] = _answer(lambda w=where: _api(col, root, w))
        handle = start_server(settings, root, watch=False)
        try:
            yield handle, local
        finally:
            handle.stop()


def _answer(call) -> set[str] | str:
    from indexer.errors import InputError

    try:
        return call()
    except InputError as exc:
        return "refused: " + str(exc)


def _rel(paths: list[str], root: Path) -> set[str]:
    return {str(Path(p).relative_to(root)) for p in paths}


def _api(col, root: Path, where) -> set[str] | str:
    res = col.search(QUERY, k=60, mode="dense", rerank=False, where=list(where))
    return _rel([h.path for h in res.hits], root) or "empty: " + str(res.filter_note)


def _expected(got: set[str] | str, want: set[str] | str, label: str) -> None:
    if isinstance(want, set):
        assert got == want, label
    else:
        assert isinstance(got, str) and want in got, (label, got)


@pytest.mark.parametrize("i", range(len(EXAMPLES)), ids=lambda i: str(EXAMPLES[i][0])[:60])
def test_each_example_in_process_and_through_search(world, i) -> None:
    handle, local = world
    where, want = EXAMPLES[i]
    _expected(local[i], want, "python api")
    with handle.client() as c:
        r = c.post("/search", json={"query": QUERY, "k": 60, "mode": "dense", "rerank": False, "where": list(where)})
    assert r.status_code < 500, r.text
    if r.status_code == 200:
        body = r.json()
        got: set[str] | str = _rel([h["path"] for h in body["hits"]], handle.root) or "empty: " + str(
            body["filter_note"])
    else:
        assert r.status_code == 400, r.text
        got = "refused: " + r.json()["error"]["message"]
        assert "pydantic" not in got and "{'" not in got
    _expected(got, want, "/search")
    assert got == local[i] or (isinstance(want, str) and isinstance(got, str))
    if isinstance(want, str) and isinstance(local[i], str):  # the same message in-process and over HTTP
        assert got.split(": ", 1)[1] == local[i].split(": ", 1)[1]


def test_each_example_through_mcp(world) -> None:
    from mcp import Client

    handle, local = world

    async def main() -> list[Any]:
        out = []
        async with Client(handle.url + "/mcp") as client:
            for where, _ in EXAMPLES:
                out.append(await client.call_tool(
                    "search", {"query": QUERY, "k": 60, "where": list(where), "full": True}))
        return out

    for (where, want), result in zip(EXAMPLES, anyio.run(main), strict=True):
        if result.is_error:
            got: set[str] | str = "refused: " + result.content[0].text
            assert "pydantic" not in got and "errors.pydantic.dev" not in got
        else:
            data = json.loads(result.content[0].text)
            got = _rel([h["path"] for h in data["hits"]], handle.root) or "empty: " + str(data.get("filter_note"))
        _expected(got, want, f"mcp {where}")


def test_each_text_example_through_the_cli_and_the_server(world) -> None:
    from indexer.server import announce

    handle, _ = world
    data_dir = Path(handle.settings.data_dir)
    ann = announce.Announcement(handle.url, os.getpid(), "test-token", time.time(), str(data_dir))
    announce.write(data_dir, ann)
    script = Path(sys.executable).with_name("indexer")
    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir), "INDEXER_CONFIG": str(data_dir / "none.toml")}
    try:
        for where, want in TEXT_EXAMPLES:
            if any("\x00" in c or len(c) > 1000 for c in where):
                continue  # not passable as an argument; the same reader refuses it above
            args = [str(script), "search", QUERY, "-k", "60", "--mode", "dense", "--no-rerank", "--json"]
            for clause in where:
                args += ["--where", clause]
            proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
            if isinstance(want, set):
                assert proc.returncode == 0, (where, proc.stderr)
                out = json.loads(proc.stdout)
                assert set(out) == {"hits", "matched", "facets", "where", "filter_note"}  # one shape, always
                assert _rel([h["path"] for h in out["hits"]], handle.root) == want, where
            elif want.startswith("no chunk matches"):
                assert proc.returncode == 0 and want in proc.stderr, (where, proc.stderr)
            else:
                assert proc.returncode == 2 and want in proc.stderr, (where, proc.stderr)
        for bad, message in ((["-k", "0"], "k=0 is out of range"), (["--mode", "fuzzy"], "unknown search mode")):
            proc = subprocess.run([str(script), "search", QUERY, *bad], capture_output=True, text=True, env=env,
                                  timeout=120)
            assert proc.returncode == 2 and message in proc.stderr and "Input should" not in proc.stderr, proc.stderr
    finally:
        announce.remove(data_dir, ann)


def test_front_matter_is_metadata_and_its_block_no_hit(world) -> None:
    handle, _ = world
    with handle.client() as c:
        hits = c.post("/search", json={"query": "Garden log Ada Lovelace tags garden tomatoes", "k": 20,
                                       "rerank": False}).json()["hits"]
    garden = [h for h in hits if h["path"].endswith("garden.md")]
    assert garden and all("author:" not in h["text"] and "Lovelace" not in h["text"] for h in garden)
    assert garden[0]["metadata"]["author"] == "Ada Lovelace" and garden[0]["metadata"]["tags"] == "garden, tomatoes"
    assert garden[0]["start_line"] == 7  # the body's first line: the file's own line numbers


def test_the_docs_filter_sections_hold_only_tested_examples() -> None:
    tested = {c for where, _ in EXAMPLES for c in where if isinstance(c, str)}
    tested |= {c.strip() for where, _ in EXAMPLES for c in where if isinstance(c, str) for c in c.split(";")}
    search = (DOCS / "search.md").read_text(encoding="utf-8")
    section = search[search.index("## Filters"):search.index("### How a filter runs")]
    formats = (DOCS / "formats.md").read_text(encoding="utf-8")
    section += formats[formats.index("Filters on metadata"):formats.index("Tables are written as rows")]
    written = set(re.findall(r"--where '([^']+)'", section))
    missing = sorted(w for w in written if w not in tested and not any(w in t for t in tested))
    assert missing == [], f"filter examples in the docs without a test here: {missing}"
