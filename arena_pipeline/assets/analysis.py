"""Analysis tables from the seed's usage scenarios: position bias and rating trend (the preference pairs are
made by the load: assets/ingest.py)."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES
from arena_pipeline.assets.version_store import VERSION_STORE, Later, TableRef, Versioned, stored_input
from arena_pipeline.constants import (
    BATTLES_TABLE,
    POSITION_BIAS_TABLE,
    RATING_TREND_TABLE,
    SCHEMA,
)
from arena_pipeline.core.analysis import (
    POSITION_BIAS_SCHEMA,
    RATING_TREND_SCHEMA,
    TREND_CATEGORIES,
    position_bias_in_duckdb,
    rating_trend,
)
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.warehouse import read_frame
from arena_pipeline.resources import Warehouse

REVISION_COLUMN = {"dump_revision": pl.String()}

#: the battles (the columns the trend reads, canonical names as the leaderboards rank them) and the tags of the
#: trend's categories, read inside DuckDB: not the other columns, not the other categories' tags
_TREND_BATTLES = ('SELECT id, model_a_canonical AS model_a, model_b_canonical AS model_b, winner, timestamp '
                  'FROM {battles}')
_TREND_TAGS = "SELECT battle_id, category FROM {tags} WHERE category IN ({categories})"


@dg.asset(
    key=dg.AssetKey([SCHEMA, POSITION_BIAS_TABLE]),
    group_name="reports",
    metadata=schema_metadata({**POSITION_BIAS_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{POSITION_BIAS_TABLE}",
                             TableSpec()),
    kinds={"polars", "duckdb"},
    # references: counted inside DuckDB over the stored files, one row per category reaches Python
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "battle_categories": stored_input(BATTLE_CATEGORIES)},
    io_manager_key=VERSION_STORE,
)
def position_bias_table(warehouse: Warehouse, battles: TableRef, battle_categories: TableRef) -> dg.Output[Versioned]:
    """arena.position_bias: per category, how often the model shown as A wins against B, with counts,
    an exact 95% interval and a binomial p-value against no bias."""

    # counted only when the store finds no version of the same votes, tags and code (an unchanged re-run
    # reuses it, without its ``overall`` metadata)
    def make() -> tuple[pl.DataFrame, dict]:
        # counted inside DuckDB over the stored files: the step's memory does not grow with the votes
        with warehouse.connection() as con:
            table = position_bias_in_duckdb(con, battles.name, battle_categories.name)
        overall = table.filter(pl.col("category") == "overall").to_dicts()
        return table, {"overall": dg.MetadataValue.json(overall)}

    return dg.Output(Versioned(Later(make), reuse=True))


@dg.asset(
    key=dg.AssetKey([SCHEMA, RATING_TREND_TABLE]),
    group_name="reports",
    metadata=schema_metadata({**RATING_TREND_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{RATING_TREND_TABLE}",
                             TableSpec()),
    kinds={"numpy", "duckdb"},
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "battle_categories": stored_input(BATTLE_CATEGORIES)},
    io_manager_key=VERSION_STORE,
)
def rating_trend_table(warehouse: Warehouse, battles: TableRef, battle_categories: TableRef) -> dg.Output[Versioned]:
    """arena.rating_trend: Bradley-Terry ratings per calendar month for the models with enough
    battles that month, over every loaded dump; months are linked in order through the models two
    consecutive months share (core/analysis/rating_trend.py: the first month is centred)."""

    # fitted only when the store finds no version of the same votes, tags and code (an unchanged re-run reuses it)
    def make() -> tuple[pl.DataFrame, dict]:
        categories = ", ".join(f"'{c}'" for c in TREND_CATEGORIES)
        with warehouse.connection() as con:
            votes = read_frame(con, _TREND_BATTLES.format(battles=battles.name))
            tags = read_frame(con, _TREND_TAGS.format(tags=battle_categories.name, categories=categories))
        table = rating_trend(votes, tags, categories=TREND_CATEGORIES)
        return table, {"months": table.get_column("month").n_unique() if table.height else 0}

    return dg.Output(Versioned(Later(make), reuse=True))
