"""The broad-filter path above its threshold, on FAISS and embedded Qdrant, by each route a filter can take.

A collection of at most MAX_CHUNKS chunks is held in memory (indexer/state/columns.py): a filter is counted exactly
and, up to LISTED_MATCHES matches, the store searches among them; above that, a broad one checks the candidates
against the held matches. A bigger collection is filtered in SQL: a filter estimated to keep at least 5 % of the
chunks (``broad`` in indexer/collection/reader.py) is not listed: the store searches without it and the state
database checks the candidates (``FieldIndex.among``); when the first fetch holds too few matches, the search runs
once among the listed matches. The estimate samples 500 chunks and starts at 5,000 of them, so the collection here
is a real indexed folder (Markdown with front matter, mails, CSVs) plus 6,000 generated chunks written the way the
indexer writes them (their state rows with metadata fields, their points with the payload the pipeline builds;
vectors near the real model's embeddings of six topics). Each broad filter's hits, through the public search, by
each route, are the narrow path's (the same filter listed: ``broad`` forced off) and the exact filtered ranking (an
unfiltered search of every chunk, kept by the filter's definition), in dense, lexical and hybrid mode; a filter
whose matches are far from the query makes the search list them (once, for both sides).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.test_filter_examples import ALL, write_folder
from tests.server.conftest import make_settings

pytestmark = pytest.mark.slow

N_FILES = 600
PER_FILE = 10
N_GEN = N_FILES * PER_FILE
TOPICS = {
    "saturn": "the rings of Saturn are made of ice and dust",
    "bread": "sourdough bread needs a long slow rise overnight",
    "budget": "the quarterly budget review and travel expenses",
    "keys": "rotate the API keys before the security audit",
    "garden": "tomatoes in the garden need water twice a week",
    "kernel": "the kernel summit schedule and its talks",
}
NAMES = list(TOPICS)
QUERY = "Saturn rings ice"
SATURN_WORDS = 66  # every 66th chunk (a Saturn one) holds the query's words, each at another length: no BM25 ties


def _text(i: int, topic: str) -> str:
    """Generated chunk ``i``'s text: the query's words only in every 66th chunk, at a length of its own (the
    dense side ranks by the vectors, near the topics' embeddings; the lexical side has no tied scores)."""
    if i % SATURN_WORDS == 0:
        return f"Note {i}: Saturn rings of ice" + " moonlet" * (i // SATURN_WORDS)
    body = "a planet wrapped in dust and gas" if topic == "saturn" else TOPICS[topic]
    return f"Note {i}: {body}, item {i * 7919 % 10007}."


def _fields(i: int) -> dict[str, Any]:
    """The metadata of generated chunk ``i`` (of file i // PER_FILE): its team, topic and number."""
    f = i // PER_FILE
    return {"team": "red" if f % 2 == 0 else "blue", "topic": NAMES[i % len(NAMES)], "n": i}


# filter clauses -> which generated chunks they keep (a real file's chunk has none of these fields: only `not`
# keeps it), all estimated broad (>= 5 % of the chunks) but the last, which is narrow (30 chunks)
BROAD: list[tuple[tuple[str, ...], Callable[[dict[str, Any] | None], bool]]] = [
    (("team=red",), lambda m: m is not None and m["team"] == "red"),
    (("not team=red",), lambda m: m is None or m["team"] != "red"),
    (("topic=bread",), lambda m: m is not None and m["topic"] == "bread"),  # far from the query: widens
    (("team=red", "topic in (bread, kernel)"), lambda m: m is not None and m["team"] == "red"
     and m["topic"] in ("bread", "kernel")),
    (("n>=3000", "path^=gen"), lambda m: m is not None and m["n"] >= 3000),  # a number and a built-in field
    (("topic==saturn", "not n<3000"), lambda m: m is not None and m["topic"] == "saturn" and m["n"] >= 3000),
]
NARROW = (("team=red", "n<60"), lambda m: m is not None and m["team"] == "red" and m["n"] < 60)


def _add_generated(col, root: Path) -> dict[str, dict[str, Any]]:
    """6,000 chunks in 600 files under ``root/gen``, written through the state's and the store's own writes."""
    from indexer.state.database import ChunkRecord, FileRecord, FileUpdate
    from indexer.types import Point

    parts = col.parts
    rec = parts.require_record()
    topic_vectors = parts.document_embedder.embed_batch(list(TOPICS.values()), rec.normalization)
    rng = np.random.default_rng(42)
    noise = rng.normal(size=(N_GEN, topic_vectors.shape[1])).astype(np.float32)
    vectors = topic_vectors[np.arange(N_GEN) % len(NAMES)] + 0.02 * noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta: dict[str, dict[str, Any]] = {}
    points, updates = [], []
    for f in range(N_FILES):
        path = str(root / "gen" / f"g{f:03d}.md")
        chunks = []
        for j in range(PER_FILE):
            i = f * PER_FILE + j
            pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"broad-filter/{i}"))
            fields = _fields(i)
            meta[pid] = fields
            text = _text(i, fields["topic"])
            payload = {"path": path, "root": str(root), "rel_path": f"gen/g{f:03d}.md", "file_type": "md",
                       "kind": "text", "chunk_index": j, "text": text, "start_line": j + 1, "end_line": j + 1,
                       "start_byte": 0, "end_byte": len(text), "page": None, "heading": [], "locator": "",
                       "location": {}, "metadata": {k: str(v) for k, v in fields.items()},
                       "content_hash": f"gen{i}", "n_tokens": 20}
            points.append(Point(pid, vectors[i], payload))
            chunks.append(ChunkRecord(pid, path, j, f"gen{i}", 20, tuple((k, str(v)) for k, v in fields.items())))
        updates.append(FileUpdate(FileRecord(path, str(root), 1000, 1_750_000_000_000_000_000, f"genfile{f}",
                                             "indexed", None, "text"), tuple(chunks)))
    for start in range(0, N_GEN, 1000):
        parts.store.upsert(col.name, points[start:start + 1000])
    parts.state.commit_files(col.name, updates)
    return meta


