"""Processes the fault tests run beside the pipeline: a refresh, a reader, a lock holder.

    python -m arena_pipeline_tests.support.refresh_worker refresh [--pause-at fill|publish --paused-file P]
        Materialize every asset of ``refresh_job`` in this process, with the real resources of
        ``arena_pipeline.definitions`` (so ARENA_SOURCE, ARENA_WAREHOUSE, ... are read at run time)
        and the instance of DAGSTER_HOME. Exit status 0 when the run succeeded, 1 otherwise.
        ``--pause-at`` stops the run at a chosen point, creates P and sleeps there (for a kill):
        ``fill``: inside flat_tables, after the third batch appended to the new revision's
        staging tables; ``publish``: inside the publication transaction, after the first
        arena.* view was re-pointed at the new revision.
    python -m arena_pipeline_tests.support.refresh_worker read --warehouse W --out OUT --stop-file STOP
        Query the published tables in a loop with short read-only connections until STOP exists,
        then write a JSON summary of what was seen to OUT (``--hold``: one connection held throughout;
        ``--lake ATTACH``: the DuckLake of that attach string instead of W).
    python -m arena_pipeline_tests.support.refresh_worker hold --warehouse W --ready-file READY --release-file REL
        Open W read-write, create READY, keep the connection until REL exists (or --max-seconds).

Nothing here is imported by the package; it is test code.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from arena_pipeline.constants import BATTLES_TABLE, DUMPS_TABLE, SCHEMA, VERSIONS_SCHEMA
from arena_pipeline.core.store.warehouse import search_path

if TYPE_CHECKING:
    import dagster as dg

# dagster is imported inside the functions that need it: the reader and the holder start fast.
LEADERBOARD_VIEW = "leaderboard"
_VERSIONED = re.compile(rf'"?{VERSIONS_SCHEMA}"?\s*\.\s*"?([A-Za-z0-9_]+)"?')


def refresh_job() -> dg.JobDefinition:
    """The production refresh job (a module-level function, so ``dg.reconstructable`` accepts it)."""
    from arena_pipeline.definitions import defs

    return defs.resolve_job_def("refresh_job")


def no_retries_config(resources: dict[str, dict] | None = None) -> dict:
    """Run config for ``dg.execute_job(reconstructable(refresh_job))``: in-process, step retries
    off (raw_dump's RetryPolicy would otherwise wait 5 + 10 s before the run fails), resources
    configured from ``resources`` ({"warehouse": {"database": ...}, ...})."""
    config: dict = {"execution": {"config": {"retries": {"disabled": {}}}}}
    if resources:
        config["resources"] = {name: {"config": values} for name, values in resources.items()}
    return config


# ---------------------------------------------------------------------------------------- refresh

#: Calls of the hooked function after which the run pauses.
PAUSE_AFTER = {"fill": 3, "publish": 2}


def install_pause(point: str, paused_file: Path, seconds: float = 120.0) -> None:
    """Wrap a core function so the run stops at ``point`` (see the module docstring)."""
    from arena_pipeline.core.ingest import load
    from arena_pipeline.core.store import publish

    # fill: the load's part files (the third one written); publish: inside publish()'s transaction
    module, name = (load, "write_part") if point == "fill" else (publish, "versioned")
    original = getattr(module, name)
    calls = 0

    def hooked(*args, **kwargs):
        nonlocal calls
        result = original(*args, **kwargs)
        # versioned() is also used outside publish(); count only the calls made by publish()
        if point == "fill" or sys._getframe(1).f_code.co_name == "publish":
            calls += 1
            if calls == PAUSE_AFTER[point]:
                paused_file.write_text(str(os.getpid()))
                time.sleep(seconds)
        return result

    setattr(module, name, hooked)


def run_refresh(pause_at: str | None = None, paused_file: Path | None = None) -> int:
    import dagster as dg

    if pause_at:
        install_pause(pause_at, paused_file)

    from arena_pipeline.definitions import defs

    started = time.monotonic()
    # run configuration for tests (e.g. a lower min_battles for small fixture dumps), as JSON
    run_config = json.loads(os.environ.get("ARENA_TEST_RUN_CONFIG") or "{}")
    with dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("refresh_job").execute_in_process(
            instance=instance, raise_on_error=False, run_config=run_config)
    print(json.dumps({"success": result.success, "run_id": result.run_id,
                      "seconds": round(time.monotonic() - started, 3)}), flush=True)
    return 0 if result.success else 1


# ------------------------------------------------------------------------------------------- read

def versioned_keys(view_sql: str) -> set[str]:
    """The revision keys of the ``arena_versions`` tables a view reads
    (``battles__<revision key>__<build key>`` -> revision key)."""
    return {name.split("__")[1] for name in _VERSIONED.findall(view_sql)}


def observe(con: duckdb.DuckDBPyConnection) -> dict:
    """What a reader sees in one snapshot: the published revision, the revision each view points
    at, and a fingerprint of arena.battles (and the leaderboard's row count, once it exists)."""
    con.execute("BEGIN TRANSACTION")
    try:
        published = [r[0] for r in con.execute(
            f'SELECT revision FROM "{SCHEMA}"."{DUMPS_TABLE}" WHERE status = \'published\' ORDER BY revision'
        ).fetchall()]
        views = dict(con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE schema_name = ? AND NOT internal", [SCHEMA]
        ).fetchall())
        keys = sorted(set().union(*(versioned_keys(sql) for name, sql in views.items()
                                    if not name.endswith("_history"))))
        n, files, min_id, max_id = con.execute(
            f'SELECT count(*), count(DISTINCT source_file), min(id), max(id) FROM "{SCHEMA}"."{BATTLES_TABLE}"'
        ).fetchone()
        leaderboard = None
        if LEADERBOARD_VIEW in views:
            leaderboard = con.execute(f'SELECT count(*) FROM "{SCHEMA}"."{LEADERBOARD_VIEW}"').fetchone()[0]
        publication, consistent = _publication_seen(con, views)
    finally:
        con.execute("COMMIT")
    return {"published": published, "view_keys": keys, "battles": n, "files": files,
            "min_id": min_id, "max_id": max_id, "leaderboard": leaderboard,
            "publication": publication, "consistent": consistent}


def _publication_seen(con: duckdb.DuckDBPyConnection, views: dict[str, str]) -> tuple[int | None, bool]:
    """The newest arena.publications row, and whether every view reads exactly its versions and
    shows its row counts (one complete publication)."""
    row = con.execute(f'SELECT publication_id, tables, rows FROM "{SCHEMA}".publications '
                      "ORDER BY publication_id DESC LIMIT 1").fetchone()
    if row is None:
        return None, False
    pid, tables, rows = row[0], json.loads(row[1]), json.loads(row[2])
    for table, version in tables.items():
        if set(_VERSIONED.findall(views.get(table, ""))) != {version}:
            return pid, False
        if con.execute(f'SELECT count(*) FROM "{SCHEMA}"."{table}"').fetchone()[0] != rows[table]:
            return pid, False
    return pid, True


def run_reader(warehouse: Path, out: Path, stop_file: Path, ready_file: Path | None, pause: float,
               max_seconds: float, lake: str | None = None, hold: bool = False) -> int:
    """Read until ``stop_file`` exists; every read is one short read-only connection (``hold``: one
    connection held for every read).

    ``ready_file`` is created after the first successful read. ``lake``: read the DuckLake of that attach
    string (attached read-only, ``core.store.lake.connect_lake``) instead of ``warehouse``.
    """
    held = None

    def connect() -> duckdb.DuckDBPyConnection:
        nonlocal held
        if held is not None:
            return held
        if lake:
            from arena_pipeline.core.store.lake import connect_lake

            con = connect_lake(lake, read_only=True)
        else:
            con = duckdb.connect(str(warehouse), read_only=True, config=search_path(str(warehouse)))
        if hold:
            held = con
        return con

    seen: dict[str, dict] = {}
    timeline: list[tuple[float, int]] = []  # (time.time(), index of the observation) of every read
    errors: collections.Counter[str] = collections.Counter()
    blocked = attempts = 0
    deadline = time.monotonic() + max_seconds
    while not stop_file.exists() and time.monotonic() < deadline:
        attempts += 1
        try:
            con = connect()
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                errors[f"connect: {type(exc).__name__}: {str(exc)[:200]}"] += 1
            else:
                blocked += 1
            time.sleep(pause)
            continue
        try:
            seen_at = time.time()
            obs = observe(con)
        except duckdb.Error as exc:  # a missing or half-built table would land here
            errors[f"query: {type(exc).__name__}: {str(exc)[:200]}"] += 1
            time.sleep(pause)
            continue
        finally:
            if held is None:
                con.close()
        if ready_file is not None and not timeline:
            ready_file.write_text(str(os.getpid()))
        key = json.dumps(obs, sort_keys=True)
        entry = seen.setdefault(key, {**obs, "index": len(seen), "reads": 0, "first": seen_at})
        entry["reads"] += 1
        entry["last"] = seen_at
        timeline.append((seen_at, entry["index"]))
        time.sleep(pause)
    if held is not None:
        held.close()
    summary = {
        "attempts": attempts,
        "reads": len(timeline),
        "blocked": blocked,
        "errors": dict(errors),
        "observations": sorted(seen.values(), key=lambda e: e["index"]),
        "timeline": timeline,
    }
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary))
    tmp.rename(out)
    return 0


