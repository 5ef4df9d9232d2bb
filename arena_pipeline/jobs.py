"""Jobs: the full refresh of every asset, and a re-rank of the live dump that ends in a publication."""

import dagster as dg

from arena_pipeline.assets.rankings import rankings

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them, publish.",
)

rerank_job = dg.define_asset_job(
    "rerank_job",
    # every table of the rankings fit (a publication takes them from one run) and everything computed from
    # them, with their checks: the validation tables (a publication never shows the comparison of another
    # board: the gate refuses them stale), the gate and the report
    selection=dg.AssetSelection.assets(rankings).downstream(),
    description="Re-fit the leaderboards of the live dump with new ranking settings (run config of "
    "'rankings'), compare the new boards with the published board and the benchmark scores, and publish "
    "them through the gate, then render the report; the flat tables are reused, not copied.",
)
