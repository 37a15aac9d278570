"""The held columns (indexer.state.columns) against the SQL they stand for: on generated chunks in a real state
database (text, number and date metadata with odd values, files inside and outside their root, several types and
months), every clause form and pairs of them select exactly the ids ``FieldIndex.select`` lists, and every facet
counts what the SQL counts; a commit makes new columns; a collection over the cap is not held."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

import pytest

from indexer.core.normalization import Normalization
from indexer.search import filters
from indexer.state import fields as fields_module
from indexer.state.database import ChunkRecord, CollectionRecord, FileRecord, FileUpdate, StateStore
from indexer.state.fields import compile_where

ROOT = "/data/notes"
NS = 1_000_000_000
SENDERS = ["Ada Lovelace <ada@example.org>", "linus@example.org", "ADA@example.org", "Grace <grace@navy.mil>", "x"]
TITLES = ["Guide, part 1", "guide, part 1", "Notes", "Ünïcode ß", "README"]
DATES = ["2024-05-01T09:00:00+00:00", "Mon, 10 Mar 2025 09:00:00 +0000", "2025-03-14", "2023-12-31T23:59:59Z",
         "not a date", "2025-07-01"]


def _ts(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * NS)


def _files() -> list[FileUpdate]:
    updates = []
    kinds = [("md", "markdown"), ("eml", "mail"), ("csv", "table"), ("", "text")]
    for f in range(48):
        ext, kind = kinds[f % len(kinds)]
        folder = ("mail", "docs", "gen/deep", "")[f % 4]
        name = f"f{f:02d}" + (f".{ext}" if ext else "")
        root = ROOT if f % 11 else "/elsewhere"  # some files outside their recorded root: no relative path
        path = f"{ROOT}/{folder}/{name}".replace("//", "/")
        chunks = []
        for i in range(f % 5 + 1):
            n = f * 10 + i
            values: list[tuple[str, object]] = []
            if n % 3:
                values.append(("sender", SENDERS[n % len(SENDERS)]))
            if n % 4:
                values.append(("date", DATES[n % len(DATES)]))
            if n % 5:
                values.append(("n", n if n % 7 else f"n{n}"))  # mostly numbers, some text
            if n % 2:
                values.append(("title", TITLES[(n // 2 + f) % len(TITLES)]))
            chunks.append(ChunkRecord(f"{path}#{i}", path, i, f"h{path}{i}", 5, tuple(values)))
        mtime = _ts(2023 + f % 3, f % 12 + 1, f % 27 + 1)
        updates.append(FileUpdate(FileRecord(path, root, 100 * f, mtime, "x", "indexed", None, kind), tuple(chunks)))
    return updates


@pytest.fixture
def state(tmp_path):
    st = StateStore(tmp_path / "state.sqlite")
    st.create_collection(CollectionRecord("c", "faiss", {}, "cosine", "m", "m", Normalization.L2, 4))
    st.commit_files("c", _files())
    yield st
    st.close()


CLAUSES = [
    "sender=ada", "sender==linus@example.org", "sender!=x", "sender^=ada", "sender~*@example.org",
    "sender in ada,grace", "not sender=ada", "not sender!=x", "title==guide, part 1", "title=ß", "title~g*",
    "n<100", "n>=250", "n=12", "n!=12", "n in 1,2,13", "not n<100", "date>=2025", "date=2025-03", "date!=2025",
    "date<2024-06", "not date=2025", "path=deep", "path^=gen", "path^=/data/notes/mail", "path~*.md",
    "path==docs/f01.md", "path!=docs/f01.md", "not path^=gen", "type=md", "type in eml,text", "type!=csv",
    "modified>=2025", "modified=2024-03", "not modified<2024", "size<1k", "size>=2000",
]


def _where(state, clauses, prefix=None, types=()):
    parsed = filters.parse(list(clauses))
    kinds = state.fields.check("c", parsed)
    return compile_where("c", parsed, prefix, types, kinds)


def test_each_clause_and_each_pair_selects_what_the_sql_lists(state):
    fields = state.fields
    assert fields.count("c", _where(state, ()))[0] == sum(len(u.chunks) for u in _files())
    nonempty = 0
    for clauses in [*([c] for c in CLAUSES), *itertools.combinations(CLAUSES[::3], 2)]:
        where = _where(state, clauses)
        listed = set(fields.select(where))
        assert fields.matching("c", where) == listed, clauses
        assert fields.count("c", where)[1] == len(listed), clauses
        nonempty += bool(listed)
    assert nonempty > len(CLAUSES) * 0.8  # the clauses match something, mostly


@pytest.mark.parametrize(("prefix", "types"), [("/data/notes/docs", ()), (None, ("md", "text")),
                                               ("/data/notes", ("eml",))])
def test_path_prefix_and_types_are_parts_too(state, prefix, types):
    for clauses in (("n>=0",), ("not sender=ada",), ()):
        where = _where(state, clauses, prefix, types)
        assert state.fields.matching("c", where) == set(state.fields.select(where)), (clauses, prefix, types)


def test_facets_count_what_the_sql_counts(state):
    fields = state.fields
    names = ["type", "folder", "modified", "sender", "date", "n", "title"]
    kinds = fields.check("c", (), names)
    for clauses in [(), ("sender=ada",), ("not date=2025", "n<300"), ("path^=gen",), ("n==-1",)]:
        where = _where(state, clauses)
        held = fields.facets("c", where, names)
        assert held == fields._sql_facets("c", where, names, kinds), clauses
        if not clauses:
            assert held["type"] and held["date"] and held["sender"][0][1] > 1


def test_a_commit_makes_new_columns_and_a_big_collection_is_not_held(state, monkeypatch):
    fields = state.fields
    where = _where(state, ("sender=ada",))
    before = fields.matching("c", where)
    assert fields.matching("c", where) is before  # listed once per state
    gone = sorted(before)[0].split("#")[0]
    state.commit_files("c", [], removed=[gone])
    after = fields.matching("c", where)
    assert after == set(fields.select(where)) and after < before
    monkeypatch.setattr(fields_module, "MAX_CHUNKS", 10)
    state.commit_files("c", [], removed=[sorted(after)[0].split("#")[0]])  # a new state: the cap applies
    assert fields.count("c", where) is None
    assert fields.matching("c", where) == set(fields.select(where))  # listed by SQL
    assert fields.facets("c", where, ["type"]) == fields._sql_facets("c", where, ["type"], {})
