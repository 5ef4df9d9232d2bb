"""Is the live board fresh: the live publication's age, and the newer dump revisions seen but not published.

The age is that of the live publication as ``arena.publications`` records it (``published_at`` of
its newest row), not that of the last materialization of ``publication_gate`` in a Dagster
instance: a run that built nothing materializes ``publication_gate`` ("nothing new to publish")
without changing what is live, a publication may come from another instance (the CLI, a rebuilt
``DAGSTER_HOME``), and a restored or moved warehouse brings its own history. Only the gate
changes what is live, and it writes ``arena.publications``.

A dump revision is *seen* when a refresh run was requested for it (the new-dump sensor and the
nightly schedule tag their runs with it: the run's creation time) or a run fetched it
(``arena.dumps.first_seen``). It is *newer* than the live board when it was last seen at or after
the live revision was; re-ranks and other partial runs do not count as seeing the live revision
again (they fetch nothing), so a newer revision that failed stays pending across re-ranks of the
older one. Its state is that of its latest attempt: the Dagster run (queued, running, failed,
canceled) and the build it started (``arena_versions.builds``: refused by the gate, failed,
abandoned), the build's record winning once it has ended, since it carries the reason. One case
is not seen: a source put back to the live revision leaves a newer one that failed reported as
pending (the sensor skips a revision that is live without a run) until the next publication.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import duckdb
import polars as pl

from arena_pipeline.constants import DUMPS_TABLE, PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store.warehouse import quoted, read_frame, relation_exists
from arena_pipeline.core.text import short_revision

#: The default of ``Warehouse.max_publication_age_hours`` (ARENA_MAX_PUBLICATION_AGE_HOURS): a week.
DEFAULT_MAX_AGE_HOURS = 168.0

TIMESTAMP = pl.Datetime("us")
#: ``arena.publications`` as read here (one row per publication).
PUBLICATIONS_SCHEMA: dict[str, pl.DataType] = {
    "publication_id": pl.Int64(), "revision": pl.String(), "published_at": TIMESTAMP}
#: ``arena.dumps`` as read here (one row per revision a run fetched).
DUMPS_SCHEMA: dict[str, pl.DataType] = {
    "revision": pl.String(), "first_seen": TIMESTAMP, "status": pl.String(), "status_detail": pl.String()}
#: ``arena_versions.builds`` as read here (one row per run that worked on a revision).
BUILDS_SCHEMA: dict[str, pl.DataType] = {
    "build_id": pl.String(), "revision": pl.String(), "started_at": TIMESTAMP, "status": pl.String(),
    "status_detail": pl.String()}
#: The refresh runs of a Dagster instance: run id, the revision it was requested for, its status
#: (``DagsterRunStatus`` value, e.g. ``QUEUED``, ``STARTED``, ``FAILURE``) and creation time (UTC).
RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(), "revision": pl.String(), "status": pl.String(), "created_at": TIMESTAMP}

# the states of a revision seen but not live (its latest attempt's)
QUEUED, RUNNING = "queued", "running"
REFUSED, FAILED, ABANDONED, CANCELED = "refused", "failed", "abandoned", "canceled"
UNPUBLISHED, SUPERSEDED, NOT_RUN = "not published", "superseded", "not run"
#: states in which the revision is still on its way (not a failure)
IN_PROGRESS = (QUEUED, RUNNING)

_QUEUED_RUNS = ["QUEUED", "NOT_STARTED"]
_ACTIVE_RUNS = ["STARTING", "STARTED"]
_CANCELED_RUNS = ["CANCELING", "CANCELED"]
#: what a reason shows of a long detail (the gate's message can name many models)
DETAIL_CHARS = 300


@dataclass(frozen=True)
class WarehouseRecords:
    """The small warehouse tables freshness is computed from (empty when the warehouse has none)."""

    publications: pl.DataFrame
    dumps: pl.DataFrame
    builds: pl.DataFrame

    @classmethod
    def empty(cls) -> WarehouseRecords:
        return cls(pl.DataFrame(schema=PUBLICATIONS_SCHEMA), pl.DataFrame(schema=DUMPS_SCHEMA),
                   pl.DataFrame(schema=BUILDS_SCHEMA))


def read_records(con: duckdb.DuckDBPyConnection, schema: str) -> WarehouseRecords:
    """Read ``schema.publications``, ``schema.dumps`` and ``arena_versions.builds`` (one row per
    publication, revision and run: small), each empty when the warehouse does not have it yet."""
    def table(schema_name: str, name: str, columns: dict[str, pl.DataType]) -> pl.DataFrame:
        if not relation_exists(con, schema_name, name):
            return pl.DataFrame(schema=columns)
        frame = read_frame(con, f"SELECT {', '.join(columns)} FROM {quoted(schema_name, name)}")
        return frame.cast(columns)  # type: ignore[arg-type]

    return WarehouseRecords(table(schema, PUBLICATIONS_TABLE, PUBLICATIONS_SCHEMA),
                            table(schema, DUMPS_TABLE, DUMPS_SCHEMA),
                            table(VERSIONS_SCHEMA, "builds", BUILDS_SCHEMA))


def format_age(age: dt.timedelta) -> str:
    """An age in minutes below an hour, in hours below two days, else in days."""
    hours = age.total_seconds() / 3600
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


@dataclass(frozen=True)
class LiveBoard:
    """The live publication: the newest row of ``arena.publications``."""

    publication_id: int
    revision: str
    published_at: dt.datetime
    #: when this revision was first published (a re-rank publishes the same revision again)
    revision_live_since: dt.datetime


@dataclass(frozen=True)
class Pending:
    """A dump revision seen after the live one and not published, with its latest attempt."""

    revision: str
    state: str
    reason: str
    first_seen: dt.datetime
    last_seen: dt.datetime
    #: the run (or build) of the latest attempt, if any
    run_id: str | None = None
    detail: str | None = None

    @property
    def in_progress(self) -> bool:
        return self.state in IN_PROGRESS


@dataclass(frozen=True)
class Freshness:
    """How fresh the live board is, at ``now``."""

    now: dt.datetime
    max_age: dt.timedelta
    live: LiveBoard | None
    #: the revisions seen at or after the live one and not published, the most recently seen first
    pending: list[Pending] = field(default_factory=list)
    #: why nothing could be read although something was published (the warehouse file is missing), or None
    missing: str | None = None

    @property
    def age(self) -> dt.timedelta | None:
        return None if self.live is None else self.now - self.live.published_at

    @property
    def fresh(self) -> bool:
        """Whether a publication is live and is at most ``max_age`` old."""
        return self.age is not None and self.age <= self.max_age

    @property
    def newest(self) -> Pending | None:
        """The most recently seen revision that is not published, or None."""
        return self.pending[0] if self.pending else None

    def age_text(self) -> str:
        """One line on the live publication's age against the limit."""
        if self.live is None:
            return self.missing or "nothing is published yet"
        live, age = self.live, self.age
        verdict = "within" if self.fresh else "over"
        return (f"publication {live.publication_id} (revision {short_revision(live.revision)}) is "
                f"{format_age(age)} old, {verdict} the limit of {format_age(self.max_age)}")

    def pending_text(self) -> str:
        """One line on the newest revision seen but not published (or that there is none)."""
        newest = self.newest
        if newest is None:
            return "no newer dump revision seen" if self.live else "no dump revision seen"
        more = f" ({len(self.pending) - 1} other unpublished revision(s) seen too)" if len(self.pending) > 1 else ""
        which = "newer dump revision" if self.live else "dump revision"
        return f"{which} {short_revision(newest.revision)} is not published: {newest.reason}{more}"

    def summary(self) -> str:
        """The whole state in one line (what a sensor tick shows)."""
        return f"{self.age_text()}; {self.pending_text()}"


