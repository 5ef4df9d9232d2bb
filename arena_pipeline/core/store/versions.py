"""Builds and table versions: each run writes versions of its own, reused when their inputs are unchanged."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

import duckdb
import polars as pl

from arena_pipeline.constants import SCHEMA, VERSIONS_SCHEMA
from arena_pipeline.core.dataset.manifest import DumpManifest, manifest_from_json, manifest_to_json
from arena_pipeline.core.store.processes import process_gone, process_start
from arena_pipeline.core.store.records import BUILDS, VERSIONS, ensure_catalog, live_publication, record_dump, utc_now
from arena_pipeline.core.store.warehouse import (
    quoted,
    read_frame,
    sql_string,
    write_table,
    write_table_with,
)

#: how a build ends (``arena_versions.builds.status``; 'running' until then)
FINISHED = ("published", "failed", "refused", "abandoned")



class PublicationError(RuntimeError):
    """The publication gate refused: nothing was changed (the message says what and why)."""



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



@dataclass(frozen=True)
class Build:
    """One run's work on one dump revision: the versions it writes carry its key."""

    build_id: str
    revision: str
    manifest: DumpManifest | None = None

    @property
    def key(self) -> str:
        return build_key(self.build_id)



#: Why a build's run failed, when it is known (``failure_of(build_id)``; a build's id is its run's), else None.
FailureOf = Callable[[str], "str | None"]


def close_abandoned_builds(con: duckdb.DuckDBPyConnection, failure_of: FailureOf | None = None) -> list[str]:
    """End the running builds whose process is gone (it ran on this host and has exited); return their ids.
    Their unpublished versions go at the next publication's retention.

    A build whose run is known to have failed (``failure_of`` gives the reason: a step that could not
    record it, such as one that waited past the lock timeout for the work file) ends 'failed' with that
    reason; any other ends 'abandoned': its process was killed before it finished.
    """
    running = con.execute(f"SELECT build_id, host, pid, pid_started FROM {BUILDS} WHERE status = 'running'").fetchall()
    gone = [(build_id, host, pid) for build_id, host, pid, started in running if process_gone(host, pid, started)]
    for build_id, host, pid in gone:
        reason = failure_of(build_id) if failure_of is not None else None
        if reason:
            finish_build(con, build_id, "failed", reason[:2000])
        else:
            finish_build(con, build_id, "abandoned", f"its process ({pid} on {host}) ended before the build finished")
    return [build_id for build_id, _, _ in gone]



def start_build(con: duckdb.DuckDBPyConnection, schema: str, build_id: str,
                manifest: DumpManifest, failure_of: FailureOf | None = None) -> Build:
    """Register (or re-register, for a retried step) the build of ``build_id`` on ``manifest``'s revision.

    Builds of this host whose process is gone are ended first (:func:`close_abandoned_builds`, with
    ``failure_of``).
    """
    ensure_catalog(con, schema)
    close_abandoned_builds(con, failure_of)
    existing = _build_row(con, build_id)
    if existing and existing["revision"] != manifest.revision:
        raise PublicationError(
            f"run {build_id} already works on revision {existing['revision']}; it cannot switch to "
            f"{manifest.revision}")
    _insert_build(con, build_id, manifest.revision, manifest_to_json(manifest),
                  on_conflict="DO UPDATE SET manifest = excluded.manifest, pid = excluded.pid, "
                              "pid_started = excluded.pid_started")
    return Build(build_id, manifest.revision, manifest)



def _insert_build(con: duckdb.DuckDBPyConnection, build_id: str, revision: str, manifest: str | None,
                  on_conflict: str) -> None:
    """Register a running build of this process (host and pid tell retention when it is gone)."""
    con.execute(
        f"""INSERT INTO {BUILDS} (build_id, build_key, revision, manifest, started_at, status, host, pid, pid_started)
            VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (build_id) {on_conflict}""",
        [build_id, build_key(build_id), revision, manifest, utc_now(), socket.gethostname(), os.getpid(),
         process_start(os.getpid())],
    )



def _build_row(con: duckdb.DuckDBPyConnection, build_id: str) -> dict | None:
    frame = read_frame(con, f"SELECT * FROM {BUILDS} WHERE build_id = ?", [build_id])
    return frame.row(0, named=True) if frame.height else None



