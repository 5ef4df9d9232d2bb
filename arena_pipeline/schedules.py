"""The nightly refresh schedule: runs only when the dump's revision has not been refreshed yet."""

import dagster as dg

from arena_pipeline.constants import NIGHTLY_CRON
from arena_pipeline.jobs import refresh_job
from arena_pipeline.refresh import decide, run_request
from arena_pipeline.resources import DumpSource, Warehouse


def make_nightly_schedule(cron: str = NIGHTLY_CRON) -> dg.ScheduleDefinition:
    """The nightly schedule at ``cron`` (UTC); pass another cron to change the time."""

    @dg.schedule(
        name="nightly_refresh",
        job=refresh_job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Nightly refresh; skips (no download, no recomputation) when the revision is already done; "
        "the run ranks with the live publication's ranking settings. Every skipped tick says why in one line; a "
        "requested run's tag arena/requested_because says why it was requested.",
    )
    def nightly_refresh(context: dg.ScheduleEvaluationContext, dump_source: DumpSource, warehouse: Warehouse):
        decision = decide(context.instance, dump_source, cursor=None, warehouse=warehouse)
        if decision.skip_reason:
            return dg.SkipReason(decision.skip_text())
        return run_request(decision)

    return nightly_refresh


nightly_refresh = make_nightly_schedule()
