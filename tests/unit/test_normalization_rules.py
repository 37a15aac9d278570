import pytest

from indexer.errors import ConfigError
from indexer.normalization import NORM_L2, NORM_NONE, choose_normalization, normalization_name


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclid"])
def test_cosine_models_are_l2_normalized_for_every_metric_that_can_rank_by_cosine(metric):
    assert choose_normalization("cosine", metric) == NORM_L2


def test_dot_models_keep_magnitudes():
    assert choose_normalization("dot", "dot") == NORM_NONE


def test_euclidean_models_keep_magnitudes():
    assert choose_normalization("euclidean", "euclid") == NORM_NONE


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


def test_names():
    assert normalization_name(2) == "l2" and normalization_name(-1) == "none" and normalization_name(6) == "p6"
