"""Lexical search in every script, on every store with a lexical index: a word inside a sentence is found first
(Chinese and Japanese without spaces, Korean with its particle attached, Thai without spaces, Hindi and Tamil with
their vowel signs, Arabic, Russian, English); and a collection whose terms analyzer version 1 made is searched with
its own terms until ``ensure_lexical`` rebuilds it with the current ones, its vectors untouched."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from indexer.ports import LexicalSearch
from indexer.search import lexical
from indexer.types import Metric, Point

from .conftest import StoreFactory

DIM = 8

# (language, query, the note that holds it inside a sentence, a note of the same language without it)
SCRIPTS = [
    ("zh", "预算", "今年的项目预算已经由财务总监批准了。", "冰川在夏天融化得很快，山谷里全是水。"),
    ("zh-Hant", "財務總監", "今年的项目预算已经由财务总监批准了。", "冰川在夏天融化得很快，山谷里全是水。"),
    ("ja", "ローテーション", "暗号鍵のローテーションは毎月自動で実行されます。", "東京の天気は今日も晴れです。"),
    ("ko", "데이터베이스", "데이터베이스는 매일 밤 자동으로 백업됩니다.", "오늘 회의는 다음 주로 연기되었습니다."),
    ("th", "ฐานข้อมูล", "ระบบจะสำรองฐานข้อมูลทุกคืนโดยอัตโนมัติ", "วันนี้อากาศดีมากและท้องฟ้าแจ่มใส"),
    ("hi", "दस्तावेज़", "हमारी टीम हर सप्ताह नए दस्तावेज़ हिन्दी में लिखती है।", "आज मौसम बहुत अच्छा है और धूप खिली है।"),
    ("ta", "மென்பொருள்", "புதிய மென்பொருள் இன்று காலை வெளியிடப்பட்டது.", "இன்று மழை பெய்ததால் பள்ளி மூடப்பட்டது."),
    ("ar", "البيانات", "تعمل قاعدة البيانات بسرعة كبيرة بعد التحديث.", "الطقس جميل اليوم في المدينة."),
    ("ru", "копирование", "Резервное копирование базы выполняется ночью.", "Сегодня в городе идёт сильный дождь."),
    ("en", "budget", "The quarterly budget was approved by the finance director.", "Glaciers melt quickly in summer."),
]


def _point(path: str, text: str, seed: int) -> Point:
    vec = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    vec /= np.linalg.norm(vec)
    return Point(str(uuid.uuid5(uuid.NAMESPACE_URL, path)), vec, {"path": path, "file_type": "md", "text": text})


def _notes() -> list[Point]:
    points: dict[str, Point] = {}
    for lang, _q, with_word, without in SCRIPTS:
        base = lang.split("-")[0]
        for kind, text in (("with", with_word), ("without", without)):
            path = f"/notes/{base}-{kind}.md"
            points.setdefault(path, _point(path, text, len(points)))
    return list(points.values())


def _lexical(store: object) -> LexicalSearch:
    if not isinstance(store, LexicalSearch):
        pytest.skip(f"{getattr(store, 'name', store)} keeps no lexical index (an optional port)")
    return store


def _first(store: LexicalSearch, collection: str, query: str) -> str | None:
    hits = store.search_lexical(collection, query, 5)
    return str(hits[0].payload["path"]) if hits else None


@pytest.mark.parametrize(("lang", "query"), [(s[0], s[1]) for s in SCRIPTS])
def test_a_word_inside_a_sentence_is_found_first(
    make_store: StoreFactory, collection: str, lang: str, query: str
) -> None:
    store = make_store(Metric.COSINE)
    lex = _lexical(store)
    store.ensure_collection(collection, DIM, {})
    store.upsert(collection, _notes())
    assert lex.lexical_version(collection) == lexical.LEXICAL_VERSION
    hits = lex.search_lexical(collection, query, 5)
    assert hits, f"{lang}: {query!r} found nothing"
    assert hits[0].payload["path"] == f"/notes/{lang.split('-')[0]}-with.md", [h.payload["path"] for h in hits]
    assert all(h.payload["path"] != f"/notes/{lang.split('-')[0]}-without.md" for h in hits)


def _make_v1(make_store: StoreFactory, store_kind: str, collection: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """A collection as indexer 0.4 left it: its lexical terms made by analyzer version 1."""
    store = make_store(Metric.COSINE)
    _lexical(store)
    if store_kind.startswith("faiss"):
        store.ensure_collection(collection, DIM, {"m": "1"})
        coll = store._require(collection)  # type: ignore[attr-defined]
        with coll.sidecar.write():  # version 1's table: its tokenizer, its meta
            coll.sidecar.conn.execute("DROP TABLE lexical")
            coll.sidecar.conn.execute("CREATE VIRTUAL TABLE lexical USING fts5(title, body, "
                                      "tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")")
            coll.sidecar.set_meta("lexical", "1")
    else:  # both Qdrant stores name the sparse vector of a new collection by this constant
        module = "plugins.qdrant.client_store" if hasattr(store, "client") else "plugins.qdrant.edge"
        monkeypatch.setattr(f"{module}.LEXICAL", lexical.sparse_name("1"))
        store.ensure_collection(collection, DIM, {"m": "1"})
        monkeypatch.undo()
    store.upsert(collection, _notes())  # written with the terms of the collection's analyzer: version 1's
    return store


def test_a_version_1_collection_is_searched_with_its_terms_until_rebuilt(
    make_store: StoreFactory, store_kind: str, collection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _make_v1(make_store, store_kind, collection, monkeypatch)
    lex = _lexical(store)
    points = _notes()
    assert lex.lexical_version(collection) == "1"
    assert lex.has_lexical(collection)
    assert _first(lex, collection, "budget") == "/notes/en-with.md"  # version 1's English terms still match
    assert _first(lex, collection, "预算") != "/notes/zh-with.md"  # version 1: the sentence is one word
    before = {h.id: h.score for h in store.search(collection, points[0].vector, 30)}  # type: ignore[attr-defined]

    assert lex.ensure_lexical(collection) is True
    assert lex.lexical_version(collection) == lexical.LEXICAL_VERSION
    assert _first(lex, collection, "预算") == "/notes/zh-with.md"
    assert _first(lex, collection, "데이터베이스") == "/notes/ko-with.md"
    assert _first(lex, collection, "budget") == "/notes/en-with.md"
    after = {h.id: h.score for h in store.search(collection, points[0].vector, 30)}  # type: ignore[attr-defined]
    assert after.keys() == before.keys()  # the same vectors: nothing re-embedded
    for pid, value in before.items():
        assert after[pid] == pytest.approx(value, abs=1e-5)
    assert store.collection_meta(collection)["m"] == "1"  # type: ignore[attr-defined]
    assert store.count(collection) == len(points)  # type: ignore[attr-defined]
    assert lex.ensure_lexical(collection) is False
    store.upsert(collection, [Point(points[0].id, points[0].vector, {**points[0].payload, "text": "新的预算表"})])
    assert _first(lex, collection, "预算表") == points[0].payload["path"]  # writes after it: current terms
