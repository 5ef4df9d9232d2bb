"""The sensors: the new-dump sensor (a run when the dump's revision changes, a skip with the reason
otherwise) and the board-freshness sensor (the freshness checks reported between runs, and the report
page brought up to the live publication)."""

from pathlib import Path

import dagster as dg
import duckdb

from arena_pipeline.constants import SENSOR_INTERVAL_SECONDS
from arena_pipeline.core.store.warehouse import WarehouseCorruptError, WarehouseLockedError
from arena_pipeline.core.text import one_line
from arena_pipeline.freshness import assess_board, outcomes, state_key
from arena_pipeline.jobs import refresh_job
from arena_pipeline.presentation.report import catch_up_report, why_not_written
from arena_pipeline.refresh import REASON_CHARS, SETTINGS_WAIT_S, decide, run_request
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse


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
        "one line. Re-renders the report page (ARENA_REPORT) when it is behind the live publication (a run "
        "killed or unable to write it after publishing). Reads the warehouse read-only (waiting at most 5 s "
        "for a run's lock) and the instance's refresh runs; never launches anything.",
    )
    def board_freshness_sensor(context: dg.SensorEvaluationContext, warehouse: Warehouse,
                               report_settings: ReportSettings):
        """Bring the report page up to the live publication when it is behind; report the checks when
        their outcome changed since the last report (the cursor); the tick says the state every time."""
        failure = None
        try:
            freshness = assess_board(context.instance, warehouse, timeout_s=SETTINGS_WAIT_S)
        except WarehouseLockedError:  # the page is read from the same file: not waited for twice
            return dg.SkipReason(f"not evaluated: a run has held the warehouse for more than {SETTINGS_WAIT_S:g} s; "
                                 "the checks' last evaluations stand")
        except (ValueError, WarehouseCorruptError, duckdb.Error) as exc:
            failure = one_line(f"not evaluated: {type(exc).__name__}: {exc}", REASON_CHARS)
        page = report_catch_up(warehouse, report_settings)
        if page:
            context.log.info(page)
        ending = f"; {page}" if page else ""
        if failure:
            return dg.SkipReason(failure + ending)
        key = state_key(freshness)
        if key == context.cursor:
            return dg.SkipReason(f"{freshness.summary()} (as last reported){ending}")
        return dg.SensorResult(skip_reason=freshness.summary() + ending, cursor=key,
                               asset_events=[o.evaluation() for o in outcomes(freshness)])

    return board_freshness_sensor


def report_catch_up(warehouse: Warehouse, report_settings: ReportSettings) -> str | None:
    """Re-render the report page when it is behind the live publication (``catch_up_report``), from the
    readers' snapshot (no writer ever holds it; the wait is bounded by ``SETTINGS_WAIT_S`` all the same).

    Returns what was done in one line, or None when the page shows the live publication (or nothing is
    published). Never raises: a page that cannot be written is the line "report not re-rendered: <why>",
    and the next tick tries again (cheaply: the publication is read only once the page is known behind).
    """
    try:
        path = warehouse.database_path()
        if not Path(path).is_file():  # nothing published yet
            return None
        con = warehouse.reader(timeout_s=SETTINGS_WAIT_S)
        try:
            return catch_up_report(con, report_settings.path(path), warehouse=path)
        finally:
            con.close()
    except Exception as exc:  # a tick never raises for the page: the checks are still evaluated
        return one_line(f"report not re-rendered: {why_not_written(exc)}", REASON_CHARS)


board_freshness_sensor = make_board_freshness_sensor()
