"""A blocking check's recorded outcome is reused only for the same rows (the checked version's inputs key), suite and
libraries, and only when its results are recorded; the reuse copies them under the new version."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from arena_pipeline.core.store import check_reuse
from arena_pipeline.core.store.check_reuse import check_key, recorded_check, reuse_check
from arena_pipeline.core.store.records import VERSIONS, ensure_catalog, ensure_quality_results
from arena_pipeline.core.store.warehouse import connect

SCHEMA = "arena"
CHECKED_AT = dt.datetime(2026, 1, 2, 3, 4, 5)


@pytest.fixture
def con(tmp_path):
    con = connect(str(tmp_path / "work.duckdb"))
    ensure_catalog(con, SCHEMA)
    ensure_quality_results(con, SCHEMA)
    yield con
    con.close()


def _version(con, version: str, key: str | None, checks: dict | None = None, passed: bool | None = None) -> None:
    con.execute(f"INSERT INTO {VERSIONS} (version, table_name, revision, build_id, rows, created_at, inputs_key, "
                "checks_passed, checks) VALUES (?, 'battles', 'r', ?, 1, now(), ?, ?, ?)",
                [version, version, key, passed, json.dumps(checks) if checks else None])


def _result_rows(con, version: str, n: int) -> None:
    for i in range(n):
        con.execute(f"INSERT INTO {SCHEMA}.quality_results (dump_revision, table_name, suite, expectation_id, severity, "
                    "success, checked_at, table_version) VALUES ('r', 'battles', 'battles', ?, 'error', true, ?, ?)",
                    [f"e{i}", CHECKED_AT, version])


def test_the_key_follows_the_rows_the_suite_and_the_libraries(con, monkeypatch):
    _version(con, "a", "rows-1")
    _version(con, "b", "rows-1")
    _version(con, "c", "rows-2")
    _version(con, "d", None)
    assert check_key(con, "a", "suite-1") == check_key(con, "b", "suite-1")  # the same rows, another version
    assert check_key(con, "a", "suite-1") != check_key(con, "c", "suite-1")
    assert check_key(con, "a", "suite-1") != check_key(con, "a", "suite-2")
    assert check_key(con, "d", "suite-1") is None and check_key(con, "nowhere", "suite-1") is None
    before = check_key(con, "a", "suite-1")
    monkeypatch.setattr(check_reuse, "check_libraries", lambda: {"great_expectations": "0.0"})
    assert check_key(con, "a", "suite-1") != before


def test_only_a_recorded_check_with_results_is_reused_and_its_results_are_copied(con):
    key = "k" * 64
    _version(con, "without_results", "rows-1", {"check_key": key, "failed": []}, passed=True)
    _version(con, "mine", "rows-1")
    assert recorded_check(con, SCHEMA, key, "mine") is None  # no results recorded: validate again
    _version(con, "checked", "rows-1", {"check_key": key, "suite": "battles", "failed": []}, passed=True)
    _result_rows(con, "checked", 3)
    earlier = recorded_check(con, SCHEMA, key, "mine")
    assert earlier[:2] == ("checked", True)
    assert recorded_check(con, SCHEMA, "another key", "mine") is None
    assert recorded_check(con, SCHEMA, key, "checked") is None  # never its own outcome
    assert reuse_check(con, SCHEMA, "mine", earlier) == 3
    rows = con.execute(f"SELECT expectation_id, checked_at FROM {SCHEMA}.quality_results WHERE table_version = 'mine' "
                       "ORDER BY 1").fetchall()
    assert rows == [(f"e{i}", CHECKED_AT) for i in range(3)]  # when they were checked, not now
    passed, checks = con.execute(f"SELECT checks_passed, checks FROM {VERSIONS} WHERE version = 'mine'").fetchone()
    assert passed is True and json.loads(checks)["reused_from"] == "checked"
