"""The fit's tables are declared once (issue 46 item 1): ``FIT_TABLES`` in assets/rankings.py makes the rankings
step's outputs, keys and catalogue entries, and a new table of the fit is one more entry (``toy_fit_table.py``)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import pytest

import arena_pipeline
from arena_pipeline.assets.rankings import FIT_TABLES, rankings
from arena_pipeline.constants import SCHEMA
from arena_pipeline.definitions import CATALOG, pipeline_assets
from arena_pipeline_tests import toy_fit_table
from arena_pipeline_tests.support.materialize import copy_warehouse, materialize, sample_resources
from arena_pipeline_tests.toy_fit_table import TOY_FIT

FIT_NAMES = [table.name for table in FIT_TABLES]


@pytest.fixture(scope="module")
def toy():
    return pipeline_assets(toy_fit_table)


def test_the_step_makes_the_declared_tables_in_order():
    assert list(rankings.keys_by_output_name) == FIT_NAMES
    assert {key.path[-1] for key in rankings.keys_by_output_name.values()} == set(FIT_NAMES)
    assert next(g for g in CATALOG.built_together if FIT_NAMES[0] in g) == tuple(FIT_NAMES)
    assert {name: CATALOG.specs[name] for name in FIT_NAMES} == {table.name: table.spec for table in FIT_TABLES}


def test_the_toy_table_is_named_only_in_its_module():
    package = Path(arena_pipeline.__file__).parent
    assert not [p for p in package.rglob("*.py") if TOY_FIT in p.read_text(encoding="utf-8")]


def test_one_entry_adds_a_table_to_the_fit_and_to_the_catalogue(toy):
    assets, catalog = toy
    assert sum(1 for node in assets if dg.AssetKey([SCHEMA, FIT_NAMES[0]]) in node.keys) == 1  # replaced, not twice
    assert next(g for g in catalog.built_together if FIT_NAMES[0] in g) == (*FIT_NAMES, TOY_FIT)
    assert TOY_FIT in catalog.published and TOY_FIT in catalog.exported
    assert catalog.derived_from[TOY_FIT] == ("battles", "battle_categories")


def test_the_toy_table_is_fitted_with_the_others_and_published(sample_run, toy, tmp_path):
    assets, _ = toy
    warehouse = copy_warehouse(sample_run.warehouse, tmp_path / "warehouse.duckdb")
    fit = next(node for node in assets if dg.AssetKey([SCHEMA, TOY_FIT]) in node.keys)
    selection = dg.AssetSelection.assets(fit).downstream()  # what the rerank_job runs
    result = materialize(sample_resources(tmp_path), assets=assets, selection=selection,
                         run_config={"ops": {"rankings": {"config": {"min_battles": 3, "bootstrap_rounds": 5}}}})
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as con:
        published = con.execute(f"SELECT category, method, models FROM {SCHEMA}.{TOY_FIT} "
                                "ORDER BY category, method").fetchall()
        boards = con.execute(f"SELECT category, method, count(*) FROM {SCHEMA}.leaderboard "
                             "GROUP BY ALL ORDER BY category, method").fetchall()
    assert published == boards and boards
