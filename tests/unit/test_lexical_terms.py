"""The lexical tokenizer and the fusion of rankings (our own logic, no model)."""

from __future__ import annotations

import pytest

from indexer.errors import InputError
from indexer.search import lexical
from indexer.search.fusion import FusionConfig, fuse
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
    assert lexical.fts_query('say "hi" OR NEAR(x') == '"say" OR "hi" OR "near" OR "x"'
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
