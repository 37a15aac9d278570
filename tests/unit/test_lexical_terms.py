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


def test_rrf_rewards_agreement() -> None:
    fused = fuse(_hits("a", "b", "c"), _hits("c", "b", "d"), FusionConfig(method="rrf", dense_weight=0.5))
    assert [h.id for h in fused][:2] == ["b", "c"] or [h.id for h in fused][:2] == ["c", "b"]
    assert {h.id for h in fused} == {"a", "b", "c", "d"}


def test_score_fusion_weights_the_sides() -> None:
    dense, lex = _hits("a", "b", "c"), _hits("c", "d", "e")
    assert fuse(dense, lex, FusionConfig(method="score", dense_weight=1.0))[0].id == "a"
    assert fuse(dense, lex, FusionConfig(method="score", dense_weight=0.0))[0].id == "c"
    both = fuse(dense, lex, FusionConfig(method="score", dense_weight=0.5))
    assert both[0].id in {"a", "c"} and len(both) == 5


def test_fusion_refuses_bad_settings() -> None:
    with pytest.raises(InputError, match="fusion"):
        fuse([], [], FusionConfig(method="max"))
    with pytest.raises(InputError, match="0..1"):
        fuse([], [], FusionConfig(dense_weight=1.5))
