"""Publishing: every arena.* view re-pointed at its chosen version in one transaction, then retention."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import polars as pl

from arena_pipeline.constants import DUMPS_TABLE, PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store.records import BUILDS, VERSIONS, ensure_catalog, live_publication, utc_now
from arena_pipeline.core.store.targets import PublicationTarget, plan_publication
from arena_pipeline.core.store.versions import FINISHED, Build, _base_tables, finish_build, process_gone, versioned
from arena_pipeline.core.store.warehouse import quoted, read_frame


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
    #: Parquet files of vote tables deleted after the swap (no kept snapshot names them)
    pruned_files: list[str] = field(default_factory=list)



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
    targets: Sequence[PublicationTarget] = (),
    files_of: Callable[[str], tuple[str, ...] | None] = lambda version: None,
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

    Each of ``targets`` (``core/store/targets.py``: the readers' snapshot file, ...) is part of the
    publication: the plan of what it shows (``targets.plan_publication``; ``files_of`` names the Parquet
    files of a vote table's version) is staged on every target before the work file's COMMIT and made
    visible right after it; a failure before the COMMIT discards what was staged. A crash between the
    two leaves the work file one publication ahead of a target, which the next sync brings level (the
    gate's step syncs at every run). Each target then prunes what no kept publication needs.
    """
    ensure_catalog(con, schema)
    live = live_publication(con, schema)
    now = utc_now()
    pubs = quoted(schema, PUBLICATIONS_TABLE)
    report = PublishReport(publication_id=0, revision=build.revision,
                           previous=live["revision"] if live else None,
                           tables=dict(chosen), rebuilt=list(rebuilt), settings=dict(settings or {}))
    staged: list = []
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
        if targets:
            plan = plan_publication(con, schema, files_of)
            for target in targets:
                staged.append(target.stage(con, plan))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        for target, handle in zip(targets, staged, strict=False):
            target.discard(handle)
        raise
    for target, handle in zip(targets, staged, strict=True):
        target.commit(handle)
    for target in targets:
        report.pruned_files += target.prune(con, schema)
    return report




def _drop_unused(con: duckdb.DuckDBPyConnection, kept: pl.DataFrame, history_tables: tuple[str, ...],
                 live: Mapping[str, str], is_finished: Callable[[str, dt.datetime], bool],
                 own_build: str) -> list[str]:
    """Drop the versions (and leftover staging tables) of finished builds that no kept publication uses."""
    needed = set(live.values())
    for tables in kept.get_column("tables").to_list():
        needed |= {v for t, v in json.loads(tables).items() if t in history_tables}
    builds = read_frame(con, f"SELECT build_id, build_key, started_at, status, host, pid, pid_started FROM {BUILDS}")
    finished = {r["build_key"]: r["build_id"] for r in builds.iter_rows(named=True)
                if r["build_id"] == own_build or r["status"] in FINISHED
                or process_gone(r["host"], r["pid"], r["pid_started"]) or is_finished(r["build_id"], r["started_at"])}
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
