"""What the board-freshness checks and sensor share: the warehouse's records and the instance's refresh runs, assessed.

Two checks on ``publication_gate``: ``publication_age`` (the live publication, as ``arena.publications``
records it, is at most ``Warehouse.max_publication_age_hours`` old) and ``unpublished_newer_dump``
(no dump revision seen after the live one waits unpublished; else which, and why: queued, running,
refused by the gate, failed). ``core.freshness.freshness`` says why the publication's own time is the age,
not the last materialization's. The checks run after every publication (a refresh or re-rank run
selects them with ``publication_gate``) and ``board_freshness_sensor`` reports them between runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import polars as pl

from arena_pipeline.assets.publication_gate import PUBLICATION_GATE
from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG, SCHEMA
from arena_pipeline.core.freshness.freshness import (
    RUNS_SCHEMA,
    Freshness,
    WarehouseRecords,
    assess,
    format_age,
    missing_warehouse,
    read_records,
)
from arena_pipeline.core.text import short_revision
from arena_pipeline.jobs import refresh_job
from arena_pipeline.resources import Warehouse

AGE_CHECK = "publication_age"
PENDING_CHECK = "unpublished_newer_dump"
#: how many of the newest refresh runs are looked at for the revisions they were requested for
RUNS_LOOKED_AT = 200
SETTING = "ARENA_MAX_PUBLICATION_AGE_HOURS (Warehouse.max_publication_age_hours)"


def refresh_runs(instance: dg.DagsterInstance) -> pl.DataFrame:
    """The newest refresh runs requested for a dump revision (the sensor's and the schedule's,
    tagged ``arena/revision``), as :data:`core.freshness.freshness.RUNS_SCHEMA` (creation time in naive UTC)."""
    records = instance.get_run_records(dg.RunsFilter(job_name=refresh_job.name), limit=RUNS_LOOKED_AT)
    rows = [
        {"run_id": r.dagster_run.run_id, "revision": r.dagster_run.tags[REVISION_TAG],
         "status": r.dagster_run.status.value,
         "created_at": r.create_timestamp.astimezone(dt.UTC).replace(tzinfo=None)}
        for r in records if REVISION_TAG in r.dagster_run.tags
    ]
    return pl.DataFrame(rows, schema=RUNS_SCHEMA)


def assess_board(instance: dg.DagsterInstance, warehouse: Warehouse, timeout_s: float) -> Freshness:
    """The board's freshness now: the warehouse read once, read-only (waiting at most ``timeout_s``
    for a writer's lock), and the instance's refresh runs.

    Raises
    ------
    ValueError
        If ARENA_MAX_PUBLICATION_AGE_HOURS is not a positive number.
    WarehouseLockedError, WarehouseCorruptError
        If the warehouse cannot be read.
    """
    max_age = warehouse.max_publication_age()
    path = warehouse.database_path()
    records = WarehouseRecords.empty()
    missing = None
    if Path(path).is_file():
        con = warehouse.reader(timeout_s=timeout_s)
        try:
            records = read_records(con, SCHEMA)
        finally:
            con.close()
    else:  # never published, or the file is gone: the store folder and the instance tell them apart
        store = warehouse.store_path()
        published = [v for _, values in instance.get_run_tags(tag_keys=[PUBLISHED_TAG]) for v in values]
        missing = missing_warehouse(str(Path(path).resolve()), str(store) if store.is_dir() else None, published)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return dataclasses.replace(assess(records, refresh_runs(instance), now=now, max_age=max_age), missing=missing)


def _utc(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _timestamp(moment: dt.datetime) -> dg.TimestampMetadataValue:
    return dg.MetadataValue.timestamp(moment.replace(tzinfo=dt.UTC))


@dataclass(frozen=True)
class Outcome:
    """One check's result, as a run's ``AssetCheckResult`` or a sensor's ``AssetCheckEvaluation``."""

    check_name: str
    passed: bool
    severity: dg.AssetCheckSeverity
    description: str
    metadata: dict = field(default_factory=dict)

    def result(self) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(asset_key=PUBLICATION_GATE, check_name=self.check_name, passed=self.passed,
                                   severity=self.severity, description=self.description, metadata=self.metadata)

    def evaluation(self) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(asset_key=PUBLICATION_GATE, check_name=self.check_name, passed=self.passed,
                                       severity=self.severity, description=self.description, metadata=self.metadata,
                                       blocking=False)


