"""Asset checks: the Great Expectations suites in expectations/ run on the flat tables of each dump.

Each table whose ``TableSpec`` says ``checked`` (on its asset) gets two checks from one validation: ``<table>_errors`` (ERROR severity, blocking, so
nothing downstream, leaderboards and publication included, is materialized from data that fails
it) and ``<table>_warnings`` (WARN severity, never blocking). Every run's results are appended to
``arena.quality_results``, and the outcome is recorded on the exact table version checked, which the
publication gate requires to have passed. The checked version is the check's input through the version
store (a ``TableRef``: this run's version of the table, or the live one of the same dump).

A checked version whose rows, suite and libraries were checked before (``core.store.check_reuse.check_key``:
the version's inputs key, the suite file's sha256, the code and the library versions) is not validated again:
that check's outcome is recorded on it and its results copied under it (an unchanged re-run runs no suite).

The validation (``core.validation.quality.validate_relation``) reads the checked version from DuckDB in batches
of at most ~``DEFAULT_BATCH_CELLS`` values of the suite's columns, so the check's memory follows the
batch, not the table; its report is the one a single whole-table validation gives.

``board_freshness`` (WARN or ERROR, never blocking) checks ``publication_gate``: the live publication's
age and the newer dump revisions seen but not published (``arena_pipeline/freshness.py``).

``models_confusable`` (WARN, never blocking) names the model names of ``arena.models`` that look
alike (Unicode TR39 skeletons of their visible form, invisible characters removed): add an alias
row when they are one model.
"""

import datetime as dt
import hashlib

import dagster as dg
import polars as pl

from arena_pipeline.assets.models import MODELS
from arena_pipeline.assets.publication_gate import PUBLICATION_GATE
from arena_pipeline.assets.version_store import TableRef, stored_input
from arena_pipeline.constants import QUALITY_RESULTS_TABLE, SCHEMA
from arena_pipeline.core.dataset.models import confusable_pairs
from arena_pipeline.core.store.check_reuse import check_key, recorded_check, reuse_check
from arena_pipeline.core.store.records import ensure_quality_results, record_dump
from arena_pipeline.core.store.versions import finish_build, record_checks
from arena_pipeline.core.store.warehouse import quoted, read_frame
from arena_pipeline.core.text import one_line
from arena_pipeline.core.validation.quality import QualityReport, suite_path, validate_relation
from arena_pipeline.freshness import AGE_CHECK, PENDING_CHECK, SETTING, assess_board, outcomes
from arena_pipeline.resources import Warehouse

SAMPLE_SIZE = 10


def suite_sha256(table: str) -> str:
    """The sha256 of the suite file a table is checked with (recorded with every check and publication)."""
    return hashlib.sha256(suite_path(table).read_bytes()).hexdigest()


def store_results(con, revision: str, table: str, report: QualityReport, version: str | None = None) -> int:
    """Append a validation's rows to ``arena.quality_results``; return how many."""
    name = ensure_quality_results(con, SCHEMA)
    rows = report.results.select(  # noqa: F841 - DuckDB reads `rows` by name below
        pl.lit(revision).alias("dump_revision"),
        pl.lit(table).alias("table_name"),
        "suite",
        "expectation_id",
        "expectation_type",
        pl.col("column").alias("column_name"),
        "severity",
        "success",
        "element_count",
        "unexpected_count",
        "unexpected_percent",
        "sample_ids",
        pl.lit(dt.datetime.now(dt.UTC).replace(tzinfo=None)).alias("checked_at"),
        pl.lit(version, dtype=pl.String).alias("table_version"),
    ).to_arrow()
    con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM rows")
    return report.results.height


def _failures_md(failed: pl.DataFrame) -> str:
    if failed.is_empty():
        return "none"
    lines = ["| expectation | column | unexpected | % | sample ids |", "|---|---|---|---|---|"]
    for row in failed.iter_rows(named=True):
        pct = row["unexpected_percent"]
        ids = ", ".join((row["sample_ids"] or [])[:5])
        lines.append(f"| {row['expectation_id']} | {row['column'] or ''} | {row['unexpected_count'] or 0} | "
                     f"{'' if pct is None else f'{pct:.3f}'} | {ids} |")
    return "\n".join(lines)


