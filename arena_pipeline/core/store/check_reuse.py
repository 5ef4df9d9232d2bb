"""A blocking check's recorded outcome, reused when the checked rows, the suite and the libraries are unchanged."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping

import duckdb

from arena_pipeline.core.store.records import VERSIONS, ensure_quality_results
from arena_pipeline.core.store.versions import code_fingerprint, installed_versions, library_versions, record_checks

#: The libraries a check's outcome depends on besides those that shape the rows (``TABLE_LIBRARIES``): the
#: validation's own.
CHECK_LIBRARIES = ("great_expectations",)


@functools.cache
def check_libraries() -> dict[str, str]:
    """The installed versions of the libraries of the rows and of the validation (part of every check key)."""
    return {**library_versions(), **installed_versions(CHECK_LIBRARIES)}


def check_key(con: duckdb.DuckDBPyConnection, version: str, suite_sha256: str) -> str | None:
    """What a check of ``version`` concludes from: the version's inputs key (its rows: the dump revision, the
    settings, the code and the keys of its inputs, see ``versions.inputs_key``), the suite file's sha256, the
    package's code and the versions of the libraries of the rows and of the validation (:func:`check_libraries`).
    Two checks with one key have one outcome. None (never reused) when the version has no inputs key."""
    row = con.execute(f"SELECT inputs_key FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
    if not row or not row[0]:
        return None
    payload = {"rows": row[0], "suite_sha256": suite_sha256, "code": code_fingerprint(),
               "libraries": check_libraries()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def recorded_check(con: duckdb.DuckDBPyConnection, schema: str, key: str,
                   version: str) -> tuple[str, bool, dict] | None:
    """(the checked version, whether its blocking checks passed, its checks record) of the newest other
    version whose check has ``key`` and whose results ``schema.quality_results`` holds; None when there is none."""
    results = ensure_quality_results(con, schema)
    rows = con.execute(
        f"""SELECT v.version, v.checks_passed, v.checks FROM {VERSIONS} v
            WHERE v.version <> ? AND v.checks_passed IS NOT NULL AND json_extract_string(v.checks, '$.check_key') = ?
              AND EXISTS (SELECT 1 FROM {results} q WHERE q.table_version = v.version)
            ORDER BY v.created_at DESC LIMIT 1""", [version, key]).fetchone()
    return (rows[0], rows[1], json.loads(rows[2])) if rows else None


def reuse_check(con: duckdb.DuckDBPyConnection, schema: str, version: str, earlier: tuple[str, bool, Mapping]) -> int:
    """Record ``earlier``'s check (:func:`recorded_check`) as ``version``'s: its outcome on the version (with
    ``reused_from``), and its latest results copied in ``schema.quality_results`` under ``version``, with the
    time they were checked. Returns the rows copied."""
    source, passed, checks = earlier
    results = ensure_quality_results(con, schema)
    copied = con.execute(
        f"""INSERT INTO {results} SELECT * REPLACE (?::VARCHAR AS table_version) FROM {results}
            WHERE table_version = ? AND checked_at = (SELECT max(checked_at) FROM {results} WHERE table_version = ?)""",
        [version, source, source]).fetchone()[0]
    record_checks(con, version, passed, {**checks, "reused_from": source})
    return copied
