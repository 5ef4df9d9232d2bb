"""Jobs: the full refresh of every asset, and a re-rank of the live dump that ends in a publication."""

import dagster as dg

from arena_pipeline.constants import BUILT_TOGETHER, DERIVED_FROM, LEADERBOARD_TABLE, SCHEMA

#: every table of the rankings fit (a publication takes them from one run)
_RANKING_TABLES = next(group for group in BUILT_TOGETHER if LEADERBOARD_TABLE in group)

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them, publish.",
)

rerank_job = dg.define_asset_job(
    "rerank_job",
    selection=dg.AssetSelection.assets(
        *[dg.AssetKey([SCHEMA, t]) for t in _RANKING_TABLES],
        # the validation tables computed from the new leaderboard (a publication never shows the
        # comparison of another board: the gate refuses them stale), with their checks
        *[dg.AssetKey([SCHEMA, t]) for t, inputs in DERIVED_FROM.items() if LEADERBOARD_TABLE in inputs],
    )
    # the gate and the report
    | dg.AssetSelection.assets(dg.AssetKey("publication_gate")).downstream(),
    description="Re-fit the leaderboards of the live dump with new ranking settings (run config of "
    "'rankings'), compare the new boards with the published board and the benchmark scores, and publish "
    "them through the gate, then render the report; the flat tables are reused, not copied.",
)
