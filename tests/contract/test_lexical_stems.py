"""Each language stemmed as itself (analyzer version 3), on every store with a lexical index: a Russian, German,
French and Spanish query in another inflection than the note's word finds that note first, in a collection holding
notes of all four languages and English (chunks carry their detected language, as indexing records it); an English
query on that collection gets the same terms as version 2's; and the chunks' languages are what the query is told
among."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from indexer.core.languages import detect
from indexer.ports import LexicalSearch
from indexer.search import lexical
from indexer.types import Metric, Point

from .conftest import StoreFactory

DIM = 8

# (language, query, the note with the word in another inflection, a note of the same language without it)
INFLECTIONS = [
    ("ru", "бюджета", "Годовой бюджет проекта утвердили вчера на совете директоров компании.",
     "Сегодня в городе идёт сильный дождь, и улицы совсем пустые."),
    ("de", "Haus", "Die neuen Häuser am Stadtrand wurden im letzten Sommer schnell gebaut.",
     "Der Zug nach Berlin hatte heute Morgen wieder eine lange Verspätung."),
    ("fr", "bilan", "Les bilans annuels sont validés chaque printemps par le directeur financier.",
     "Le train pour Lyon avait encore beaucoup de retard ce matin."),
    ("es", "presupuesto", "Los presupuestos anuales fueron aprobados ayer por la directora financiera.",
     "El tren a Sevilla llegó otra vez muy tarde esta mañana."),
    ("en", "approve", "The quarterly budget was approved by the finance director yesterday.",
     "Glaciers melt quickly in the long summer months of the north."),
]  # fmt: skip


def _notes() -> list[Point]:
    points = []
    for n, (lang, _q, with_word, without) in enumerate(INFLECTIONS):
        for kind, text in (("with", with_word), ("without", without)):
            path = f"/notes/{lang}-{kind}.md"
            vec = np.random.default_rng(2 * n + len(kind)).normal(size=DIM).astype(np.float32)
            payload = {"path": path, "file_type": "md", "text": text, "lang": detect(text)}
            points.append(Point(str(uuid.uuid5(uuid.NAMESPACE_URL, path)), vec / np.linalg.norm(vec), payload))
    return points


def _lexical(store: object) -> LexicalSearch:
    if not isinstance(store, LexicalSearch):
        pytest.skip(f"{getattr(store, 'name', store)} keeps no lexical index (an optional port)")
    return store


def test_each_note_is_detected_as_its_language() -> None:
    assert [p.payload["lang"] for p in _notes()[::2]] == [lang for lang, *_ in INFLECTIONS]


@pytest.mark.parametrize(("lang", "query"), [(s[0], s[1]) for s in INFLECTIONS])
def test_a_query_in_another_inflection_finds_the_note_first(
    make_store: StoreFactory, collection: str, lang: str, query: str
) -> None:
    store = make_store(Metric.COSINE)
    lex = _lexical(store)
    store.ensure_collection(collection, DIM, {})
    store.upsert(collection, _notes())
    hits = lex.search_lexical(collection, query, 5)
    assert hits, f"{lang}: {query!r} found nothing"
    assert hits[0].payload["path"] == f"/notes/{lang}-with.md", [h.payload["path"] for h in hits]
    assert all(h.payload["path"] != f"/notes/{lang}-without.md" for h in hits)


def test_the_stems_differ_from_english_ones_where_the_language_has_its_own() -> None:
    """German and Russian words get their own stems (English's would not join Häuser and Haus, or бюджета and
    бюджет); an English text's terms are version 2's."""
    v3, v2 = lexical.ANALYZER, lexical.analyzer("2")
    assert "haus" in v3.words(INFLECTIONS[1][2], "de") and "haus" not in v2.words(INFLECTIONS[1][2])
    assert v3.words(INFLECTIONS[0][2], "ru")[1] == v3.query_words("бюджета", {"ru"})[0] == "бюджет"
    english = INFLECTIONS[4][2]
    assert v3.words(english, "en") == v3.words(english) == v2.words(english)
    assert v3.query_words(english, {"en"}) == v2.query_words(english)
