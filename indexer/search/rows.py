"""A spreadsheet hit names the rows that matched, not only its block's range.

Spreadsheet and CSV readers write a block of rows as a section located by its cell range (``A134:C144``, or
``Sales!A134:C144`` with the sheet in ``location["sheet"]``): its text is an optional ``## Sheet`` heading, the
header row and one line per row. The readers record where the rows are: ``row_numbers`` (``"134-144"``, empty
rows left out: ``"2-4,7"``) and ``first_row_line``, the document line of the first of them, so any chunk of the
block (a model with a short chunk limit splits it) maps its lines to rows. The lines holding the most query
terms give the rows: ``row 137 (A137:C137)``. Blocks indexed before the readers recorded it map only when the
chunk holds the whole block. A hit sharing no word with the query, or matching every row alike, keeps the range.
"""

from __future__ import annotations

import re
from typing import Any

_RANGE = re.compile(r"^(?:(?P<sheet>.+)!)?(?P<c1>[A-Z]{1,3})(?P<r1>\d+):(?P<c2>[A-Z]{1,3})(?P<r2>\d+)$")


def expand_numbers(text: str) -> list[int]:
    """``"2-4,7"`` -> ``[2, 3, 4, 7]`` (as plugins.documents.office.compact_numbers writes them)."""
    out: list[int] = []
    for part in filter(None, str(text).split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def matched_rows(
    text: str, location: dict[str, Any], matched_lines: set[int], start_line: int = 0
) -> tuple[str, dict[str, Any]] | None:
    """``(locator, location)`` naming the rows of ``matched_lines`` (indexes into ``text.split("\\n")``, the
    chunk starting at document line ``start_line``) when ``location`` is a spreadsheet block; else None."""
    cell_range = location.get("range")
    m = _RANGE.match(str(cell_range or ""))
    if not m or not matched_lines:
        return None
    first, last = int(m["r1"]), int(m["r2"])
    if "row_numbers" in location and "first_row_line" in location and start_line > 0:
        try:
            numbers = expand_numbers(location["row_numbers"])
            at = int(location["first_row_line"])
        except (TypeError, ValueError):
            return None
        here = [start_line + i - at for i in range(text.count("\n") + 1)]  # the chunk's lines as row indexes
        in_chunk = sum(1 for d in here if 0 <= d < len(numbers))
        found = sorted({numbers[d] for d in (start_line + i - at for i in matched_lines) if 0 <= d < len(numbers)})
        return _named(found, in_chunk, m, location)
    lines = text.split("\n")
    start = 0
    while start < len(lines) and lines[start].startswith("#"):  # the sheet's heading
        start += 1
    body = len(lines) - start
    rows = last - first + 1
    if body == rows:  # the first block: the header row is row `first`
        offset = first - start
    elif body == rows + 1:  # a later block: its first line repeats the header row
        offset = first - start - 1
    else:
        return None
    found = sorted({i + offset for i in matched_lines if i >= start and first <= i + offset <= last})
    return _named(found, rows, m, location)


def _named(
    found: list[int], rows: int, m: re.Match[str], location: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    cell_range = location.get("range")
    if not found or len(found) == rows:  # nothing, or every row alike (a column name matched): the block
        return None
    c1, c2 = m["c1"], m["c2"]
    sheet = location.get("sheet")
    cells = f"{c1}{found[0]}:{c2}{found[-1]}"
    where = f"{sheet}!{cells}" if sheet else cells
    named = f"row {found[0]}" if len(found) == 1 else f"rows {', '.join(map(str, found[:8]))}"
    if len(found) > 8:
        named += f" and {len(found) - 8} more"
    out = dict(location)
    out["range"] = cells if not m["sheet"] else f"{m['sheet']}!{cells}"
    out["rows"] = ",".join(map(str, found))
    out["block"] = cell_range  # the reader's block of rows the chunk holds
    return f"{named} ({where})", out