@pytest.fixture(scope="module", params=["faiss", "qdrant"])
def big(request, tmp_path_factory, embed_model_path) -> Iterator[tuple[Any, dict[str, dict[str, Any] | None]]]:
    from indexer.collection.facade import open_collection

    base = tmp_path_factory.mktemp(f"broad-{request.param}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INDEXER_CONFIG", str(base / "no-config.toml"))
        root = write_folder(base / "folder").resolve()
        settings = make_settings(base / "data", embed_model_path, None, store=request.param,
                                 max_top_k=N_GEN + 100, max_candidates=N_GEN + 100)
        with open_collection("default", settings=settings) as col:
            report = col.index([root])
            assert report.failed == [] and report.files_indexed == len(ALL), report.to_dict()
            meta: dict[str, dict[str, Any] | None] = dict(_add_generated(col, root))
            everything = col.search(QUERY, k=N_GEN + 100, candidates=N_GEN + 100, mode="dense", rerank=False)
            assert len(everything.hits) > N_GEN and everything.warning is None
            for h in everything.hits:
                meta.setdefault(h.chunk_id, None)  # the real files' chunks: none of the generated fields
            assert len(meta) == len(everything.hits)
            yield col, meta
            _EVERYTHING.clear()  # the exact rankings were this collection's


ROUTES = ("held", "held-checked", "sql")


@pytest.fixture(params=ROUTES)
def route(request, big, monkeypatch) -> Iterator[str]:
    """How a filter runs: ``held``, the collection's chunks in memory (indexer.state.columns), the exact matches
    given to the store (up to reader.LISTED_MATCHES); ``held-checked``, the same counts with the candidates checked
    against the held matches (as above that many); ``sql``, a collection not held (over MAX_CHUNKS): the estimate,
    the candidates checked by FieldIndex.among, the listing when too few match."""
    from indexer.collection import reader
    from indexer.state import fields

    col, _ = big
    if request.param == "held-checked":
        monkeypatch.setattr(reader, "LISTED_MATCHES", 0)
    if request.param == "sql":
        monkeypatch.setattr(fields, "MAX_CHUNKS", -1)
    col.parts.state.fields._columns.clear()  # the cap applies from the next read
    yield request.param
    col.parts.state.fields._columns.clear()


