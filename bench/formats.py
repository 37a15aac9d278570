"""Document readers: fidelity, speed and peak memory per format, ours against one-library-for-many engines.

    python bench/formats.py make DIR            # write the samples (tests/documents.py) and large files into DIR
    python bench/formats.py run DIR [--engine ours|markitdown|kreuzberg] [--json OUT]
    python bench/formats.py ocr [--pages N]     # OCR: character error rate and seconds per 200-dpi A4 page, one core

``make`` needs this project's environment (the formats' own libraries write the files). ``run`` can be started
with another interpreter that has markitdown or kreuzberg installed (``--engine``): it imports only that engine
(and, for ``ours``, this project). Each file is read in a fresh subprocess, so peak memory (max RSS, the
interpreter and the engine's imports included; the baseline is reported apart) is per format.

Fidelity checks per sample: the unique phrase, headings written as headings, a table row kept with its header,
list items, reading order (the slide notes with their slide), and where the engine says the text lies (slides,
sheets, messages, cells, chapters).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# sample -> checks: name -> (regex that must match the extracted text)
CHECKS: dict[str, dict[str, str]] = {
    "docx": {"phrase": "marmalade turbines hum", "heading": r"(?m)^#+ Maintenance",
             "list": r"(?m)^[-*] first checklist",
             "table header": r"Revenue: 1200|\| *Region *\| *Owner *\| *Revenue *\|\n\| *-"},
    "pptx": {"phrase": "octopus ledger reconciled", "title heading": r"(?m)^#+ Quarterly results",
             "slide number": r"(?i)slide(?: number)?:? 2", "notes with slide": r"(?s)Quarterly results.{0,120}auditors",
             "table header": r"Revenue: 1200|\| *Region *\| *Owner *\| *Revenue *\|\n\| *-"},
    "xlsx": {"phrase": "zircon invoice", "sheet": r"Sales", "row with header": r"Note: zircon invoice|"
             r"\| *Region *\| *Owner *\| *Revenue *\| *Note *\|\n\| *-", "cell range": r"A1:D4"},
    "csv": {"phrase": "quokka shipment", "row with header": r"Note: quokka shipment|Note\W+quokka|"
            r"\| *Region *\| *Owner *\| *Revenue *\| *Note *\|\n\| *-"},
    "odt": {"phrase": "lavender anvil protocol", "heading": r"(?m)^#+ Safety", "list": r"(?m)^[-*] goggles",
            "table header": r"Revenue: 1200|\| *Region *\| *Owner *\| *Revenue *\|\n\| *-"},
    "ods": {"phrase": "tangerine voltage", "sheet": r"Budget", "row with header": r"Note: tangerine|"
            r"\| *Region *\| *Owner *\| *Revenue *\| *Note *\|\n\| *-"},
    "odp": {"phrase": "basalt choir rehearsal", "title heading": r"(?m)^#+ Choir", "slide number": r"(?i)slide 2"},
    "epub": {"phrase": "saffron lighthouse keeper", "heading": r"(?m)^#+ The keeper", "list": r"(?m)^[-*] oil",
             "chapter": r"(?i)chapter 2"},
    "rtf": {"phrase": "cobalt meadow whistle", "no markup": r"^(?!.*\\par)(?s:.*)Café au lait"},
    "eml": {"phrase": "periwinkle audit deadline", "sender": r"ada@example\.org", "no MIME": r"^(?!(?s:.*)boundary=)"},
    "mbox": {"phrase": "walrus budget approval", "both messages": r"(?s)Lunch.*Budget",
             "no MIME": r"^(?!(?s:.*)boundary=)", "message number": r"(?i)message 2"},
    "ipynb": {"phrase": "regression slope" , "code cell": r"np\.polyfit", "output": r"(?m)^2\.0$",
              "cell number": r"(?i)cell 3"},
}  # fmt: skip


def make(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.documents import make_all

    make_all(folder)
    big = folder / "big"
    big.mkdir(exist_ok=True)
    _big_docx(big / "big.docx")
    _big_pptx(big / "big.pptx")
    _big_xlsx(big / "big.xlsx")
    _big_csv(big / "big.csv")
    _big_mbox(big / "big.mbox")
    _big_ipynb(big / "big.ipynb")
    _big_odt(big / "big.odt")
    _big_epub(big / "big.epub")
    print(f"wrote samples and large files into {folder}")


_TEXT = "the plant keeps its turbines at speed while the crew logs every reading in the ledger"
_WORDS = _TEXT.split()


def _sentence(i: int, n: int = 24) -> str:
    return " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(n)) + f" {i}."


def _big_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    for section in range(50):
        d.add_heading(f"Section {section}", level=1)
        for p in range(8):
            d.add_paragraph(_sentence(section * 10 + p))
        table = d.add_table(rows=1, cols=3)
        for cell, name in zip(table.rows[0].cells, ("Name", "Value", "Unit"), strict=True):
            cell.text = name
        for r in range(5):
            for cell, value in zip(table.add_row().cells, (f"m{r}", str(r * 7), "kW"), strict=True):
                cell.text = value
    d.save(path)


def _big_pptx(path: Path) -> None:
    from pptx import Presentation

    prs = Presentation()
    for s in range(100):
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = f"Slide title {s}"
        slide.placeholders[1].text = "\n".join(_sentence(s * 3 + k, 12) for k in range(3))
        slide.notes_slide.notes_text_frame.text = _sentence(s, 10)
    prs.save(path)


def _big_xlsx(path: Path) -> None:
    import openpyxl

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("Data")
    ws.append(["Id", "Name", "Amount", "Comment"])
    for i in range(20_000):
        ws.append([i, f"item {i}", i * 3, _sentence(i, 6)])
    wb.save(path)


def _big_csv(path: Path) -> None:
    import csv

    with open(path, "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["Id", "Name", "Amount", "Comment"])
        for i in range(20_000):
            w.writerow([i, f"item {i}", i * 3, _sentence(i, 6)])


def _big_mbox(path: Path) -> None:
    import mailbox
    from email.message import EmailMessage

    box = mailbox.mbox(str(path))
    for i in range(1000):
        msg = EmailMessage()
        msg["Subject"], msg["From"], msg["To"] = f"Report {i}", f"user{i % 17}@example.org", "team@example.org"
        msg["Date"] = "Mon, 02 Mar 2026 09:30:00 +0000"
        msg.set_content("\n\n".join(_sentence(i + k) for k in range(4)))
        box.add(msg)
    box.flush()
    box.close()


def _big_ipynb(path: Path) -> None:
    cells = []
    for i in range(500):
        cells.append({"cell_type": "markdown", "metadata": {}, "source": f"## Step {i}\n{_sentence(i)}"})
        cells.append({"cell_type": "code", "metadata": {}, "execution_count": i, "source": f"x_{i} = {i} * 2\nx_{i}",
                      "outputs": [{"output_type": "execute_result", "execution_count": i, "metadata": {},
                                   "data": {"text/plain": str(i * 2)}}]})  # fmt: skip
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    path.write_text(json.dumps(nb))


def _big_odt(path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    doc = OpenDocumentText()
    for s in range(50):
        doc.text.addElement(H(outlinelevel=1, text=f"Section {s}"))
        for p in range(8):
            doc.text.addElement(P(text=_sentence(s * 10 + p)))
    doc.save(str(path))


def _big_epub(path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("big")
    book.set_title("Big")
    book.set_language("en")
    chapters = []
    for c in range(50):
        ch = epub.EpubHtml(title=f"Chapter {c}", file_name=f"c{c}.xhtml", lang="en")
        ch.content = f"<html><body><h1>Chapter {c}</h1>" + "".join(
            f"<p>{_sentence(c * 10 + p)}</p>" for p in range(8)) + "</body></html>"  # fmt: skip
        book.add_item(ch)
        chapters.append(ch)
    book.toc = tuple(chapters)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)


# -- reading one file with one engine (in a subprocess) --------------------------------------------------------


def _read_ours(path: Path) -> tuple[str, list[str]]:
    sys.path.insert(0, str(ROOT))
    from indexer.plugin_api import SourceRef, load_readers

    ext = path.suffix.lower()
    reader = next(r for r in load_readers() if ext in r.extensions)
    data = path.read_bytes()
    doc = reader.read(SourceRef(str(path.parent), str(path), len(data), 0), data)
    return doc.text, [s.locator for s in doc.sections]


def _read_markitdown(path: Path) -> tuple[str, list[str]]:
    from markitdown import MarkItDown

    return MarkItDown().convert(str(path)).text_content, []


def _read_kreuzberg(path: Path) -> tuple[str, list[str]]:
    import kreuzberg

    result = kreuzberg.extract_file_sync(str(path), config=kreuzberg.ExtractionConfig(output_format="markdown"))
    return result.content, []


ENGINES = {"ours": _read_ours, "markitdown": _read_markitdown, "kreuzberg": _read_kreuzberg}


def one(engine: str, path: Path) -> dict[str, object]:
    """Read ``path`` (twice: the first includes imports, the second is timed) and report."""
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    read = ENGINES[engine]
    try:
        started = time.perf_counter()
        text, locators = read(path)
        first = time.perf_counter() - started
        started = time.perf_counter()
        text, locators = read(path)
        second = time.perf_counter() - started
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    return {"first_s": first, "s": second, "chars": len(text), "text": text, "locators": locators,
            "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "base_rss_kb": base_rss}  # fmt: skip


def run(folder: Path, engine: str, out: Path | None) -> None:
    results: dict[str, dict[str, object]] = {}
    files = sorted(folder.glob("sample.*")) + sorted((folder / "big").glob("big.*"))
    for path in files:
        proc = subprocess.run([sys.executable, __file__, "one", engine, str(path)], capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        try:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            r = {"error": (proc.stderr or proc.stdout)[-200:]}
        key = path.name
        if path.name.startswith("sample.") and "text" in r:
            checks = CHECKS[path.suffix[1:]]
            haystack = str(r["text"]) + "\n" + "\n".join(str(x) for x in r.get("locators", []))  # type: ignore[union-attr]
            r["fidelity"] = {name: bool(re.search(rx, haystack)) for name, rx in checks.items()}
        r.pop("text", None)
        r["bytes"] = path.stat().st_size
        results[key] = r
        if "error" in r:
            print(f"{engine:10s} {key:12s} ERROR {r['error']}")
            continue
        fid = r.get("fidelity")
        fid_s = ""
        if isinstance(fid, dict):
            fid_s = f"{sum(fid.values())}/{len(fid)} {[k for k, v in fid.items() if not v]}"
        mb_s = r["bytes"] / 1e6 / max(1e-9, float(r["s"]))  # type: ignore[arg-type]
        print(f"{engine:10s} {key:12s} {float(r['s']) * 1000:8.1f} ms {mb_s:7.2f} MB/s  rss "  # type: ignore[arg-type]
              f"{int(r['rss_kb']) // 1024} MiB (base {int(r['base_rss_kb']) // 1024})  {fid_s}")  # type: ignore[call-overload]
    if out is not None:
        out.write_text(json.dumps(results, indent=1))


def ocr_bench(pages: int) -> None:
    """Full A4 pages of prose (11 pt, 45 lines) rendered at 200 dpi, OCR'd on one core (OMP_THREAD_LIMIT=1)."""
    os.environ["OMP_THREAD_LIMIT"] = "1"
    sys.path.insert(0, str(ROOT))
    from indexer.plugin_api import SourceRef
    from plugins.filesystem.ocr import ImageReader
    from tests.documents import render_page
    from tests.unit.test_ocr import cer

    reader = ImageReader()
    rates, seconds = [], []
    for page in range(pages):
        lines = [_sentence(page * 100 + i, 11) for i in range(45)]
        image = render_page(lines, dpi=200, points=11)
        buffer = __import__("io").BytesIO()
        image.save(buffer, "PNG")
        data = buffer.getvalue()
        started = time.perf_counter()
        doc = reader.read(SourceRef("/bench", f"/bench/p{page}.png", len(data), 0), data)
        seconds.append(time.perf_counter() - started)
        rates.append(cer("\n".join(lines), doc.text))
    print(f"OCR 200-dpi A4 pages: {pages}, CER mean {sum(rates) / pages:.4f} max {max(rates):.4f}, "
          f"seconds/page median {sorted(seconds)[pages // 2]:.2f} max {max(seconds):.2f} (one core)")


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    if len(sys.argv) >= 2 and sys.argv[1] == "one":
        print(json.dumps(one(sys.argv[2], Path(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make").add_argument("folder", type=Path)
    r = sub.add_parser("run")
    r.add_argument("folder", type=Path)
    r.add_argument("--engine", choices=sorted(ENGINES), default="ours")
    r.add_argument("--json", type=Path)
    sub.add_parser("ocr").add_argument("--pages", type=int, default=5)
    args = parser.parse_args()
    if args.command == "ocr":
        ocr_bench(args.pages)
    elif args.command == "make":
        make(args.folder)
    else:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        run(args.folder, args.engine, args.json)


if __name__ == "__main__":
    main()
