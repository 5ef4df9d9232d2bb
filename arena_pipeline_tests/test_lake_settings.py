"""The DuckLake is a publication target only when ARENA_DUCKLAKE is set; its settings, and a password never shown."""

from __future__ import annotations

from arena_pipeline.core.store.lake import LakeTarget, _redacted, stored_name
from arena_pipeline.core.store.targets import PublicationTarget
from arena_pipeline.resources import Warehouse


def test_the_lake_is_a_target_only_when_arena_ducklake_is_set(tmp_path, monkeypatch):
    warehouse = Warehouse(database=str(tmp_path / "warehouse.duckdb"), retention=3)
    assert [target.name for target in warehouse.targets()] == ["snapshot"]  # unset: nothing changes
    monkeypatch.setenv("ARENA_DUCKLAKE", "ducklake:postgres:dbname=arena host=db.example.org user=arena")
    monkeypatch.setenv("ARENA_DUCKLAKE_DATA_PATH", "s3://bucket/arena/")
    snapshot, lake = warehouse.targets(["battles"])
    assert isinstance(lake, LakeTarget) and isinstance(lake, PublicationTarget) and lake.name == "ducklake"
    assert (lake.attach, lake.data_path) == ("ducklake:postgres:dbname=arena host=db.example.org user=arena",
                                             "s3://bucket/arena/")
    assert lake.files == snapshot.files and lake.file_tables == frozenset({"battles"}) and lake.retention == 3
    # the resource's fields come before the variables
    explicit = Warehouse(database=str(tmp_path / "warehouse.duckdb"), ducklake="ducklake:postgres:dbname=other",
                         ducklake_data_path=str(tmp_path / "lake"), ducklake_cleanup_after_s=0)
    lake = explicit.store().lake_target()
    assert (lake.attach, lake.data_path, lake.cleanup_after_s) == (
        "ducklake:postgres:dbname=other", str(tmp_path / "lake"), 0)


def test_a_password_is_redacted_bare_or_quoted_in_any_text():
    assert _redacted("ducklake:postgres:dbname=a password=s3cret host=h") == \
        "ducklake:postgres:dbname=a password=*** host=h"
    quoted = "at \"dbname=a PASSWORD = 'two words'\": failed"
    assert _redacted(quoted) == quoted.replace("'two words'", "***")
    assert _redacted('"user=u password=x1": connection refused') == '"user=u password=***": connection refused'


def test_a_version_is_stored_in_the_lake_under_the_name_of_its_files():
    assert stored_name(("tables/battles__aaa__run1.parquet",), "battles__aaa__run2") == "battles__aaa__run1"
    assert stored_name(("tables/battles__aaa__run1.a1/part-*.parquet",), "battles__aaa__run2") == "battles__aaa__run1.a1"
    assert stored_name(("tables/a.parquet", "tables/b.parquet"), "battles__aaa__run2") == "battles__aaa__run2"
