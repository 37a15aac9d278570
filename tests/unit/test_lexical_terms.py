"""The lexical tokenizer and the fusion of rankings (our own logic, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.errors import InputError, StoreError
from indexer.search import lexical
from indexer.search.fusion import FusionConfig, fuse
from indexer.search.snippets import matches, passage_marks, snippet
from indexer.types import Hit


def test_words_are_folded_stemmed_and_stopwords_dropped() -> None:
    assert lexical.terms("The Mutations of the GENES") == ["mutat", "gene"]
    assert lexical.terms("running runs") == ["run", "run"]


def test_identifiers_are_kept_whole_and_split() -> None:
    got = lexical.terms("raise ERR_QUOTA_7731 in parseHttpHeader")
    assert got[:5] == ["rais", "err_quota_7731", "err", "quota", "7731"]
    assert got[5:] == ["parsehttpheader", "pars", "http", "header"]


def test_non_ascii_words_are_not_split_as_camel_case() -> None:
    assert lexical.terms("Zürich Ärger") == ["zürich", "ärger"]


def test_query_terms_are_distinct_and_fts_query_is_quoted() -> None:
    assert lexical.query_terms("fox fox FOX") == ["fox"]
    assert lexical.fts_query('say "hi" OR NEAR(x', None, {"en"}) == '"say" OR "hi" OR "near" OR "x"'
    assert lexical.fts_query("the of and") is None


def test_sparse_document_weights_title_and_saturates() -> None:
    payload = {"text": "gene gene gene mutation", "heading": ["Mutation"], "path": "/x/notes.md"}
    idx, values = lexical.sparse_document(payload)
    weights = dict(zip(idx, values, strict=True))
    gene, mutat, note = (lexical.term_index(t) for t in ("gene", "mutat", "note"))
    assert set(weights) == {gene, mutat, note}
    assert weights[mutat] == pytest.approx(weights[gene])  # one body + one title occurrence (x2) = three in the body
    assert weights[note] < weights[gene]
    assert all(v < lexical.BM25_K1 + 1 for v in values)  # BM25 saturation


def _hits(*ids: str) -> list[Hit]:
    return [Hit(id=i, score=float(len(ids) - n), payload={"path": i}) for n, i in enumerate(ids)]


def test_rrf_rewards_agreement_and_weights_the_sides() -> None:
    dense, lex = _hits("a", "b", "c"), _hits("c", "b", "d")

    def ranked(w: float) -> list[tuple[str, float]]:
        return [(h.id, h.score) for h in fuse(dense, lex, FusionConfig(method="rrf", dense_weight=w))]

    k = 60  # sum(w / (k + rank)) over the lists a chunk is in
    even = ranked(0.5)
    assert [i for i, _ in even] == ["c", "b", "a", "d"]  # in both lists first; c's ranks 3 and 1 beat b's 2 and 2
    assert even[0][1] == pytest.approx(0.5 / (k + 3) + 0.5 / (k + 1)) and even[1][1] == pytest.approx(1 / (k + 2))
    assert [i for i, _ in ranked(0.9)] == ["b", "c", "a", "d"]  # dense-heavy: a (dense only) beats d
    assert [i for i, _ in ranked(0.1)] == ["c", "b", "d", "a"]  # lexical-heavy: d (lexical only) beats a


def test_score_fusion_weights_the_sides() -> None:
    dense, lex = _hits("a", "b", "c"), _hits("c", "d", "e")  # min-max: 1, 0.5, 0 on each side

    def ranked(w: float) -> list[tuple[str, float]]:
        return [(h.id, round(h.score, 6)) for h in fuse(dense, lex, FusionConfig(method="score", dense_weight=w))]

    assert ranked(1.0)[0][0] == "a" and ranked(0.0)[0][0] == "c"
    assert ranked(0.6) == [("a", 0.6), ("c", 0.4), ("b", 0.3), ("d", 0.2), ("e", 0.0)]
    assert ranked(0.4) == [("c", 0.6), ("a", 0.4), ("d", 0.3), ("b", 0.2), ("e", 0.0)]
    assert [i for i, _ in ranked(0.5)] == ["a", "c", "b", "d", "e"]  # a tie (0.5 each) goes by id


def test_fusion_refuses_bad_settings() -> None:
    with pytest.raises(InputError, match="fusion"):
        fuse([], [], FusionConfig(method="max"))
    with pytest.raises(InputError, match="0..1"):
        fuse([], [], FusionConfig(dense_weight=1.5))


# -- the analyzer (version 2): scripts, spans, folding ---------------------------------------------------------
def test_combining_marks_stay_inside_words() -> None:
    assert lexical.terms("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # version 1 (Python's re): ह, न, द, भ, ष
    assert lexical.terms("தமிழ் மொழி") == ["தமிழ்", "மொழி"]
    assert lexical.analyzer("1").words("हिन्दी") == ["ह", "न", "द"]


def test_cjk_runs_become_overlapping_bigrams_with_spans() -> None:
    assert lexical.ANALYZER.terms("项目预算") == [("项目", 0, 2), ("目预", 1, 3), ("预算", 2, 4)]
    assert lexical.terms("鍵") == ["键"]  # a run of one character is kept (Han folded to Simplified)
    assert set(lexical.query_terms("데이터베이스")) <= set(lexical.terms("데이터베이스는 매일 백업됩니다"))
    assert lexical.terms("API接口v2") == ["api", "接口", "v2", "v", "2"]  # scripts split inside a run


def test_traditional_and_simplified_and_widths_fold_together() -> None:
    assert lexical.terms("數據庫") == lexical.terms("数据库") == ["数据", "据库"]
    assert lexical.terms("ﾛｰﾃｰｼｮﾝ") == lexical.terms("ローテーション")  # half-width katakana by NFKC
    assert lexical.ANALYZER.terms("ｶﾞｽ") == [("ガス", 0, 3)]  # a half-width voiced mark joins its kana
    assert lexical.terms("ＡＢＣ") == ["abc"]


def test_thai_becomes_bigrams_of_grapheme_clusters() -> None:
    got = lexical.ANALYZER.terms("สำรองฐานข้อมูล")
    assert ("ฐา", 5, 7) in got and ("ข้อ", 8, 11) in got  # the tone mark stays on its consonant
    assert set(lexical.query_terms("ฐานข้อมูล")) <= {t for t, _, _ in got}


def test_english_terms_are_version_1s() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert len(lexical.terms(readme)) > 1000
    assert lexical.terms(readme) == lexical.analyzer("1").words(readme)


def test_an_unknown_analyzer_version_is_named_with_the_fix() -> None:
    with pytest.raises(StoreError, match="analyzer version '9'.*upgrade indexer"):
        lexical.analyzer("9")
    assert lexical.sparse_name() == f"bm25_v{lexical.LEXICAL_VERSION}" and lexical.known("1")


def test_snippet_marks_cjk_words_from_the_analyzers_spans() -> None:
    text = "今年的项目预算已经由财务总监批准了。"
    passage, marks = snippet(text, "预算")
    assert [passage[a:b] for a, b in marks] == ["预算"]
    passage, marks = snippet(text, "財務總監")  # Traditional query; overlapping bigram matches: one mark
    assert [passage[a:b] for a, b in marks] == ["财务总监"]
    assert passage_marks("第一行\n数据库는 데이터베이스는", "데이터베이스") == [(9, 15)]  # the particle unmarked
    assert matches("项目预算", "冰川") == []
    assert [m[:2] for m in matches("Mutations of the gene", "mutation gene")] == [(0, 9), (17, 21)]


def test_a_hangul_word_gives_itself_its_stem_and_a_compounds_bigrams() -> None:
    v3, v2 = lexical.ANALYZER, lexical.analyzer("2")
    assert v3.words("데이터베이스는") == ["데이터베이스는", "데이터베이스", "데이", "이터", "터베", "베이", "이스"]
    assert v3.words("줄을 표시합니다") == ["줄을", "표시합니다", "표시"]  # two syllables left: the stem alone
    assert v3.words("서버를") == ["서버를", "서버"]
    assert "데이터베이스" in v3.query_words("데이터베이스") and "서버" in v3.words("데이터베이스서버는")
    assert v2.words("데이터베이스는")[-1] == "스는"  # version 2 (its collections until rebuilt): bigrams


def test_words_are_stemmed_by_their_chunks_language_and_script() -> None:
    from indexer.core.languages import detect

    v3 = lexical.ANALYZER
    german = "Die neuen Häuser am Stadtrand wurden im letzten Sommer gebaut, see the running notes."
    assert detect(german) == "de"
    got = v3.words(german)
    assert "haus" in got and "die" not in got  # German stem, German stopword dropped
    russian = "Годовой бюджет проекта утвердили вчера на совете директоров."
    assert v3.words(russian)[:2] == ["годов", "бюджет"]
    assert "бюджет" in v3.words("The бюджета was approved", "en")  # a Cyrillic word in an English chunk: Russian
    ukrainian = "Річний бюджету проєкту затвердили вчора на раді директорів компанії."
    assert detect(ukrainian) == "uk" and "бюджету" in v3.words(ukrainian)  # no Ukrainian stemmer: as it is
    french = "Les bilans annuels sont validés chaque printemps par le directeur financier."
    assert "bilan" in v3.words(french) == v3.words(french, "en")  # French keeps English stems (measured)
    assert v3.words("short note", "") == ["short", "note"]  # unknown language: Latin words as English


def test_a_query_is_told_among_the_collections_languages_or_expanded() -> None:
    v3 = lexical.ANALYZER
    assert v3.query_words("Häuser", {"en"}) == ["häuser"]  # an English collection: English stems only
    assert v3.query_words("Häuser", {"en", "de"}) == ["häuser", "haus"]  # untold: both ways a chunk stems it
    assert v3.query_words("Die neuen Häuser am Stadtrand", {"en", "de"}) == ["neu", "haus", "stadtrand"]  # told
    assert v3.query_words("the of and") == []  # English stopwords give nothing, whatever the languages
    assert lexical.held({"en": 97, "de": 3, "la": 1}) == {"en", "de"} and lexical.held({}) is None
