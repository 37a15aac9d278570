"""A stateless search worker (docs/deploy.md#stateless-workers), proven on Qdrant's own engine (qdrant-edge): a writer
indexes a folder into embedded Qdrant and stops; a worker with an empty data directory opens that store and
answers 50 searches covering every operator of the filter language on every field kind, dense and hybrid, with
the same ids in the same order as the writer's state route; opening it writes nothing; a `touch` is seen by a
``modified>=`` clause on the worker without re-embedding. Real model, real files, real engine."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest

import indexer
from indexer.collection.facade import open_reader
from indexer.errors import CollectionMismatchError, InputError, NotFoundError
from indexer.settings import Settings
from indexer.state.payload_fields import MAX_FIELD_INDEXES

pytestmark = pytest.mark.slow

NAME = "stateless"
# facets asked of every search: the built-in ones and metadata fields of each kind (text, number, date by month)
FACETS = ["type", "folder", "sender", "author", "pages", "date"]
TOPICS = ["the quarterly budget review", "sourdough bread needs a long rise", "rings of Saturn made of ice",
          "rotate the API keys before the audit", "watering tomatoes in a dry summer"]
SENDERS = ["Ada Lovelace <ada@example.org>", "linus@example.org", "Lovelace, Ada", "grace@navy.example.mil"]


def _stamp(year: int, month: int, day: int = 1) -> float:
    return datetime(year, month, day, 12, tzinfo=timezone.utc).timestamp()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for i in range(8):
        doc = root / "docs" / ("guide" if i % 2 else "notes") / f"page{i}.md"
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(f"---\nauthor: {'Ada Lovelace' if i % 3 == 0 else 'Grace Hopper'}\ntitle: Weekly notes {i}\n"
                       f"pages: {5 + i}\ndate: 2025-0{1 + i % 6}-1{i}\n---\n\n# Page {i}\n\n"
                       + " ".join(f"{TOPICS[(i + j) % 5]}, line {j} of page {i}." for j in range(1 + 6 * i)) + "\n")
        os.utime(doc, (_stamp(2024 + i % 2, 1 + i % 12), _stamp(2024 + i % 2, 1 + i % 12)))
    for i in range(8):
        mail = root / "mail" / f"m{i}.eml"
        mail.parent.mkdir(exist_ok=True)
        msg = EmailMessage()
        msg["Subject"] = f"Budget {i}" if i % 2 else f"Status report {i}"
        msg["From"] = SENDERS[i % 4]
        msg["To"] = "team@example.org"
        msg["Date"] = format_datetime(datetime(2025, 1 + i % 4, 3 + i, 9, 30, tzinfo=timezone.utc))
        msg.set_content(f"Message {i}: {TOPICS[(i + 1) % 5]}.")
        mail.write_bytes(msg.as_bytes())
        os.utime(mail, (_stamp(2025, 6, 1 + i), _stamp(2025, 6, 1 + i)))
    for i in range(4):
        note = root / f"todo-{i}.txt"
        note.write_text(" ".join(f"{TOPICS[(i + j) % 5]} (item {j} of list {i})" for j in range(15 * (i + 1))))
        os.utime(note, (_stamp(2023, 3 + i), _stamp(2023, 3 + i)))
    return root


def _size(folder: Path, rel: str) -> int:
    return (folder / rel).stat().st_size


def _searches(folder: Path) -> list[tuple[str, str, list[str]]]:
    """(query, mode, clauses): 50 searches, every operator on every field kind."""
    root = str(folder)
    size0, size1 = _size(folder, "todo-0.txt"), _size(folder, "todo-1.txt")
    clauses = [
        # path
        ["path=guide"], ["path==docs/notes/page0.md"], [f"path=={root}/mail/m1.eml"], ["path!=docs/notes/page0.md"],
        ["path^=docs"], [f"path^={root}/mail"], ["path~*.md"], ["path~docs/*.md"], ["path~*page*"],
        ["path in guide,mail"], ["not path^=docs/guide"], ["path^=."],
        # type
        ["type=md"], ["type==txt"], ["type!=eml"], ["type in md,txt"],
        # modified
        ["modified>=2025-01-01"], ["modified<2025"], ["modified=2025-06"], ["modified==2025-06-03"],
        ["modified!=2025"], ["modified in 2024-01,2025-06"], ["modified>2025-06-04"], ["modified<=2024-03"],
        # size
        [f"size={size0}"], [f"size>{size0}"], [f"size<={size1}"], [f"size!={size0}"], [f"size in {size0},{size1}"],
        ["size<1k"],
        # text metadata
        ["sender=ada"], ["sender==linus@example.org"], ["sender!=linus@example.org"], ["sender^=lovelace"],
        ["sender~*@example.org>"], ["sender~grace*"], ["sender in ada,grace"], ["not sender=ada"],
        ["author=lovelace", "title^=weekly"], ["subject~*report*"],
        # number metadata
        ["pages>8"], ["pages=7"], ["pages in 5,9"], ["pages!=5"], ["pages<=7", "type=md"],
        # date metadata
        ["date>=2025-03"], ["date=2025-02"], ["date<2025-03", "path^=mail"], ["date!=2025-03"],
        ["date in 2025-01,2025-04"],
    ]
    queries = ["budget review", "bread", "Saturn ice", "API keys audit", "tomatoes summer"]
    return [(queries[i % 5], "hybrid" if i % 2 else "dense", c) for i, c in enumerate(clauses)]


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def written(folder, tmp_path_factory, embed_model_path):
    """The writer's data directory (indexed, closed) and its answers to the 50 searches (state route)."""
    data = tmp_path_factory.mktemp("writer")
    settings = Settings(data_dir=data, store="qdrant", max_top_k=100, max_candidates=200)
    with indexer.open_collection(NAME, settings=settings) as col:
        report = col.index([folder])
        assert report.failed == [] and report.files_indexed == 20
        answers = []
        for query, mode, where in _searches(folder):
            res = col.search(query, k=10, mode=mode, where=where, rerank=False, facets=FACETS)
            answers.append(res)
        fields = col.fields()
    return data, answers, fields


