"""A run refuses, at its first step and before the download, a readers' file its store did not publish."""

from __future__ import annotations

import duckdb

from arena_pipeline_tests.support.materialize import copy_warehouse, run_sample


def test_a_users_database_at_ARENA_WAREHOUSE_beside_an_existing_store_is_never_replaced(sample_run, tmp_path):
    warehouse = copy_warehouse(sample_run.root / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    warehouse.unlink()  # ARENA_WAREHOUSE now points at the user's own analysis database; the store stays
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE my_results AS SELECT 42 AS answer")
        con.execute("CREATE SCHEMA notes; CREATE TABLE notes.t AS SELECT 'keep me' AS note")
    before = warehouse.read_bytes()
    result = run_sample(tmp_path)
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    assert failure.step_key == "raw_dump"  # the first step, before the fetch
    message = failure.step_failure_data.error.message
    assert str(warehouse) in message and "did not publish" in message and "nothing was written" in message
    assert warehouse.read_bytes() == before
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT answer FROM my_results").fetchall() == [(42,)]
        assert con.execute("SELECT note FROM notes.t").fetchall() == [("keep me",)]
