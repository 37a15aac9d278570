"""Documents as people have them, through the product: every format written by its own library, indexed with
the real model into FAISS and embedded Qdrant, found by a phrase only it contains, the hit saying where it is
(heading path, slide, sheet range, message, cell, chapter) and carrying the file's metadata; metadata filters;
hostile files reported without losing what was indexed; code found by the name of its function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import indexer
from tests.documents import UNIQUE, make_all
from tests.unit.test_document_readers import WHERE

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "qdrant"}]
# The row a spreadsheet hit names (indexer.search.rows), where the reader's block is WHERE's range.
HIT_ROWS = {"xlsx": "row 3 (Sales!A3:D3)", "csv": "row 3 (A3:D3)", "ods": "row 3 (Budget!A3:D3)"}


@pytest.fixture(params=STORES, ids=lambda o: o["store"])
def store_opts(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(request.param)


def test_every_format_is_found_by_its_phrase_and_says_where(tmp_path, embed_model_path, store_opts):
    folder = tmp_path / "docs"
    paths = make_all(folder)
    with indexer.open_collection(f"docs-{store_opts['store']}", **store_opts) as col:
        report = col.index([folder])
        assert report.failed == [] and report.skipped == []
        assert report.files_indexed == len(paths)
        for ext, path in paths.items():
            result = col.search(UNIQUE[ext], k=3, mode="hybrid")
            hit = result.hits[0]
            assert hit.path == str(path.resolve()), (ext, [h.path for h in result.hits])
            assert UNIQUE[ext] in hit.text
            heading, locator = WHERE[ext]
            locator = HIT_ROWS.get(ext, locator)  # a spreadsheet hit names the row that matched
            assert (hit.heading, hit.locator) == (heading, locator), ext
        slide = col.search(UNIQUE["pptx"], k=1).hits[0]
        assert slide.location == {"slide": 2, "title": "Quarterly results"}
        assert slide.metadata["author"] == "Grace Hopper"
        cells = col.search(UNIQUE["xlsx"], k=1).hits[0]
        assert {k: cells.location[k] for k in ("sheet", "range", "rows", "block")} == {
            "sheet": "Sales", "range": "A3:D3", "rows": "3", "block": "A1:D4"}
        assert cells.snippet.endswith("Note: zircon invoice") and "North" not in cells.snippet
        mail = col.search(UNIQUE["mbox"], k=1).hits[0]
        assert mail.metadata["subject"] == "Budget" and mail.metadata["date"].startswith("2026-03-04")
        assert col.search(UNIQUE["ipynb"], k=1).hits[0].location == {"cell": 3, "cell_type": "code"}

        # metadata filters: only hits whose metadata (or location) matches every pair
        grace = col.search("lunch and budget messages", k=10, metadata=(("sender", "grace@example.org"),))
        assert grace.hits and {h.metadata["subject"] for h in grace.hits} == {"Lunch"}
        ada = col.search("report", k=10, metadata=(("author", "lovelace"),))
        assert ada.hits and {os.path.basename(h.path) for h in ada.hits} == {"sample.docx"}
        sales = col.search("revenue by region", k=10, metadata=(("sheet", "Sales"),))
        assert sales.hits and all(h.location["sheet"] == "Sales" for h in sales.hits)
        assert col.search("anything", metadata=(("sender", "nobody@nowhere"),)).hits == ()

        # a second run writes nothing again (files this fresh are re-hashed by the racy rule, not re-read)
        again = col.index([folder])
        assert again.files_indexed == 0 and again.chunks_embedded == 0 and again.points_upserted == 0


def test_hostile_files_fail_with_reasons_and_keep_what_was_indexed(tmp_path, embed_model_path, monkeypatch):
    monkeypatch.setenv("INDEXER_MAX_FILE_SIZE", str(400 * 1024 * 1024))  # the size cap must not hide them
    monkeypatch.setenv("INDEXER_PARSE_TIMEOUT", "20")
    folder = tmp_path / "docs"
    paths = make_all(folder)
    with indexer.open_collection("hostile") as col:
        assert col.index([folder]).failed == []
        good = paths["docx"].read_bytes()
        paths["docx"].write_bytes(good[: len(good) // 3])  # a truncated copy replaces the indexed file
        from tests.unit.test_document_readers import _bomb

        _bomb(folder / "bomb.xlsx", "xl/workbook.xml", 128 << 20)
        (folder / "locked.pptx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 2048)
        report = col.index([folder])
        failed = {os.path.basename(p): reason for p, reason in report.failed}
        assert set(failed) == {"sample.docx", "bomb.xlsx", "locked.pptx"}, failed
        assert "truncated" in failed["sample.docx"]
        assert "zip bomb" in failed["bomb.xlsx"]
        assert "encrypted" in failed["locked.pptx"]
        kept = col.search(UNIQUE["docx"], k=1).hits[0]  # the last good content is still searchable
        assert kept.path == str(paths["docx"].resolve())


def test_code_is_found_by_the_name_of_its_function(tmp_path, embed_model_path):
    folder = tmp_path / "src"
    folder.mkdir()
    helpers = "\n\n".join(
        f"def helper_{i}(values):\n    total = 0\n    for v in values:\n        total += v * {i}\n    return total"
        for i in range(12)
    )
    (folder / "mail.py").write_text(
        f"import re\n\n\n{helpers}\n\n\nclass Message:\n    def parse_header(self, line):\n"
        "        name, _, value = line.partition(':')\n        return name.strip().lower(), value.strip()\n"
    )
    with indexer.open_collection("code") as col:
        col.index([folder])
        hit = col.search("parse_header", k=1, mode="lexical").hits[0]
        assert hit.heading[-1] == "parse_header" or hit.heading == ("Message",)
        assert "def parse_header(self, line):" in hit.text
        lines = (folder / "mail.py").read_text().split("\n")
        assert lines[hit.start_line - 1].strip() in ("class Message:", "def parse_header(self, line):")


def test_cli_prints_the_locator_and_filters_by_metadata(tmp_path, embed_model_path):
    folder = tmp_path / "docs"
    make_all(folder)
    env = {**os.environ}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env,
                              timeout=600)  # fmt: skip

    assert run("index", str(folder)).returncode == 0
    plain = run("search", UNIQUE["pptx"], "-k", "1")
    assert plain.returncode == 0 and "[slide 2: Quarterly results]" in plain.stdout, plain.stdout
    found = run("search", "budget", "--json", "--meta", "sender=linus")
    hits = json.loads(found.stdout)["hits"]
    assert hits and all("linus" in h["metadata"]["sender"].lower() for h in hits)
    assert hits[0]["locator"].startswith("message 2: Budget")
    bad = run("search", "budget", "--meta", "sender")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr
    assert Path(folder).exists()


def test_scanned_pages_are_found_by_ocr(tmp_path, embed_model_path):
    from plugins.filesystem import ocr
    from tests.documents import PAGE_TEXT, make_scanned_pdf, render_page

    if ocr.missing() is not None:
        pytest.skip(f"no OCR here: {ocr.missing()}")
    folder = tmp_path / "scans"
    folder.mkdir()
    make_scanned_pdf(folder / "minutes.pdf", [["Cover sheet of the minutes."], list(PAGE_TEXT)])
    render_page(["The greenhouse thermostat must stay at nineteen degrees."]).save(folder / "note.png")
    with indexer.open_collection("scans") as col:
        report = col.index([folder])
        assert report.failed == [] and report.files_indexed == 2
        hit = col.search("audit of the filters in May", k=1).hits[0]
        assert hit.path.endswith("minutes.pdf") and hit.page == 2
        note = col.search("greenhouse thermostat", k=1).hits[0]
        assert note.path.endswith("note.png") and "nineteen degrees" in note.text
        assert note.metadata == {"ocr": "eng"}


def test_the_watcher_reads_documents_and_keeps_them_through_a_broken_save(tmp_path, embed_model_path):
    from indexer.watch.watcher import Watcher, WatchOptions
    from tests.documents import make_docx, make_pptx
    from tests.integration.waiting import until

    folder = (tmp_path / "live").resolve()
    folder.mkdir()
    make_docx(folder / "report.docx")
    with indexer.open_collection("watch-docs") as col:
        watcher = Watcher(col, [folder], WatchOptions(rescan_seconds=0))
        watcher.start()
        try:
            assert watcher.wait_idle(120)

            def top(query: str) -> object:
                hits = col.search(query, k=1).hits
                return (os.path.basename(hits[0].path), hits[0].locator) if hits else None

            make_pptx(folder / "deck.pptx")  # saved while watching: searchable, with its slide
            until(lambda: watcher.wait_idle(120) and top(UNIQUE["pptx"]) == ("deck.pptx", "slide 2: Quarterly results"),
                  120, "a saved deck becomes searchable", poll=0.05)  # fmt: skip
            data = (folder / "report.docx").read_bytes()
            (folder / "report.docx").write_bytes(data[: len(data) // 3])  # a broken save
            until(lambda: watcher.wait_idle(120) and watcher.totals["files_failed"] >= 1, 120, "failure seen",
                  poll=0.05)  # fmt: skip
            assert top(UNIQUE["docx"]) == ("report.docx", "")  # what was indexed stays searchable
        finally:
            watcher.stop()
