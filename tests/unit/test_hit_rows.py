"""A spreadsheet hit names the rows that matched (indexer.search.rows) and snippets skip what the hit's line
already shows (indexer.search.snippets.without_shown_headings): pure functions on the chunk texts readers write."""

from __future__ import annotations

from indexer.search.rows import matched_rows
from indexer.search.snippets import matched_lines, without_shown_headings

FIRST_BLOCK = (
    "## Sales\nRegion | Owner | Note\nRegion: North; Owner: Ada; Note: regular\n"
    "Region: South; Owner: Grace; Note: zircon"
)
LATER_BLOCK = "name | code\nname: ada; code: CODE938\nname: bob; code: CODE945\nname: cyd; code: CODE952"


def test_the_row_holding_the_most_query_terms_is_named_with_its_cells():
    lines = matched_lines(FIRST_BLOCK, "zircon region")  # "region" is in every line, "zircon" in one
    assert lines == {3}
    locator, location = matched_rows(FIRST_BLOCK, {"sheet": "Sales", "range": "A1:C3"}, lines)
    assert locator == "row 3 (Sales!A3:C3)"
    assert location == {"sheet": "Sales", "range": "A3:C3", "rows": "3", "block": "A1:C3"}


def test_a_later_block_repeats_the_header_and_maps_each_line_to_its_row():
    lines = matched_lines(LATER_BLOCK, "CODE945")
    assert matched_rows(LATER_BLOCK, {"range": "A134:B136"}, lines)[0] == "row 135 (A135:B135)"
    both = matched_lines(LATER_BLOCK, "ada cyd")
    assert matched_rows(LATER_BLOCK, {"range": "A134:B136"}, both)[0] == "rows 134, 136 (A134:B136)"


def test_the_block_stays_when_lines_and_range_disagree_or_every_row_matched():
    lines = matched_lines(LATER_BLOCK, "CODE945")
    assert matched_rows(LATER_BLOCK, {"range": "A134:B140"}, lines) is None  # rows left out (empty rows)
    assert matched_rows(LATER_BLOCK, {"range": "A134:B136"}, matched_lines(LATER_BLOCK, "code")) is None
    assert matched_rows(LATER_BLOCK, {"range": "A134:B136"}, set()) is None  # a dense-only hit
    assert matched_rows(LATER_BLOCK, {"range": "not a range"}, lines) is None


def test_snippets_do_not_repeat_the_title_or_sender_the_locator_shows():
    slide = "## Quarterly results\nThe octopus ledger reconciled."
    assert without_shown_headings(slide, "slide 2: Quarterly results") == "The octopus ledger reconciled."
    assert without_shown_headings(slide, "") == slide  # nothing shown: kept
    mail = "# Lunch\nFrom: Grace <g@x.org>\nTo: team@x.org\nDate: 2026-03-03T09:30:00+00:00\nShall we?"
    assert without_shown_headings(mail, "message 1: Lunch — Grace <g@x.org>, 2026-03-03") == "Shall we?"
    assert without_shown_headings("## Only a title", "slide 1: Only a title") == "## Only a title"


def test_the_readers_row_map_names_rows_in_any_chunk_of_a_split_block():
    from indexer.search.rows import expand_numbers
    from plugins.documents.office import compact_numbers

    assert compact_numbers([2, 3, 4, 7, 9, 10]) == "2-4,7,9-10" and expand_numbers("2-4,7,9-10") == [2, 3, 4, 7, 9, 10]
    # a block of rows 134-144 (first row on document line 158); a chunk holding its lines 162-166 (rows 138-142)
    location = {"range": "A134:B144", "row_numbers": "134-144", "first_row_line": 158}
    chunk = "\n".join(f"name: n{r}; code: C{r}" for r in range(138, 143)).replace("n140", "target")
    locator, where = matched_rows(chunk, location, matched_lines(chunk, "target"), start_line=162)
    assert locator == "row 140 (A140:B140)" and where["block"] == "A134:B144"
    gap = {"range": "A2:B7", "row_numbers": "2-4,7", "first_row_line": 3}  # rows 5 and 6 were empty
    text = "name | code\nname: a; code: 1\nname: b; code: 2\nname: c; code: 3\nname: target; code: 4"
    assert matched_rows(text, gap, matched_lines(text, "target"), start_line=2)[0] == "row 7 (A7:B7)"
    assert matched_rows(chunk, location, matched_lines(chunk, "name"), start_line=162) is None  # every row alike
