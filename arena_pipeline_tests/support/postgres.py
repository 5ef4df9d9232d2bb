"""The DuckLake tests' PostgreSQL: a session server (``arena_pipeline_dev/postgres.py``), skipped without it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arena_pipeline.core.store.lake import EXTENSIONS, extension_file
from arena_pipeline_dev.postgres import PostgresServer, postgres_bin, start_postgres


def missing() -> str | None:
    """Why the lake tests cannot run here (no PostgreSQL server binaries, no extension builds), or None."""
    problems = []
    if postgres_bin() is None:
        problems.append("PostgreSQL's server binaries (initdb, pg_ctl; Debian: apt-get install postgresql)")
    gone = [name for name in EXTENSIONS if extension_file(name) is None]
    if gone:
        problems.append(f"the DuckDB extension builds of {', '.join(gone)} for DuckDB of this venv "
                        "(pip install -e '.[lake]')")
    return "the DuckLake tests need " + " and ".join(problems) if problems else None


def skip_or_fail_without_lake() -> None:
    """Skip with one reason when the lake cannot be tested here; fail instead under CI (``CI=true``)."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must run them (.ci/run installs both)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session (each test makes its own database); skipped with
    one reason without PostgreSQL or the extension builds, except under CI, where that fails."""
    skip_or_fail_without_lake()
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Lake:
    """A new DuckLake: its attach string and its data path."""

    attach: str
    data_path: Path


@pytest.fixture
def new_lake(postgres_server, tmp_path) -> Lake:
    """An empty DuckLake: a new database of the session's server and a data folder of the test's."""
    return Lake(postgres_server.create_database(), tmp_path / "lake_data")
