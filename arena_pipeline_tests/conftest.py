"""Test-wide safety net: no test writes into the working directory or reads the developer's settings."""

import pytest

SETTINGS = ("ARENA_SOURCE", "ARENA_REVISION", "ARENA_WAREHOUSE", "ARENA_CACHE_DIR", "ARENA_REPORT",
            "ARENA_MODEL_ALIASES", "ARENA_PUBLISHED_BOARD", "ARENA_BENCHMARKS", "HF_ENDPOINT", "HF_TOKEN")


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