def age_outcome(freshness: Freshness) -> Outcome:
    """``publication_age``: described in absolute times, so an evaluation does not go out of date."""
    limit = freshness.max_age
    common = {"max_age_hours": round(limit.total_seconds() / 3600, 3), "setting": SETTING}
    live = freshness.live
    if live is None and freshness.missing:
        return Outcome(AGE_CHECK, False, dg.AssetCheckSeverity.ERROR, freshness.missing, common)
    if live is None:
        return Outcome(AGE_CHECK, False, dg.AssetCheckSeverity.WARN,
                       "nothing is published yet: materialize the whole graph (or start the schedule or "
                       "the new-dump sensor)", common)
    until = live.published_at + limit
    which = f"publication {live.publication_id} (revision {short_revision(live.revision)}), published " \
            f"{_utc(live.published_at)}"
    description = (f"{which}, is fresh until {_utc(until)} (limit {format_age(limit)})" if freshness.fresh
                   else f"{which}, has been older than the limit of {format_age(limit)} since {_utc(until)}")
    return Outcome(AGE_CHECK, freshness.fresh, dg.AssetCheckSeverity.WARN, description, {
        **common,
        "publication_id": live.publication_id,
        "revision": live.revision,
        "published_at": _timestamp(live.published_at),
        "fresh_until": _timestamp(until),
        "revision_live_since": _timestamp(live.revision_live_since),
        "age_hours_at_evaluation": round(freshness.age.total_seconds() / 3600, 3),
    })


def pending_outcome(freshness: Freshness) -> Outcome:
    """``unpublished_newer_dump``: WARN while the newest revision's run is queued or running, ERROR
    when it ended without a publication (refused by the gate, failed, canceled, abandoned)."""
    live = freshness.live
    common = {"live_revision": live.revision if live else ""}
    newest = freshness.newest
    if newest is None:
        text = (f"no dump revision seen after the live one ({short_revision(live.revision)})" if live
                else "no dump revision seen yet")
        return Outcome(PENDING_CHECK, True, dg.AssetCheckSeverity.WARN, text, common)
    which = "newer dump revision" if live else "dump revision"
    description = (f"{which} {short_revision(newest.revision)} (first seen {_utc(newest.first_seen)}) is not "
                   f"published: {newest.reason}")
    if len(freshness.pending) > 1:
        description += f"; {len(freshness.pending) - 1} other unpublished revision(s) seen since the live one"
    severity = dg.AssetCheckSeverity.WARN if newest.in_progress else dg.AssetCheckSeverity.ERROR
    metadata = {
        **common,
        "pending_revision": newest.revision,
        "state": newest.state,
        "reason": newest.reason,
        "first_seen": _timestamp(newest.first_seen),
        "last_seen": _timestamp(newest.last_seen),
        "pending": dg.MetadataValue.json([
            {"revision": p.revision, "state": p.state, "reason": p.reason, "run_id": p.run_id,
             "first_seen": p.first_seen.isoformat(), "last_seen": p.last_seen.isoformat()}
            for p in freshness.pending]),
    }
    if newest.run_id:
        metadata["run"] = dg.MetadataValue.dagster_run(newest.run_id)
    return Outcome(PENDING_CHECK, False, severity, description, metadata)


def outcomes(freshness: Freshness) -> list[Outcome]:
    """Both checks' outcomes."""
    return [age_outcome(freshness), pending_outcome(freshness)]


def state_key(freshness: Freshness) -> str:
    """What the sensor remembers (its cursor): a change of it is reported, anything else is not."""
    newest = freshness.newest
    return json.dumps({
        "publication": freshness.live.publication_id if freshness.live else None,
        "missing": freshness.missing,
        "fresh": freshness.fresh,
        "max_age_s": freshness.max_age.total_seconds(),
        "pending": [newest.revision, newest.state, newest.run_id] if newest else None,
        "pending_count": len(freshness.pending),
    }, sort_keys=True)
