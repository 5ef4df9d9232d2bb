"""A test-only table of the fit, added in one declaration (issue 46): the rankings step with one more
:class:`FitTable`, and nothing else.

``assets/test_fit_tables.py`` loads it beside the pipeline's assets (``definitions.pipeline_assets``: it
replaces the package's rankings step) and sees the table fitted with the others, published and exported.
"""

import polars as pl

from arena_pipeline.assets.rankings import FIT_TABLES, FitTable, fit_asset
from arena_pipeline.core.store.catalog import TableSpec

TOY_FIT = "toy_board_sizes"

rankings = fit_asset((*FIT_TABLES, FitTable(
    TOY_FIT, {"category": pl.String(), "method": pl.String(), "models": pl.UInt32()}, TableSpec(exported=True),
    "arena.toy_board_sizes: the models of each board of the fit.",
    lambda fit: fit.output.leaderboard.group_by("category", "method").len("models").sort("category", "method"))))