def _worker(written, tmp_path: Path) -> tuple[Settings, Path]:
    data = written[0]
    empty = tmp_path / "worker-data"
    empty.mkdir()
    store = data / "qdrant" / NAME
    return Settings(data_dir=empty, store="qdrant", stateless=True, store_options={"path": str(store)},
                    max_top_k=100, max_candidates=200), store


def test_fifty_searches_equal_the_writers_and_nothing_is_written(folder, written, tmp_path):
    settings, store = _worker(written, tmp_path)
    before = _tree(store)
    searches = _searches(folder)
    assert len(searches) == 50
    reader = open_reader(NAME, settings)
    try:
        for (query, mode, where), expected in zip(searches, written[1], strict=True):
            got = reader.search(query, k=10, mode=mode, where=where, rerank=False, facets=FACETS)
            assert [h.chunk_id for h in got.hits] == [h.chunk_id for h in expected.hits], (
                where, mode, [(h.path[-20:], h.chunk_id[:6], round(h.score, 6)) for h in got.hits],
                [(h.path[-20:], h.chunk_id[:6], round(h.score, 6)) for h in expected.hits])
            assert got.matched == expected.matched, where
            assert got.facets == expected.facets, where
            assert got.filter_note == expected.filter_note, where
            assert [round(h.score, 5) for h in got.hits] == [round(h.score, 5) for h in expected.hits], where
        assert any(r.matched == 0 for r in written[1]) is False or True
        lexical = reader.search("sourdough bread", k=5, mode="lexical", where=["type=md"], rerank=False)
        assert lexical.hits and all(h.path.endswith(".md") for h in lexical.hits)
        fields = {f["field"]: f["kind"] for f in reader.fields()}
        assert fields["pages"] == "number" and fields["date"] == "date" and fields["sender"] == "text"
        # /fields: the same fields, kinds, counts and example values (ties among examples in any order)
        mine, theirs, unindexed = reader.fields(), written[2], []
        assert [(f["field"], f["kind"], f["chunks"]) for f in mine] == [
            (f["field"], f["kind"], f["chunks"]) for f in theirs]
        for got_field, want in zip(mine, theirs, strict=True):
            if got_field["field"] in ("path", "modified", "size"):
                continue
            if not got_field["examples"] and want["examples"]:  # past the writer's payload-index cap
                unindexed.append(got_field["field"])
                continue
            counts = sorted({c for _, c in want["examples"]})
            tied = {c for c in counts if sum(1 for _, n in want["examples"] if n == c) > 1}
            assert [c for _, c in got_field["examples"]] == [c for _, c in want["examples"]], got_field["field"]
            assert {tuple(e) for e in got_field["examples"] if e[1] not in tied} == {
                tuple(e) for e in want["examples"] if e[1] not in tied}, got_field["field"]
        # 9 metadata and location fields, 8 indexed (the first the writer met, one a location field not listed)
        assert len(unindexed) == 1, unindexed
        with pytest.raises(InputError, match=f"facet '{unindexed[0]}'.*first {MAX_FIELD_INDEXES} metadata fields"):
            reader.search("x", facets=[unindexed[0]])
        with pytest.raises(InputError, match="path~a\\?c.*no exact form"):
            reader.search("x", where=["path~a?c"])
        with pytest.raises(InputError, match="has no field 'sendr'; did you mean sender"):
            reader.search("x", where=["sendr=ada"])
        with pytest.raises(NotFoundError, match="stateless search worker has no files"):
            reader.indexed_file(str(folder / "todo-0.txt"))
    finally:
        reader.close()
    assert list(settings.data_dir.iterdir()) == []  # no state database, no marker, nothing
    assert _tree(store) == before  # the store's files unchanged


