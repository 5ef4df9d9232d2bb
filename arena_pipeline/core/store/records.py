"""The warehouse's records: the catalog tables, one row per dump revision seen, one per publication."""

from __future__ import annotations

import datetime as dt
import json

import duckdb

from arena_pipeline.constants import DUMPS_TABLE, PUBLICATIONS_TABLE, QUALITY_RESULTS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.warehouse import quoted, read_frame, relation_exists

#: The records: the only base tables of the published schema (everything else there is a view the gate
#: re-points), appended to or updated in place, never versions (README: Tables); the export writes two.
RECORD_TABLES = {
    PUBLICATIONS_TABLE: TableSpec(published=False),
    QUALITY_RESULTS_TABLE: TableSpec(published=False, exported=True),
    DUMPS_TABLE: TableSpec(published=False, exported=True),
}

BUILDS = quoted(VERSIONS_SCHEMA, "builds")

VERSIONS = quoted(VERSIONS_SCHEMA, "versions")

DUMPS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    revision VARCHAR PRIMARY KEY,
    source VARCHAR,
    source_kind VARCHAR,
    requested_revision VARCHAR,
    first_seen TIMESTAMP,
    files JSON,
    rows BIGINT,
    status VARCHAR,
    status_detail VARCHAR,
    updated_at TIMESTAMP,
    published_at TIMESTAMP
)
"""

CATALOG_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {BUILDS} (
        build_id VARCHAR PRIMARY KEY, build_key VARCHAR UNIQUE, revision VARCHAR, manifest JSON,
        started_at TIMESTAMP, status VARCHAR, status_detail VARCHAR, finished_at TIMESTAMP,
        host VARCHAR, pid INTEGER)""",
    f"""CREATE TABLE IF NOT EXISTS {VERSIONS} (
        version VARCHAR PRIMARY KEY, table_name VARCHAR, revision VARCHAR, build_id VARCHAR,
        rows BIGINT, settings JSON, checks_passed BOOLEAN, checks JSON, created_at TIMESTAMP)""",
)

PUBLICATIONS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    publication_id BIGINT PRIMARY KEY,
    revision VARCHAR,
    run_id VARCHAR,
    published_at TIMESTAMP,
    tables JSON,
    rebuilt VARCHAR[],
    rows JSON,
    settings JSON,
    previous_publication BIGINT
)
"""

QUALITY_RESULTS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    dump_revision VARCHAR, table_name VARCHAR, suite VARCHAR, expectation_id VARCHAR,
    expectation_type VARCHAR, column_name VARCHAR, severity VARCHAR, success BOOLEAN,
    element_count BIGINT, unexpected_count BIGINT, unexpected_percent DOUBLE,
    sample_ids VARCHAR[], checked_at TIMESTAMP
)
"""

STATUSES = ("fetched", "loaded", "failed", "published", "superseded")

#: statuses a dump keeps whatever a later run of it does (a failed re-run does not un-publish it)
SETTLED = ("published", "superseded")



def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)



def ensure_catalog(con: duckdb.DuckDBPyConnection, schema: str) -> None:
    """Create the schemas, ``schema.dumps``, ``schema.publications`` and the build/version registry."""
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{VERSIONS_SCHEMA}"')
    con.execute(DUMPS_DDL.format(table=quoted(schema, DUMPS_TABLE)))
    con.execute(PUBLICATIONS_DDL.format(table=quoted(schema, PUBLICATIONS_TABLE)))
    for ddl in CATALOG_DDL:
        con.execute(ddl)
    # a warehouse made before versions could be reused gains the columns (null: never reused)
    # files: a version stored as Parquet files (the vote tables), their folder relative to the store folder
    for column in ("inputs_key", "same_as", "files"):
        con.execute(f"ALTER TABLE {VERSIONS} ADD COLUMN IF NOT EXISTS {column} VARCHAR")
    # when the build's process started (core/store/processes.py: a reused pid is another process)
    con.execute(f"ALTER TABLE {BUILDS} ADD COLUMN IF NOT EXISTS pid_started BIGINT")


