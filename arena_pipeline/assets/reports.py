"""What users see: analysis tables from the seed's usage scenarios, and the static HTML report."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.ingest import RAW_DUMP, TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.publish import PUBLISHED_DUMP
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES
from arena_pipeline.constants import (
    BATTLE_CATEGORIES_TABLE,
    BATTLES_TABLE,
    MESSAGES_TABLE,
    POSITION_BIAS_TABLE,
    PREFERENCE_PAIRS_TABLE,
    RATING_TREND_TABLE,
    SCHEMA,
)
from arena_pipeline.core.analysis import (
    POSITION_BIAS_SCHEMA,
    PREFERENCE_PAIRS_SCHEMA,
    RATING_TREND_SCHEMA,
    position_bias,
    preference_pairs,
    rating_trend,
)
from arena_pipeline.core.ingest import DumpManifest
from arena_pipeline.core.publication import read_version, versioned, write_version
from arena_pipeline.core.warehouse import read_frame
from arena_pipeline.core.report import load_report_inputs, rating_chart_svg, render_report, svg_data_uri
from arena_pipeline.resources import ReportSettings, Warehouse

ANALYSIS_KEYS = {name: dg.AssetKey([SCHEMA, name])
                 for name in (POSITION_BIAS_TABLE, RATING_TREND_TABLE, PREFERENCE_PAIRS_TABLE)}
REPORT = dg.AssetKey("leaderboard_report")
REVISION_COLUMN = {"dump_revision": pl.String()}
#: The message-list columns are dropped before storing (they would store every text twice).
LIST_COLUMNS = ("prompt_messages", "chosen_messages", "rejected_messages")
PAIRS_COLUMNS = {k: v for k, v in PREFERENCE_PAIRS_SCHEMA.items() if k not in LIST_COLUMNS}

_BATTLE_COLUMNS = "id, model_a, model_b, model_a_canonical, model_b_canonical, winner, timestamp, turns, language"


def _canonical(battles: pl.DataFrame) -> pl.DataFrame:
    """Battles as the leaderboards see them: canonical model names."""
    return battles.with_columns(model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))


@dg.asset(
    key=ANALYSIS_KEYS[POSITION_BIAS_TABLE],
    group_name="reports",
    metadata=schema_metadata({**POSITION_BIAS_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{POSITION_BIAS_TABLE}"),
    kinds={"polars", "duckdb"},
    deps=[TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES],
    ins={"manifest": dg.AssetIn(RAW_DUMP)},
)
def position_bias_table(context: dg.AssetExecutionContext, manifest: DumpManifest,
                        warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.position_bias: per category, how often the model shown as A wins against B, with counts,
    an exact 95% interval and a binomial p-value against no bias."""
    with warehouse.connection() as con:
        battles = read_version(con, BATTLES_TABLE, manifest.revision, _BATTLE_COLUMNS)
        tags = read_version(con, BATTLE_CATEGORIES_TABLE, manifest.revision)
        table = position_bias(battles, tags).with_columns(dump_revision=pl.lit(manifest.revision))
        write_version(con, POSITION_BIAS_TABLE, manifest.revision, table)
    overall = table.filter(pl.col("category") == "overall").to_dicts()
    return dg.MaterializeResult(
        metadata={"dagster/row_count": table.height, "overall": dg.MetadataValue.json(overall)},
        data_version=dg.DataVersion(manifest.revision),
    )