def missing_warehouse(path: str, store: str | None, published: list[str]) -> str | None:
    """Why a warehouse file that does not exist is missing rather than not written yet, in one line; None
    when nothing says it was ever there.

    Parameters
    ----------
    path
        The warehouse file (ARENA_WAREHOUSE), which does not exist.
    store
        The pipeline's store folder when it exists (written by every run since the first), else None.
    published
        Revisions a Dagster instance records as published (its runs' ``arena/published_revision`` tags).
    """
    if published:
        return (f"the warehouse file {path} is missing, yet revision {short_revision(sorted(published)[-1])} was "
                "published (the Dagster instance records it): restore the file, or run the pipeline to publish again")
    if store is not None:
        return (f"the warehouse file {path} is missing, yet the pipeline's store folder {store} exists: it was moved "
                "or deleted (or the first run has not published yet); a run publishes it again")
    return None


def _one_line(text: pl.Expr) -> pl.Expr:
    """:func:`one_line` with ``limit=DETAIL_CHARS``, as an expression."""
    flat = text.str.replace_all(r"\s+", " ").str.strip_chars()
    return pl.when(flat.str.len_chars() > DETAIL_CHARS).then(
        pl.concat_str(flat.str.slice(0, DETAIL_CHARS - 1), pl.lit("…"))).otherwise(flat)


