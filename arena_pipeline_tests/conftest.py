"""Test-wide safety net: no test writes into the working directory or reads the developer's settings."""

import gc

import pytest

SETTINGS = ("ARENA_SOURCE", "ARENA_REVISION", "ARENA_WAREHOUSE", "ARENA_CACHE_DIR", "ARENA_REPORT",
            "ARENA_MODEL_ALIASES", "ARENA_PUBLISHED_BOARD", "ARENA_BENCHMARKS", "HF_ENDPOINT", "HF_TOKEN",
            "ARENA_DATASETS", "ARENA_DISCOVER")


@pytest.fixture(autouse=True, scope="session")
def _isolated_settings(tmp_path_factory):
    """Unset the pipeline's variables and point the file defaults at a temporary folder.

    Session-scoped so that it is in force before any module- or session-scoped fixture runs
    (a function-scoped autouse fixture comes after those). Tests that need a setting pass it
    explicitly to the resource, or set the variable themselves with ``monkeypatch``.
    """
    scratch = tmp_path_factory.mktemp("defaults")
    with pytest.MonkeyPatch.context() as patch:
        for name in SETTINGS:
            patch.delenv(name, raising=False)
        patch.setenv("ARENA_WAREHOUSE", str(scratch / "warehouse.duckdb"))
        patch.setenv("ARENA_CACHE_DIR", str(scratch / "cache"))
        patch.setenv("ARENA_REPORT", str(scratch / "report" / "index.html"))
        yield scratch


@pytest.fixture(autouse=True)
def _no_stale_defs_state_storage():
    """Start every test with no current defs-state storage and no earlier instance left to finalize.

    Dagster keeps the current instance's defs-state storage in a ContextVar, set when an
    instance is made and reset (by token) when it is disposed. An instance context left to the
    garbage collector is disposed whenever the cyclic GC runs, and its reset then puts back the
    storage of an instance that is already gone: the next ``dg.materialize()`` without an
    instance fails with "Attempted to resolve undefined DagsterInstance weakref" while loading
    the definitions. Clearing the variable alone is not enough (CI saw the GC run inside the
    test, after the clearing), so the earlier tests' garbage is collected first, then the
    variable is cleared. The pipeline has no state-backed definitions, so no storage is what
    every test should see; an instance made inside a test sets its own.
    """
    from dagster._core.storage.defs_state.base import _current_storage

    gc.collect()
    _current_storage.set(None)
    yield
