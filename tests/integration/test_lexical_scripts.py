"""Lexical search in every script through the product (real model, real files, FAISS and embedded Qdrant): five
short notes per the report that opened the Lexical terms issue, and their peers in Thai, Hindi, Tamil, Arabic,
Russian and English. Each word, written inside a sentence or a heading, is found first by lexical search (and by
hybrid search: the English default model no longer decides alone) and
marked in the hit's snippet; an embedded-Qdrant collection made with version 1's terms is rebuilt by the next
`index` without re-embedding, which says so, and status names the analyzer."""

from __future__ import annotations

import os

import pytest

import indexer
from indexer.cli.status_view import lines as status_lines
from indexer.search import lexical
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "qdrant"}]

NOTES = {
    "zh/budget.md": "# 项目预算\n\n今年的项目预算已经由财务总监批准了，下个月开始执行。\n",
    "zh/glacier.md": "# 气候观测\n\n山上的冰川在夏天融化得很快，山谷里全是水。\n",
    "ja/keys.md": "# 鍵の管理\n\n暗号鍵のローテーションは毎月自動で実行されます。\n",
    "ja/weather.md": "# 天気\n\n東京の天気は今日も晴れで、とても暑いです。\n",
    "ko/db.md": "# 백업 정책\n\n데이터베이스는 매일 밤 자동으로 백업됩니다.\n",
    "ko/meeting.md": "# 회의\n\n오늘 회의는 다음 주로 연기되었습니다.\n",
    "th/db.md": "# นโยบาย\n\nระบบจะสำรองฐานข้อมูลทุกคืนโดยอัตโนมัติ\n",
    "th/weather.md": "# อากาศ\n\nวันนี้อากาศดีมากและท้องฟ้าแจ่มใส\n",
    "hi/docs.md": "# टीम\n\nहमारी टीम हर सप्ताह नए दस्तावेज़ हिन्दी में लिखती है।\n",
    "hi/weather.md": "# मौसम\n\nआज मौसम बहुत अच्छा है और धूप खिली है।\n",
    "ta/release.md": "# வெளியீடு\n\nபுதிய மென்பொருள் இன்று காலை வெளியிடப்பட்டது.\n",
    "ta/rain.md": "# மழை\n\nஇன்று மழை பெய்ததால் பள்ளி மூடப்பட்டது.\n",
    "ar/db.md": "# التحديث\n\nتعمل قاعدة البيانات بسرعة كبيرة بعد التحديث.\n",
    "ar/weather.md": "# الطقس\n\nالطقس جميل اليوم في المدينة.\n",
    "ru/backup.md": "# Ночью\n\nРезервное копирование базы выполняется каждую ночь.\n",
    "ru/rain.md": "# Погода\n\nСегодня в городе идёт сильный дождь.\n",
    "en/budget.md": "# Approvals\n\nThe quarterly budget was approved by the finance director.\n",
    "en/glacier.md": "# Field notes\n\nGlaciers melt quickly in summer.\n",
}
QUERIES = [  # (query, the note it is in, the words marked in the snippet)
    ("财务总监", "zh/budget.md", ["财务总监"]),
    ("預算", "zh/budget.md", ["预算", "预算"]),  # Traditional query, Simplified text; heading and text
    ("冰川", "zh/glacier.md", ["冰川"]),
    ("ローテーション", "ja/keys.md", ["ローテーション"]),
    ("暗号鍵", "ja/keys.md", ["暗号鍵"]),
    ("데이터베이스", "ko/db.md", ["데이터베이스"]),  # the particle 는 attached in the text
    ("ฐานข้อมูล", "th/db.md", ["ฐานข้อมูล"]),
    ("दस्तावेज़", "hi/docs.md", ["दस्तावेज़"]),
    ("மென்பொருள்", "ta/release.md", ["மென்பொருள்"]),
    ("البيانات", "ar/db.md", ["البيانات"]),
    ("копирование", "ru/backup.md", ["копирование"]),
    ("budget", "en/budget.md", ["budget"]),
]


def _ids(opts: dict[str, str]) -> str:
    return "-".join(str(v) for v in opts.values())


@pytest.mark.parametrize("store_opts", STORES, ids=_ids)
def test_a_word_in_any_script_is_found_first_and_marked(tmp_path, embed_model_path, store_opts):
    corpus = write_corpus(tmp_path / "notes", NOTES)
    with indexer.open_collection(f"scripts-{_ids(store_opts)}", **store_opts) as col:
        col.index([corpus])
        wrong = {}
        for query, path, marked in QUERIES:
            hits = col.search(query, k=3, mode="lexical").hits
            first = os.path.relpath(hits[0].path, corpus) if hits else None
            words = [hits[0].snippet[a:b] for a, b in hits[0].marks] if hits else []
            if first != path or words != marked:
                wrong[query] = (first, words)
            fused = col.search(query, k=3, mode="hybrid").hits  # the English model's dense side no longer decides
            if not fused or os.path.relpath(fused[0].path, corpus) != path:
                wrong[f"{query} (hybrid)"] = [os.path.relpath(h.path, corpus) for h in fused]
        assert not wrong, wrong
        status = col.status()
        assert status["lexical_terms"] == lexical.ANALYZER.label
        shown = dict(status_lines(status))  # what `indexer status` prints
        assert f"lexical index ready (terms: {lexical.ANALYZER.label})" in shown["search"], shown


def test_an_embedded_qdrant_collection_of_version_1_is_rebuilt_by_index(tmp_path, embed_model_path, monkeypatch):
    corpus = write_corpus(tmp_path / "notes", NOTES)
    with indexer.open_collection("old-terms", store="qdrant") as col:
        monkeypatch.setattr("plugins.qdrant.edge.LEXICAL", lexical.sparse_name("1"))  # as indexer 0.4 made it
        col.index([corpus])
        monkeypatch.undo()
        assert col.status()["lexical_terms"].startswith("python-words v1 (`indexer index` rebuilds it")
        hits = col.search("财务总监", k=3, mode="lexical").hits
        assert not hits or not hits[0].path.endswith("zh/budget.md")  # version 1: a sentence is one word

        report = col.index([corpus])
        assert report.chunks_embedded == 0  # nothing re-embedded
        assert any("rebuilt" in n and "no re-embedding" in n for n in report.notes), report.notes
        assert col.status()["lexical_terms"] == lexical.ANALYZER.label
        assert col.search("财务总监", k=3, mode="lexical").hits[0].path.endswith("zh/budget.md")
        assert col.index([corpus]).notes == []  # done once
