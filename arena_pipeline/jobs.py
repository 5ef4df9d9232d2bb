"""Jobs: the full refresh of every asset, and a re-rank of the live dump that ends in a publication."""

import dagster as dg

from arena_pipeline.constants import BUILT_TOGETHER, LEADERBOARD_TABLE, SCHEMA

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them, publish.",
)

rerank_job = dg.define_asset_job(
    "rerank_job",
    selection=dg.AssetSelection.assets(
        # every table of the rankings fit (a publication takes them from one run)
        *[dg.AssetKey([SCHEMA, t]) for group in BUILT_TOGETHER if LEADERBOARD_TABLE in group for t in group],
    )
    # the gate, the report, and the validation tables computed from the live board (so they never
    # describe the board a re-rank replaced)
    | dg.AssetSelection.assets(dg.AssetKey("published_dump")).downstream(),
    description="Re-fit the leaderboards of the live dump with new ranking settings (run config of "
    "'rankings') and publish them through the gate, then redo the report and the comparisons of the new "
    "board; the flat tables are reused, not copied.",
)
