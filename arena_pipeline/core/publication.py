"""Run-scoped table versions, the dump and publication records, and the one-transaction publication gate.

Every run (a *build*) writes each table it computes to a version of its own,
``arena_versions."<table>__<revision key>__<build key>"``, registered in ``arena_versions.versions``.
Nothing a run writes is visible under ``arena.*``: those names are views, re-pointed only by
``publish``, in one transaction, after checking that

- every published table exists for the build's dump revision (this build's version where it built
  one, else the live publication's version of the same revision);
- a table taken from the live publication is not derived from a table this build rebuilt (that
  would mix two builds' data), and tables computed together (one load, one fit) come from one build;
- the checked tables' blocking expectations passed on exactly the versions being published;
- the new leaderboard is not degenerate against the live one (``core.publication_gate``).

Each publication is a row of ``arena.publications`` (tables and versions, settings, run id); the
``*_history`` views are keyed by publication, and retention drops only versions that no kept
publication uses and whose build is finished (never the live ones, never a running build's).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import duckdb
import polars as pl

from arena_pipeline.constants import DERIVED_FROM, DUMPS_TABLE, PUBLICATIONS_TABLE, SCHEMA, VERSIONS_SCHEMA
from arena_pipeline.core.ingest import DumpManifest, ShardFile
from arena_pipeline.core.warehouse import quoted, read_frame, relation_exists, write_table, write_table_with

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

STATUSES = ("fetched", "loaded", "failed", "published", "superseded")
#: how a build ends (``arena_versions.builds.status``; 'running' until then)
FINISHED = ("published", "failed", "refused", "abandoned")
#: statuses a dump keeps whatever a later run of it does (a failed re-run does not un-publish it)
SETTLED = ("published", "superseded")


class PublicationError(RuntimeError):
    """The publication gate refused: nothing was changed (the message says what and why)."""


class NothingBuiltError(PublicationError):
    """The run wrote no table version: there is nothing new to publish (not a failure of the gate)."""


class NothingPublishedError(LookupError):
    """A run that does not fetch the dump needs a live publication to build on, and there is none."""


def revision_key(revision: str) -> str:
    """A short, identifier-safe key for a revision: 12 characters of a sha, or the local id."""
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        return revision[:12]
    key = re.sub(r"[^0-9A-Za-z]+", "_", revision).strip("_").lower()
    if not key:
        raise ValueError(f"revision {revision!r} has no usable characters")
    return key[:40]


def build_key(build_id: str) -> str:
    """A short, identifier-safe key for a build (run) id."""
    key = re.sub(r"[^0-9a-z]+", "", build_id.lower())
    if not key:
        raise ValueError(f"build id {build_id!r} has no usable characters")
    return key[:12]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# --------------------------------------------------------------------------- manifests

def manifest_to_json(manifest: DumpManifest) -> str:
    """A manifest as JSON (what a later partial run of the same build or dump reads back)."""
    return json.dumps(dataclasses.asdict(manifest))


def manifest_from_json(text: str | None) -> DumpManifest | None:
    """The manifest stored by ``manifest_to_json`` (None stays None)."""
    if not text:
        return None
    data = json.loads(text)
    files = tuple(ShardFile(**f) for f in data.pop("files", []))
    parts = tuple(tuple(p) for p in data.pop("parts", []))
    return DumpManifest(**data, files=files, parts=parts)


# --------------------------------------------------------------------------- catalog

def ensure_catalog(con: duckdb.DuckDBPyConnection, schema: str) -> None:
    """Create the schemas, ``schema.dumps``, ``schema.publications`` and the build/version registry."""
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{VERSIONS_SCHEMA}"')
    con.execute(DUMPS_DDL.format(table=quoted(schema, DUMPS_TABLE)))
    con.execute(PUBLICATIONS_DDL.format(table=quoted(schema, PUBLICATIONS_TABLE)))
    for ddl in CATALOG_DDL:
        con.execute(ddl)
    # a warehouse made before versions could be reused gains the columns (null: never reused)
    for column in ("inputs_key", "same_as"):
        con.execute(f"ALTER TABLE {VERSIONS} ADD COLUMN IF NOT EXISTS {column} VARCHAR")


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
    """Insert or update the history row of ``revision`` (fields left None keep their value).

    A dump that is published or superseded keeps that status: a later run of the same revision
    that fails (or only fetches) records its outcome on its build, not on the dump.
    """
    if status not in STATUSES:
        raise ValueError(f"unknown dump status {status!r}; expected one of {STATUSES}")
    name = ensure_dumps_table(con, schema)
    now = _now()
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
            updated_at = excluded.updated_at
        """,
        [revision, source, source_kind, requested_revision, now,
         json.dumps(files) if files is not None else None, rows, status, detail, now],
    )