def current_build(con: duckdb.DuckDBPyConnection, schema: str, build_id: str,
                  failure_of: FailureOf | None = None) -> Build:
    """The build of run ``build_id``: the one its raw_dump step started, or else a new build on the
    live publication's revision (a partial run: re-rank, new aliases, a re-check); builds whose process
    is gone are ended first (:func:`close_abandoned_builds`, with ``failure_of``).

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
    close_abandoned_builds(con, failure_of)
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
                [status, detail, utc_now(), build_id])



def version_name(table: str, build: Build) -> str:
    """The unquoted name of ``build``'s version of ``table`` inside the versions schema."""
    return f"{table}__{revision_key(build.revision)}__{build.key}"



def versioned(version: str) -> str:
    """The quoted, schema-qualified name of a version."""
    return quoted(VERSIONS_SCHEMA, version)



def register_version(con: duckdb.DuckDBPyConnection, table: str, build: Build, rows: int,
                     settings: Mapping | None = None, *, same_as: str | None = None,
                     key: str | None = None, inputs: Iterable[str] = (), files: str | None = None) -> str:
    """Record that ``build`` wrote its version of ``table`` (``rows`` rows, made with ``settings`` from
    the tables ``inputs``).

    The version's :func:`inputs_key` is recorded with it (``key`` when the caller has it already), so
    a later build with the same inputs and settings can reuse it (:func:`reusable_version`);
    ``same_as`` names the version it reuses; ``files`` the folder of its Parquet files (relative to the
    store folder) when it is stored as files (:func:`write_file_versions`).
    """
    version = version_name(table, build)
    key = key if key is not None else inputs_key(con, table, build, settings, inputs)
    con.execute(
        f"""INSERT INTO {VERSIONS} (version, table_name, revision, build_id, rows, settings, created_at,
                                    inputs_key, same_as, files)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (version) DO UPDATE SET rows = excluded.rows, settings = excluded.settings,
                checks_passed = NULL, checks = NULL, created_at = excluded.created_at,
                inputs_key = excluded.inputs_key, same_as = excluded.same_as, files = excluded.files""",
        [version, table, build.revision, build.build_id, rows, json.dumps(dict(settings or {}), default=str), utc_now(),
         key, same_as, files],
    )
    return version



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



#: The libraries that shape the tables' rows (parsing, Arrow and DuckDB types and arithmetic, the fits,
#: name confusables): a new version of any of them makes every table again instead of reusing it.
TABLE_LIBRARIES = ("polars", "duckdb", "pyarrow", "numpy", "scipy", "confusables")


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """Each package's installed version, ``"absent"`` for one not installed."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


@functools.cache
def library_versions() -> dict[str, str]:
    """The installed versions of :data:`TABLE_LIBRARIES` and Python's (its Unicode tables): part of every
    reuse key (:func:`inputs_key`)."""
    return {"python": platform.python_version(), **installed_versions(TABLE_LIBRARIES)}


def inputs_key(con: duckdb.DuckDBPyConnection, table: str, build: Build, settings: Mapping | None,
               inputs: Iterable[str] = ()) -> str | None:
    """What a version of ``table`` is made from: the dump revision, the settings (but
    ``package_version``), the package's code (:func:`code_fingerprint`), the versions of the libraries that
    shape the rows (:func:`library_versions`) and the keys of the versions
    of its input tables ``inputs`` (the step's, from the asset graph: the version store's context)
    that ``build`` reads. Two versions with one key hold the same rows. None (never reused) when an
    input has no version ``build`` would read."""
    keys = {}
    for upstream in sorted(set(inputs)):
        try:
            version = input_version(con, SCHEMA, upstream, build)
        except LookupError:
            return None
        row = con.execute(f"SELECT inputs_key FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
        keys[upstream] = (row[0] if row else None) or version
    payload = {"table": table, "revision": build.revision, "code": code_fingerprint(), "inputs": keys,
               "libraries": library_versions(),
               "settings": {k: v for k, v in dict(settings or {}).items() if k not in _UNKEYED_SETTINGS}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()



def base_version(con: duckdb.DuckDBPyConnection, version: str) -> str:
    """The version whose table holds ``version``'s rows (itself, or the one it reuses)."""
    row = con.execute(f"SELECT same_as FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
    return (row[0] if row else None) or version



def reusable_version(con: duckdb.DuckDBPyConnection, table: str, build: Build,
                     settings: Mapping | None = None, inputs: Iterable[str] = ()) -> tuple[str, int] | None:
    """(version, rows) of an existing version of ``table`` with ``build``'s inputs key (made from the
    tables ``inputs``), or None.

    Only a version whose table still exists and whose blocking checks did not fail qualifies; the
    newest is taken. ``build``'s own versions are not candidates (a retried step rewrites its own).
    """
    key = inputs_key(con, table, build, settings, inputs)
    if key is None:
        return None
    rows = con.execute(
        f"""SELECT coalesce(same_as, version) AS base, rows FROM {VERSIONS}
            WHERE table_name = ? AND inputs_key = ? AND build_id <> ? AND checks_passed IS NOT false
            ORDER BY created_at DESC""", [table, key, build.build_id]).fetchall()
    # a version's rows: a table, or a view over its Parquet files (a vote table's version)
    existing = {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = ? "
        "UNION ALL SELECT v.version FROM duckdb_views() d JOIN " + VERSIONS + " v ON v.version = d.view_name "
        "WHERE d.schema_name = ? AND v.files IS NOT NULL", [VERSIONS_SCHEMA, VERSIONS_SCHEMA]).fetchall()}
    return next(((base, n) for base, n in rows if base in existing), None)



