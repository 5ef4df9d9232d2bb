"""Analysis tables built from the flat tables: position bias and monthly rating trends.

Polars (plus SciPy's exact binomial test); no Dagster imports. Every function takes
the published frames (``arena.battles``, ``arena.battle_categories``), or (``*_in_duckdb``) their
relations on a DuckDB connection, counted there, and returns one frame whose columns and types are
pinned by a ``*_SCHEMA`` dict of its module.
"""

from arena_pipeline.core.analysis.position_bias import POSITION_BIAS_SCHEMA, position_bias, position_bias_in_duckdb
from arena_pipeline.core.analysis.rating_trend import (
    RATING_TREND_SCHEMA,
    TREND_CATEGORIES,
    TREND_CONFIG,
    chain_months,
    rating_trend,
)

__all__ = ["POSITION_BIAS_SCHEMA", "RATING_TREND_SCHEMA", "TREND_CATEGORIES", "TREND_CONFIG", "chain_months", "position_bias",
           "position_bias_in_duckdb", "rating_trend"]
