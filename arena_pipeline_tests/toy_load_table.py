"""A test-only table of the load, added in one declaration (issue 46): the load step with one more
:class:`LoadTable`, and nothing else.

``assets/test_load_tables.py`` loads it beside the pipeline's assets (``definitions.pipeline_assets``: it
replaces the package's load step) and sees the table written with the others, versioned and published.
"""

import polars as pl

from arena_pipeline.assets.ingest import load_asset
from arena_pipeline.core.ingest.tables import LOAD_TABLES, Batch, LoadTable
from arena_pipeline.core.store.catalog import TableSpec

TOY_LOAD = "toy_vote_models"


def vote_models(batch: Batch) -> pl.DataFrame:
    """The two models of each kept vote of a batch (a module-level function: the load's workers import it)."""
    return batch.battles.select(
        battle_id="id", models=pl.concat_str("model_a_canonical", "model_b_canonical", separator=" vs "))


flat_tables = load_asset((*LOAD_TABLES, LoadTable(
    TOY_LOAD, {"battle_id": pl.String(), "models": pl.String()}, TableSpec(file_view=True), "ingest",
    "arena.toy_vote_models: the two models of each kept vote.", batch=vote_models)))
