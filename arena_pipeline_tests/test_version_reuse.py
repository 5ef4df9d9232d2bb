"""A re-run of an unchanged dump reuses the heavy table versions: no load, no copy, and no new publication (the
live one shows the same); a re-run with another ranking setting publishes, its heavy tables still reused.

Versions are keyed by what they are made from (``core.store.versions.inputs_key``: the revision, the
settings, the package's code and the inputs' keys); a version with the key of an existing one is a
view of it, and retention keeps a table as long as a kept or running version is a view of it.
"""

from __future__ import annotations

import json

import pytest

from arena_pipeline.core.store.versions import reused_versions
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import ModelCatalog, Warehouse
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import work_file
from arena_pipeline_tests.support.publication_support import (
    Setup,
    assert_live_is_one_publication,
    fingerprint,
    publications,
    query,
)

ROWS = 200
HEAVY = ("battles", "messages", "context_messages", "quarantine", "preference_pairs", "battle_categories")


def _live_tables(setup: Setup) -> dict[str, str]:
    return json.loads(query(setup.warehouse, "SELECT tables FROM arena.publications "
                                             "ORDER BY publication_id DESC LIMIT 1")[0][0])


def _base_tables(setup: Setup) -> set[str]:
    """The versions holding rows: DuckDB tables of the work file, and versions stored as Parquet files."""
    return {name for (name,) in query(work_file(setup.warehouse), "SELECT table_name FROM duckdb_tables() "
                                                       "WHERE schema_name = 'arena_versions' UNION ALL "
                                                       "SELECT version FROM arena_versions.versions "
                                                       "WHERE files IS NOT NULL AND same_as IS NULL")}


def _same_as(setup: Setup) -> dict[str, str | None]:
    return dict(query(work_file(setup.warehouse), "SELECT version, same_as FROM arena_versions.versions"))


@pytest.mark.slow
def test_unchanged_rerun_reuses_the_heavy_versions_and_retention_keeps_what_they_show(tmp_path):
    write_dump(tmp_path / "dump", n_rows=ROWS, n_shards=2, seed=5)
    setup = Setup(tmp_path, tmp_path / "dump", tmp_path / "warehouse.duckdb")
    keep_one = {"warehouse": Warehouse(database=str(setup.warehouse), retention=1)}
    assert setup.run(**keep_one).success
    first = _live_tables(setup)
    tables_before = _base_tables(setup)
    seen = fingerprint(setup.warehouse)

    result = setup.run(**keep_one)  # unchanged: publication 1 stays live (rule 23), nothing new is published
    assert result.success
    assert [p[0] for p in publications(setup.warehouse)] == [1]
    rerun = dict(query(work_file(setup.warehouse), "SELECT table_name, version FROM arena_versions.versions "
                                                   "WHERE build_id = ?", [result.run_id]))
    same_as = _same_as(setup)
    for table in HEAVY:
        assert same_as[rerun[table]] == first[table], table  # a view of the first run's table
    assert {t for t in _base_tables(setup) if t.split("__")[0] in HEAVY} == {
        t for t in tables_before if t.split("__")[0] in HEAVY}
    assert fingerprint(setup.warehouse) == seen  # what readers see is what they saw

    result = setup.run(rank={"bootstrap_rounds": 6}, **keep_one)  # a ranking setting changed: a new publication
    assert result.success
    second = _live_tables(setup)
    assert [p[0] for p in publications(setup.warehouse)] == [1, 2]
    same_as = _same_as(setup)
    for table in HEAVY:
        assert second[table] != first[table]
        assert same_as[second[table]] == first[table], table  # a view of the first run's table
    # no heavy table was written again, and retention (keeping one publication) kept the ones shown
    heavy_now = {t for t in _base_tables(setup) if t.split("__")[0] in HEAVY}
    assert heavy_now == {t for t in tables_before if t.split("__")[0] in HEAVY}
    assert {first[t] for t in HEAVY} <= heavy_now
    now = fingerprint(setup.warehouse)
    for table in HEAVY:  # the same rows, read through the new versions
        assert now[table][1:] == seen[table][1:], table
    flat = [e for e in result.get_asset_materialization_events()
            if e.asset_key.to_user_string() == "arena/battles"]
    assert flat[0].materialization.metadata["reused"].value == first["battles"]  # the version it is a view of
    # the gate's line names them reused (nothing read or written), as flat_tables' does, not rebuilt (issue 37)
    with connect_warehouse(str(work_file(setup.warehouse)), read_only=True) as con:
        reused = {t for t, v in second.items() if v in reused_versions(con, second.values())}
    assert reused >= set(HEAVY) and "leaderboard" not in reused
    assert_live_is_one_publication(setup.warehouse)

    # another alias table changes what the flat tables hold: loaded again, not reused
    aliases = tmp_path / "aliases.csv"
    aliases.write_text("alias,canonical\nllama-4-maverick,deepseek-v3-0324\n", encoding="utf-8")
    assert setup.run(model_catalog=ModelCatalog(aliases_path=str(aliases)), **keep_one).success
    third = _live_tables(setup)
    same_as = _same_as(setup)
    for table in HEAVY:
        assert same_as[third[table]] is None and third[table] in _base_tables(setup), table
    # the first run's tables are shown by no kept publication any more: retention dropped them,
    # views and tables alike
    names = {n for (n,) in query(work_file(setup.warehouse), "SELECT table_name FROM duckdb_tables() WHERE schema_name = "
                                                  "'arena_versions' UNION ALL SELECT view_name FROM duckdb_views() "
                                                  "WHERE schema_name = 'arena_versions'")}
    assert not ({first[t] for t in HEAVY} | {second[t] for t in HEAVY}) & names
    # every table or view of a version's name is a registered version: the loads left no side table behind
    assert {n for n in names if "__" in n} <= set(_same_as(setup))
    assert_live_is_one_publication(setup.warehouse)
