"""A run killed between its COMMIT and its rename never blocks the sensor or the schedule: their next tick
brings the readers' snapshot level with the work file (the publication the run made is then live)."""

from __future__ import annotations

import dagster as dg
import pytest

from arena_pipeline.core.store.snapshot import StagedSnapshot
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline.schedules import nightly_refresh
from arena_pipeline.sensors import new_dump_sensor
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.publication_support import held_by_another_process
from arena_pipeline_tests.support.small_store import look, small_store
from arena_pipeline_tests.support.ticks import tick


def _killed_before_the_rename(path, monkeypatch) -> None:
    """Publication 1 in the snapshot; publication 2 committed in the work file, its rename never made."""
    store = small_store(path)
    try:
        store.publish("1" * 40)
        with monkeypatch.context() as patch:
            patch.setattr(StagedSnapshot, "swap", lambda self: (_ for _ in ()).throw(KeyboardInterrupt()))
            with pytest.raises(KeyboardInterrupt):
                store.publish("2" * 40)
    finally:
        store.close()


@pytest.mark.parametrize("definition", [new_dump_sensor, nightly_refresh], ids=["sensor", "schedule"])
def test_a_tick_brings_the_snapshot_of_a_run_killed_before_its_rename_level(tmp_path, monkeypatch, definition):
    path = tmp_path / "warehouse.duckdb"
    _killed_before_the_rename(path, monkeypatch)
    with connect_warehouse(str(path), read_only=True) as con:
        assert look(con) == "1 run-1"
    write_dump(tmp_path / "dump", 6, 1)
    source = DumpSource(source=str(tmp_path / "dump"))
    resources = {"dump_source": source, "warehouse": Warehouse(database=str(path))}
    with dg.instance_for_test() as instance:
        with held_by_another_process(path.parent / "warehouse.pipeline" / "work.duckdb"):
            tick(definition, instance, resources, source.latest_revision())  # a live run holds it: left alone
        with connect_warehouse(str(path), read_only=True) as con:
            assert look(con) == "1 run-1"
        tick(definition, instance, resources, source.latest_revision())
    with connect_warehouse(str(path), read_only=True) as con:
        assert look(con) == "2 run-2"  # what the killed run published is live for readers
    assert Warehouse(database=str(path)).bring_readers_level() is None  # level: nothing to do