def _result(report: QualityReport, severity: str, check_name: str, asset_key: dg.AssetKey) -> dg.AssetCheckResult:
    failed = report.failures(severity)
    checked = report.results.filter(pl.col("severity") == severity)
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=check_name,
        passed=failed.is_empty(),
        severity=dg.AssetCheckSeverity.ERROR if severity == "error" else dg.AssetCheckSeverity.WARN,
        metadata={
            "suite": report.suite,
            "rows": report.row_count,
            "expectations": checked.height,
            "failed": failed.height,
            "unexpected_rows": int(failed["unexpected_count"].fill_null(0).sum()),
            "failures": dg.MetadataValue.md(_failures_md(failed)),
            "failed_expectations": dg.MetadataValue.json(
                [
                    {
                        "expectation": r["expectation_id"],
                        "column": r["column"],
                        "unexpected_count": r["unexpected_count"],
                        "unexpected_percent": r["unexpected_percent"],
                        "sample_ids": (r["sample_ids"] or [])[:SAMPLE_SIZE],
                        "sample_values": (r["sample_values"] or [])[:SAMPLE_SIZE],
                        "observed": r["observed_value"],
                        "exception": r["exception"],
                    }
                    for r in failed.iter_rows(named=True)
                ]
            ),
            "seconds": round(report.duration_s, 3),
        },
    )


def quality_check(table: str) -> dg.AssetChecksDefinition:
    """The two checks of ``expectations/<table>.json`` on ``arena.<table>``: made for every table whose
    :class:`TableSpec` says ``checked`` (``definitions.ASSET_CHECKS``), never listed by hand."""
    key = dg.AssetKey([SCHEMA, table])
    errors, warnings = f"{table}_errors", f"{table}_warnings"

    @dg.multi_asset_check(
        name=f"{table}_quality",
        specs=[
            dg.AssetCheckSpec(errors, asset=key, blocking=True,
                              description=f"Error-severity expectations of expectations/{table}.json "
                              "(a failure would corrupt a ranking); blocks everything downstream, and the "
                              "publication gate publishes only a version that passed it."),
            dg.AssetCheckSpec(warnings, asset=key,
                              description=f"Warning-severity expectations of expectations/{table}.json."),
        ],
        ins={"checked": stored_input(key)},
    )
    def suite_check(context: dg.AssetCheckExecutionContext, warehouse: Warehouse, checked: TableRef):
        # the same rows, suite and libraries checked before (an unchanged re-run): that outcome, not validated again
        suite = suite_sha256(table)
        # one hold on the work file: leaving it brings the readers' targets level (a snapshot that cannot be
        # written: a warning)
        with warehouse.store().work(warn=context.log.warning) as con:
            reuse_key = check_key(con, checked.version, suite)
            earlier = recorded_check(con, SCHEMA, reuse_key, checked.version) if reuse_key is not None else None
            if earlier is not None:
                reuse_check(con, SCHEMA, checked.version, earlier)
                rows = _reused_rows(context, con, table, checked, earlier)
        if earlier is not None:
            yield from _reused_results(context, table, rows, earlier, (errors, warnings), reuse_key)
            return
        # the version this run publishes (the version store's input: its own, or the live one of the dump),
        # in batches of the suite's columns read from DuckDB (never the whole table in Python); a column a
        # dump's format lacks (null in all its rows) is not checked on that dump's rows
        with warehouse.connection() as con:
            report = validate_relation(con, checked.name, table, sample_size=SAMPLE_SIZE)
        failed = report.failures("error").get_column("expectation_id").to_list()
        # leaving the block brings the readers' targets level (a snapshot that cannot be written: a warning,
        # the check's outcome stays the step's)
        with warehouse.store().work(warn=context.log.warning) as con:
            store_results(con, checked.revision, table, report, checked.version)
            record_checks(con, checked.version, report.passed_errors,
                          {"suite": report.suite, "suite_sha256": suite, "failed": failed, "check_key": reuse_key})
            if not report.passed_errors:
                detail = f"{table} failed error expectations: {', '.join(failed)}"[:2000]
                record_dump(con, SCHEMA, revision=checked.revision, status="failed", detail=detail)
                finish_build(con, context.run.run_id, "failed", detail)  # the run's build (build id = run id)
        for line in report.failure_lines():  # each failed expectation named in the run log, not only the report
            context.log.warning(line)
        context.log.info(report.summary_line())
        yield _result(report, "error", errors, key)
        yield _result(report, "warning", warnings, key)

    return suite_check


def _reused_rows(context: dg.AssetCheckExecutionContext, con, table: str, checked: TableRef,
                 earlier: tuple[str, bool, dict]) -> pl.DataFrame:
    """The results recorded for a reused check's version (copied by ``check_reuse.reuse_check``); a failed one
    fails the build as a validation would."""
    _, passed, checks = earlier
    rows = read_frame(con, f"SELECT severity, success, unexpected_count FROM {quoted(SCHEMA, QUALITY_RESULTS_TABLE)} "
                           "WHERE table_version = ?", [checked.version])
    if not passed:
        detail = f"{table} failed error expectations: {', '.join(checks.get('failed') or [])}"[:2000]
        record_dump(con, SCHEMA, revision=checked.revision, status="failed", detail=detail)
        finish_build(con, context.run.run_id, "failed", detail)
    return rows


