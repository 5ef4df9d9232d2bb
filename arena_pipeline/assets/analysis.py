"""Analysis tables from the seed's usage scenarios: position bias, rating trend, preference pairs."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES
from arena_pipeline.assets.version_store import VERSION_STORE, Fill, TableRef, Versioned, stored_input
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
from arena_pipeline.core.ingest.pairs import PAIR_ROWS_SCHEMA
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.versions import sibling_version, versioned
from arena_pipeline.core.store.warehouse import relation_exists

ANALYSIS_KEYS = {name: dg.AssetKey([SCHEMA, name])
                 for name in (POSITION_BIAS_TABLE, RATING_TREND_TABLE, PREFERENCE_PAIRS_TABLE)}
REVISION_COLUMN = {"dump_revision": pl.String()}

_BATTLE_COLUMNS = "id, model_a, model_b, model_a_canonical, model_b_canonical, winner, timestamp, turns, language"
#: battles (the columns the analyses read) and their category tags, through the version store
_TAGGED_BATTLES = {"battles": stored_input(TABLE_KEYS[BATTLES_TABLE], _BATTLE_COLUMNS),
                   "battle_categories": stored_input(BATTLE_CATEGORIES)}


def _canonical(battles: pl.DataFrame) -> pl.DataFrame:
    """Battles as the leaderboards see them: canonical model names."""
    return battles.with_columns(model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))


@dg.asset(
    key=ANALYSIS_KEYS[POSITION_BIAS_TABLE],
    group_name="reports",
    metadata=schema_metadata({**POSITION_BIAS_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{POSITION_BIAS_TABLE}",
                             TableSpec()),
    kinds={"polars", "duckdb"},
    ins=_TAGGED_BATTLES,
    io_manager_key=VERSION_STORE,
)
def position_bias_table(battles: pl.DataFrame, battle_categories: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """arena.position_bias: per category, how often the model shown as A wins against B, with counts,
    an exact 95% interval and a binomial p-value against no bias."""
    table = position_bias(battles, battle_categories)
    overall = table.filter(pl.col("category") == "overall").to_dicts()
    return dg.Output(table, metadata={"overall": dg.MetadataValue.json(overall)})


@dg.asset(
    key=ANALYSIS_KEYS[RATING_TREND_TABLE],
    group_name="reports",
    metadata=schema_metadata({**RATING_TREND_SCHEMA, **REVISION_COLUMN}, f"{SCHEMA}.{RATING_TREND_TABLE}",
                             TableSpec()),
    kinds={"numpy", "duckdb"},
    ins=_TAGGED_BATTLES,
    io_manager_key=VERSION_STORE,
)
def rating_trend_table(battles: pl.DataFrame, battle_categories: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """arena.rating_trend: Bradley-Terry ratings per calendar month for the models with enough
    battles that month, over every loaded dump; months are linked in order through the models two
    consecutive months share (core/analysis.py rating_trend: the first month is centred)."""
    table = rating_trend(_canonical(battles), battle_categories)
    months = table.get_column("month").n_unique() if table.height else 0
    return dg.Output(table, metadata={"months": months})


@dg.asset(
    key=ANALYSIS_KEYS[PREFERENCE_PAIRS_TABLE],
    group_name="reports",
    # the message lists of PREFERENCE_PAIRS_SCHEMA are not stored (they would store every text twice)
    metadata=schema_metadata(PAIR_ROWS_SCHEMA, f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}",
                             TableSpec(heavy=True, file_view=True)),
    kinds={"polars", "duckdb"},
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "messages": stored_input(TABLE_KEYS[MESSAGES_TABLE]),
         "battle_categories": stored_input(BATTLE_CATEGORIES)},
    io_manager_key=VERSION_STORE,
)
def preference_pairs_table(context: dg.AssetExecutionContext, battles: TableRef, messages: TableRef,
                           battle_categories: TableRef) -> Versioned:
    """arena.preference_pairs: prompt, chosen and rejected responses of every decisive vote (ties and
    both_bad excluded), for reward-model training. The shared prompt is the first user message; the
    rest of each side's conversation is its response (multi-turn sides differ after the first turn).
    The load makes the pairs from the nested rows and this step adopts that table (renamed, its
    categories reconciled with arena.battle_categories); a partial run builds them in DuckDB from
    the flat tables with the same definition. Same inputs and code as an earlier version: that one,
    as a view."""
    def make(con, target: str):  # inside DuckDB, batch by batch: no text enters this process
        loaded = sibling_version(battles.version, PAIRS_LOAD_TABLE)
        if relation_exists(con, VERSIONS_SCHEMA, loaded):  # made with these battles by the load: adopt it
            rows, fixed = adopt_loaded_pairs(con, versioned(loaded), target.rpartition(".")[2].strip('"'),
                                             battle_categories.name)
            context.log.info(f"{SCHEMA}.{PREFERENCE_PAIRS_TABLE}: the {rows} pairs flat_tables made while loading "
                             f"(categories set from {SCHEMA}.{BATTLE_CATEGORIES_TABLE} on {fixed} of them)")
            return rows, {"made_by": "flat_tables", "categories_set": fixed}
        # messages by row ranges of the table that holds them (a reused version is a view of it)
        return write_preference_pairs(
            con, target, battles.name, messages.base_name, battle_categories.name,
            model_columns=("model_a_canonical", "model_b_canonical"),
            extra_columns=f"{sql_literal(battles.revision)} AS dump_revision")

    return Versioned(Fill(make), reuse=True)
