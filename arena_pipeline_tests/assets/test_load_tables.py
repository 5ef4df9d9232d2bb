"""The load's tables are declared once (issue 46 item 1): ``LOAD_TABLES`` in core/ingest/tables.py makes the load
step's outputs, keys, catalogue entries and the loader's targets, and a new table of the load is one more entry
(``toy_load_table.py``)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

import arena_pipeline
from arena_pipeline.assets.ingest import TABLE_KEYS, flat_tables
from arena_pipeline.constants import BATTLES_TABLE, SCHEMA
from arena_pipeline.core.ingest.load import load_tables
from arena_pipeline.core.ingest.tables import LOAD_TABLES, LoadTable
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.records import VERSIONS
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.definitions import CATALOG, pipeline_assets
from arena_pipeline_tests import toy_load_table
from arena_pipeline_tests.support.materialize import SAMPLE_RUN_CONFIG, materialize, sample_resources, work_file
from arena_pipeline_tests.toy_load_table import TOY_LOAD

LOAD_NAMES = [table.name for table in LOAD_TABLES]


@pytest.fixture(scope="module")
def toy():
    return pipeline_assets(toy_load_table)


def test_the_step_makes_the_declared_tables_in_order():
    assert list(flat_tables.keys_by_output_name) == LOAD_NAMES == list(TABLE_KEYS) == list(load_tables())
    assert next(g for g in CATALOG.built_together if LOAD_NAMES[0] in g) == tuple(LOAD_NAMES)
    assert {name: CATALOG.specs[name] for name in LOAD_NAMES} == {table.name: table.spec for table in LOAD_TABLES}
    assert {name for name in LOAD_NAMES if CATALOG.specs[name].checked} <= set(CATALOG.checked)


def test_a_table_is_made_one_way():
    with pytest.raises(ValueError, match="either"):
        LoadTable("neither", {}, TableSpec(), "ingest", "no rows")


def test_the_toy_table_is_named_only_in_its_module():
    package = Path(arena_pipeline.__file__).parent
    assert not [p for p in package.rglob("*.py") if TOY_LOAD in p.read_text(encoding="utf-8")]


def test_one_entry_adds_a_table_to_the_load_and_to_the_catalogue(toy):
    assets, catalog = toy
    assert sum(1 for node in assets if dg.AssetKey([SCHEMA, BATTLES_TABLE]) in node.keys) == 1  # replaced, not twice
    assert next(g for g in catalog.built_together if LOAD_NAMES[0] in g) == (*LOAD_NAMES, TOY_LOAD)
    assert TOY_LOAD in catalog.published and catalog.specs[TOY_LOAD].file_view


def test_the_toy_table_is_loaded_with_the_others_versioned_and_published(toy, tmp_path):
    assets, _ = toy
    result = materialize(sample_resources(tmp_path), assets=assets, run_config=SAMPLE_RUN_CONFIG)
    assert result.success
    with connect_warehouse(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        published = pl.from_arrow(con.execute(f"SELECT * FROM {SCHEMA}.{TOY_LOAD} ORDER BY battle_id").arrow())
        battles = pl.from_arrow(con.execute(
            f"SELECT id AS battle_id, concat(model_a_canonical, ' vs ', model_b_canonical) AS models "
            f"FROM {SCHEMA}.{BATTLES_TABLE} ORDER BY id").arrow())
    assert published.select(battles.columns).equals(battles) and battles.height == 100
    with duckdb.connect(str(work_file(tmp_path / "warehouse.duckdb")), read_only=True) as con:
        versions = con.execute(f"SELECT table_name, build_id, rows FROM {VERSIONS} WHERE table_name IN (?, ?) "
                               "ORDER BY table_name", [BATTLES_TABLE, TOY_LOAD]).fetchall()
    assert [(name, rows) for name, _, rows in versions] == [(BATTLES_TABLE, 100), (TOY_LOAD, 100)]
    assert versions[0][1] == versions[1][1]  # one build made both