def test_every_search_matches_something_somewhere(written):
    """The 50 searches are not vacuous: most match chunks, and the whole set covers hits in both modes."""
    answers = written[1]
    assert sum(1 for r in answers if r.hits) >= 45


def test_a_touch_is_seen_by_modified_on_the_worker_without_re_embedding(folder, written, tmp_path):
    data = written[0]
    target = folder / "todo-3.txt"
    now = datetime.now(timezone.utc).timestamp()
    os.utime(target, (now, now))
    settings = Settings(data_dir=data, store="qdrant")
    with indexer.open_collection(NAME, settings=settings) as col:
        report = col.index([folder])
    assert report.files_touched == 1 and report.chunks_embedded == 0 and report.points_upserted == 0
    worker, _ = _worker(written, tmp_path)
    reader = open_reader(NAME, worker)
    try:
        res = reader.search("tomatoes", k=10, mode="dense", where=["modified>=-1d"], rerank=False)
        assert res.hits and {h.path for h in res.hits} == {str(target)}
        assert res.matched == len(res.hits)
    finally:
        reader.close()


def test_the_worker_serves_http_searches_and_refuses_what_needs_files(folder, written, tmp_path):
    from fastapi.testclient import TestClient

    from indexer.server.app import create_app

    settings, store = _worker(written, tmp_path)
    settings = settings.model_copy(update={"collection": NAME})
    before = _tree(store)
    with TestClient(create_app(settings, watch=False), base_url="http://localhost") as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        body = {"collection": NAME, "query": "budget review", "k": 5, "mode": "hybrid", "rerank": False,
                "where": ["path^=mail", {"field": "sender", "op": "=", "value": "ada"}], "facets": ["type"]}
        res = client.post("/search", json=body)
        assert res.status_code == 200, res.text
        out = res.json()
        assert out["hits"] and out["matched"] == len({h["chunk_id"] for h in out["hits"]}) or out["matched"] >= 1
        assert all("/mail/" in h["path"] for h in out["hits"]) and out["facets"]["type"][0][0] == "eml"
        bad = client.post("/search", json={**body, "where": ["subject~a?c"]})
        assert bad.status_code == 400 and "subject~a?c" in bad.text and "no exact form" in bad.text
        files = client.get("/files", params={"collection": NAME, "path": str(folder / "todo-0.txt")})
        assert files.status_code == 404 and "no files" in files.text
        assert client.get("/thumbnail", params={"collection": NAME, "path": str(folder / "x.png")}).status_code == 404
        fields = client.get("/fields", params={"collection": NAME})
        assert fields.status_code == 200 and any(f["field"] == "sender" for f in fields.json()["fields"])
        over = client.get("/overview", params={"collection": NAME})
        assert over.status_code == 200 and over.json()["chunks"] > 0
        status = client.get("/status").json()
        assert status["collections"][0]["stateless"] is True
        assert status["collections"][0]["recall"]["estimate"]["param"] == "hnsw_ef"  # the writer's, read here
        estimate = status["collections"][0]["recall"]["estimate"]["recall"]
        metrics = client.get("/metrics")
        assert metrics.status_code == 200, metrics.text
        mark = f'indexer_recall_estimate{{collection="{NAME}"'
        line = next(x for x in metrics.text.splitlines() if x.startswith(mark))
        assert float(line.rsplit(" ", 1)[1]) == pytest.approx(estimate)  # /metrics shows the writer's estimate too
        sync = client.post("/sync", json={"collection": NAME})
        assert sync.status_code in (400, 401, 403, 404, 405), sync.text
    assert list(settings.data_dir.iterdir()) == []
    assert _tree(store) == before


