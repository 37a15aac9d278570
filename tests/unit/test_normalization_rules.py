import numpy as np
import pytest

from indexer.core.normalization import (
    Normalization,
    cache_tag,
    check_unit_length,
    choose_normalization,
    normalization_name,
    normalize,
)
from indexer.errors import ConfigError, InputError, StateError


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclid"])
def test_cosine_models_are_l2_normalized_for_every_metric_that_can_rank_by_cosine(metric):
    assert choose_normalization("cosine", metric) is Normalization.L2


def test_dot_models_keep_magnitudes():
    assert choose_normalization("dot", "dot") is Normalization.NONE


def test_euclidean_models_keep_magnitudes():
    assert choose_normalization("euclidean", "euclid") is Normalization.NONE


@pytest.mark.parametrize(
    ("similarity", "metric", "hint"),
    [("cosine", "manhattan", "cosine or dot or euclid"), ("dot", "cosine", "dot"), ("euclidean", "dot", "euclid")],
)
def test_incompatible_pairs_are_refused_with_the_metrics_that_fit(similarity, metric, hint):
    with pytest.raises(ConfigError, match=f"use --metric {hint}"):
        choose_normalization(similarity, metric)


def test_unknown_values_are_config_errors():
    with pytest.raises(ConfigError):
        choose_normalization("jaccard", "cosine")


def test_names_and_the_integer_codes_old_state_databases_hold():
    assert normalization_name(Normalization.L2) == "l2" and str(Normalization.NONE) == "none"
    # version 0.1 stored llama.cpp's integer modes: they still read as the project's values
    assert Normalization.parse(2) is Normalization.L2 and Normalization.parse(-1) is Normalization.NONE
    assert Normalization.parse("2") is Normalization.L2 and Normalization.parse("L2") is Normalization.L2
    with pytest.raises(StateError, match="re-index"):
        Normalization.parse(6)
    # vector-cache keys keep the form version 0.1 wrote, so cached vectors stay valid
    assert cache_tag(Normalization.L2) == "2" and cache_tag(Normalization.NONE) == "-1"


def test_normalize_and_the_unit_length_check():
    vectors = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    unit = normalize(vectors, Normalization.L2)
    np.testing.assert_allclose(unit, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    np.testing.assert_array_equal(normalize(vectors, Normalization.NONE), vectors)
    check_unit_length(unit[0], "v", "collection 'c'")
    check_unit_length(unit[1], "v", "collection 'c'")  # a zero vector (empty text) passes
    with pytest.raises(InputError, match=r"length 5 .*Normalization\.L2"):
        check_unit_length(vectors[0], "v", "collection 'c'")
