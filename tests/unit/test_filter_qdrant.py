"""The filter language as a Qdrant filter (plugins/qdrant/clauses.py), clause by clause: the request shapes held to
qdrant-client's models, and their meaning checked on qdrant-edge (the server's engine) over payloads the writer
makes (indexer/search/payload_fields.py), at the edges the state's evaluator draws (a nanosecond at a date bound,
a folder and its namesake prefix, a field that is absent)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

import pytest
from qdrant_client import models as qm

from indexer.errors import InputError
from indexer.search.filters import parse
from indexer.state.payload_fields import filter_payload, key, stat_payload
from plugins.qdrant.clauses import COMMITTED, MARKED, clause_filter, clauses_filter, to_edge

qe = pytest.importorskip("qdrant_edge")


def one(text: str, kind: str = "text") -> qm.Filter:
    return clause_filter(parse([text])[0], kind)


def dump(node) -> dict:
    return node.model_dump(exclude_none=True)


# -- request shapes ---------------------------------------------------------------------------------------------------
def test_text_equals_is_a_case_folded_substring_and_in_any_of_them():
    assert dump(one("sender=Ada")) == dump(qm.FieldCondition(key="filter.t.sender",
                                                             match=qm.MatchSubstring(substring="ada")))
    assert dump(one("sender in ada,linus")) == dump(qm.Filter(should=[
        qm.FieldCondition(key="filter.t.sender", match=qm.MatchSubstring(substring="ada")),
        qm.FieldCondition(key="filter.t.sender", match=qm.MatchSubstring(substring="linus"))]))


def test_whole_value_prefix_and_not_equal_need_the_field():
    assert dump(one("title==Weekly")) == dump(qm.FieldCondition(key="filter.t.title",
                                                                match=qm.MatchValue(value="weekly")))
    assert dump(one("title^=Week")) == dump(qm.FieldCondition(key="filter.t.title",
                                                              match=qm.MatchPrefix(prefix="week")))
    assert dump(one("title!=x")) == dump(qm.Filter(
        must=[qm.FieldCondition(key="filter.names", match=qm.MatchValue(value="title"))],
        must_not=[qm.FieldCondition(key="filter.t.title", match=qm.MatchValue(value="x"))]))
    assert dump(one("not title=x")) == dump(qm.Filter(must_not=[
        qm.FieldCondition(key="filter.t.title", match=qm.MatchSubstring(substring="x"))]))


def test_globs_are_prefixes_of_the_value_and_of_its_reverse():
    assert dump(one("path~docs/*.md")) == dump(qm.Filter(should=[
        qm.Filter(must=[qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key="filter.p"))]),
                        qm.FieldCondition(key="filter.p", match=qm.MatchPrefix(prefix="docs/")),
                        qm.FieldCondition(key="filter.pr", match=qm.MatchPrefix(prefix="dm."))]),
        qm.Filter(must=[qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key="filter.rp"))]),
                        qm.FieldCondition(key="filter.rp", match=qm.MatchPrefix(prefix="docs/")),
                        qm.FieldCondition(key="filter.rpr", match=qm.MatchPrefix(prefix="dm."))])]))
    assert dump(one("subject~*draft*")) == dump(qm.Filter(must=[
        qm.FieldCondition(key="filter.t.subject", match=qm.MatchSubstring(substring="draft"))]))


@pytest.mark.parametrize("clause, why", [
    ("path~a?c", r"\? and \[\.\.\.\]"), ("subject~[ab]*", r"\? and \[\.\.\.\]"),
    ("subject~a*b*c", "only one part"), ("subject~ab*ba", "overlapping"), ("path~docs*/*.txt", "only one part"),
])
def test_a_glob_without_an_exact_form_is_refused_naming_the_clause(clause, why):
    with pytest.raises(InputError, match=rf"filter clause '{re.escape(clause)}'.*{why}"):
        one(clause)


def test_numbers_and_dates_are_ranges_and_modified_is_exact_to_the_nanosecond():
    assert dump(one("pages>10", "number")) == dump(qm.FieldCondition(key="filter.n.pages", range=qm.Range(gt=10.0)))
    assert dump(one("pages=5", "number")) == dump(qm.FieldCondition(key="filter.n.pages",
                                                                    range=qm.Range(gte=5.0, lte=5.0)))
    start = datetime(2025, 3, 1, tzinfo=timezone.utc).timestamp()
    end = datetime(2025, 4, 1, tzinfo=timezone.utc).timestamp()
    assert dump(one("date=2025-03", "date")) == dump(qm.Filter(must=[
        qm.FieldCondition(key="filter.n.date", range=qm.Range(gte=start)),
        qm.FieldCondition(key="filter.n.date", range=qm.Range(lt=end))]))
    s = int(start)
    assert dump(one("modified>=2025-03")) == dump(qm.Filter(should=[
        qm.FieldCondition(key="stat.s", range=qm.Range(gt=s)),
        qm.Filter(must=[qm.FieldCondition(key="stat.s", match=qm.MatchValue(value=s)),
                        qm.FieldCondition(key="stat.ns", range=qm.Range(gte=0))])]))


def test_a_field_name_that_reads_as_a_path_gets_a_key_of_its_own():
    assert key("sender") == "sender" and key("dc.creator") == "_x" + b"dc.creator".hex()
    assert dump(one("dc.creator=ada")) == dump(qm.FieldCondition(key=f"filter.t.{key('dc.creator')}",
                                                                 match=qm.MatchSubstring(substring="ada")))


def test_all_clauses_must_hold_and_the_marker_is_a_bool_match():
    both = clauses_filter(parse(["type=md", "size<1k"]), {})
    assert len(both.must) == 2
    assert dump(COMMITTED) == dump(qm.IsEmptyCondition(is_empty=qm.PayloadField(key="uncommitted")))
    assert dump(MARKED) == dump(qm.Filter(must_not=[COMMITTED]))


# -- meaning, on qdrant-edge -------------------------------------------------------------------------------------
ROOT = "/data/notes"
NS = 1_000_000_000
BOUND = int(datetime(2025, 3, 1, tzinfo=timezone.utc).timestamp()) * NS
POINTS = {  # name -> (path, mtime_ns, size, metadata)
    "before": (f"{ROOT}/docs/a.md", BOUND - 1, 100, {"sender": "Ada Lovelace <ada@example.org>", "pages": 5}),
    "at": (f"{ROOT}/docs/b.MD", BOUND, 2048, {"sender": "linus@example.org", "date": "2025-03-04T09:30:00Z"}),
    "after": (f"{ROOT}/docsx/c.txt", BOUND + 1, 4096, {"dc.creator": "Grace"}),
    "none": (f"{ROOT}/todo.txt", BOUND + 10 * NS, 10, {}),
}


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edge")
    config = qe.EdgeConfig(vectors={"": qe.EdgeVectorParams(size=2, distance=qe.Distance.Cosine)})
    s = qe.EdgeShard.create(str(folder / "s"), config)
    points = []
    for i, (name, (path, mtime, size, meta)) in enumerate(POINTS.items()):
        payload = {"name": name, "path": path, "file_type": path.rsplit(".", 1)[-1].lower(),
                   "filter": filter_payload(path, ROOT, list(meta.items())), "stat": stat_payload(mtime, size)}
        points.append(qe.Point(id=str(uuid.UUID(int=i + 1)), vector=[1.0, 0.5], payload=payload))
    s.update(qe.UpdateOperation.upsert_points(points))
    yield s
    s.close()


def matching(shard, *texts: str, kinds=None) -> set[str]:
    flt = to_edge(clauses_filter(parse(list(texts)), kinds or {}))
    records, _ = shard.scroll(qe.ScrollRequest(limit=100, filter=flt, with_payload=True))
    return {r.payload["name"] for r in records}


@pytest.mark.parametrize("clauses, kinds, expected", [
    (["modified>=2025-03-01"], {}, {"at", "after", "none"}),
    (["modified<2025-03-01"], {}, {"before"}),
    (["modified==2025-03-01"], {}, {"at", "after", "none"}),
    (["modified!=2025-02"], {}, {"at", "after", "none"}),
    (["modified<=2025-02"], {}, {"before"}),
    (["path^=docs"], {}, {"before", "at"}),  # not docsx
    (["path^=/data/notes/docs"], {}, {"before", "at"}),
    (["path=DOCS/"], {}, {"before", "at"}),
    (["path~*.md"], {}, {"before", "at"}),  # case folded: b.MD
    (["path==docs/b.md"], {}, {"at"}),
    (["path!=docs/b.md"], {}, {"before", "after", "none"}),
    (["type in md,txt"], {}, set(POINTS)),
    (["size>2k"], {}, {"after"}),
    (["size=2k"], {}, {"at"}),
    (["size in 10,100"], {}, {"before", "none"}),
    (["sender=ADA"], {}, {"before"}),
    (["sender!=linus@example.org"], {}, {"before"}),  # has the field
    (["not sender==linus@example.org"], {}, {"before", "after", "none"}),  # also those without it
    (["sender~*@example.org"], {}, {"at"}),
    (["sender~*@example.org>"], {}, {"before"}),
    (["sender^=ada"], {}, {"before"}),
    (["pages>=5"], {"pages": "number"}, {"before"}),
    (["pages<5"], {"pages": "number"}, set()),
    (["date=2025-03"], {"date": "date"}, {"at"}),
    (["date>2025-03-04T09:30"], {"date": "date"}, set()),
    (["date>=2025-03-04T09:30"], {"date": "date"}, {"at"}),
    (["dc.creator=grace"], {}, {"after"}),
])
def test_each_clause_means_on_qdrant_edge_what_the_state_evaluates(shard, clauses, kinds, expected):
    assert matching(shard, *clauses, kinds=kinds) == expected
