"""A test-only published table declared in this one module (issue 35): its asset and what it is, nothing else.

``test_one_module_table.py`` loads it beside the pipeline's assets (``definitions.pipeline_assets``)
and sees it versioned, published, exported and in the lineage without a change anywhere else.
"""

import dagster as dg
import polars as pl

from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.version_store import VERSION_STORE, Versioned, stored_input
from arena_pipeline.core.store.catalog import TableSpec

TOY = "toy_votes"


@dg.asset(
    key=dg.AssetKey(["arena", TOY]),
    group_name="toy",
    kinds={"polars", "duckdb"},
    metadata=schema_metadata({"category": pl.String(), "battles": pl.UInt32(), "dump_revision": pl.String()},
                             f"arena.{TOY}", TableSpec(exported=True)),
    ins={"battle_categories": stored_input(dg.AssetKey(["arena", "battle_categories"]))},
    io_manager_key=VERSION_STORE,
)
def toy_votes(battle_categories: pl.DataFrame) -> Versioned:
    """arena.toy_votes: battles per category (the same battle_categories and code: that version, as a view)."""
    return Versioned(battle_categories.group_by("category").len("battles").sort("category"), reuse=True)