@pytest.fixture
def checked(monkeypatch) -> list[bool]:
    """For each side of each search: whether it checked candidates (a broad filter's ``keep``)."""
    from indexer.search import fusion

    calls: list[bool] = []
    real = fusion.kept

    def spying(fetch, want, keep, *args, **kwargs):
        calls.append(keep is not None)
        return real(fetch, want, keep, *args, **kwargs)

    monkeypatch.setattr(fusion, "kept", spying)
    return calls


@pytest.fixture
def among_calls(monkeypatch) -> list[int]:
    """The number of candidates each broad-filter check was given (FieldIndex.among, the broad path's check)."""
    from indexer.state.fields import FieldIndex

    calls: list[int] = []
    real = FieldIndex.among

    def counting(self, where, ids):
        calls.append(len(ids))
        return real(self, where, ids)

    monkeypatch.setattr(FieldIndex, "among", counting)
    return calls


def _search(col, where, mode: str, k: int = 10):
    return col.search(QUERY, k=k, mode=mode, where=list(where), rerank=False)


def _narrow(col, where, mode: str, monkeypatch):
    """The same search with the filter listed (the narrow path), whatever its share."""
    from indexer.collection import reader

    with monkeypatch.context() as m:
        m.setattr(reader, "broad", lambda total, fraction: False)
        return _search(col, where, mode)


_EVERYTHING: dict[tuple[int, str], Any] = {}


def _exact(col, mode: str, keep: Callable[[str], bool], k: int = 10) -> list[Any]:
    """The exact filtered ranking: an unfiltered search of every chunk (made once per collection and mode: the
    same query, no filter, so the same answer on every route), kept by the filter's definition."""
    key = (id(col.parts.store), mode)
    if key not in _EVERYTHING:
        _EVERYTHING[key] = col.search(QUERY, k=N_GEN + 100, candidates=N_GEN + 100, mode=mode, rerank=False)
    return [h for h in _EVERYTHING[key].hits if keep(h.chunk_id)][:k]


def _same(got, want, label: str) -> None:
    """The same ranking: the same ids in the same order, with the same scores."""
    assert [h.chunk_id for h in got] == [h.chunk_id for h in want], label
    assert [round(h.score, 5) for h in got] == [round(h.score, 5) for h in want], label


