"""The preference pairs of small frames: ``core.analysis.preference_pairs_sql`` in an in-memory DuckDB."""

from __future__ import annotations

import duckdb
import polars as pl

from arena_pipeline.core.analysis import PREFERENCE_PAIRS_SCHEMA, preference_pairs_sql


def preference_pairs(battles: pl.DataFrame, messages: pl.DataFrame, battle_categories: pl.DataFrame) -> pl.DataFrame:
    """:func:`preference_pairs_sql` (with the message lists) on frames: :data:`PREFERENCE_PAIRS_SCHEMA`,
    sorted by ``battle_id`` (the pipeline runs the query on the warehouse's tables)."""
    with duckdb.connect() as con:
        for name, frame in (("_battles", battles), ("_messages", messages), ("_tags", battle_categories)):
            con.register(name, frame.to_arrow())
        out = con.execute(preference_pairs_sql("_battles", "_messages", "_tags", with_messages=True)).pl()
    return out.select([pl.col(c).cast(t) for c, t in PREFERENCE_PAIRS_SCHEMA.items()])
