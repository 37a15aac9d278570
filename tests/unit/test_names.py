"""Names the OS allows but UTF-8 does not: what can be stored, and the form every output shows."""

from __future__ import annotations

import json
import os
import uuid

from indexer.index.points import POINT_NAMESPACE, point_id
from indexer.names import encodable, printable, printable_data
from indexer.types import IndexReport

ODD = os.fsdecode(b"/docs/\xff\xfe.md")


def test_encodable_and_printable():
    assert encodable("/docs/café.md") and encodable("/a/b")
    assert not encodable(ODD)
    assert printable(ODD) == "/docs/\\xff\\xfe.md"
    assert printable("/docs/café.md") == "/docs/café.md"
    assert printable("\ud800x") == "\\ud800x"  # a surrogate no file name decodes to still prints
    data = printable_data({ODD: [ODD, 3, None], "k": {"n": ODD}})
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # would raise on a surrogate
    assert data == {"/docs/\\xff\\xfe.md": ["/docs/\\xff\\xfe.md", 3, None], "k": {"n": "/docs/\\xff\\xfe.md"}}


def test_point_id_takes_any_name_and_keeps_the_ids_of_utf8_names():
    assert point_id("/docs/café.md", 0, "h") == str(uuid.uuid5(POINT_NAMESPACE, "/docs/café.md\n0\nh"))
    assert point_id(ODD, 0, "h") != point_id(os.fsdecode(b"/docs/\xfe\xff.md"), 0, "h")


def test_report_json_is_utf8_whatever_the_names():
    report = IndexReport(failed=[(ODD, "name is not valid UTF-8")], skipped=[(ODD, "binary")])
    text = json.dumps(report.to_dict(), ensure_ascii=False)
    assert text.encode("utf-8") and "\\\\xff\\\\xfe.md" in text
