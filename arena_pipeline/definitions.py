"""The one Definitions object of the code location: assets, checks, jobs, schedules, sensors, resources."""

import dagster as dg

from arena_pipeline.assets.ingest import flat_tables, raw_dump
from arena_pipeline.assets.publish import published_dump
from arena_pipeline.assets.rankings import battle_categories, rankings
from arena_pipeline.checks import battles_quality, messages_quality
from arena_pipeline.jobs import refresh_job
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline.schedules import nightly_refresh
from arena_pipeline.sensors import new_dump_sensor

ASSETS = [raw_dump, flat_tables, battle_categories, rankings, published_dump]
ASSET_CHECKS = [battles_quality, messages_quality]

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=[refresh_job],
    schedules=[nightly_refresh],
    sensors=[new_dump_sensor],
    resources={
        "dump_source": DumpSource(),
        "warehouse": Warehouse(),
    },
)
