"""The filter language's evaluation in a real state database (indexer.state.fields): each operator on each kind of
field, negation of a missing field, typed metadata, facets, the field list and the backfill from payloads."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from indexer.core.normalization import Normalization
from indexer.errors import InputError, StateError
from indexer.search import filters
from indexer.state.database import ChunkRecord, CollectionRecord, FileRecord, FileUpdate, StateStore
from indexer.state.fields import compile_where

ROOT = "/data/notes"
NS = 1_000_000_000


def _ts(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * NS)


FILES = {  # path: (size, mtime, kind, [fields of each chunk])
    f"{ROOT}/mail/a.eml": (2_000, _ts(2024, 5, 1), "mail", [
        (("sender", "Ada <ada@example.org>"), ("date", "2024-05-01T09:00:00+00:00"), ("pages", 3)),
    ]),
    f"{ROOT}/mail/b.eml": (50_000, _ts(2025, 3, 10), "mail", [
        (("sender", "linus@example.org"), ("date", "Mon, 10 Mar 2025 09:00:00 +0000"), ("pages", 12)),
        (("sender", "linus@example.org"), ("date", "Mon, 10 Mar 2025 09:00:00 +0000"), ("pages", 2025)),
    ]),
    f"{ROOT}/docs/guide.md": (3_000_000, _ts(2025, 12, 31, 23), "markdown", [(("title", "Guide, part 1"),), ()]),
    f"{ROOT}/README": (10, _ts(2023, 1, 1), "text", [()]),
}


@pytest.fixture
def state(tmp_path):
    st = StateStore(tmp_path / "state.sqlite")
    st.create_collection(CollectionRecord("c", "faiss", {}, "cosine", "m", "m", Normalization.L2, 4))
    updates = []
    for path, (size, mtime, kind, chunks) in FILES.items():
        recs = tuple(
            ChunkRecord(f"{path}#{i}", path, i, f"h{path}{i}", 5, fields) for i, fields in enumerate(chunks)
        )
        updates.append(FileUpdate(FileRecord(path, ROOT, size, mtime, "x", "indexed", None, kind), recs))
    st.commit_files("c", updates)
    yield st
    st.close()


def _select(state, *clauses: str, prefix=None, types=()) -> set[str]:
    parsed = filters.parse(clauses)
    kinds = state.fields.check("c", parsed)
    return {pid.split("/")[-1] for pid in state.fields.select(compile_where("c", parsed, prefix, types, kinds))}


def test_each_operator(state):
    assert _select(state, "sender=ADA") == {"a.eml#0"}
    assert _select(state, "sender==linus@example.org") == {"b.eml#0", "b.eml#1"}
    assert _select(state, "sender!=linus@example.org") == {"a.eml#0"}  # a chunk without it has no value to equal
    assert _select(state, "not sender=linus") == {"a.eml#0", "guide.md#0", "guide.md#1", "README#0"}
    assert _select(state, "sender^=lin") == {"b.eml#0", "b.eml#1"}
    assert _select(state, "sender~*@example.org") == {"b.eml#0", "b.eml#1"}
    assert _select(state, 'title in "guide, part 1",other') == {"guide.md#0"}
    assert _select(state, "pages>=12") == {"b.eml#0", "b.eml#1"}
    assert _select(state, "pages<12") == {"a.eml#0"}
    assert _select(state, "pages>2024") == {"b.eml#1"}  # pages is numeric: 2024 is a number, not a year


def test_dates_and_file_fields(state):
    assert _select(state, "date>=2025") == {"b.eml#0", "b.eml#1"}  # an e-mail date, read as a date
    assert _select(state, "date<=2024-05") == {"a.eml#0"}
    assert _select(state, "modified=2025") == {"b.eml#0", "b.eml#1", "guide.md#0", "guide.md#1"}
    assert _select(state, "modified>2025-03") == {"guide.md#0", "guide.md#1"}  # after March: from April 1st
    assert _select(state, "modified<2024") == {"README#0"}
    assert _select(state, "size>1M") == {"guide.md#0", "guide.md#1"}
    assert _select(state, "size<=2000") == {"a.eml#0", "README#0"}
    assert _select(state, "type=eml") == {"a.eml#0", "b.eml#0", "b.eml#1"}
    assert _select(state, "type in text,md") == {"guide.md#0", "guide.md#1", "README#0"}  # README: its kind
    assert _select(state, "path~*.md") == {"guide.md#0", "guide.md#1"}
    assert _select(state, "path~mail/*") == {"a.eml#0", "b.eml#0", "b.eml#1"}  # root-relative
    assert _select(state, f"path^={ROOT}/mail") == {"a.eml#0", "b.eml#0", "b.eml#1"}
    assert _select(state, f"path^={ROOT}/mai") == set()  # a folder, not a string prefix
    assert _select(state, "path^=docs") == {"guide.md#0", "guide.md#1"}  # root-relative
    assert _select(state, "type=eml", "date>=2025", "not pages>100") == {"b.eml#0"}
    assert _select(state, "size>0", prefix=f"{ROOT}/docs", types=("md",)) == {"guide.md#0", "guide.md#1"}


def test_unknown_fields_and_pending_backfill(state):
    with pytest.raises(InputError, match="no field 'colour'; filterable fields: path, type, modified, size"):
        _select(state, "colour=red")
    with state._tx() as db:  # as migration m0003 leaves a collection made before it
        db.execute("DELETE FROM chunk_fields")
        db.execute("INSERT INTO fields_backfill VALUES ('c')")
    assert _select(state, "size>1M") == {"guide.md#0", "guide.md#1"}
    with pytest.raises(StateError, match="indexer index -c c"):
        _select(state, "sender=ada")
    payloads = [(f"{ROOT}/mail/a.eml#0", {"metadata": {"sender": "ada@x"}, "location": {"message": 1}}),
                ("not-ours", {"metadata": {"sender": "eve"}})]
    assert state.fields.backfill("c", payloads) == 2
    assert _select(state, "sender=ada") == {"a.eml#0"} and _select(state, "message=1") == {"a.eml#0"}
    assert state.fields.complete("c")


def test_facets_and_summary(state):
    where = compile_where("c", filters.parse(["size>100"]))
    facets = state.fields.facets("c", where, ["type", "folder", "modified", "sender"])
    assert facets["type"] == [("eml", 3), ("md", 2)]
    assert facets["folder"] == [("notes/mail", 3), ("notes/docs", 2)]
    assert facets["modified"] == [("2025-03", 2), ("2025-12", 2), ("2024-05", 1)]
    assert facets["sender"] == [("linus@example.org", 2), ("Ada <ada@example.org>", 1)]
    summary = {f["field"]: f for f in state.fields.summary("c")}
    assert summary["date"]["kind"] == "date" and summary["pages"]["kind"] == "number"
    assert summary["sender"]["kind"] == "text" and summary["sender"]["chunks"] == 3
    assert summary["type"]["examples"][0] == ["eml", 3]


def test_removing_a_file_removes_its_fields(state):
    state.commit_files("c", [], removed=[f"{ROOT}/mail/b.eml"])
    assert _select(state, "sender=linus") == set()
    rows = state._db.execute("SELECT COUNT(*) FROM chunk_fields WHERE point_id LIKE '%b.eml%'").fetchone()[0]
    assert rows == 0


def test_dates_and_numbers_compare_by_value_with_every_operator(state):
    # date: a mail dated 2025-03-10 (an e-mail date) and one 2024-05-01 (ISO)
    assert _select(state, "date==2025-03") == {"b.eml#0", "b.eml#1"}  # within the period, not the text
    assert _select(state, "date=2025-03-10") == {"b.eml#0", "b.eml#1"}
    assert _select(state, "date!=2025") == {"a.eml#0"}  # outside the period
    assert _select(state, "not date==2025") == {"a.eml#0", "guide.md#0", "guide.md#1", "README#0"}
    assert _select(state, "date==2025-03-10T10:00+01:00") == {"b.eml#0", "b.eml#1"}  # 09:00 UTC: that minute
    assert _select(state, "date==2025-03-10T09:01") == set()
    assert _select(state, "date in 2024-05,2026") == {"a.eml#0"}
    with pytest.raises(InputError, match="date is a date field; filter clause 'date=03': '03' is not a date"):
        _select(state, "date=03")
    # pages: numbers 3, 12, 2025
    assert _select(state, "pages=2") == set()  # not a substring of 12 or 2025
    assert _select(state, "pages==12") == {"b.eml#0"}
    assert _select(state, "pages!=12") == {"a.eml#0", "b.eml#1"}
    assert _select(state, "pages in 3,2025") == {"a.eml#0", "b.eml#1"}
    with pytest.raises(InputError, match="pages is a number field; filter clause 'pages=three'"):
        _select(state, "pages=three")
    with pytest.raises(InputError, match="pages is a number field; filter clause 'pages~1"):
        _select(state, "pages~1*")


def test_text_fields_refuse_ranges_and_in_means_contains_any(state):
    for clause in ("title>5", "sender>=2020", "title<2024-01"):
        with pytest.raises(InputError, match=r"(title|sender) is a text field .* needs = == != \^= ~ or in"):
            _select(state, clause)
    # `in`: contains any, as `=` (a sender written "Name <addr>" is found by its address or its name)
    assert _select(state, "sender in ada@example.org,linus@example.org") == {"a.eml#0", "b.eml#0", "b.eml#1"}
    assert _select(state, "sender in ada,nobody") == {"a.eml#0"}
    assert _select(state, "sender in nobody,guide") == set()  # each value on this field only (title has "guide")
    assert _select(state, "date in 2030,2024") == {"a.eml#0"} and _select(state, "pages in 1,3") == {"a.eml#0"}
    # the whole value, any of them: == with a list
    assert _select(state, "sender==(ada@example.org, LINUS@example.org)") == {"b.eml#0", "b.eml#1"}
    assert _select(state, "sender==(Ada <ada@example.org>, x)") == {"a.eml#0"}
    assert _select(state, "sender!=(linus@example.org, x)") == {"a.eml#0"}
    assert _select(state, "sender~*ADA*") == {"a.eml#0"}  # any case, like every text operator


def test_path_rules_are_the_same_for_every_operator(state):
    guide = {"guide.md#0", "guide.md#1"}
    assert _select(state, f"path=={ROOT.upper()}/docs/GUIDE.md") == guide  # any case
    assert _select(state, "path==docs/guide.md") == guide  # relative to the root
    assert _select(state, "path==./docs/guide.md") == guide
    assert _select(state, "path!=docs/guide.md") == {"a.eml#0", "b.eml#0", "b.eml#1", "README#0"}
    assert _select(state, "path^=./DOCS") == guide
    assert _select(state, "path^=docs/guide.md") == guide  # a file is at or under itself
    assert _select(state, "path^=do") == set()  # a folder, not a string prefix, relative or absolute
    assert _select(state, "path^=.") == {"a.eml#0", "b.eml#0", "b.eml#1", "guide.md#0", "guide.md#1", "README#0"}
    assert _select(state, "path~DOCS/*.MD") == guide
    assert _select(state, "path in guide,readme") == guide | {"README#0"}  # contains any, as `=`
    assert _select(state, "path==(docs/guide.md, readme)") == guide | {"README#0"}
    assert _select(state, "type!=md") == {"a.eml#0", "b.eml#0", "b.eml#1", "README#0"}


def test_a_field_typo_is_answered_with_a_suggestion(state):
    with pytest.raises(InputError, match="no field 'sendr'.*did you mean sender"):
        _select(state, "sendr=ada")


def test_date_facets_count_by_month_and_internal_fields_are_not_listed(state):
    with state._tx() as db:
        db.execute("INSERT INTO chunk_fields VALUES ('c', ?, 'row_numbers', '1-3', '1-3', NULL, 'text')",
                   (f"{ROOT}/mail/a.eml#0",))
    facets = state.fields.facets("c", compile_where("c", ()), ["date"])
    assert facets["date"] == [("2025-03", 2), ("2024-05", 1)]
    assert "row_numbers" not in {f["field"] for f in state.fields.summary("c")}
    with pytest.raises(InputError, match="size cannot be a facet"):
        state.fields.check("c", (), ["size"])


def test_unfiltered_facet_counts_are_computed_once_per_state(state):
    where = compile_where("c", ())
    first = state.fields.facets("c", where, ["type", "sender"])
    assert state.fields.facets("c", where, ["type", "sender"]) == first
    assert len(state.fields._facet_cache) == 1
    state.commit_files("c", [], removed=[f"{ROOT}/mail/b.eml"])
    after = state.fields.facets("c", where, ["type", "sender"])
    assert after["type"] == [("md", 2), ("eml", 1), ("text", 1)] != first["type"]


def test_an_empty_answer_can_name_the_clause_that_emptied_it(state):
    parsed = filters.parse(["type=eml", "sender=nobody", "date>=2025"])
    kinds = state.fields.check("c", parsed)
    assert state.fields.any(compile_where("c", parsed[:1], kinds=kinds))
    assert not state.fields.any(compile_where("c", parsed[:2], kinds=kinds))


def _traced(state) -> list[str]:
    seen: list[str] = []
    state._db.set_trace_callback(seen.append)
    return seen


def test_field_names_and_kinds_are_kept_until_the_state_changes(state, tmp_path):
    parsed = filters.parse(["pages>2", "sender=ada"])
    assert state.fields.check("c", parsed) == {"pages": "number", "sender": "text"}
    seen = _traced(state)
    assert state.fields.check("c", parsed) == {"pages": "number", "sender": "text"}
    state._db.set_trace_callback(None)
    assert not [s for s in seen if "chunk_fields" in s]  # no count per search
    # this connection writes: the kinds are read again (pages now mostly text)
    path = f"{ROOT}/more.txt"
    recs = tuple(ChunkRecord(f"{path}#{i}", path, i, f"m{i}", 5, (("pages", "many"),)) for i in range(6))
    state.commit_files("c", [FileUpdate(FileRecord(path, ROOT, 1, _ts(2025, 1, 1), "x", "indexed", None, "text"),
                                        recs)])
    assert state.fields.kinds("c", ["pages"]) == {"pages": "text"}
    # another connection (another process) writes: a new field is known at once
    other = StateStore(tmp_path / "state.sqlite")
    try:
        path = f"{ROOT}/new.txt"
        rec = ChunkRecord(f"{path}#0", path, 0, "n0", 5, (("colour", "red"),))
        other.commit_files("c", [FileUpdate(FileRecord(path, ROOT, 1, _ts(2025, 1, 1), "x", "indexed", None, "text"),
                                            (rec,))])
    finally:
        other.close()
    assert _select(state, "colour=red") == {"new.txt#0"}


def test_the_listing_starts_from_the_most_selective_clause(tmp_path):
    from indexer.state.fields import clause_order

    st = StateStore(tmp_path / "state.sqlite")
    try:
        st.create_collection(CollectionRecord("c", "faiss", {}, "cosine", "m", "m", Normalization.L2, 4))
        path = f"{ROOT}/gen.txt"
        recs = tuple(ChunkRecord(f"{path}#{i}", path, i, f"g{i}", 5, (("team", "red" if i % 2 else "blue"),
                                                                          ("n", i))) for i in range(6000))
        st.commit_files("c", [FileUpdate(FileRecord(path, ROOT, 1, _ts(2025, 1, 1), "x", "indexed", None, "text"),
                                         recs)])
        parsed = filters.parse(["team=red", "n<300", "not team=green"])
        kinds = st.fields.check("c", parsed)
        where = compile_where("c", parsed, kinds=kinds)
        total, fraction, shares = st.fields.estimate_clauses(where)
        assert total > 5000 and abs(fraction - 0.025) < 0.03 and len(shares) == 3
        assert abs(shares[0] - 0.5) < 0.1 and shares[1] < 0.15 and shares[2] == 1.0
        order = clause_order(shares)
        assert order == [1, 0, 2]
        ordered = compile_where("c", [parsed[i] for i in order], kinds=kinds, selective_first=True)
        assert set(st.fields.select(ordered)) == set(st.fields.select(where))
        assert len(st.fields.select(ordered)) == 150
        assert st.fields.estimate(where) == (total, fraction)
        # the listing starts from the selective clause's index range (n<300), once; team is checked on each match
        plan = [r[3] for r in st._db.execute(
            f"EXPLAIN QUERY PLAN SELECT c.point_id FROM chunks c JOIN files f ON f.collection = c.collection AND "
            f"f.path = c.path WHERE {ordered.sql}", ordered.args)]
        assert sum(p.startswith("LIST SUBQUERY") for p in plan) == 1
        assert any("chunk_fields_num (collection=? AND name=? AND num<?)" in p for p in plan)
        assert sum(p.startswith("CORRELATED") for p in plan) == 2
    finally:
        st.close()
