"""Test-wide safety net: no test writes into the working directory or reads the developer's settings."""

import pytest

SETTINGS = ("ARENA_SOURCE", "ARENA_REVISION", "ARENA_WAREHOUSE", "ARENA_CACHE_DIR", "ARENA_REPORT",
            "ARENA_MODEL_ALIASES", "ARENA_PUBLISHED_BOARD", "HF_ENDPOINT", "HF_TOKEN")


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path_factory, monkeypatch):
    """Unset the pipeline's variables and point the file defaults at a temporary folder.

    Tests that need a setting pass it explicitly to the resource (or set the variable themselves).
    """
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    scratch = tmp_path_factory.mktemp("defaults")
    monkeypatch.setenv("ARENA_WAREHOUSE", str(scratch / "warehouse.duckdb"))
    monkeypatch.setenv("ARENA_CACHE_DIR", str(scratch / "cache"))
    monkeypatch.setenv("ARENA_REPORT", str(scratch / "report" / "index.html"))