# --------------------------------------------------------------------------- builds

@dataclass(frozen=True)
class Build:
    """One run's work on one dump revision: the versions it writes carry its key."""

    build_id: str
    revision: str
    manifest: DumpManifest | None = None

    @property
    def key(self) -> str:
        return build_key(self.build_id)


def close_abandoned_builds(con: duckdb.DuckDBPyConnection) -> list[str]:
    """End 'abandoned' the running builds whose process is gone (it ran on this host and has exited:
    killed before it finished); return their ids. Their unpublished versions go at the next
    publication's retention."""
    running = con.execute(f"SELECT build_id, host, pid FROM {BUILDS} WHERE status = 'running'").fetchall()
    gone = [(build_id, host, pid) for build_id, host, pid in running if _process_gone(host, pid)]
    for build_id, host, pid in gone:
        finish_build(con, build_id, "abandoned", f"its process ({pid} on {host}) ended before the build finished")
    return [build_id for build_id, _, _ in gone]


def start_build(con: duckdb.DuckDBPyConnection, schema: str, build_id: str,
                manifest: DumpManifest) -> Build:
    """Register (or re-register, for a retried step) the build of ``build_id`` on ``manifest``'s revision.

    Builds of this host whose process is gone are ended first (:func:`close_abandoned_builds`).
    """
    ensure_catalog(con, schema)
    close_abandoned_builds(con)
    existing = _build_row(con, build_id)
    if existing and existing["revision"] != manifest.revision:
        raise PublicationError(
            f"run {build_id} already works on revision {existing['revision']}; it cannot switch to "
            f"{manifest.revision}")
    _insert_build(con, build_id, manifest.revision, manifest_to_json(manifest),
                  on_conflict="DO UPDATE SET manifest = excluded.manifest, pid = excluded.pid")
    return Build(build_id, manifest.revision, manifest)


def _insert_build(con: duckdb.DuckDBPyConnection, build_id: str, revision: str, manifest: str | None,
                  on_conflict: str) -> None:
    """Register a running build of this process (host and pid tell retention when it is gone)."""
    con.execute(
        f"""INSERT INTO {BUILDS} (build_id, build_key, revision, manifest, started_at, status, host, pid)
            VALUES (?, ?, ?, ?, ?, 'running', ?, ?) ON CONFLICT (build_id) {on_conflict}""",
        [build_id, build_key(build_id), revision, manifest, _now(), socket.gethostname(), os.getpid()],
    )


def _build_row(con: duckdb.DuckDBPyConnection, build_id: str) -> dict | None:
    frame = read_frame(con, f"SELECT * FROM {BUILDS} WHERE build_id = ?", [build_id])
    return frame.row(0, named=True) if frame.height else None


def current_build(con: duckdb.DuckDBPyConnection, schema: str, build_id: str) -> Build:
    """The build of run ``build_id``: the one its raw_dump step started, or else a new build on the
    live publication's revision (a partial run: re-rank, new aliases, a re-check).

    Raises
    ------
    NothingPublishedError
        If this run did not fetch a dump and nothing is published yet.
    """
    ensure_catalog(con, schema)
    row = _build_row(con, build_id)
    if row is not None:
        return Build(build_id, row["revision"], manifest_from_json(row["manifest"]))
    live = live_publication(con, schema)
    if live is None:
        raise NothingPublishedError(
            "nothing is published yet and this run does not fetch the dump: materialize the whole "
            "graph first (dagster asset materialize -m arena_pipeline.definitions --select '*')")
    close_abandoned_builds(con)
    source = con.execute(f"SELECT manifest FROM {BUILDS} WHERE build_id = ?", [live["run_id"]]).fetchone()
    manifest = source[0] if source else None
    _insert_build(con, build_id, live["revision"], manifest, on_conflict="DO NOTHING")
    return Build(build_id, live["revision"], manifest_from_json(manifest))


