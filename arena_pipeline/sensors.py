"""The sensors: the new-dump sensor (a run when the dump's revision changes, a skip with the reason
otherwise) and the board-freshness sensor (the freshness checks reported between runs)."""

import dagster as dg
import duckdb

from arena_pipeline.constants import SENSOR_INTERVAL_SECONDS
from arena_pipeline.core.publication.freshness import one_line
from arena_pipeline.core.store.warehouse import WarehouseCorruptError, WarehouseLockedError
from arena_pipeline.freshness import assess_board, outcomes, state_key
from arena_pipeline.jobs import refresh_job
from arena_pipeline.refresh import REASON_CHARS, SETTINGS_WAIT_S, decide, run_request
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
        "the live publication's ranking settings. Every skipped tick says why in one line; a requested "
        "run's tag arena/requested_because says why it was requested.",
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
            return dg.SkipReason(decision.skip_text())
        if decision.changes:
            context.log.info(f"dumps new/changed since the last tick: {decision.changes}")
        return run_request(decision)

    return new_dump_sensor


new_dump_sensor = make_new_dump_sensor()


def make_board_freshness_sensor(interval_seconds: int = SENSOR_INTERVAL_SECONDS) -> dg.SensorDefinition:
    """The board-freshness sensor, evaluating at most every ``interval_seconds``."""

    @dg.sensor(
        name="board_freshness_sensor",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Evaluates the freshness checks of publication_gate (publication_age, unpublished_newer_dump) "
        "between runs and reports them as check evaluations (no run); a tick's text is the board's state in "
        "one line. Reads the warehouse read-only (waiting at most 5 s for a run's lock) and the instance's "
        "refresh runs; never launches anything.",
    )
    def board_freshness_sensor(context: dg.SensorEvaluationContext, warehouse: Warehouse):
        """Report the checks when their outcome changed since the last report (the cursor); the
        tick says the state every time."""
        try:
            freshness = assess_board(context.instance, warehouse, timeout_s=SETTINGS_WAIT_S)
        except WarehouseLockedError:
            return dg.SkipReason(f"not evaluated: a run has held the warehouse for more than {SETTINGS_WAIT_S:g} s; "
                                 "the checks' last evaluations stand")
        except (ValueError, WarehouseCorruptError, duckdb.Error) as exc:
            return dg.SkipReason(one_line(f"not evaluated: {type(exc).__name__}: {exc}", REASON_CHARS))
        key = state_key(freshness)
        if key == context.cursor:
            return dg.SkipReason(f"{freshness.summary()} (as last reported)")
        return dg.SensorResult(skip_reason=freshness.summary(), cursor=key,
                               asset_events=[o.evaluation() for o in outcomes(freshness)])

    return board_freshness_sensor


board_freshness_sensor = make_board_freshness_sensor()