def reused_versions(con: duckdb.DuckDBPyConnection, versions: Iterable[str]) -> set[str]:
    """The versions among ``versions`` that are views of an earlier version (:func:`reuse_version`): their
    build read and wrote nothing for them."""
    rows = con.execute(f"SELECT version FROM {VERSIONS} WHERE version IN (SELECT unnest(?)) AND same_as IS NOT NULL",
                       [list(versions)]).fetchall()
    return {version for (version,) in rows}


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


def drop_version(con: duckdb.DuckDBPyConnection, table: str, build: Build) -> None:
    """Undo :func:`reuse_version`: drop ``build``'s view of ``table`` and its registry row (a view made ahead
    for an output that then came otherwise: ``assets.version_store``)."""
    version = version_name(table, build)
    con.execute(f"DROP VIEW IF EXISTS {versioned(version)}")
    con.execute(f"DELETE FROM {VERSIONS} WHERE version = ? AND same_as IS NOT NULL", [version])


def reuse_together(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...], build: Build,
                   settings: Mapping | None = None, inputs: Iterable[str] = ()) -> dict[str, tuple[str, int]] | None:
    """(reused version, rows) per table when one earlier build made every table of ``tables`` (built
    together, by one step, from the tables ``inputs``) with ``build``'s inputs keys
    (:func:`reusable_version`): they become ``build``'s versions, as views (:func:`reuse_version`), all
    or none; else None (nothing changed)."""
    inputs = tuple(inputs)
    found = {name: reusable_version(con, name, build, settings, inputs) for name in tables}
    if any(v is None for v in found.values()):
        return None
    if len({base.rpartition("__")[2] for base, _ in found.values()}) != 1:  # made together, by one build
        return None
    for name, (base, rows) in found.items():
        reuse_version(con, name, build, base, rows, settings)
    return found


def write_version(con: duckdb.DuckDBPyConnection, table: str, build: Build, frame: pl.DataFrame,
                  settings: Mapping | None = None, inputs: Iterable[str] = ()) -> int:
    """Write ``frame`` as ``build``'s version of ``table`` (staged, then swapped in) and register it
    (made from the tables ``inputs``)."""
    rows = write_table(con, VERSIONS_SCHEMA, version_name(table, build), frame)
    register_version(con, table, build, rows, settings, inputs=inputs)
    return rows



def write_version_with(con: duckdb.DuckDBPyConnection, table: str, build: Build, fill: Callable[[str], int],
                       settings: Mapping | None = None, inputs: Iterable[str] = ()) -> int:
    """Write ``build``'s version of ``table`` with ``fill`` (see ``warehouse.write_table_with``: the
    rows are made inside DuckDB) and register it (made from the tables ``inputs``)."""
    rows = write_table_with(con, VERSIONS_SCHEMA, version_name(table, build), fill)
    register_version(con, table, build, rows, settings, inputs=inputs)
    return rows



#: A version's Parquet files inside its folder (their names sort in the order they were written).
PART_GLOB = "part-*.parquet"
#: Rows of a row group of a part file: a load batch's messages (~20,000 rows at 1x) fill one; a table
#: written in one piece (battles, about 450 bytes a vote) gets row groups of about 30 MB.
ROW_GROUP_ROWS = 65_536
#: zstd level 1: on conversation text as fast as snappy and a quarter smaller.
PARQUET_COMPRESSION = {"compression": "zstd", "compression_level": 1}


