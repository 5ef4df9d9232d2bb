"""The one Definitions object of the code location: assets, checks, jobs, schedules, sensors, resources."""

import dagster as dg

from arena_pipeline.assets.ingest import flat_tables, raw_dump
from arena_pipeline.assets.publish import published_dump
from arena_pipeline.jobs import refresh_job
from arena_pipeline.resources import DumpSource, Warehouse

defs = dg.Definitions(
    assets=[raw_dump, flat_tables, published_dump],
    jobs=[refresh_job],
    resources={
        "dump_source": DumpSource(),
        "warehouse": Warehouse(),
    },
)