def ensure_quality_results(con: duckdb.DuckDBPyConnection, schema: str) -> str:
    """Create ``schema.quality_results`` (the expectation suites' results, appended by checks.py) where it
    is missing, with the columns a warehouse from before gains; return its quoted name."""
    name = quoted(schema, QUALITY_RESULTS_TABLE)
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    con.execute(QUALITY_RESULTS_DDL.format(table=name))
    con.execute(f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS table_version VARCHAR")
    return name



def ensure_dumps_table(con: duckdb.DuckDBPyConnection, schema: str) -> str:
    """Create the catalog if missing; return the quoted name of ``schema.dumps``."""
    ensure_catalog(con, schema)
    return quoted(schema, DUMPS_TABLE)



def record_dump(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    *,
    revision: str,
    status: str,
    source: str | None = None,
    source_kind: str | None = None,
    requested_revision: str | None = None,
    files: list[dict] | None = None,
    rows: int | None = None,
    detail: str | None = None,
) -> None:
    """Insert or update the history row of ``revision`` (fields left None keep their value; ``updated_at``
    moves only when a field changes).

    A dump that is published or superseded keeps that status: a later run of the same revision
    that fails (or only fetches) records its outcome on its build, not on the dump.
    """
    if status not in STATUSES:
        raise ValueError(f"unknown dump status {status!r}; expected one of {STATUSES}")
    name = ensure_dumps_table(con, schema)
    now = utc_now()
    settled = ", ".join(f"'{s}'" for s in SETTLED)
    con.execute(
        f"""
        INSERT INTO {name} (revision, source, source_kind, requested_revision, first_seen, files, rows,
                            status, status_detail, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (revision) DO UPDATE SET
            source = COALESCE(excluded.source, source),
            source_kind = COALESCE(excluded.source_kind, source_kind),
            requested_revision = COALESCE(excluded.requested_revision, requested_revision),
            files = COALESCE(excluded.files, files),
            rows = COALESCE(excluded.rows, rows),
            status = CASE WHEN status IN ({settled}) AND excluded.status NOT IN ({settled})
                          THEN status ELSE excluded.status END,
            status_detail = CASE WHEN status IN ({settled}) AND excluded.status NOT IN ({settled})
                                 THEN status_detail ELSE excluded.status_detail END,
            -- the time the row last changed: a run that changes nothing (an unchanged re-run's fetch and load
            -- of a published dump) leaves it, so that readers' records stay as they are
            updated_at = CASE WHEN (source, source_kind, requested_revision, files, rows, status, status_detail)
                                   IS NOT DISTINCT FROM
                                   (COALESCE(excluded.source, source), COALESCE(excluded.source_kind, source_kind),
                                    COALESCE(excluded.requested_revision, requested_revision),
                                    COALESCE(excluded.files, files), COALESCE(excluded.rows, rows),
                                    CASE WHEN status IN ({settled}) AND excluded.status NOT IN ({settled})
                                         THEN status ELSE excluded.status END,
                                    CASE WHEN status IN ({settled}) AND excluded.status NOT IN ({settled})
                                         THEN status_detail ELSE excluded.status_detail END)
                              THEN updated_at ELSE excluded.updated_at END
        """,
        [revision, source, source_kind, requested_revision, now,
         json.dumps(files) if files is not None else None, rows, status, detail, now],
    )



def published_dump_row(con: duckdb.DuckDBPyConnection, schema: str) -> dict | None:
    """The latest ``status = 'published'`` row of ``schema.dumps`` (column -> value), or None."""
    if not relation_exists(con, schema, DUMPS_TABLE):
        return None
    cursor = con.execute(f"SELECT * FROM {quoted(schema, DUMPS_TABLE)} WHERE status = 'published' "
                         "ORDER BY published_at DESC NULLS LAST LIMIT 1")
    row = cursor.fetchone()
    return None if row is None else dict(zip((d[0] for d in cursor.description), row, strict=True))


def live_publication(con: duckdb.DuckDBPyConnection, schema: str) -> dict | None:
    """The newest row of ``schema.publications`` (what the views show), or None."""
    return publication(con, schema)



def publication(con: duckdb.DuckDBPyConnection, schema: str, publication_id: int | None = None) -> dict | None:
    """A row of ``schema.publications`` (``tables`` and ``settings`` parsed): ``publication_id``'s, or
    the newest (the live one); None when there is no such row. The id is written into the query, not
    bound: binding a Python value makes DuckDB import pandas, which the CLI's read path avoids."""
    if not relation_exists(con, schema, PUBLICATIONS_TABLE):
        return None
    where = "" if publication_id is None else f"WHERE publication_id = {int(publication_id)} "
    frame = read_frame(con, f"SELECT * FROM {quoted(schema, PUBLICATIONS_TABLE)} {where}"
                            "ORDER BY publication_id DESC LIMIT 1")
    if frame.is_empty():
        return None
    row = frame.row(0, named=True)
    row["tables"] = json.loads(row["tables"])
    row["settings"] = json.loads(row["settings"]) if row["settings"] else {}
    return row
