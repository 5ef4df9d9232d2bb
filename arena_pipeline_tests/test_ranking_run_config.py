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


def test_size_settings_have_an_upper_bound_with_the_memory_in_the_message(golden):
    from arena_pipeline.core.ranking.types import MAX_BOOTSTRAP_ROUNDS, MAX_STYLE_BOOTSTRAP_ROUNDS

    assert RankingRunConfig(bootstrap_rounds=MAX_BOOTSTRAP_ROUNDS,
                            style_bootstrap_rounds=MAX_STYLE_BOOTSTRAP_ROUNDS).bootstrap_rounds == MAX_BOOTSTRAP_ROUNDS
    with pytest.raises(ValidationError) as caught:
        RankingRunConfig(bootstrap_rounds=10**6)
    # 10^6 rounds: ~148 KB a round at the 140k dump (measured) -> ~148 GB
    (error,) = caught.value.errors()
    assert error["loc"] == ("bootstrap_rounds",) and f"at most {MAX_BOOTSTRAP_ROUNDS:,}" in error["msg"]
    golden.check("settings", "too many bootstrap rounds", error["msg"])
    with pytest.raises(ValidationError, match="bootstrap_rounds"):
        RankingRunConfig(bootstrap_rounds=MAX_BOOTSTRAP_ROUNDS + 1)
    with pytest.raises(ValidationError, match=f"at most {MAX_STYLE_BOOTSTRAP_ROUNDS:,}"):
        RankingRunConfig(style_bootstrap_rounds=MAX_STYLE_BOOTSTRAP_ROUNDS + 1)


def test_run_config_check_is_one_line_naming_each_bad_field(golden):
    from arena_pipeline.assets.run_config import check_ranking_run_config

    assert check_ranking_run_config(None).bootstrap_rounds == 100
    assert check_ranking_run_config({"ops": {"raw_dump": {"config": {}}}}).bootstrap_rounds == 100
    with pytest.raises(ValueError) as caught:
        check_ranking_run_config({"ops": {"rankings": {"config": {"bootstrap_rounds": 10**6, "seed": -1}}}})
    message = str(caught.value)
    assert "\n" not in message and "bootstrap_rounds: " in message and "seed: " in message
    golden.check("settings", "a run config refused at launch", message)
    with pytest.raises(ValueError, match="needs bootstrap_rounds > 0"):  # RankingConfig's own rules, at launch too
        check_ranking_run_config({"ops": {"rankings": {"config": {"primary_interval": "bootstrap",
                                                                  "bootstrap_rounds": 0}}}})


def test_a_run_asking_for_too_many_rounds_fails_at_its_first_step(tmp_path, golden):
    """Checked in raw_dump, before the fetch and the load (it failed in rankings, after them, or ran out
    of memory there)."""
    from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse
    from arena_pipeline_dev.fixtures import write_dump
    from arena_pipeline_tests.support.materialize import materialize

    write_dump(tmp_path / "dump", n_rows=20, n_shards=1, seed=3)
    warehouse = tmp_path / "warehouse.duckdb"
    result = materialize(
        {"dump_source": DumpSource(source=str(tmp_path / "dump"), cache_dir=str(tmp_path / "cache")),
         "warehouse": Warehouse(database=str(warehouse)),
         "report_settings": ReportSettings(report_path=str(tmp_path / "report" / "index.html"))},
        run_config={"ops": {"rankings": {"config": {"bootstrap_rounds": 10**6}}}})
    assert not result.success
    (failure,) = result.get_step_failure_events()
    assert failure.step_key == "raw_dump"
    description = failure.step_failure_data.user_failure_data.description
    golden.check("settings", "a run config refused at the first step", description)
    assert not result.get_asset_materialization_events()
    assert not warehouse.exists()  # nothing fetched, no build started


def test_the_launchpad_shows_each_run_setting_as_core_declares_it():
    """The run configuration restates nothing: each field's type, default and description come from
    RankingConfig, and the Dagster config schema (what the launchpad shows) carries them."""
    from arena_pipeline.core.ranking import RUN_SETTINGS, RankingConfig

    fields = RankingRunConfig.to_config_schema().as_field().config_type.fields
    assert list(fields) == list(RUN_SETTINGS)
    for name in RUN_SETTINGS:
        core = RankingConfig.__pydantic_fields__[name]
        assert fields[name].description == core.description and core.description
        default = core.default
        assert fields[name].default_value == (list(default) if isinstance(default, tuple) else default)
    assert fields["anchor_models"].default_value == ["llama-3.3-70b-instruct", "gemma-3-27b-it", "deepseek-v3-0324"]


def test_recorded_settings_read_back_as_the_one_type():
    """A publication records dataclasses.asdict(RankingConfig) (JSON: tuples as lists); reading it back
    gives the same RankingConfig, an earlier record's missing keys take their default, unknown keys are
    ignored, and the run configuration that ranks the same way is its run settings."""
    import dataclasses
    import json

    from arena_pipeline.assets.run_config import run_config_of
    from arena_pipeline.core.ranking import RUN_SETTINGS, RankingConfig

    config = RankingConfig(ties="drop", display_min_battles=0, anchor_models=("a", "b"), tol=1e-9)
    recorded = json.loads(json.dumps(dataclasses.asdict(config)))
    assert RankingConfig.from_settings(recorded) == config
    assert RankingConfig.from_settings({"ties": "drop", "retired_setting": 1}) == RankingConfig(ties="drop")
    with pytest.raises(ValidationError, match="display_min_battles"):
        RankingConfig.from_settings({"display_min_battles": -1})
    run = run_config_of(config)
    assert list(run) == list(RUN_SETTINGS) and run["anchor_models"] == ["a", "b"] and "tol" not in run
    assert RankingRunConfig(**run).ranking_config() == dataclasses.replace(config, tol=1e-8)
