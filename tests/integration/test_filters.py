"""Filters inside the engine (the filter language, evaluated exactly in the state database, searched among by every
store): a rare match is found whatever the query, k matches come back when k exist, every store agrees with an
exact filtered search, facets count what matches, and a collection made before the fields gets them without
re-embedding."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest

import indexer
from indexer.errors import InputError, StateError

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "faiss", "faiss_index": "hnsw"}, {"store": "qdrant"}]
TOPICS = [
    "the quarterly budget review and travel expenses",
    "sourdough bread needs a long slow rise",
    "the rings of Saturn are made of ice",
    "rotate the API keys before the audit",
]
N_MAIL = 200
RARE = "rare.sender@example.org"  # one mail, about bread
TWENTY = "twenty@example.org"  # 20 mails, all about the budget


def _mail(i: int) -> EmailMessage:
    sender = RARE if i == 7 else TWENTY if i % 10 == 3 else f"person{i % 9}@example.org"
    topic = TOPICS[1] if i == 7 else TOPICS[0] if sender == TWENTY else TOPICS[i % len(TOPICS)]
    msg = EmailMessage()
    msg["Subject"] = f"Note {i}"
    msg["From"] = sender
    msg["To"] = "team@example.org"
    msg["Date"] = format_datetime(datetime(2025, 1 + i % 12, 1 + i % 28, 9, 30, tzinfo=timezone.utc))
    msg.set_content(f"Message {i}: {topic}. Reference {i * 7919 % 10007}.")
    return msg


@pytest.fixture(scope="module")
def mail_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mail")
    for i in range(N_MAIL):
        path = folder / ("2024" if i < 50 else "2025") / f"m{i:03d}.eml"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(_mail(i).as_bytes())
        stamp = datetime(2024 if i < 50 else 2025, 6, 1, tzinfo=timezone.utc).timestamp()
        os.utime(path, (stamp, stamp))
    (folder / "notes.md").write_text("# Notes\n\nThe rings of Saturn, again: ice and dust.\n")
    return folder


@pytest.fixture(params=STORES, ids=lambda o: "-".join(map(str, o.values())))
def col(request, mail_folder, embed_model_path):
    name = f"filters-{'-'.join(map(str, request.param.values()))}"
    with indexer.open_collection(name, max_top_k=500, max_candidates=500, **request.param) as c:
        report = c.index([mail_folder])
        assert report.failed == [] and report.files_indexed == N_MAIL + 1
        yield c


def _exact_filtered(c, query: str, keep, k: int) -> list[str]:
    """The true top k of the chunks ``keep`` accepts: every chunk ranked by an unfiltered exact search."""
    everything = c.search(query, k=N_MAIL + 1, candidates=N_MAIL + 1, mode="dense", rerank=False)
    assert len(everything.hits) == N_MAIL + 1
    return [h.chunk_id for h in everything.hits if keep(h)][:k]


def test_a_rare_value_is_found_whatever_the_query(col):
    for mode in ("dense", "lexical", "hybrid"):
        res = col.search("rings of Saturn", k=10, mode=mode, where=[f"sender={RARE}"], rerank=False)
        if mode == "lexical":  # the mail does not hold the words: BM25 has nothing to rank
            assert res.hits == () and res.matched == 1
            continue
        assert [h.metadata["sender"] for h in res.hits] == [RARE], mode
        assert res.matched == 1
    legacy = col.search("rings of Saturn", k=10, metadata=(("sender", "RARE.sender"),), mode="dense")
    assert [h.metadata["sender"] for h in legacy.hits] == [RARE]


def test_k_matches_come_back_when_k_exist_in_every_mode(col):
    for mode in ("dense", "lexical", "hybrid"):
        res = col.search("sourdough bread", k=10, mode=mode, where=[f"sender=={TWENTY}"], rerank=False)
        if mode == "lexical":
            assert res.hits == ()  # no budget mail holds these words
            continue
        assert len(res.hits) == 10 and {h.metadata["sender"] for h in res.hits} == {TWENTY}, mode
    budget = col.search("budget travel", k=10, mode="lexical", where=[f"sender=={TWENTY}"], rerank=False)
    assert len(budget.hits) == 10 and {h.metadata["sender"] for h in budget.hits} == {TWENTY}


def test_filtered_hits_equal_an_exact_filtered_search(col):
    cases = {
        "sender in": ([f"sender in {TWENTY},{RARE}"], lambda h: h.metadata.get("sender") in (TWENTY, RARE)),
        "not": (["not type=eml"], lambda h: not h.path.endswith(".eml")),
        "glob": (["path~2024/*"], lambda h: "/2024/" in h.path),
        "modified": (["modified<2025"], lambda h: "/2024/" in h.path),
        "date range": (["date>=2025-11", "date<2026"], lambda h: h.metadata.get("date", "")[:7] >= "2025-11"),
    }
    for label, (where, keep) in cases.items():
        want = _exact_filtered(col, "the rings of Saturn are made of ice", keep, 5)
        got = col.search("the rings of Saturn are made of ice", k=5, mode="dense", where=where, rerank=False)
        assert [h.chunk_id for h in got.hits] == want, label
        assert all(keep(h) for h in got.hits), label


def test_a_filter_that_keeps_everything_does_not_change_the_ranking(col):
    plain = col.search("travel expenses", k=10, mode="hybrid", rerank=False)
    kept = col.search("travel expenses", k=10, mode="hybrid", where=["size>0"], rerank=False)
    assert [h.chunk_id for h in kept.hits] == [h.chunk_id for h in plain.hits]
    assert [round(h.score, 5) for h in kept.hits] == [round(h.score, 5) for h in plain.hits]
    assert kept.matched == N_MAIL + 1


def test_facets_and_fields(col, mail_folder):
    res = col.search("budget", k=3, where=["type=eml"], facets=["sender", "folder", "type"], rerank=False)
    senders = dict(res.facets["sender"])
    assert senders[TWENTY] == 20 and senders[RARE] == 1 and sum(senders.values()) == N_MAIL
    assert dict(res.facets["type"]) == {"eml": N_MAIL}
    folders = dict(res.facets["folder"])
    assert folders == {f"{mail_folder.name}/2024": 50, f"{mail_folder.name}/2025": 150}  # the root's name, not paths
    fields = {f["field"]: f for f in col.fields()}
    assert fields["sender"]["kind"] == "text" and fields["sender"]["chunks"] == N_MAIL
    assert fields["date"]["kind"] == "date"
    top = fields["sender"]["examples"]
    assert len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1] and [v for v, n in top if n == senders[v]] == [
        v for v, _ in top
    ]  # the commonest values, with the counts the facets give


def test_bad_filters_name_the_problem(col):
    with pytest.raises(InputError, match="no field 'colour'.*sender"):
        col.search("x", where=["colour=red"])
    with pytest.raises(InputError, match="not a size"):
        col.search("x", where=["size>big"])
    with pytest.raises(InputError, match="neither a number nor a date"):
        col.search("x", where=["sender>=ada"])
    with pytest.raises(InputError, match="cannot read the filter clause"):
        col.search("x", where=["just words"])
    with pytest.raises(InputError, match="clauses; the limit is 32"):
        col.search("x", where=["size>0"] * 33)
    nothing = col.search("x", where=["sender=nobody-at-all"])
    assert nothing.hits == () and nothing.matched == 0


def test_a_touch_changes_modified_but_rewrites_no_point(tmp_path, embed_model_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nSaturn has rings of ice number {i}.\n")
    old = datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp()
    for p in folder.iterdir():
        os.utime(p, (old, old))
    with indexer.open_collection("touch") as c:
        c.index([folder])
        assert c.search("Saturn", where=["modified>=2024"]).hits == ()
        os.utime(folder / "n1.md")  # now
        report = c.sync()
        assert report.points_upserted == 0 and report.chunks_embedded == 0
        hits = c.search("Saturn", where=["modified>=-1d"]).hits
        assert [Path(h.path).name for h in hits] == ["n1.md"]


def test_a_collection_made_before_the_fields_gets_them_without_re_embedding(tmp_path, embed_model_path, mail_folder):
    with indexer.open_collection("older", store="qdrant") as c:
        c.index([mail_folder])
        state = Path(c.settings.data_dir) / "state.sqlite"
    db = sqlite3.connect(state)  # as the migration leaves a collection that existed before it
    db.execute("DELETE FROM chunk_fields WHERE collection='older'")
    db.execute("INSERT INTO fields_backfill VALUES ('older')")
    db.commit()
    db.close()
    with indexer.open_collection("older", store="qdrant") as c:
        assert c.search("bread", where=["modified<2025"]).hits  # file fields need no backfill
        with pytest.raises(StateError, match="indexer index -c older"):
            c.search("bread", where=[f"sender={RARE}"])
        report = c.sync()
        assert report.chunks_embedded == 0 and report.points_upserted == 0
        hits = c.search("rings of Saturn", where=[f"sender={RARE}"], mode="dense").hits
        assert [h.metadata["sender"] for h in hits] == [RARE]


def test_the_cli_filters_counts_and_lists_fields(mail_folder, embed_model_path):
    from tests.integration.test_cli import run

    assert run("index", str(mail_folder), "-c", "clifilters").returncode == 0
    found = run("search", "rings of Saturn", "-c", "clifilters", "--where", f"sender={RARE}", "--where",
                "date>=2025", "--facet", "sender", "--json", "--no-rerank")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert [h["metadata"]["sender"] for h in answer["hits"]] == [RARE] and answer["matched"] == 1
    assert answer["facets"]["sender"] == [[RARE, 1]] and "rerank" not in found.stderr  # no notice unless -v
    bad = run("search", "x", "-c", "clifilters", "--where", "size>huge")
    assert bad.returncode == 2 and "not a size" in bad.stderr
    unknown = run("search", "x", "-c", "clifilters", "--where", "colour=red")
    assert unknown.returncode == 2 and "no field 'colour'" in unknown.stderr
    none = run("search", "x", "-c", "clifilters", "--where", "sender=nobody-at-all")
    assert none.returncode == 0 and none.stdout == "" and "no indexed chunk matches the filter" in none.stderr
    listed = run("fields", "-c", "clifilters")
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert listed.returncode == 0 and "example.org (2" in lines["sender"] and lines["date"].split()[1] == "date"