@dg.asset(
    key=ANALYSIS_KEYS[RATING_TREND_TABLE],
    group_name="reports",
    metadata=schema_metadata({**RATING_TREND_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{RATING_TREND_TABLE}"),
    kinds={"numpy", "duckdb"},
    deps=[TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES],
    ins={"manifest": dg.AssetIn(RAW_DUMP)},
)
def rating_trend_table(context: dg.AssetExecutionContext, manifest: DumpManifest,
                       warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.rating_trend: Bradley-Terry ratings per calendar month for the models with enough
    battles that month (each month centred on its own field)."""
    with warehouse.connection() as con:
        battles = read_version(con, BATTLES_TABLE, manifest.revision, _BATTLE_COLUMNS)
        tags = read_version(con, BATTLE_CATEGORIES_TABLE, manifest.revision)
        table = rating_trend(_canonical(battles), tags).with_columns(dump_revision=pl.lit(manifest.revision))
        write_version(con, RATING_TREND_TABLE, manifest.revision, table)
    months = table.get_column("month").n_unique() if table.height else 0
    return dg.MaterializeResult(
        metadata={"dagster/row_count": table.height, "months": months},
        data_version=dg.DataVersion(manifest.revision),
    )


@dg.asset(
    key=ANALYSIS_KEYS[PREFERENCE_PAIRS_TABLE],
    group_name="reports",
    metadata=schema_metadata({**PAIRS_COLUMNS, **REVISION_COLUMN}, f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}"),
    kinds={"polars", "duckdb"},
    deps=[TABLE_KEYS[BATTLES_TABLE], TABLE_KEYS[MESSAGES_TABLE], BATTLE_CATEGORIES],
    ins={"manifest": dg.AssetIn(RAW_DUMP)},
)
def preference_pairs_table(context: dg.AssetExecutionContext, manifest: DumpManifest,
                           warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.preference_pairs: prompt, chosen and rejected responses of every decisive vote (ties and
    both_bad excluded), for reward-model training. The shared prompt is the first user message; the
    rest of each side's conversation is its response (multi-turn sides differ after the first turn)."""
    with warehouse.connection() as con:
        battles = read_version(con, BATTLES_TABLE, manifest.revision, _BATTLE_COLUMNS)
        # only what the pairs need: the decisive votes' messages, without the unused columns
        messages = read_frame(
            con,
            f"SELECT battle_id, side, position, role, text, images FROM {versioned(MESSAGES_TABLE, manifest.revision)} "
            f"WHERE battle_id IN (SELECT id FROM {versioned(BATTLES_TABLE, manifest.revision)} "
            "WHERE winner IN ('model_a', 'model_b'))",
        )
        tags = read_version(con, BATTLE_CATEGORIES_TABLE, manifest.revision)
        # the rendered strings only: the *_messages list columns would store every text twice
        table = preference_pairs(_canonical(battles), messages, tags).drop(*LIST_COLUMNS).with_columns(dump_revision=pl.lit(manifest.revision))
        del messages
        write_version(con, PREFERENCE_PAIRS_TABLE, manifest.revision, table)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": table.height},
        data_version=dg.DataVersion(manifest.revision),
    )


@dg.asset(key=REPORT, group_name="reports", kinds={"html"}, deps=[PUBLISHED_DUMP])
def leaderboard_report(context: dg.AssetExecutionContext, warehouse: Warehouse,
                       report_settings: ReportSettings) -> dg.MaterializeResult:
    """A static, offline HTML report of the published dump (default data/report/index.html): per
    category the sortable leaderboard, ratings with 95% intervals, the pairwise win-rate heatmap,
    raw vs style-controlled ranks, the data-quality summary and the dump revision."""
    with warehouse.connection(read_only=True) as con:
        inputs = load_report_inputs(con, SCHEMA)
    if inputs.leaderboard.is_empty():
        context.log.warning("the published leaderboard is empty (no model reached min_battles): no report written")
        return dg.MaterializeResult(metadata={"status": "empty leaderboard: no report written"})
    path = render_report(inputs.leaderboard, inputs.pairwise, inputs.style_coefficients,
                         inputs.quality_results, inputs.dumps_row, report_settings.path())
    chart = rating_chart_svg(inputs.leaderboard, "overall", methods=("bt", "bt_style"), max_models=25)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path.resolve())),
            "bytes": path.stat().st_size,
            "revision": (inputs.dumps_row or {}).get("revision", ""),
            "overall_ratings": dg.MetadataValue.md(f"![overall ratings with 95% CI]({svg_data_uri(chart)})"),
        }
    )