def _reused_results(context: dg.AssetCheckExecutionContext, table: str, rows: pl.DataFrame,
                    earlier: tuple[str, bool, dict], names: tuple[str, str], key: str):
    """The two check results of a reused check (``check_reuse.recorded_check``), from the results recorded for
    the version checked before (``rows``, :func:`_reused_rows`): the same outcome, with ``reused_from`` naming it."""
    source, passed, checks = earlier
    context.log.info(f"{table}: the rows, suite and libraries were checked before ({source}): its outcome reused, "
                     "not validated again")
    for severity, name in zip(("error", "warning"), names, strict=True):
        mine = rows.filter(pl.col("severity") == severity)
        failed = mine.filter(~pl.col("success").fill_null(False))
        yield dg.AssetCheckResult(
            asset_key=dg.AssetKey([SCHEMA, table]), check_name=name,
            passed=bool(passed) if severity == "error" else failed.is_empty(),
            severity=dg.AssetCheckSeverity.ERROR if severity == "error" else dg.AssetCheckSeverity.WARN,
            metadata={"suite": checks.get("suite", ""), "reused_from": source, "check_key": key,
                      "expectations": mine.height, "failed": failed.height,
                      "unexpected_rows": int(failed["unexpected_count"].fill_null(0).sum())})


@dg.asset_check(asset=MODELS, name="models_confusable", blocking=False,
                description="Model names that look alike but are not merged: equal once invisible characters "
                "(default-ignorable code points, format and control characters) are removed and blanks read as "
                "spaces, or equal Unicode TR39 confusable skeletons; merge them with an alias row when they are "
                "one model. Warning only.")
def models_confusable(models: pl.DataFrame) -> dg.AssetCheckResult:
    # arena.models as this run publishes it, through the version store (a small table)
    pairs = confusable_pairs(models)
    return dg.AssetCheckResult(
        passed=pairs.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "models": models.height,
            "confusable_pairs": pairs.height,
            "pairs": dg.MetadataValue.json(
                [{"model": r["model"], "other": r["other"], "model_repr": ascii(r["model"]),
                  "other_repr": ascii(r["other"])} for r in pairs.iter_rows(named=True)]
            ),
        },
    )


@dg.multi_asset_check(
    name="board_freshness",
    specs=[
        dg.AssetCheckSpec(AGE_CHECK, asset=PUBLICATION_GATE, blocking=False,
                          description="The live publication (arena.publications.published_at of its newest row, "
                          "not the last materialization) is at most the allowed age old: "
                          f"{SETTING}, default a week. Warning only."),
        dg.AssetCheckSpec(PENDING_CHECK, asset=PUBLICATION_GATE, blocking=False,
                          description="No dump revision seen after the live one (a refresh requested for it by "
                          "the sensor or the schedule, or a run that fetched it) waits unpublished; else which "
                          "one and why: queued or running (warning), refused by the gate, failed, canceled or "
                          "abandoned (error), with the run."),
    ],
)
def board_freshness(context: dg.AssetCheckExecutionContext, warehouse: Warehouse):
    """Is the live board fresh: its publication's age, and a newer dump revision not published.

    Runs after every publication; ``board_freshness_sensor`` reports the same checks between runs.
    Never fails its step (the checks are not blocking, and the run may have published): a freshness
    that cannot be assessed (a setting out of range, a warehouse that cannot be read) makes both checks
    fail with the reason.
    """
    try:
        freshness = assess_board(context.instance, warehouse, timeout_s=warehouse.lock_timeout_s)
    except Exception as exc:  # whatever it is, a failed check with the reason, not a failed step
        reason = one_line(f"not evaluated: {exc if isinstance(exc, ValueError) else f'{type(exc).__name__}: {exc}'}")
        context.log.warning(f"board_freshness {reason}")
        for name in (AGE_CHECK, PENDING_CHECK):
            yield dg.AssetCheckResult(asset_key=PUBLICATION_GATE, check_name=name, passed=False,
                                      severity=dg.AssetCheckSeverity.ERROR, description=reason,
                                      metadata={"error": reason, "setting": SETTING})
        return
    context.log.info(freshness.summary())
    for outcome in outcomes(freshness):
        yield outcome.result()
