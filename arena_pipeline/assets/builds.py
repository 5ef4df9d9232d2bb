"""What every asset of a run shares: its build (run-scoped table versions) and the settings it records."""

from __future__ import annotations

import datetime as dt
import hashlib
from importlib import metadata as importlib_metadata

import dagster as dg
import polars as pl

from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.versions import Build, FailureOf, NothingPublishedError, current_build

FINISHED_RUN_STATUSES = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def run_build(context, con) -> Build:
    """The build of this run (its raw_dump's, or one on the live publication for a partial run)."""
    # asset and asset-check contexts both have .run and .instance
    return build_of_run(con, context.run.run_id, run_failure(context.instance))


def build_of_run(con, run_id: str, failure_of: FailureOf | None = None) -> Build:
    """The build of run ``run_id``; a failure without retries when nothing is published to build on."""
    try:
        return current_build(con, SCHEMA, run_id, failure_of)
    except NothingPublishedError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc


def run_failure(instance: dg.DagsterInstance) -> FailureOf:
    """``failure_of(build_id)`` for ``core.store.versions.close_abandoned_builds``: why the build's run
    failed, from the instance's record of it (its first failed step and that step's error, say a
    ``WarehouseLockedError`` of a step that could not open the work file to record it), or None when the
    run did not fail (a killed process leaves its run started: the build is then 'abandoned')."""
    def failure_of(build_id: str) -> str | None:
        run = instance.get_run_by_id(build_id)
        if run is None or run.status != dg.DagsterRunStatus.FAILURE:
            return None
        for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE):
            for entry in instance.all_logs(build_id, of_type=kind):
                event = entry.dagster_event
                error = getattr(event.event_specific_data, "error", None) if event else None
                while error is not None and error.cause is not None and error.cls_name == "DagsterExecutionStepExecutionError":
                    error = error.cause  # the user code's error, not Dagster's wrapper
                if error is not None:
                    message = " ".join((error.message or "").split())
                    where = f"step {event.step_key}" if event.step_key else "the run"
                    return f"{where} failed: {message or error.cls_name}"
        return "the run failed before the warehouse recorded why; see the run's logs"

    return failure_of


def table_sha256(frame: pl.DataFrame) -> str:
    """A content hash of a small table (the merged alias table), recorded with what it produced."""
    return hashlib.sha256(frame.write_csv().encode()).hexdigest()


def package_version() -> str:
    """The installed arena_pipeline version."""
    try:
        return importlib_metadata.version("arena_pipeline")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def finished_check(instance: dg.DagsterInstance, stale_hours: float):
    """``is_finished(build_id, started_at)`` for retention: a run the instance knows to be over, or a
    build older than ``stale_hours`` (a killed run, or one launched from another instance)."""
    def is_finished(build_id: str, started_at: dt.datetime | None) -> bool:
        run = instance.get_run_by_id(build_id)
        if run is not None and run.status in FINISHED_RUN_STATUSES:
            return True
        if started_at is None:
            return True
        age = dt.datetime.now(dt.UTC).replace(tzinfo=None) - started_at
        return age > dt.timedelta(hours=stale_hours)

    return is_finished
