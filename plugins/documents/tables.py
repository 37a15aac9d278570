"""CSV and TSV files (the standard library's csv module, the dialect sniffed): rows in sections with their
range (``A2:D9``; fields ``range``), each row written with the header row, like a spreadsheet."""

from __future__ import annotations

import csv
import io

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, TextBuilder
from plugins.documents.office import write_sheet


class CsvReader(DocumentReader):
    kind = "csv"
    extensions = (".csv", ".tsv")
    reads_text = True
    isolated = False  # the csv module is bounded by the text size; no worker needed

    def read(self, ref: SourceRef, data: bytes) -> Document:
        text = _decode(data)
        try:
            dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel_tab if ref.path.lower().endswith(".tsv") else csv.excel
        try:
            rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), dialect), start=1)]
        except csv.Error as exc:
            raise SourceError(ref.path, f"malformed CSV ({exc})") from None
        out = TextBuilder(self.limits, ref)
        width = max((len(r) for _, r in rows), default=0)
        write_sheet(out, "", rows, width)
        doc = out.document(ref, self.kind, {"rows": len(rows)})
        return doc


def _decode(data: bytes) -> str:
    for codec in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")