def refuse_build(con: duckdb.DuckDBPyConnection, schema: str, build: Build, message: str) -> None:
    """Record the gate's refusal: the build ends 'refused' with the message, and its dump's row says so
    (a dump already published or superseded keeps its status and detail, see :func:`record_dump`)."""
    finish_build(con, build.build_id, "refused", message[:2000])
    record_dump(con, schema, revision=build.revision, status="loaded", detail=f"not published: {message}"[:2000])


def finish_build(con: duckdb.DuckDBPyConnection, build_id: str, status: str, detail: str | None = None) -> None:
    """Record how a build ended ('published', 'failed', 'refused' by the gate, 'abandoned': killed)."""
    con.execute(f"UPDATE {BUILDS} SET status = ?, status_detail = ?, finished_at = ? WHERE build_id = ?",
                [status, detail, _now(), build_id])


# --------------------------------------------------------------------------- versions

def version_name(table: str, build: Build) -> str:
    """The unquoted name of ``build``'s version of ``table`` inside the versions schema."""
    return f"{table}__{revision_key(build.revision)}__{build.key}"


def sibling_version(version: str, table: str) -> str:
    """The name of ``table``'s version by the build and on the revision of ``version`` (say, the pairs
    the load made beside a battles version)."""
    _, revision, build = version.rsplit("__", 2)
    return f"{table}__{revision}__{build}"


def versioned(version: str) -> str:
    """The quoted, schema-qualified name of a version."""
    return quoted(VERSIONS_SCHEMA, version)


def register_version(con: duckdb.DuckDBPyConnection, table: str, build: Build, rows: int,
                     settings: Mapping | None = None, *, same_as: str | None = None,
                     key: str | None = None) -> str:
    """Record that ``build`` wrote its version of ``table`` (``rows`` rows, made with ``settings``).

    The version's :func:`inputs_key` is recorded with it (``key`` when the caller has it already), so
    a later build with the same inputs and settings can reuse it (:func:`reusable_version`);
    ``same_as`` names the version it reuses.
    """
    version = version_name(table, build)
    key = key if key is not None else inputs_key(con, table, build, settings)
    con.execute(
        f"""INSERT INTO {VERSIONS} (version, table_name, revision, build_id, rows, settings, created_at,
                                    inputs_key, same_as)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (version) DO UPDATE SET rows = excluded.rows, settings = excluded.settings,
                checks_passed = NULL, checks = NULL, created_at = excluded.created_at,
                inputs_key = excluded.inputs_key, same_as = excluded.same_as""",
        [version, table, build.revision, build.build_id, rows, json.dumps(dict(settings or {}), default=str), _now(),
         key, same_as],
    )
    return version


# --------------------------------------------------------------------------- reuse

#: Settings that do not change a table's content (the code fingerprint stands for the package).
_UNKEYED_SETTINGS = frozenset({"package_version"})