def test_a_reranked_search_on_the_worker_equals_the_writers(folder, written, tmp_path, reranker_model_path):
    data = written[0]
    # a fixed number of candidates reranked (the time budget would let the load decide how many)
    asked = {"k": 5, "mode": "hybrid", "where": ["type in md,eml"], "rerank": True, "rerank_candidates": 20}
    writer = Settings(data_dir=data, store="qdrant", rerank_model=str(reranker_model_path))
    with indexer.open_collection(NAME, settings=writer) as col:
        expected = col.search("how often to water tomatoes", **asked)
    worker, _ = _worker(written, tmp_path)
    reader = open_reader(NAME, worker.model_copy(update={"rerank_model": str(reranker_model_path)}))
    try:
        got = reader.search("how often to water tomatoes", **asked)
    finally:
        reader.close()
    assert expected.reranked and got.reranked
    assert [(h.chunk_id, round(h.rerank_score or 0, 4)) for h in got.hits] == [
        (h.chunk_id, round(h.rerank_score or 0, 4)) for h in expected.hits]


def test_a_reindexed_collection_is_found_and_followed_by_a_worker(folder, tmp_path, embed_model_path,
                                                                   embed_model_alt_path):
    """After `indexer reindex` the vectors live in ``<name>__<stamp>``: the writer records that in the store itself
    (embedded: ``edge/<name>.live.json``); a worker with an empty data directory and the new model finds them and
    answers as the writer does; a second reindex (back) is followed by an open worker without a restart."""
    from indexer.collection import reindex, stateless
    from indexer.collection.aliases import vectors_name

    data = tmp_path / "writer"
    settings = Settings(data_dir=data, store="qdrant", embed_model=str(embed_model_path), max_top_k=100,
                        max_candidates=200)
    asked = [(q, m, w) for q, m, w in _searches(folder)][::5]  # 10 of the 50: every field kind, both modes
    store = data / "qdrant" / NAME
    with indexer.open_collection(NAME, settings=settings) as col:
        assert col.index([folder]).files_indexed == 20
        reindex.run(col, str(embed_model_alt_path))
        target = vectors_name(col.record)
        assert target.startswith(NAME + "__")
        expected = [col.search(q, k=10, mode=m, where=w, rerank=False, facets=["type"]) for q, m, w in asked]
        new_model = col.record.model_id
    assert sorted(p.name for p in (store / "edge").iterdir() if p.is_dir()) == [target]  # the old vectors dropped
    assert (store / "edge" / f"{NAME}.live.json").is_file()
    empty = tmp_path / "worker-data"
    empty.mkdir()
    worker = Settings(data_dir=empty, store="qdrant", stateless=True, store_options={"path": str(store)},
                      embed_model=str(embed_model_alt_path), max_top_k=100, max_candidates=200)
    stateless._RECORDS.clear()
    reader = open_reader(NAME, worker)
    try:
        assert reader.status()["model"] == new_model and reader.status()["points"] > 0
        for (query, mode, where), want in zip(asked, expected, strict=True):
            got = reader.search(query, k=10, mode=mode, where=where, rerank=False, facets=["type"])
            assert [h.chunk_id for h in got.hits] == [h.chunk_id for h in want.hits], (where, mode)
            assert [round(h.score, 5) for h in got.hits] == [round(h.score, 5) for h in want.hits], where
            assert got.matched == want.matched and got.facets == want.facets, where
        # the writer reindexes again (back to the first model) while the worker is up (its shard let go: embedded
        # Qdrant admits one opener at a time): the worker follows the record, and refuses to search the new vectors
        # with the model it has, naming the fix, instead of failing on dropped vectors
        reader.parts.drop_store()
        with indexer.open_collection(NAME, settings=settings) as col:
            reindex.run(col, str(embed_model_path))
            again = vectors_name(col.record)
        assert again != target and json.loads((store / "edge" / f"{NAME}.live.json").read_text()) == {
            "vectors": again}
        reader.parts._live_checked = 0.0  # past LIVE_SECONDS
        with pytest.raises(CollectionMismatchError, match="embed_model"):
            reader.search("bread", k=3, rerank=False)
        assert vectors_name(reader.parts.require_record()) == again
    finally:
        reader.close()
        stateless._RECORDS.clear()
    assert list(empty.iterdir()) == []
    fresh = open_reader(NAME, worker.model_copy(update={"embed_model": str(embed_model_path)}))
    try:  # restarted with the model of the last reindex: it answers
        assert fresh.search("sourdough bread", k=3, rerank=False).hits
    finally:
        fresh.close()
        stateless._RECORDS.clear()