def _seen(dumps: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per revision: when it was first and last seen (a requested run, or a fetch)."""
    return (
        pl.concat([dumps.select("revision", seen="first_seen"), runs.select("revision", seen="created_at")])
        .drop_nulls()
        .group_by("revision")
        .agg(first_seen=pl.col("seen").min(), last_seen=pl.col("seen").max())
    )


def _attempts(builds: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Every run or build on a revision with its state, one row per run id (a build's id is its run's)."""
    joined = builds.rename({"build_id": "run_id", "status": "build_status", "status_detail": "build_detail"}).join(
        runs.rename({"revision": "run_revision", "status": "run_status"}), on="run_id", how="full", coalesce=True)
    build, run = pl.col("build_status"), pl.col("run_status")
    state = (
        pl.when(build == "refused").then(pl.lit(REFUSED))
        .when(build == "failed").then(pl.lit(FAILED))
        .when(build == "abandoned").then(pl.lit(ABANDONED))
        .when(build == "published").then(pl.lit(SUPERSEDED))
        .when(run.is_in(_QUEUED_RUNS)).then(pl.lit(QUEUED))
        .when(run.is_in(_ACTIVE_RUNS)).then(pl.lit(RUNNING))
        .when(run == "FAILURE").then(pl.lit(FAILED))
        .when(run.is_in(_CANCELED_RUNS)).then(pl.lit(CANCELED))
        .when(run == "SUCCESS").then(pl.lit(UNPUBLISHED))
        .when(build == "running").then(pl.lit(RUNNING))
        .otherwise(pl.lit(NOT_RUN))
    )
    return joined.select(
        pl.coalesce("revision", "run_revision").alias("revision"),
        "run_id",
        pl.coalesce("created_at", "started_at").alias("at"),
        state.alias("state"),
        pl.col("build_detail"),
    ).drop_nulls(["revision", "at"])


def _reason() -> pl.Expr:
    """The one-line reason of a pending revision's state (``detail`` already cut to DETAIL_CHARS)."""
    state, detail = pl.col("state"), pl.col("detail")
    # a build's id is the id of the run that made it (in this Dagster instance or another)
    who = pl.when(pl.col("run_id").is_null()).then(pl.lit("")).otherwise(pl.format(" (run {})", "run_id"))
    failed_detail = detail.fill_null("the run failed before the warehouse recorded why; see the run's logs")
    return (
        pl.when(state == REFUSED).then(pl.format("refused by the gate{}: {}", who, detail.fill_null("")))
        .when(state == FAILED).then(pl.format("failed{}: {}", who, failed_detail))
        .when(state == ABANDONED).then(pl.format("abandoned{}: {}", who, detail.fill_null("killed")))
        .when(state == CANCELED).then(pl.format("canceled{}", who))
        .when(state == UNPUBLISHED).then(pl.format("its run succeeded without publishing{}", who))
        .when(state == SUPERSEDED).then(pl.format("published before, then replaced by an older revision's "
                                                  "publication{}", who))
        .when(state.is_in(IN_PROGRESS)).then(pl.format("{}{}", state, who))
        .otherwise(pl.lit("seen, but no run has started for it"))
    )


def assess(records: WarehouseRecords, runs: pl.DataFrame, *, now: dt.datetime,
           max_age: dt.timedelta) -> Freshness:
    """The live publication's age and the revisions seen at or after the live one and not published.

    Parameters
    ----------
    records
        The warehouse's publications, dumps and builds (:func:`read_records`).
    runs
        The Dagster instance's refresh runs (:data:`RUNS_SCHEMA`); a revision is seen when a run
        was requested for it.
    now
        The time of the assessment (naive UTC, as the warehouse's timestamps).
    max_age
        How old the live publication may be and still count as fresh.

    Returns
    -------
    Freshness
        With ``pending`` ordered by when each revision was last seen, the latest first.
    """
    pubs = records.publications.sort("publication_id")
    runs = runs.cast(RUNS_SCHEMA)  # type: ignore[arg-type]
    seen = _seen(records.dumps, runs)
    live = None
    candidates = seen
    if pubs.height:
        row = pubs.row(-1, named=True)
        since = pubs.filter(pl.col("revision") == row["revision"]).get_column("published_at").min()
        live = LiveBoard(row["publication_id"], row["revision"], row["published_at"], since)
        live_seen = seen.filter(pl.col("revision") == live.revision).get_column("last_seen").max() or since
        candidates = seen.filter((pl.col("revision") != live.revision) & (pl.col("last_seen") >= live_seen))
    latest = _attempts(records.builds, runs).sort("at").group_by("revision", maintain_order=True).last()
    dumps = records.dumps.select("revision", dump_status="status", dump_detail="status_detail")
    rows = (
        candidates.join(latest, on="revision", how="left")
        .join(dumps, on="revision", how="left")
        .with_columns(
            # a dump rejected at the fetch has no build: its record says why
            state=pl.when(pl.col("state").is_null() & (pl.col("dump_status") == "failed"))
            .then(pl.lit(FAILED)).otherwise(pl.col("state").fill_null(NOT_RUN)),
            detail=_one_line(pl.coalesce("build_detail",
                                         pl.when(pl.col("dump_status") == "failed").then("dump_detail"))),
        )
        .with_columns(reason=_reason())
        .sort(["last_seen", "first_seen"], descending=True)
    )
    pending = [Pending(r["revision"], r["state"], r["reason"], r["first_seen"], r["last_seen"],
                       r["run_id"], r["detail"])
               for r in rows.iter_rows(named=True)]
    return Freshness(now, max_age, live, pending)


def unpublished_revisions(con: duckdb.DuckDBPyConnection, schema: str,
                          now: dt.datetime | None = None) -> list[Pending]:
    """The dump revisions fetched after the live one and not published, as the warehouse alone records
    them (what the report can say without a Dagster instance: a revision requested but not fetched
    yet is not known here), the most recently seen first; none for a warehouse whose tables predate
    the columns this reads."""
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    try:
        records = read_records(con, schema)
    except duckdb.BinderException:  # a warehouse written before these tables had their columns: not recorded
        return []
    return assess(records, pl.DataFrame(schema=RUNS_SCHEMA), now=now, max_age=dt.timedelta(days=36_500)).pending
