"""Test-wide safety net: no test writes into the working directory or reads the developer's settings."""

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
    """Start every test with no current defs-state storage.

    Dagster keeps the current instance's defs-state storage in a ContextVar, set when an
    instance is made and reset (by token) when it is disposed. Instances disposed out of order
    (fixtures of different scopes) leave an earlier instance's storage there; once that instance
    is garbage-collected, the next ``dg.materialize()`` without an instance fails with "Attempted
    to resolve undefined DagsterInstance weakref" while loading the definitions, at a moment that
    depends on the cyclic GC (a check of the weakref before the test is not enough: the GC can run
    during the test). The pipeline has no state-backed definitions, so no storage is what every
    test should see; an instance made inside a test sets its own, and resets by token still work.
    """
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)
    yield
