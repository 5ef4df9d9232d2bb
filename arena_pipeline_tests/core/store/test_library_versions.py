"""The reuse key includes the versions of the libraries that shape the tables: an upgrade of DuckDB,
pyarrow, NumPy or SciPy makes every table again instead of reusing the old one."""

from __future__ import annotations

from importlib import metadata

import pytest

from arena_pipeline.core.store import versions
from arena_pipeline.core.store.versions import TABLE_LIBRARIES, Build, inputs_key


@pytest.fixture
def fresh_versions():
    versions.library_versions.cache_clear()
    yield
    versions.library_versions.cache_clear()


@pytest.mark.parametrize("library", ["duckdb", "pyarrow", "numpy", "scipy"])
def test_an_upgrade_of_a_library_that_shapes_the_tables_changes_every_key(monkeypatch, fresh_versions, library):
    build = Build("run-1", "rev-1")

    def key(table: str) -> str:
        return inputs_key(None, table, build, {"min_battles": 3})  # no inputs: no look-up

    before = {table: key(table) for table in ("battles", "leaderboard")}
    assert {table: key(table) for table in before} == before  # the same libraries: the tables are reused
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "999.0" if name == library else real(name))
    versions.library_versions.cache_clear()
    after = {table: key(table) for table in before}
    assert all(after[table] != before[table] for table in before)
    assert versions.library_versions()[library] == "999.0" and library in TABLE_LIBRARIES