@functools.cache
def code_fingerprint() -> str:
    """sha256 of the installed package's code and data files: any change of them changes every key."""
    root = resources.files("arena_pipeline")
    digest = hashlib.sha256()
    for path in sorted(Path(str(root)).rglob("*")):
        if path.suffix in {".py", ".csv", ".json"} and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(str(root))).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def inputs_key(con: duckdb.DuckDBPyConnection, table: str, build: Build, settings: Mapping | None) -> str | None:
    """What a version of ``table`` is made from: the dump revision, the settings (but
    ``package_version``), the package's code (:func:`code_fingerprint`) and the keys of the versions
    of its inputs (``constants.DERIVED_FROM``) that ``build`` reads. Two versions with one key hold
    the same rows. None (never reused) when an input has no version ``build`` would read."""
    inputs = {}
    for upstream in DERIVED_FROM.get(table, ()):
        try:
            version = input_version(con, SCHEMA, upstream, build)
        except LookupError:
            return None
        row = con.execute(f"SELECT inputs_key FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
        inputs[upstream] = (row[0] if row else None) or version
    payload = {"table": table, "revision": build.revision, "code": code_fingerprint(), "inputs": inputs,
               "settings": {k: v for k, v in dict(settings or {}).items() if k not in _UNKEYED_SETTINGS}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def base_version(con: duckdb.DuckDBPyConnection, version: str) -> str:
    """The version whose table holds ``version``'s rows (itself, or the one it reuses)."""
    row = con.execute(f"SELECT same_as FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
    return (row[0] if row else None) or version


def reusable_version(con: duckdb.DuckDBPyConnection, table: str, build: Build,
                     settings: Mapping | None = None) -> tuple[str, int] | None:
    """(version, rows) of an existing version of ``table`` with ``build``'s inputs key, or None.

    Only a version whose table still exists and whose blocking checks did not fail qualifies; the
    newest is taken. ``build``'s own versions are not candidates (a retried step rewrites its own).
    """
    key = inputs_key(con, table, build, settings)
    if key is None:
        return None
    rows = con.execute(
        f"""SELECT coalesce(same_as, version) AS base, rows FROM {VERSIONS}
            WHERE table_name = ? AND inputs_key = ? AND build_id <> ? AND checks_passed IS NOT false
            ORDER BY created_at DESC""", [table, key, build.build_id]).fetchall()
    existing = {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [VERSIONS_SCHEMA]).fetchall()}
    return next(((base, n) for base, n in rows if base in existing), None)


def reuse_version(con: duckdb.DuckDBPyConnection, table: str, build: Build, base: str, rows: int,
                  settings: Mapping | None = None) -> str:
    """Make ``build``'s version of ``table`` a view of the existing version ``base`` (no rows copied),
    recorded with ``base``'s inputs key: the one :func:`reusable_version` found it by, not computed
    again."""
    version = version_name(table, build)
    con.execute(f"DROP TABLE IF EXISTS {versioned(version)}")
    con.execute(f"CREATE OR REPLACE VIEW {versioned(version)} AS SELECT * FROM {versioned(base)}")
    row = con.execute(f"SELECT inputs_key FROM {VERSIONS} WHERE version = ?", [base]).fetchone()
    return register_version(con, table, build, rows, settings, same_as=base, key=row[0] if row else None)


def write_version(con: duckdb.DuckDBPyConnection, table: str, build: Build, frame: pl.DataFrame,
                  settings: Mapping | None = None) -> int:
    """Write ``frame`` as ``build``'s version of ``table`` (staged, then swapped in) and register it."""
    rows = write_table(con, VERSIONS_SCHEMA, version_name(table, build), frame)
    register_version(con, table, build, rows, settings)
    return rows


def write_version_with(con: duckdb.DuckDBPyConnection, table: str, build: Build, fill: Callable[[str], int],
                       settings: Mapping | None = None) -> int:
    """Write ``build``'s version of ``table`` with ``fill`` (see ``warehouse.write_table_with``: the
    rows are made inside DuckDB) and register it."""
    rows = write_table_with(con, VERSIONS_SCHEMA, version_name(table, build), fill)
    register_version(con, table, build, rows, settings)
    return rows


def record_checks(con: duckdb.DuckDBPyConnection, version: str, passed: bool, checks: Mapping) -> None:
    """Record the blocking checks' outcome on one version (the gate publishes only passed versions)."""
    con.execute(f"UPDATE {VERSIONS} SET checks_passed = ?, checks = ? WHERE version = ?",
                [passed, json.dumps(dict(checks), default=str), version])


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


def input_version(con: duckdb.DuckDBPyConnection, schema: str, table: str, build: Build) -> str:
    """The version of ``table`` a step of ``build`` reads: its own, or the live one of the same dump.

    Raises
    ------
    LookupError
        If neither exists (the message names what to materialize).
    """
    own = version_name(table, build)
    if con.execute(f"SELECT count(*) FROM {VERSIONS} WHERE version = ?", [own]).fetchone()[0]:
        return own
    live = live_publication(con, schema)
    if live is not None and live["revision"] == build.revision and table in live["tables"]:
        return live["tables"][table]
    raise LookupError(
        f"{schema}.{table} has not been built for revision {build.revision} in this run and is not "
        f"live: include the asset that builds it ({schema}/{table}) in the selection")


def read_input(con: duckdb.DuckDBPyConnection, schema: str, table: str, build: Build,
               columns: str = "*") -> pl.DataFrame:
    """``table`` as a step of ``build`` sees it (see ``input_version``), as a Polars frame."""
    return read_frame(con, f"SELECT {columns} FROM {versioned(input_version(con, schema, table, build))}")


# --------------------------------------------------------------------------- publication

@dataclass
class PublishReport:
    """What a publication changed."""

    publication_id: int
    revision: str
    previous: str | None
    tables: dict[str, str] = field(default_factory=dict)
    rebuilt: list[str] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    history_views: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def plan_tables(con: duckdb.DuckDBPyConnection, schema: str, build: Build, tables: Iterable[str],
                *, derived_from: Mapping[str, tuple[str, ...]], built_together: Iterable[tuple[str, ...]],
                checked: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Which version of each table a publication of ``build`` would show, and which it rebuilt.

    The table rules of the gate as the README's *Publication* paragraph states them (the one place
    they are written): this run's versions, the live publication's for the rest; refused when one is
    missing, would be shown beside a rebuilt input (``derived_from``), comes from another run than
    the tables built with it (``built_together``) or another alias table, or failed its blocking
    checks (``checked``).

    Raises
    ------
    PublicationError
        If a table is missing, would mix builds, or its blocking checks did not pass.
    """
    tables = list(tables)
    own = dict(con.execute(
        f"SELECT table_name, version FROM {VERSIONS} WHERE build_id = ? AND revision = ?",
        [build.build_id, build.revision]).fetchall())
    if not own:
        raise NothingBuiltError(f"run {build.build_id} built no table: nothing new to publish")
    live = live_publication(con, schema)
    live_tables = live["tables"] if live is not None and live["revision"] == build.revision else {}
    chosen, rebuilt, problems = {}, [], []
    for table in tables:
        if table in own:
            chosen[table] = own[table]
            rebuilt.append(table)
        elif table in live_tables:
            chosen[table] = live_tables[table]
        else:
            problems.append(f"{schema}.{table} was not built for revision {build.revision}")
    for table in tables:
        if table in own:
            continue
        stale = [up for up in derived_from.get(table, ()) if up in own]
        if stale:
            problems.append(f"{schema}.{table} is computed from {', '.join(stale)}, which this run rebuilt, "
                            f"but was not rebuilt itself (include {schema}/{table} in the selection)")
    for group in built_together:
        mine = [t for t in group if t in own]
        if mine and len(mine) < len(group):
            problems.append(f"{', '.join(group)} are computed together; this run built only {', '.join(mine)}")
    checks = dict(con.execute(
        f"SELECT version, checks_passed FROM {VERSIONS} WHERE version IN (SELECT unnest(?))",
        [[chosen[t] for t in checked if t in chosen]]).fetchall())
    for table in checked:
        if table in chosen and checks.get(chosen[table]) is not True:
            state = "failed" if checks.get(chosen[table]) is False else "were not run"
            problems.append(f"the blocking checks of {schema}.{table} ({chosen[table]}) {state}")
    problems += _settings_conflicts(schema, publication_settings(con, chosen))
    if problems:
        raise PublicationError("publication refused, nothing changed: " + "; ".join(problems))
    return chosen, rebuilt


#: settings that may differ between the tables of one publication (they do not change the data)
UNCOMPARED_SETTINGS = frozenset({"package_version", "source"})


def _settings_conflicts(schema: str, settings: Mapping[str, Mapping]) -> list[str]:
    """Settings recorded with the chosen versions (``publication_settings``) that disagree (say, two
    alias tables); check outcomes are not settings."""
    seen: dict[str, dict[str, list[str]]] = {}
    for table, recorded in settings.items():
        for key, value in recorded.items():
            if key not in UNCOMPARED_SETTINGS and key != "checks":
                seen.setdefault(key, {}).setdefault(json.dumps(value, sort_keys=True), []).append(table)
    return [
        f"the tables were made with different {key}: "
        + " vs ".join(f"{', '.join(f'{schema}.{t}' for t in sorted(tables))}" for tables in values.values())
        + " (rebuild them together)"
        for key, values in sorted(seen.items()) if len(values) > 1
    ]


def publication_settings(con: duckdb.DuckDBPyConnection, chosen: Mapping[str, str]) -> dict:
    """The settings recorded with the chosen versions, per table (what the publication row keeps)."""
    rows = con.execute(f"SELECT table_name, settings, checks FROM {VERSIONS} WHERE version IN (SELECT unnest(?))",
                       [list(chosen.values())]).fetchall()
    out: dict = {}
    for table, settings, checks in rows:
        out[table] = json.loads(settings) if settings else {}
        if checks:
            out[table]["checks"] = json.loads(checks)
    return out


def publish(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    build: Build,
    chosen: Mapping[str, str],
    *,
    rebuilt: Iterable[str] = (),
    run_id: str | None = None,
    settings: Mapping | None = None,
    history_tables: tuple[str, ...] = (),
    retention: int = 5,
    is_finished: Callable[[str, dt.datetime], bool] = lambda build_id, started: False,
    before_commit: Callable[[], None] | None = None,
) -> PublishReport:
    """Point every ``schema.<table>`` view at its chosen version and record the publication, in one
    transaction; then (same transaction) drop the versions nothing needs any more.

    A base table of a chosen name (a warehouse from before the table was published through the gate,
    e.g. ``benchmark_scores``) is dropped for its view in the same transaction.
    ``history_tables`` get a ``schema.<table>_history`` view: the union of that table over the
    ``retention`` newest publications, each row with its ``publication_id`` and ``published_at``.
    A version is dropped only when no kept publication uses it and its build is finished: published,
    failed or refused, run by a process of this host that has exited (killed), or ``is_finished(build_id,
    started_at)`` (the Dagster instance knows the run is over, or it is older than a stale limit).
    """
    ensure_catalog(con, schema)
    live = live_publication(con, schema)
    now = _now()
    pubs = quoted(schema, PUBLICATIONS_TABLE)
    report = PublishReport(publication_id=0, revision=build.revision,
                           previous=live["revision"] if live else None,
                           tables=dict(chosen), rebuilt=list(rebuilt), settings=dict(settings or {}))
    con.execute("BEGIN TRANSACTION")
    try:
        pid = con.execute(f"SELECT coalesce(max(publication_id), 0) + 1 FROM {pubs}").fetchone()[0]
        report.publication_id = pid
        rows = dict(con.execute(f"SELECT version, rows FROM {VERSIONS} WHERE version IN (SELECT unnest(?))",
                                [list(chosen.values())]).fetchall())
        con.execute(
            f"INSERT INTO {pubs} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [pid, build.revision, run_id or build.build_id, now, json.dumps(dict(chosen)), list(rebuilt),
             json.dumps({t: rows.get(v) for t, v in chosen.items()}), json.dumps(report.settings, default=str),
             live["publication_id"] if live else None],
        )
        legacy = _base_tables(con, schema) & set(chosen)
        for table, version in chosen.items():
            if table in legacy:  # a warehouse from before the table was published by the gate
                con.execute(f"DROP TABLE {quoted(schema, table)}")
            con.execute(f"CREATE OR REPLACE VIEW {quoted(schema, table)} AS SELECT * FROM {versioned(version)}")
            report.views.append(f"{schema}.{table}")
        kept = read_frame(con, f"SELECT publication_id, published_at, tables FROM {pubs} "
                               f"ORDER BY publication_id DESC LIMIT {max(int(retention), 1)}")
        for table in history_tables:
            parts = [
                f"SELECT *, {row['publication_id']}::BIGINT AS publication_id, "
                f"TIMESTAMP '{row['published_at']}' AS published_at FROM {versioned(json.loads(row['tables'])[table])}"
                for row in kept.iter_rows(named=True) if table in json.loads(row["tables"])
            ]
            con.execute(f"CREATE OR REPLACE VIEW {quoted(schema, table + '_history')} AS "
                        + " UNION ALL BY NAME ".join(parts))
            report.history_views.append(f"{schema}.{table}_history")
        dumps = quoted(schema, DUMPS_TABLE)
        con.execute(f"UPDATE {dumps} SET status = 'superseded', updated_at = ? "
                    "WHERE status = 'published' AND revision <> ?", [now, build.revision])
        con.execute(
            f"UPDATE {dumps} SET status = 'published', status_detail = NULL, published_at = ?, updated_at = ? "
            "WHERE revision = ?", [now, now, build.revision])
        if con.execute(f"SELECT count(*) FROM {dumps} WHERE revision = ?", [build.revision]).fetchone()[0] == 0:
            con.execute(f"INSERT INTO {dumps} (revision, first_seen, status, updated_at, published_at) "
                        "VALUES (?, ?, 'published', ?, ?)", [build.revision, now, now, now])
        finish_build(con, build.build_id, "published")
        if before_commit is not None:
            before_commit()
        report.dropped = _drop_unused(con, kept, history_tables, chosen, is_finished, build.build_id)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return report


def _base_tables(con: duckdb.DuckDBPyConnection, schema: str) -> set[str]:
    """The names of the base tables (not views) of ``schema``."""
    return {name for (name,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'",
        [schema]).fetchall()}


def _process_gone(host: str | None, pid: int | None) -> bool:
    """Whether the process that ran a build is known to be gone (it ran on this host and has exited)."""
    if host != socket.gethostname() or not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _drop_unused(con: duckdb.DuckDBPyConnection, kept: pl.DataFrame, history_tables: tuple[str, ...],
                 live: Mapping[str, str], is_finished: Callable[[str, dt.datetime], bool],
                 own_build: str) -> list[str]:
    """Drop the versions (and leftover staging tables) of finished builds that no kept publication uses."""
    needed = set(live.values())
    for tables in kept.get_column("tables").to_list():
        needed |= {v for t, v in json.loads(tables).items() if t in history_tables}
    builds = read_frame(con, f"SELECT build_id, build_key, started_at, status, host, pid FROM {BUILDS}")
    finished = {r["build_key"]: r["build_id"] for r in builds.iter_rows(named=True)
                if r["build_id"] == own_build or r["status"] in FINISHED
                or _process_gone(r["host"], r["pid"]) or is_finished(r["build_id"], r["started_at"])}
    # a version that reuses another (a view of it) keeps it: the kept ones and an unfinished build's
    same_as = dict(con.execute(f"SELECT version, same_as FROM {VERSIONS} WHERE same_as IS NOT NULL").fetchall())
    needed |= {base for version, base in same_as.items()
               if version in needed or version.rpartition("__")[2] not in finished}
    relations = con.execute(
        "SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE schema_name = ? "
        "UNION ALL SELECT view_name, 'VIEW' FROM duckdb_views() WHERE schema_name = ?",
        [VERSIONS_SCHEMA, VERSIONS_SCHEMA]).fetchall()
    dropped = []
    for name, kind in sorted(relations, key=lambda r: r[1] != "VIEW"):  # views before their tables
        key = name.rpartition("__")[2]
        if name in needed or key not in finished or name.count("__") < 2:
            continue
        con.execute(f"DROP {kind} IF EXISTS {versioned(name)}")
        dropped.append(name)
    if dropped:
        con.execute(f"DELETE FROM {VERSIONS} WHERE version IN (SELECT unnest(?))", [dropped])
    return dropped