def test_the_filters_are_estimated_broad_and_narrow_as_the_threshold_says(big) -> None:
    from indexer.collection.reader import BROAD_SHARE, broad
    from indexer.search.filters import parse
    from indexer.state.fields import compile_where

    col, meta = big
    fields = col.parts.state.fields
    for where, keep in [*BROAD, NARROW]:
        clauses = parse(list(where))
        kinds = fields.check(col.name, clauses, ())
        total, fraction = fields.estimate(compile_where(col.name, clauses, None, (), kinds))
        share = sum(map(keep, meta.values())) / len(meta)
        assert abs(total - len(meta)) <= 0.1 * len(meta), (where, total)
        assert abs(fraction - share) <= 0.06, (where, fraction, share)  # 500 sampled chunks
        assert broad(total, fraction) == (where != NARROW[0]), (where, total, fraction, BROAD_SHARE)


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_a_broad_filter_ranks_as_the_narrow_path_and_an_exact_filtered_search(big, mode, route, among_calls, checked,
                                                                               monkeypatch) -> None:
    from indexer.state.fields import FieldIndex

    col, meta = big
    listings: list[int] = []
    real_select = FieldIndex.select
    monkeypatch.setattr(FieldIndex, "select", lambda self, where: listings.append(1) or real_select(self, where))
    listed_after_check = False
    for where, keep in BROAD:
        among_calls.clear()
        listings.clear()
        checked.clear()
        got = _search(col, where, mode)
        matches = sum(map(keep, meta.values()))
        if route == "sql":
            assert among_calls, f"{where}: not the broad path"  # candidates checked first, not the ids listed
            assert len(among_calls) <= (2 if mode == "hybrid" else 1), (where, among_calls)  # never widened
            assert len(listings) <= 1, where  # listed at most once, for both sides
            listed_after_check |= bool(listings)
            assert got.matched is None
        else:  # counted exactly in memory: no SQL per search
            assert among_calls == [] and listings == [] and got.matched == matches, (where, got.matched)
            assert checked and all(checked) == (route == "held-checked"), (where, checked)
            listed_after_check |= route == "held-checked"
        assert got.where == where and got.filter_note is None
        assert all(keep(meta[h.chunk_id]) for h in got.hits), where
        if mode != "lexical":  # thousands match: k of them come back (lexically, only those with a query word)
            assert len(got.hits) == 10, where
        among_calls.clear()
        listed = _narrow(col, where, mode, monkeypatch)
        assert among_calls == [] and listed.matched == matches, where
        _same(got.hits, listed.hits, f"{mode} {where}: broad vs narrow")
        if mode != "hybrid":  # fusion normalises per candidate list: only the paths are compared there
            _same(got.hits, _exact(col, mode, lambda pid, keep=keep: keep(meta[pid])), f"{mode} {where}: exact")
    if mode != "lexical" and route != "held":  # far matches (topic=bread for a query on Saturn): the first fetch
        assert listed_after_check  # holds none of them, so the search runs once among the listed matches


def test_a_large_selection_checked_after_the_search_is_the_selection_searched(big, monkeypatch) -> None:
    """Embedded Qdrant checks a selection of many ids after a search without payloads (plugins/qdrant/selection.py):
    the same hits, scores and payloads as the search with the HasIdCondition, dense and lexical."""
    from indexer.search import filters
    from indexer.state.fields import compile_where
    from indexer.types import Filter
    from plugins.qdrant import selection

    col, meta = big
    if col.parts.store.name != "qdrant":
        pytest.skip("embedded Qdrant's own route")
    store, fields = col.parts.store, col.parts.state.fields
    vector = col.parts.embedder.embed_batch([QUERY], col.parts.require_record().normalization)[0]
    taken: list[bool] = []
    real_depth = selection.checked_depth
    monkeypatch.setattr(selection, "checked_depth", lambda *a: taken.append(bool(r := real_depth(*a))) or r)
    for where in (("team=red",), ("not team=red",), ("n>=1000",)):
        clauses = filters.parse(list(where))
        ids = fields.matching(col.name, compile_where(col.name, clauses, kinds=fields.check(col.name, clauses)))
        assert len(ids) >= selection.CHECK_FROM and len(ids) / store.count(col.name) >= selection.CHECK_SHARE
        for side in ("dense", "lexical"):
            def run(side=side, ids=ids):
                f = Filter(ids=ids)
                return (store.search(col.name, vector, 30, f) if side == "dense"
                        else store.search_lexical(col.name, QUERY, 30, f))

            taken.clear()
            got = run()
            assert taken == [True], (where, side)
            with monkeypatch.context() as m:
                m.setattr(selection, "CHECK_FROM", 10**9)
                want = run()
            assert [(h.id, round(h.score, 5), h.payload) for h in got] == [
                (h.id, round(h.score, 5), h.payload) for h in want], (where, side)
            assert len(got) == 30 and all(h.id in ids for h in got), (where, side)


def test_a_narrow_filter_lists_its_matches(big, among_calls) -> None:
    col, meta = big
    where, keep = NARROW
    got = _search(col, where, "dense")
    assert among_calls == [] and got.matched == 30
    assert [h.chunk_id for h in got.hits] == [h.chunk_id for h in _exact(col, "dense", lambda p: keep(meta[p]))]
