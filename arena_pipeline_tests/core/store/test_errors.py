"""Errors say their cause: out of memory and a full disk reach the user as their own line with the setting
to change, not as "Current transaction is aborted"; the advice for a damaged work file works when followed."""

from __future__ import annotations

import errno
import re
import subprocess

import duckdb
import pytest

from arena_pipeline.core.store.errors import ResourceLimitError, explain
from arena_pipeline.resources import Warehouse
from arena_pipeline_tests.support.materialize import copy_warehouse, run_sample, work_file


def test_out_of_memory_in_a_transaction_is_named_with_the_setting_to_change(tmp_path):
    warehouse = Warehouse(database=str(tmp_path / "warehouse.duckdb"), memory_limit="20MB")
    with warehouse.get_connection() as con:
        con.execute("CREATE SCHEMA arena_versions")
        con.execute("CREATE TABLE arena_versions.t AS SELECT i, repeat('x', 1000) || i::VARCHAR AS s FROM range(300000) r(i)")
    with pytest.raises(ResourceLimitError) as raised, warehouse.get_connection() as con:
        con.execute("SET temp_directory = ''")  # nowhere to spill
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("CREATE TABLE u AS SELECT s, count(*) FROM arena_versions.t GROUP BY s ORDER BY s")
        finally:  # what a step does after a failure: the transaction is aborted, this fails too
            con.execute("SET preserve_insertion_order = false")
    message = str(raised.value)
    assert message.startswith("DuckDB ran out of memory (Out of Memory Error")
    assert "memory_limit 20MB" in message and "\n" not in message and "transaction is aborted" not in message


@pytest.mark.parametrize("failure", [
    OSError(errno.ENOSPC, "No space left on device"),
    duckdb.IOException('IO Error: Could not write all bytes to file "x.parquet": No space left on device'),
])
def test_a_full_disk_is_named_with_the_folders_to_free(tmp_path, failure):
    warehouse = Warehouse(database=str(tmp_path / "warehouse.duckdb"))
    with pytest.raises(ResourceLimitError) as raised, warehouse.get_connection() as con:
        try:
            raise failure
        except (OSError, duckdb.Error):
            con.execute("SELECT * FROM no_such_table")  # any later error on the connection
    message = str(raised.value)
    assert message.startswith("the disk is full (") and str(warehouse.store_path()) in message
    assert explain(ValueError("no"), memory_limit=None, temp_directory=None, store="x") is None


@pytest.mark.slow
def test_the_advice_for_a_damaged_work_file_works_when_followed(sample_run, tmp_path):
    warehouse = copy_warehouse(sample_run.root / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    work = work_file(warehouse)
    with open(work, "r+b") as fh:
        fh.truncate(work.stat().st_size // 2)
    failed = run_sample(tmp_path)
    assert not failed.success
    (failure,) = [event for event in failed.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.message
    assert f"the pipeline's work file {work} is damaged" in message
    command = re.search(r"`(.+?)`", message).group(1)
    moves = command.split(" && ARENA_WAREHOUSE=")[0]
    assert moves == f"mv {work} {work}.damaged && mv {warehouse} {warehouse}.old"
    subprocess.run(moves, shell=True, check=True)  # the advice's moves; then the run it gives
    assert run_sample(tmp_path).success
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM arena.leaderboard").fetchone()[0] > 0
    assert (tmp_path / "warehouse.duckdb.old").is_file() and work.with_name("work.duckdb.damaged").is_file()