# ------------------------------------------------------------------------------------------- hold

def run_holder(warehouse: Path, ready_file: Path, release_file: Path, max_seconds: float,
               read_only: bool = False) -> int:
    """Hold ``warehouse`` open read-write (as another pipeline process, or a user's ``duckdb warehouse.duckdb``
    session would), or with ``read_only`` as a notebook or a BI pool does, querying it every 0.1 s."""
    con = duckdb.connect(str(warehouse), read_only=read_only)
    con.execute("SELECT 1").fetchall()
    ready_file.write_text(str(os.getpid()))
    deadline = time.monotonic() + max_seconds
    while not release_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1 if read_only else 0.02)
        if read_only:
            con.execute("SELECT count(*) FROM information_schema.tables").fetchall()
    con.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    refresh = sub.add_parser("refresh")
    refresh.add_argument("--pause-at", choices=sorted(PAUSE_AFTER))
    refresh.add_argument("--paused-file", type=Path)
    read = sub.add_parser("read")
    read.add_argument("--warehouse", type=Path, required=True)
    read.add_argument("--out", type=Path, required=True)
    read.add_argument("--stop-file", type=Path, required=True)
    read.add_argument("--ready-file", type=Path)
    read.add_argument("--pause", type=float, default=0.05)
    read.add_argument("--max-seconds", type=float, default=120.0)
    read.add_argument("--lake", help="a DuckLake attach string: read it instead of --warehouse")
    read.add_argument("--hold", action="store_true", help="one connection for every read")
    hold = sub.add_parser("hold")
    hold.add_argument("--warehouse", type=Path, required=True)
    hold.add_argument("--ready-file", type=Path, required=True)
    hold.add_argument("--release-file", type=Path, required=True)
    hold.add_argument("--max-seconds", type=float, default=60.0)
    hold.add_argument("--read-only", action="store_true")
    args = parser.parse_args(argv)
    if args.mode == "refresh":
        return run_refresh(args.pause_at, args.paused_file)
    if args.mode == "read":
        return run_reader(args.warehouse, args.out, args.stop_file, args.ready_file, args.pause,
                          args.max_seconds, args.lake, args.hold)
    return run_holder(args.warehouse, args.ready_file, args.release_file, args.max_seconds, args.read_only)


if __name__ == "__main__":
    sys.exit(main())
