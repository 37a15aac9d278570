"""The filter language's reader (indexer.search.filters): one reader for every front end: several clauses in one
text (the page's where box), values with spaces, quoting, objects, typed operands and clear refusals (no Python
reprs, no internal errors on hostile values)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from indexer.errors import InputError
from indexer.search import filters

NS = 1_000_000_000


def _ts(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("text, clauses", [
    ("not type=pdf", ["not type=pdf"]),
    ("sender in ada,linus", ["sender in ada,linus"]),
    ("sender in ada, linus not type=pdf", ["sender in ada, linus", "not type=pdf"]),
    ("title==Weekly notes type=md", ["title==Weekly notes", "type=md"]),
    ("sender=ada modified>=2025-01 size<1M", ["sender=ada", "modified>=2025-01", "size<1M"]),
    ("type in md,txt; not type=pdf", ["type in md,txt", "not type=pdf"]),
    ('subject="a=b c" type=md', ['subject="a=b c"', "type=md"]),
    ("title=to be or not to be", ["title=to be or not to be"]),
    ("sender = ada  date >= 2025", ["sender = ada", "date >= 2025"]),
    ("path~docs/*.md !type=pdf", ["path~docs/*.md", "!type=pdf"]),
])
def test_one_text_is_split_into_its_clauses(text, clauses):
    assert filters.split(text) == clauses
    assert len(filters.parse([text])) == len(clauses)


def test_values_are_read_as_every_kind_may_need():
    c = filters.parse_clause("not modified>=2025-03")
    assert c.negate and c.op == ">=" and c.values == ((int(_ts(2025, 3, 1) * NS), int(_ts(2025, 4, 1) * NS)),)
    assert filters.parse_clause("size<=1.5M").values == ((1572864, 1572864),)
    assert [v.text for v in filters.parse_clause('sender in ada@x.org, "Lovelace, Ada"').values] == [
        "ada@x.org", "lovelace, ada"]
    assert [v.text for v in filters.parse_clause("sender==(ada@x.org, linus@y.org)").values] == [
        "ada@x.org", "linus@y.org"]
    assert filters.parse_clause("type in .MD,txt").values == ("md", "txt")
    pages = filters.parse([{"field": "pages", "op": ">", "value": 3, "not": True}])[0]
    assert pages.negate and pages.values[0].number == 3.0 and pages.values[0].start is None
    year = filters.parse_clause("date<2026").values[0]  # a number or a year: the field's kind decides
    assert year.number == 2026.0 and (year.start, year.end) == (_ts(2026, 1, 1), _ts(2027, 1, 1))
    zoned = filters.parse_clause("date==2025-03-04T10:30+01:00").values[0]
    assert (zoned.start, zoned.end) == (_ts(2025, 3, 4, 9, 30), _ts(2025, 3, 4, 9, 31))
    assert filters.period("2025-03-04T09")[1] - filters.period("2025-03-04T09")[0] == 3600
    assert filters.period("-7d", now=1_000_000.0) == (1_000_000.0 - 7 * 86400, 1_000_000.0)
    assert filters.period("2025-12")[1] == _ts(2026, 1, 1)
    assert filters.parse_clause("size in 1k,2k").values == ((1024, 1024), (2048, 2048))


def test_paths_are_absolute_or_relative_to_a_root_on_every_front_end():
    rel = filters.parse_clause("path^=./Docs/").values[0]
    assert rel.rel and rel.path == "docs"
    assert filters.parse_clause("path==docs/a.md").values[0] == filters.PathValue("docs/a.md", "docs/a.md", True)
    absolute = filters.parse_clause("path^=/Data/Notes/").values[0]
    assert not absolute.rel and absolute.path == "/data/notes"
    assert filters.parse_clause("path^=.").values[0].path == ""  # the roots themselves
    with pytest.raises(InputError, match="leaves the collection's roots"):
        filters.parse_clause("path^=../elsewhere")


@pytest.mark.parametrize("bad, message", [
    ("type~*.md", "type is text compared whole"),
    ("modified~2025", "modified is a date"),
    ("path>3", "path is text"),
    ("x", "cannot read the filter clause"),
    ("size<99999999999999999999999G", "the size is out of range"),
    ("modified>=-999999y", "the date is out of range"),
    ("date>=9999-99", "neither a number nor a date"),
    ("sender=a\x00b", "holds a control character"),
    ("sender=\ud800", "holds a lone surrogate"),
    ("sender=" + "x" * 20_000, "a filter clause has 20,007 characters"),
    ("sender>=ada", "neither a number nor a date"),
    ("modified=2025-02-30", "not a date"),
])
def test_bad_clauses_are_refused_with_one_clear_message(bad, message):
    with pytest.raises(InputError, match=message) as err:
        filters.parse([bad])
    assert "\\x00" not in str(err.value) and len(str(err.value)) < 600


@pytest.mark.parametrize("item, message", [
    ({"field": {"a": 1}, "op": "=", "value": "x"}, "field must be a field name"),
    ({"field": "sender", "op": "like", "value": "x"}, "op must be one of"),
    ({"field": "sender", "value": {"x": 1}}, "value must be text, a number or a list"),
    ({"field": "sender", "value": [["x"]]}, "value must be text, a number or a list"),
    ({"field": "sender", "value": True}, "value must be text, a number or a list"),
    ({"field": "sender", "value": "x", "not": "yes"}, "not must be true or false"),
    ({"field": "sender", "value": "x", "colour": 1}, "unknown: colour"),
    ({"field": "sender"}, "needs field, op and value"),
    ({"field": "size", "op": "<", "value": 1e300}, "is not a size"),
    ({"field": "sender", "op": ">", "value": ["a", "b"]}, "a list of values needs op in, == or !="),
    (["sender=ada"], "neither text nor an object"),
    (7, "neither text nor an object"),
])
def test_objects_of_the_wrong_shape_are_refused_clearly(item, message):
    with pytest.raises(InputError, match=message) as err:
        filters.parse([item])
    assert "{'" not in str(err.value) and "pydantic" not in str(err.value)


def test_an_object_reads_as_the_text_clause_does():
    obj = filters.parse([{"field": "sender", "op": "in", "value": ["ada", "linus"], "not": True}])[0]
    text = filters.parse(["not sender in ada,linus"])[0]
    assert (obj.field, obj.op, obj.values, obj.negate) == (text.field, text.op, text.values, text.negate)
    assert obj.text == "not sender in ada,linus"
    assert filters.parse([{"field": "size", "op": "<", "value": 1024}])[0].values == ((1024, 1024),)
