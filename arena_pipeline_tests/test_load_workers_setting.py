"""ARENA_LOAD_WORKERS: how many processes a load uses, from the resource field or the variable, read at run time."""

import pytest

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.ingest.parallel import MAX_LOAD_WORKERS, MIN_PARALLEL_BYTES, load_workers
from arena_pipeline.core.ingest.sources import SourceError
from arena_pipeline.resources import Warehouse


def _manifest(total_bytes: int, files: int = 4) -> DumpManifest:
    shards = [ShardFile(path=f"/nowhere/{i}.parquet", name=f"{i}.parquet", size=total_bytes // files, rows=10)
              for i in range(files)]
    return DumpManifest(source_kind="local", source="local", requested_revision="r1", revision="r1", files=tuple(shards))


def test_automatic_is_one_process_for_a_small_dump_and_the_cores_for_a_large_one(monkeypatch):
    monkeypatch.delenv("ARENA_LOAD_WORKERS", raising=False)
    assert Warehouse().load_processes(_manifest(MIN_PARALLEL_BYTES - 4)) == 1
    assert Warehouse().load_processes(_manifest(MIN_PARALLEL_BYTES * 4)) == load_workers()


def test_the_variable_and_the_field_set_it_whatever_the_size(monkeypatch):
    monkeypatch.setenv("ARENA_LOAD_WORKERS", "3")
    assert Warehouse().load_processes(_manifest(1000)) == 3
    assert Warehouse(load_workers=1).load_processes(_manifest(MIN_PARALLEL_BYTES * 4)) == 1


@pytest.mark.parametrize("value", ["-1", "two", str(MAX_LOAD_WORKERS + 1)])
def test_a_value_out_of_range_fails_the_run_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("ARENA_LOAD_WORKERS", value)
    with pytest.raises(SourceError, match="ARENA_LOAD_WORKERS") as caught:
        Warehouse().load_processes(_manifest(1000))
    assert repr(value) in str(caught.value)
