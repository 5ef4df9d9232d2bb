"""Jobs: the full refresh of every asset, and a re-rank of the live dump that ends in a publication."""

import dagster as dg

from arena_pipeline.constants import (
    DUMP_LEADERBOARD_TABLE,
    LEADERBOARD_TABLE,
    PAIRWISE_TABLE,
    SCHEMA,
    STYLE_COEFFICIENTS_TABLE,
)

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them, publish.",
)

rerank_job = dg.define_asset_job(
    "rerank_job",
    selection=dg.AssetSelection.assets(
        *[dg.AssetKey([SCHEMA, t]) for t in (LEADERBOARD_TABLE, PAIRWISE_TABLE, STYLE_COEFFICIENTS_TABLE,
                                                   DUMP_LEADERBOARD_TABLE)],
        dg.AssetKey("published_dump"),
        dg.AssetKey("leaderboard_report"),
    ),
    description="Re-fit the leaderboards of the live dump with new ranking settings (run config of "
    "'rankings') and publish them through the gate; the flat tables are reused, not copied.",
)
