"""A spreadsheet hit names the rows that matched, not only its block's range.

Spreadsheet and CSV readers write a block of rows as a section located by its cell range (``A134:C144``, or
``Sales!A134:C144`` with the sheet in ``location["sheet"]``): its text is an optional ``## Sheet`` heading, the
header row (repeated at the top of every block but the first) and one line per row. When the block's lines and
its range agree (no empty row left out, the whole block in the chunk), the lines holding a query term give the
rows: ``row 137 (A137:C137)``. Otherwise, or for a hit sharing no word with the query, the block's range stays.
"""

from __future__ import annotations

import re
from typing import Any

_RANGE = re.compile(r"^(?:(?P<sheet>.+)!)?(?P<c1>[A-Z]{1,3})(?P<r1>\d+):(?P<c2>[A-Z]{1,3})(?P<r2>\d+)$")


def matched_rows(text: str, location: dict[str, Any], matched_lines: set[int]) -> tuple[str, dict[str, Any]] | None:
    """``(locator, location)`` naming the rows of ``matched_lines`` (indexes into ``text.split("\\n")``) when
    ``location`` is a spreadsheet block whose lines map onto its rows; else None."""
    cell_range = location.get("range")
    m = _RANGE.match(str(cell_range or ""))
    if not m or not matched_lines:
        return None
    first, last = int(m["r1"]), int(m["r2"])
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
