"""Analysis tables from the seed's usage scenarios: position bias, rating trend, preference pairs."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.builds import package_version, run_build
from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.publish import note_if_unpublished
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES
from arena_pipeline.constants import (
    BATTLE_CATEGORIES_TABLE,
    BATTLES_TABLE,
    MESSAGES_TABLE,
    PAIRS_LOAD_TABLE,
    POSITION_BIAS_TABLE,
    PREFERENCE_PAIRS_TABLE,
    RATING_TREND_TABLE,
    SCHEMA,
    VERSIONS_SCHEMA,
)
from arena_pipeline.core.analysis import (
    POSITION_BIAS_SCHEMA,
    RATING_TREND_SCHEMA,
    adopt_loaded_pairs,
    position_bias,
    rating_trend,
    sql_literal,
    write_preference_pairs,
)
from arena_pipeline.core.pairs import PAIR_ROWS_SCHEMA
from arena_pipeline.core.publication import (
    base_version,
    input_version,
    read_input,
    register_version,
    reusable_version,
    reuse_version,
    version_name,
    versioned,
    write_version,
    write_version_with,
)
from arena_pipeline.core.warehouse import relation_exists
from arena_pipeline.resources import Warehouse

ANALYSIS_KEYS = {name: dg.AssetKey([SCHEMA, name])
                 for name in (POSITION_BIAS_TABLE, RATING_TREND_TABLE, PREFERENCE_PAIRS_TABLE)}
REVISION_COLUMN = {"dump_revision": pl.String()}

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
)
def position_bias_table(context: dg.AssetExecutionContext, warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.position_bias: per category, how often the model shown as A wins against B, with counts,
    an exact 95% interval and a binomial p-value against no bias."""
    with warehouse.connection() as con:
        build = run_build(context, con)
        battles = read_input(con, SCHEMA, BATTLES_TABLE, build, _BATTLE_COLUMNS)
        tags = read_input(con, SCHEMA, BATTLE_CATEGORIES_TABLE, build)
        table = position_bias(battles, tags).with_columns(dump_revision=pl.lit(build.revision))
        write_version(con, POSITION_BIAS_TABLE, build, table, {"package_version": package_version()})
    overall = table.filter(pl.col("category") == "overall").to_dicts()
    note_if_unpublished(context, warehouse)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": table.height, "overall": dg.MetadataValue.json(overall)},
        data_version=dg.DataVersion(build.revision),
    )


@dg.asset(
    key=ANALYSIS_KEYS[RATING_TREND_TABLE],
    group_name="reports",
    metadata=schema_metadata({**RATING_TREND_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{RATING_TREND_TABLE}"),
    kinds={"numpy", "duckdb"},
    deps=[TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES],
)
def rating_trend_table(context: dg.AssetExecutionContext, warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.rating_trend: Bradley-Terry ratings per calendar month for the models with enough
    battles that month, over every loaded dump; months are linked in order through the models two
    consecutive months share (core/analysis.py rating_trend: the first month is centred)."""
    with warehouse.connection() as con:
        build = run_build(context, con)
        battles = read_input(con, SCHEMA, BATTLES_TABLE, build, _BATTLE_COLUMNS)
        tags = read_input(con, SCHEMA, BATTLE_CATEGORIES_TABLE, build)
        table = rating_trend(_canonical(battles), tags).with_columns(dump_revision=pl.lit(build.revision))
        write_version(con, RATING_TREND_TABLE, build, table, {"package_version": package_version()})
    months = table.get_column("month").n_unique() if table.height else 0
    note_if_unpublished(context, warehouse)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": table.height, "months": months},
        data_version=dg.DataVersion(build.revision),
    )


@dg.asset(
    key=ANALYSIS_KEYS[PREFERENCE_PAIRS_TABLE],
    group_name="reports",
    # the message lists of PREFERENCE_PAIRS_SCHEMA are not stored (they would store every text twice)
    metadata=schema_metadata(PAIR_ROWS_SCHEMA, f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}"),
    kinds={"polars", "duckdb"},
    deps=[TABLE_KEYS[BATTLES_TABLE], TABLE_KEYS[MESSAGES_TABLE], BATTLE_CATEGORIES],
)
def preference_pairs_table(context: dg.AssetExecutionContext, warehouse: Warehouse) -> dg.MaterializeResult:
    """arena.preference_pairs: prompt, chosen and rejected responses of every decisive vote (ties and
    both_bad excluded), for reward-model training. The shared prompt is the first user message; the
    rest of each side's conversation is its response (multi-turn sides differ after the first turn).
    The load makes the pairs from the nested rows and this step adopts that table (renamed, its
    categories reconciled with arena.battle_categories); a partial run builds them in DuckDB from
    the flat tables with the same definition."""
    with warehouse.connection() as con:
        build = run_build(context, con)
        settings = {"package_version": package_version()}
        loaded = version_name(PAIRS_LOAD_TABLE, build)
        if relation_exists(con, VERSIONS_SCHEMA, loaded):  # made by this run's flat_tables: adopt it
            tags = input_version(con, SCHEMA, BATTLE_CATEGORIES_TABLE, build)
            rows, fixed = adopt_loaded_pairs(con, versioned(loaded), version_name(PREFERENCE_PAIRS_TABLE, build),
                                             versioned(tags))
            register_version(con, PREFERENCE_PAIRS_TABLE, build, rows, settings)
            context.log.info(f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}: the {rows} pairs flat_tables made while loading "
                             f"(categories set from {SCHEMA}.{BATTLE_CATEGORIES_TABLE} on {fixed} of them)")
            note_if_unpublished(context, warehouse)
            return dg.MaterializeResult(metadata={"dagster/row_count": rows, "made_by": "flat_tables",
                                                  "categories_set": fixed},
                                        data_version=dg.DataVersion(build.revision))
        reusable = reusable_version(con, PREFERENCE_PAIRS_TABLE, build, settings)
        if reusable is not None:  # same inputs, settings and code: the earlier version, as a view
            base, rows = reusable
            reuse_version(con, PREFERENCE_PAIRS_TABLE, build, base, rows, settings)
            context.log.info(f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}: inputs unchanged, {base} reused")
        else:
            inputs = {name: input_version(con, SCHEMA, name, build)
                      for name in (BATTLES_TABLE, MESSAGES_TABLE, BATTLE_CATEGORIES_TABLE)}
            # messages by row ranges of the table that holds them (a reused version is a view of it)
            messages = versioned(base_version(con, inputs[MESSAGES_TABLE]))

            def fill(target: str) -> int:  # inside DuckDB, batch by batch: no text enters this process
                return write_preference_pairs(
                    con, target, versioned(inputs[BATTLES_TABLE]), messages,
                    versioned(inputs[BATTLE_CATEGORIES_TABLE]),
                    model_columns=("model_a_canonical", "model_b_canonical"),
                    extra_columns=f"{sql_literal(build.revision)} AS dump_revision")

            rows = write_version_with(con, PREFERENCE_PAIRS_TABLE, build, fill, settings)
    note_if_unpublished(context, warehouse)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": rows},
        data_version=dg.DataVersion(build.revision),
    )
