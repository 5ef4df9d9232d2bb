"""A new published table is one asset in one module (issue 35, item 1): ``toy_table.py`` declares
``arena.toy_votes`` and nothing else changes; the run versions it, the gate publishes it, the export
writes it and the lineage knows what it is computed from."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

import arena_pipeline
from arena_pipeline.cli import EXIT_OK, main
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.definitions import pipeline_assets
from arena_pipeline.export import export_tables, exported_by_publication
from arena_pipeline_tests import toy_table
from arena_pipeline_tests.support.materialize import copy_warehouse, materialize, sample_resources, work_file
from arena_pipeline_tests.toy_table import TOY

#: the toy table and the gate (the report with it): a partial run on the live publication of the sample
SELECTION = [f"arena/{TOY}", "publication_gate", "leaderboard_report"]


@pytest.fixture(scope="module")
def toy():
    return pipeline_assets(toy_table)


def _versions(warehouse: Path) -> dict[str, tuple]:
    with connect_warehouse(str(work_file(warehouse)), read_only=True) as con:
        rows = con.execute("SELECT version, build_id, inputs_key, same_as FROM arena_versions.versions "
                           "WHERE table_name = ?", [TOY]).fetchall()
    return {version: rest for version, *rest in rows}


def test_the_module_is_the_only_place_the_table_is_named():
    package = Path(arena_pipeline.__file__).parent
    assert not [p for p in package.rglob("*.py") if TOY in p.read_text(encoding="utf-8")]


def test_the_catalogue_derives_what_the_toy_table_is(toy):
    assets, catalog = toy
    assert TOY in catalog.published and TOY in catalog.exported
    assert catalog.derived_from[TOY] == ("battles", "battle_categories")  # through battle_categories
    assert TOY not in catalog.file_tables | catalog.heavy and not any(TOY in g for g in catalog.built_together)
    gate = next(a for a in assets if dg.AssetKey("publication_gate") in a.keys)
    assert dg.AssetKey(["arena", TOY]) in gate.asset_deps[dg.AssetKey("publication_gate")]


def test_a_table_in_one_module_is_versioned_published_exported_and_in_the_lineage(sample_run, toy, tmp_path):
    assets, catalog = toy
    warehouse = copy_warehouse(sample_run.warehouse, tmp_path / "warehouse.duckdb")
    resources = sample_resources(tmp_path)
    first = materialize(resources, assets=assets, selection=SELECTION)
    assert first.success
    # versioned: this run's version, keyed by its input (battle_categories, from the asset graph)
    versions = _versions(warehouse)
    assert [(build, same_as) for build, _, same_as in versions.values()] == [(first.run_id, None)]
    (own, (_, key, _)), = versions.items()
    assert key is not None
    # published: a view of the readers' snapshot, in the publication's tables
    with connect_warehouse(str(warehouse), read_only=True) as con:
        published = pl.from_arrow(con.execute(f"SELECT * FROM arena.{TOY} ORDER BY category").arrow())
        tables = json.loads(con.execute("SELECT tables FROM arena.publications ORDER BY publication_id DESC "
                                        "LIMIT 1").fetchone()[0])
        categories = con.execute("SELECT category, count(*) FROM arena.battle_categories GROUP BY 1 "
                                 "ORDER BY 1").fetchall()
        assert con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?",
                           [TOY]).fetchone() == ("VIEW",)
    assert tables[TOY] == own
    assert published.select("category", "battles").rows() == categories
    assert published.get_column("dump_revision").unique().to_list() == [tables_revision(warehouse)]
    # exported: the catalogue's export writes it with the rest
    with connect_warehouse(str(warehouse), read_only=True) as con:
        written, _, _ = export_tables(con, tmp_path / "export", "parquet", str(warehouse), catalog.exported)
    assert written[TOY]["rows"] == len(categories)
    assert pl.read_parquet(tmp_path / "export" / f"{TOY}.parquet").equals(published)
    # the publication records what is exported: the CLI exports the toy table without the pipeline knowing it
    with connect_warehouse(str(warehouse), read_only=True) as con:
        assert exported_by_publication(con) == catalog.exported
    assert main(["export", "--warehouse", str(warehouse), str(tmp_path / "cli")]) == EXIT_OK
    assert pl.read_parquet(tmp_path / "cli" / f"{TOY}.parquet").equals(published)
    # reused: the same input version and code again is the earlier version, as a view
    again = materialize(resources, assets=assets, selection=SELECTION)
    assert again.success
    reused = {v: rest for v, rest in _versions(warehouse).items() if v != own}
    assert [(build, same_as) for build, _, same_as in reused.values()] == [(again.run_id, own)]
    # in the lineage: battle_categories rebuilt without the toy table is refused by the gate
    stale = materialize(resources, assets=assets, selection=["arena/battle_categories", "publication_gate"])
    assert not stale.success
    failure = next(e for e in stale.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    refusal = str(failure.event_specific_data)
    assert f"arena.{TOY} is computed from battle_categories" in refusal and "include arena/" in refusal


def tables_revision(warehouse: Path) -> str:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return con.execute("SELECT revision FROM arena.publications ORDER BY publication_id DESC LIMIT 1").fetchone()[0]
