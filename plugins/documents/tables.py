"""CSV and TSV files (the standard library's csv module, the dialect sniffed): rows in sections with their
range (``A2:D9``; fields ``range``), each row written with the header row, like a spreadsheet. Read in the parse
worker like every document; each block of rows is a part (its time limit bounds a stall), and a file has at
most ``max_rows`` rows (reader option, default 1,048,576, Excel's sheet limit); rows past it are left out with a
note (reported "partly read")."""

from __future__ import annotations

import csv
import io

from indexer.plugin_api import Document, SourceError, SourceRef
from indexer.plugin_api.parts import part_done
from plugins.documents._common import DocumentReader, TextBuilder
from plugins.documents.office import MAX_ROWS, ROWS_PER_PART, rows_note, write_sheet


class CsvReader(DocumentReader):
    kind = "csv"
    extensions = (".csv", ".tsv")
    reads_text = True

    def known_options(self) -> tuple[str, ...]:
        return ("max_rows",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        text = _decode(data)
        try:
            dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel_tab if ref.path.lower().endswith(".tsv") else csv.excel
        cap = int(self.options.get("max_rows", MAX_ROWS))
        rows: list[tuple[int, list[str]]] = []
        total = 0
        try:
            for total, row in enumerate(csv.reader(io.StringIO(text), dialect), start=1):
                if total <= cap:
                    rows.append((total, row))
                if total % ROWS_PER_PART == 0:
                    part_done()
        except csv.Error as exc:
            raise SourceError(ref.path, f"malformed CSV ({exc})") from None
        out = TextBuilder(self.limits, ref)
        width = max((len(r) for _, r in rows), default=0)
        write_sheet(out, "", rows, width)
        notes = (rows_note(cap, total, "", self.kind),) if total > cap else ()
        return out.document(ref, self.kind, {"rows": len(rows)}, notes)


def _decode(data: bytes) -> str:
    for codec in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")
