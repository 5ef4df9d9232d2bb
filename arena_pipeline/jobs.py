"""Jobs: the full refresh of every asset."""

import dagster as dg

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them.",
)