def write_part(folder: Path, frame: pl.DataFrame, number: int = 0) -> int:
    """Write ``frame`` as part file ``number`` of a version's ``folder``; return its rows."""
    frame.write_parquet(folder / f"part-{number:06d}.parquet", row_group_size=ROW_GROUP_ROWS, **PARQUET_COMPRESSION)
    return frame.height


def files_scan(files: str) -> str:
    """The DuckDB scan of a version's Parquet files, by their folder relative to the database's folder
    (resolved through the connection's ``file_search_path``: ``warehouse.search_path``)."""
    return f"read_parquet({sql_string(f'{files}/{PART_GLOB}')})"


def version_files(con: duckdb.DuckDBPyConnection, version: str) -> str | None:
    """The folder (relative to the store folder) of the Parquet files holding ``version``'s rows (its
    own, or those of the version it reuses); None for a version stored as a DuckDB table (and in a
    registry from before versions were stored as files)."""
    if not con.execute("SELECT count(*) FROM duckdb_columns() WHERE schema_name = ? AND table_name = 'versions' "
                       "AND column_name = 'files'", [VERSIONS_SCHEMA]).fetchone()[0]:
        return None
    row = con.execute(f"""SELECT coalesce(b.files, v.files) FROM {VERSIONS} v
                          LEFT JOIN {VERSIONS} b ON b.version = v.same_as WHERE v.version = ?""",
                      [version]).fetchone()
    return row[0] if row else None


def write_file_versions(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...], build: Build, files: Path,
                        fill: Callable[[dict[str, Path]], Mapping[str, int]], settings: Mapping | None = None,
                        inputs: Iterable[str] = ()) -> dict[str, int]:
    """Write ``build``'s versions of ``tables`` as Parquet files, made in one pass by ``fill``, and
    register them (made from the tables ``inputs``); return the rows per table.

    ``fill`` gets a new, empty folder per table (hidden, inside ``files``: the store's Parquet folder)
    and writes the table's part files there (``part-*.parquet``). The folders then get their final
    names, unique to this attempt (``<version>.<attempt>``): a retried step writes new files and never
    touches what an earlier attempt wrote (a registered version's folder stays until pruning finds no
    version and no kept publication names it). Each version is a view over its files in the work
    file, all swapped in together with their registry rows (one transaction). A failure deletes this
    attempt's folders and is raised.
    """
    files.mkdir(parents=True, exist_ok=True)
    attempt = uuid.uuid4().hex[:8]
    names = {table: version_name(table, build) for table in tables}
    staging = {table: files / f".{names[table]}.{os.getpid()}.{attempt}.tmp" for table in tables}
    finals = {table: files / f"{names[table]}.{attempt}" for table in tables}
    try:
        for folder in staging.values():
            folder.mkdir()
        rows = dict(fill(dict(staging)))
        for table in tables:
            os.replace(staging[table], finals[table])
        con.execute("BEGIN TRANSACTION")
        try:
            for table in tables:
                relative = f"{files.name}/{finals[table].name}"
                if names[table] in _base_tables(con, VERSIONS_SCHEMA):  # an earlier attempt's table (a store from before)
                    con.execute(f"DROP TABLE {versioned(names[table])}")
                con.execute(f"CREATE OR REPLACE VIEW {versioned(names[table])} AS SELECT * FROM {files_scan(relative)}")
                register_version(con, table, build, rows[table], settings, inputs=inputs, files=relative)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    except BaseException:
        for folder in (*staging.values(), *finals.values()):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return {table: rows[table] for table in tables}


def record_checks(con: duckdb.DuckDBPyConnection, version: str, passed: bool, checks: Mapping) -> None:
    """Record the blocking checks' outcome on one version (the gate publishes only passed versions)."""
    con.execute(f"UPDATE {VERSIONS} SET checks_passed = ?, checks = ? WHERE version = ?",
                [passed, json.dumps(dict(checks), default=str), version])



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



def _base_tables(con: duckdb.DuckDBPyConnection, schema: str) -> set[str]:
    """The names of the base tables (not views) of ``schema``."""
    return {name for (name,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'",
        [schema]).fetchall()}