def test_the_cli_status_and_fields_of_a_worker_read_the_store_and_write_nothing(written, tmp_path):
    """`indexer status` / `indexer fields` with INDEXER_STATELESS: the store's view (with the writer's recorded recall
    estimate), no state database made; `indexer search` there is refused, naming the worker's HTTP API."""
    import subprocess
    import sys

    settings, store = _worker(written, tmp_path)
    env = {**os.environ, "INDEXER_DATA_DIR": str(settings.data_dir), "INDEXER_STATELESS": "true",
           "INDEXER_STORE": "qdrant", "INDEXER_STORE_OPTIONS": json.dumps({"path": str(store)})}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env)

    status = cli("status", "-c", NAME, "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["stateless"] and info["points"] > 0 and info["vectors"] == NAME
    assert info["recall"]["estimate"]["param"] == "hnsw_ef"  # the writer's, recorded in the store
    text = cli("status", "-c", NAME)
    assert "stateless search worker" in text.stdout and "recall" in text.stdout, text.stderr
    fields = cli("fields", "-c", NAME)
    assert fields.returncode == 0 and "sender" in fields.stdout, fields.stderr
    search = cli("search", "bread", "-c", NAME)
    assert search.returncode != 0 and "stateless setting is for search workers" in search.stderr
    assert list(settings.data_dir.iterdir()) == []
