"""The new-dump sensor: a run when the dump's revision changes, a skip (with the reason) otherwise."""

import dagster as dg

from arena_pipeline.constants import SENSOR_INTERVAL_SECONDS
from arena_pipeline.jobs import refresh_job
from arena_pipeline.refresh import decide, run_request
from arena_pipeline.resources import DumpSource, Warehouse


def make_new_dump_sensor(interval_seconds: int = SENSOR_INTERVAL_SECONDS) -> dg.SensorDefinition:
    """The new-dump sensor, looking at most every ``interval_seconds``."""

    @dg.sensor(
        name="new_dump_sensor",
        job=refresh_job,
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Requests a refresh when the Hub revision (or the local files' fingerprint) changes; "
        "the cursor and the run key are the revision, so a revision is refreshed once; the run ranks with "
        "the live publication's ranking settings.",
    )
    def new_dump_sensor(context: dg.SensorEvaluationContext, dump_source: DumpSource, warehouse: Warehouse):
        """One cheap look-up per tick: the Hub's commit sha of ARENA_REVISION, or a local fingerprint.

        With ARENA_DATASETS / ARENA_DISCOVER: each dump's sha (one listing covers the discovered
        ones); a new dataset or a moved revision changes the combined revision, so one run loads
        and publishes them all.
        """
        decision = decide(context.instance, dump_source, context.cursor, warehouse)
        if decision.revision is not None and decision.cursor() != context.cursor:
            context.update_cursor(decision.cursor())
        if decision.skip_reason:
            return dg.SkipReason(decision.skip_reason)
        if decision.changes:
            context.log.info(f"dumps new/changed since the last tick: {decision.changes}")
        return run_request(decision)

    return new_dump_sensor


new_dump_sensor = make_new_dump_sensor()
