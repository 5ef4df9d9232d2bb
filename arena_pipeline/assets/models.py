"""Model identity assets: the models table, and the comparison with a published leaderboard."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.builds import package_version, run_build, table_sha256
from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.publish import PUBLISHED_DUMP, note_if_unpublished
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES
from arena_pipeline.constants import (
    BATTLE_CATEGORIES_TABLE,
    BATTLES_TABLE,
    EXTERNAL_COMPARISON_MODELS_TABLE,
    EXTERNAL_COMPARISON_TABLE,
    MODELS_TABLE,
    SCHEMA,
)
from arena_pipeline.core.external import BoardFormatError, compare_boards
from arena_pipeline.core.models import MODELS_SCHEMA, merged_names, models_table
from arena_pipeline.core.publication import read_input, write_version
from arena_pipeline.core.warehouse import read_frame, write_table
from arena_pipeline.presentation.markdown import frame_markdown
from arena_pipeline.resources import ModelCatalog, Warehouse

MODELS = dg.AssetKey([SCHEMA, MODELS_TABLE])
EXTERNAL_COMPARISON = dg.AssetKey([SCHEMA, EXTERNAL_COMPARISON_TABLE])


@dg.asset(
    key=MODELS,
    group_name="rankings",
    kinds={"polars", "duckdb"},
    metadata=schema_metadata(MODELS_SCHEMA, f"{SCHEMA}.{MODELS_TABLE}"),
    deps=[TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES],
)
def models(context: dg.AssetExecutionContext, warehouse: Warehouse,
           model_catalog: ModelCatalog) -> dg.MaterializeResult:
    """arena.models: one row per canonical model name with its provider, the raw names seen, first and
    last battle, and battles per category. Raw names that normalize to one model are listed in the metadata."""
    aliases = model_catalog.aliases()
    with warehouse.connection() as con:
        build = run_build(context, con)
        battles = read_input(con, SCHEMA, BATTLES_TABLE, build,
                             "id, model_a, model_b, model_a_canonical, model_b_canonical, timestamp")
        tags = read_input(con, SCHEMA, BATTLE_CATEGORIES_TABLE, build)
        table = models_table(battles, tags, aliases)
        write_version(con, MODELS_TABLE, build, table,
                      {"aliases_sha256": table_sha256(aliases), "package_version": package_version()})
    merged = merged_names(battles, aliases)
    note_if_unpublished(context, warehouse)
    return dg.MaterializeResult(
        metadata={
            "revision": build.revision,
            "dagster/row_count": table.height,
            "merged_names": dg.MetadataValue.json(
                [{"canonical": r["canonical"], "raw_names": r["raw_names"], "battles": r["n_battles"]}
                 for r in merged.iter_rows(named=True)]
            ),
            "models_without_provider": dg.MetadataValue.json(
                table.filter(pl.col("provider").is_null()).get_column("model").to_list()
            ),
        },
        data_version=dg.DataVersion(build.revision),
    )


BOARD_CHECK = "published_board_valid"


@dg.multi_asset(
    name="external_comparison",
    specs=[dg.AssetSpec(
        EXTERNAL_COMPARISON, group_name="validation", kinds={"polars", "duckdb"}, deps=[PUBLISHED_DUMP],
        skippable=True,
        description="Our published boards against ARENA_PUBLISHED_BOARD (rank correlations, rating "
        "differences, slope and residual RMS of published ~ a + b * ours); skipped when no board is configured or the board is unusable "
        "(then the published_board_valid check fails).",
    )],
    check_specs=[dg.AssetCheckSpec(
        BOARD_CHECK, asset=EXTERNAL_COMPARISON,
        description="The published leaderboard file (ARENA_PUBLISHED_BOARD) is readable; a malformed "
        "board fails this check, not the run. Not executed when no board is configured.")],
    can_subset=True,  # so that both the table and the check may be left out (skipped)
)
def external_comparison(context: dg.AssetExecutionContext, warehouse: Warehouse,
                        model_catalog: ModelCatalog):
    """arena.external_comparison (per category) and arena.external_comparison_models (per model): our
    published boards against a published leaderboard file (ARENA_PUBLISHED_BOARD), matched through the
    model-name normalization and aliases; rank correlations and rating differences after centring, and how
    far the scales agree (slope, intercept and residual RMS of published ~ intercept + slope * ours, the
    median shift, the RMS after the best shift).

    Runs after publication, so a missing or malformed board never blocks the leaderboards. Skipped
    (not materialized) when no board is configured; a board that cannot be read fails the check
    ``published_board_valid`` and the asset is skipped, while the run succeeds.
    """
    aliases = model_catalog.aliases()
    try:
        theirs = model_catalog.read_board(aliases)
    except (BoardFormatError, FileNotFoundError) as exc:
        context.log.warning(f"skipped: published board unusable: {exc}")
        yield dg.AssetCheckResult(
            check_name=BOARD_CHECK, passed=False, severity=dg.AssetCheckSeverity.ERROR,
            description=f"published board unusable: {exc}",
            metadata={"board": str(model_catalog.board_path()), "problem": str(exc)},
        )
        return
    if theirs is None:
        context.log.info("skipped: no published board configured (set ARENA_PUBLISHED_BOARD)")
        return
    with warehouse.connection() as con:
        ours = read_frame(con, f'SELECT * FROM "{SCHEMA}".leaderboard')
        if ours.is_empty():
            yield dg.AssetCheckResult(check_name=BOARD_CHECK, passed=True,
                                      metadata={"board": str(model_catalog.board_path())})
            yield dg.MaterializeResult(metadata={"status": "the published leaderboard is empty: nothing to compare"})
            return
        results = {}
        for method in ours.get_column("method").unique().sort().to_list():
            result = compare_boards(ours.filter(pl.col("method") == method), theirs, aliases)
            results[method] = result
        revision = ours.get_column("dump_revision").first()
        summary = pl.concat(
            [r.summary.with_columns(method=pl.lit(m)) for m, r in results.items()], how="diagonal_relaxed"
        ).with_columns(dump_revision=pl.lit(revision), board=pl.lit(model_catalog.board_path()))
        per_model = pl.concat(
            [r.models.with_columns(method=pl.lit(m)) for m, r in results.items()], how="diagonal_relaxed"
        ).with_columns(dump_revision=pl.lit(revision))
        write_table(con, SCHEMA, EXTERNAL_COMPARISON_TABLE, summary)
        write_table(con, SCHEMA, EXTERNAL_COMPARISON_MODELS_TABLE, per_model)
    headline = summary.filter(pl.col("method") == "bt").select(
        "category", "n_matched", "spearman", "kendall", "mean_abs_diff", "max_abs_diff", "slope", "rms_residual",
        "median_shift",
    )
    yield dg.AssetCheckResult(check_name=BOARD_CHECK, passed=True,
                              metadata={"board": str(model_catalog.board_path()), "rows": theirs.height})
    yield dg.MaterializeResult(
        metadata={
            "board": model_catalog.board_path(),
            "dump_revision": revision,
            "dagster/row_count": summary.height,
            "bt_vs_published": dg.MetadataValue.md(frame_markdown(headline)),
            "comparison": dg.MetadataValue.json({m: r.to_metadata() for m, r in results.items()}),
        }
    )
