"""RankingRunConfig: launch-time validation of the ranking settings and their mapping to RankingConfig."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from arena_pipeline.assets.rankings import RankingRunConfig


@pytest.mark.parametrize(
    "bad",
    [
        {"bootstrap_rounds": -1},
        {"min_battles": 0},
        {"display_min_battles": -5},
        {"seed": -1},
        {"anchor_rating": math.inf},
        {"anchor_rating": math.nan},
        {"anchor_rating": 1e9},
        {"style_l2": -1.0},
        {"primary_interval": "percentile"},
    ],
)
def test_bad_values_are_rejected_at_launch(bad):
    with pytest.raises(ValidationError):
        RankingRunConfig(**bad)


def test_values_reach_the_ranking_config():
    config = RankingRunConfig(
        display_min_battles=50, primary_interval="bootstrap", bootstrap_rounds=10, seed=3
    ).ranking_config()
    assert config.display_min_battles == 50
    assert config.primary_interval == "bootstrap"
    assert (config.bootstrap_rounds, config.seed, config.min_battles) == (10, 3, 1)
    default = RankingRunConfig().ranking_config()
    assert default.display_min_battles == 301 and default.primary_interval == "sandwich"


def test_reference_models_are_configurable():
    from arena_pipeline.core.ranking import REFERENCE_MODELS

    assert RankingRunConfig().ranking_config().anchor_models == REFERENCE_MODELS
    assert RankingRunConfig(anchor_models=[]).ranking_config().anchor_models == ()
    assert RankingRunConfig(anchor_models=["x", "y"]).ranking_config().anchor_models == ("x", "y")
