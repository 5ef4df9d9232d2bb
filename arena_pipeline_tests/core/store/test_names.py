"""No name or path bends a publication: warehouse files and folders named like catalogs, with glob
characters, quotes, spaces or non-ASCII letters publish and read correctly, or are refused at the start
with one line."""

from __future__ import annotations

import re
import shutil

import duckdb
import pytest

from arena_pipeline import reader
from arena_pipeline.core.store.guard import WarehouseNameError, check_name
from arena_pipeline.core.store.snapshot import store_folder
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import Warehouse
from arena_pipeline_tests.support.materialize import run_sample
from arena_pipeline_tests.support.small_store import look, small_store

#: Warehouse files named after a catalog or schema readers resolve ``arena.*`` in: refused at the start.
REFUSED_FILES = ["arena.duckdb", "arena_versions.duckdb", "Arena.db", "arena",
                 # and a '?': DuckDB reads what follows it as options, and opens "st" or "w*h"
                 "st?ar/warehouse.duckdb", "w*h?[1]{2}.duckdb",
                 # and a ',' in the folder: file_search_path (the vote tables' files) is a comma-separated list
                 "s{a,b}t/warehouse.duckdb"]
#: Files and folders that publish and read like any other.
PUBLISHED = ["main.duckdb", "system.duckdb", "temp.duckdb", "memory.duckdb", "st*ar/warehouse.duckdb",
             "s[x]t/warehouse.duckdb", "s{a}t/warehouse.duckdb", "it's \"q\"/warehouse.duckdb",
             "with space/my warehouse.duckdb", "naïve 日本/warehouse.duckdb", "w*h[1]{2}.duckdb"]


def _matched(name: str) -> str:
    """A name that ``name``, read as a file pattern, matches (``st*ar`` -> ``stXar``, ``s[x]t`` -> ``sxt``)."""
    return re.sub(r"\[(.)[^\]]*\]", r"\1", name).replace("*", "X")


def _siblings(path):
    """Beside the store, a copy of it (its folder, or its store folder) that the path's glob characters match."""
    source = path.parent if _matched(path.parent.name) != path.parent.name else store_folder(path)
    copy = source.with_name(_matched(source.name))
    if copy == source:
        return
    shutil.copytree(source, copy)
    with duckdb.connect() as con:  # the copy's vote tables tell themselves apart
        for file in copy.rglob("*.parquet"):
            con.execute(f"COPY (SELECT i, 'copy' AS tag FROM read_parquet('{file}')) TO '{file}' (FORMAT parquet)")


@pytest.mark.parametrize("name", REFUSED_FILES)
def test_a_warehouse_named_like_a_schema_is_refused_at_the_start(tmp_path, name):
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    with pytest.raises(WarehouseNameError) as refused, Warehouse(database=str(path)).get_connection():
        pass
    message = str(refused.value)
    assert str(path) in message and "nothing was written" in message and "\n" not in message
    assert sorted(p.name for p in path.parent.iterdir()) == []  # no file made, not even the one before '?'
    check_name(tmp_path / "arenas.duckdb")  # only the catalog's exact name


@pytest.mark.parametrize("name", PUBLISHED)
def test_names_and_paths_publish_and_read_correctly(tmp_path, name):
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    store = small_store(path)
    try:
        store.publish("1" * 40, n=3)
        store.publish("2" * 40, n=5)
        store.con.execute("CHECKPOINT")
    finally:
        store.close()
    _siblings(path)  # a copy of the store that the name's glob characters would match: never read
    for open_ in (lambda: connect_warehouse(str(path), read_only=True), lambda: reader.connect(path)):
        with open_() as con:
            assert look(con) == "2 run-2"
            assert con.execute("SELECT count(*) FROM arena.battles").fetchone()[0] == 5


@pytest.mark.slow
@pytest.mark.parametrize("name", [*PUBLISHED, "arena.duckdb", "st?ar/warehouse.duckdb", "s{a,b}t/warehouse.duckdb"])
def test_the_sample_publishes_under_each_name_or_is_refused_at_the_start(tmp_path, name, sample_run):
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    result = run_sample(tmp_path, warehouse=Warehouse(database=str(path)))
    if name in REFUSED_FILES:
        assert not result.success and not path.exists()
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        assert "nothing was written" in failure.step_failure_data.error.message
        return
    assert result.success
    expected = _battles(sample_run.root / "warehouse.duckdb")
    for open_ in (lambda: connect_warehouse(str(path), read_only=True), lambda: reader.connect(path)):
        with open_() as con:
            assert con.execute("SELECT count(*) FROM arena.battles").fetchone()[0] == expected
            assert con.execute("SELECT count(*) FROM arena.leaderboard").fetchone()[0] > 0


def _battles(path) -> int:
    with reader.connect(path) as con:
        return con.execute("SELECT count(*) FROM arena.battles").fetchone()[0]
