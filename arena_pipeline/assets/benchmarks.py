"""Validation after publication: the published boards against benchmark scores (ARENA_BENCHMARKS)."""

import dataclasses

import dagster as dg
import polars as pl

from arena_pipeline.assets.publish import PUBLISHED_DUMP, write_live_report
from arena_pipeline.constants import (
    BENCHMARK_AGREEMENT_TABLE,
    BENCHMARK_SCORES_TABLE,
    LEADERBOARD_TABLE,
    SCHEMA,
)
from arena_pipeline.core.benchmarks import BenchmarkFormatError, benchmark_agreement, match_scores
from arena_pipeline.core.hub import HubError
from arena_pipeline.core.publication import live_publication
from arena_pipeline.core.published import Benchmarks
from arena_pipeline.core.ranking import LEADERBOARD_SCHEMA
from arena_pipeline.core.warehouse import quoted, read_frame, write_table
from arena_pipeline.presentation.markdown import frame_markdown
from arena_pipeline.presentation.read import read_published
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse

BENCHMARK_SCORES = dg.AssetKey([SCHEMA, BENCHMARK_SCORES_TABLE])
BENCHMARK_AGREEMENT = dg.AssetKey([SCHEMA, BENCHMARK_AGREEMENT_TABLE])
BENCHMARKS_CHECK = "benchmark_file_valid"


@dg.multi_asset(
    name="benchmark_comparison",
    specs=[
        dg.AssetSpec(
            BENCHMARK_SCORES, group_name="validation", kinds={"polars", "duckdb"}, deps=[PUBLISHED_DUMP],
            skippable=True,
            description="The benchmark scores read from ARENA_BENCHMARKS, each row matched to a model of the "
            "live leaderboard or not, with the reason and the source file and line; skipped when no "
            "benchmark file is configured or it is unusable (then benchmark_file_valid fails).",
        ),
        dg.AssetSpec(
            BENCHMARK_AGREEMENT, group_name="validation", kinds={"polars", "duckdb"}, deps=[PUBLISHED_DUMP],
            skippable=True,
            description="Per (category, method, benchmark): matched models, Spearman and Kendall with seeded "
            "bootstrap intervals over models (none under 5 models, with the reason), the models whose "
            "two ranks differ most, and the publication compared.",
        ),
    ],
    check_specs=[dg.AssetCheckSpec(
        BENCHMARKS_CHECK, asset=BENCHMARK_SCORES,
        description="The benchmark scores (ARENA_BENCHMARKS) are readable; a malformed file fails this check "
        "with its file and line, not the run. Not executed when no benchmark file is configured.")],
    can_subset=True,  # so that the tables and the check may be left out (skipped)
)
def benchmark_comparison(context: dg.AssetExecutionContext, warehouse: Warehouse,
                         model_catalog: ModelCatalog, report_settings: ReportSettings, dump_source: DumpSource):
    """arena.benchmark_scores and arena.benchmark_agreement: the live publication's boards against automated
    benchmark scores (ARENA_BENCHMARKS: a long or wide CSV/parquet, the Open LLM Leaderboard's layout, or its
    Hub id), matched through the model-name normalization and aliases.

    Runs after publication and never blocks it: skipped (not materialized) when no benchmark file is configured;
    a file that cannot be read fails the check ``benchmark_file_valid`` (file and line in its description) and
    the tables are left as they were, while the run and its publication stand.

    Then the report (rendered by the publish step, before these tables described the new publication)
    is re-rendered with its benchmark panel, or with a panel saying the file failed its check.
    """
    aliases = model_catalog.aliases()
    location = model_catalog.benchmarks_location()
    try:
        read = model_catalog.read_benchmarks(aliases, dump_source.hub_access())
    except (BenchmarkFormatError, FileNotFoundError, HubError, ValueError) as exc:
        context.log.warning(f"skipped: benchmark scores unusable: {exc}")
        with warehouse.connection() as con:
            _rerender_report(context, con, report_settings, f"{exc}")
        if not context.selected_asset_check_keys:
            return
        yield dg.AssetCheckResult(
            check_name=BENCHMARKS_CHECK, passed=False, severity=dg.AssetCheckSeverity.ERROR,
            description=f"benchmark scores unusable: {exc}",
            metadata={"benchmarks": str(location), "problem": str(exc),
                      "line": getattr(exc, "line", None)},
        )
        return
    if read is None:
        context.log.info("skipped: no benchmark scores configured (set ARENA_BENCHMARKS)")
        return
    with warehouse.connection() as con:
        live = live_publication(con, SCHEMA)
        publication_id = None if live is None else live["publication_id"]
        board = (read_frame(con, f"SELECT * FROM {quoted(SCHEMA, LEADERBOARD_TABLE)}") if live
                 else pl.DataFrame(schema=LEADERBOARD_SCHEMA))
        scores = match_scores(read, board.get_column("model").unique(), publication_id)
        agreement = benchmark_agreement(board, scores, publication_id=publication_id)
        selected = context.selected_asset_keys
        if BENCHMARK_SCORES in selected:
            write_table(con, SCHEMA, BENCHMARK_SCORES_TABLE, scores)
        if BENCHMARK_AGREEMENT in selected:
            write_table(con, SCHEMA, BENCHMARK_AGREEMENT_TABLE, agreement)
        report = _rerender_report(context, con, report_settings)
    if context.selected_asset_check_keys:
        yield dg.AssetCheckResult(check_name=BENCHMARKS_CHECK, passed=True,
                                  metadata={"benchmarks": location, "rows": read.height})
    if BENCHMARK_SCORES in selected:
        yield _scores_result(scores, location, publication_id)
    if BENCHMARK_AGREEMENT in selected:
        yield _agreement_result(agreement, publication_id, report)


def _rerender_report(context: dg.AssetExecutionContext, con, report_settings: ReportSettings,
                     problem: str | None = None) -> dict:
    """Re-render the report of the live publication: with the benchmark panel when the tables now
    describe it, or with ``problem`` (the file failed its check) and no figures. Nothing when
    nothing is published yet."""
    try:
        pub = read_published(con, SCHEMA)
    except LookupError:
        return {}
    if problem is not None:
        pub = dataclasses.replace(pub, benchmarks=Benchmarks(problem=problem))
    metadata = write_live_report(context, pub, report_settings)
    context.log.info(f"report re-rendered: {metadata.get('path', metadata.get('status'))}")
    return metadata


def _scores_result(scores: pl.DataFrame, location: str,
                   publication_id: int | None) -> dg.MaterializeResult:
    matched = scores.filter(pl.col("matched"))
    return dg.MaterializeResult(
        asset_key=BENCHMARK_SCORES,
        metadata={
            "benchmarks": location,
            "publication_id": publication_id,
            "dagster/row_count": scores.height,
            "matched_models": matched.get_column("canonical").n_unique(),
            "reasons": dg.MetadataValue.json(
                {r: n for r, n in scores.group_by("reason").len().sort("reason").iter_rows()}),
        },
    )


def _agreement_result(agreement: pl.DataFrame, publication_id: int | None,
                      report: dict) -> dg.MaterializeResult:
    headline = agreement.filter(pl.col("method") == "bt").select(
        "category", "benchmark", "n_matched", "spearman", "kendall", "note")
    return dg.MaterializeResult(
        asset_key=BENCHMARK_AGREEMENT,
        metadata={
            "publication_id": publication_id,
            "dagster/row_count": agreement.height,
            "bt_vs_benchmarks": dg.MetadataValue.md(frame_markdown(headline)),
            **({"report": report["path"]} if "path" in report else {}),
        },
    )

