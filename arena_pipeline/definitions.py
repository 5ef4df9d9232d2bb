"""The one Definitions object of the code location: assets, checks, jobs, schedules, sensors, resources."""

import dagster as dg

from arena_pipeline.assets.analysis import position_bias_table, rating_trend_table
from arena_pipeline.assets.benchmarks import benchmark_comparison
from arena_pipeline.assets.ingest import flat_tables, raw_dump
from arena_pipeline.assets.models import external_comparison, models
from arena_pipeline.assets.publish import publication_gate
from arena_pipeline.assets.rankings import battle_categories, rankings
from arena_pipeline.assets.version_store import VERSION_STORE, version_store
from arena_pipeline.checks import battles_quality, board_freshness, messages_quality, models_confusable
from arena_pipeline.jobs import refresh_job, rerank_job
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse
from arena_pipeline.schedules import nightly_refresh
from arena_pipeline.sensors import board_freshness_sensor, new_dump_sensor

ASSETS = [
    raw_dump,
    flat_tables,
    battle_categories,
    rankings,
    models,
    position_bias_table,
    rating_trend_table,
    publication_gate,
    external_comparison,
    benchmark_comparison,
]
ASSET_CHECKS = [battles_quality, messages_quality, models_confusable]
ASSET_CHECKS.append(board_freshness)  # the live board's freshness (issue 27)


def default_resources() -> dict:
    """The resources with their defaults (each resolves its settings at run time, not now)."""
    return {
        "dump_source": DumpSource(),
        "warehouse": Warehouse(),
        "model_catalog": ModelCatalog(),
        "report_settings": ReportSettings(),
        # the run's table versions, on the run's warehouse (arena_pipeline/assets/version_store.py)
        VERSION_STORE: version_store,
    }


defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=[refresh_job, rerank_job],
    schedules=[nightly_refresh],
    sensors=[new_dump_sensor, board_freshness_sensor],
    resources=default_resources(),
    # steps run one after another (one DuckDB writer): one process saves a re-import per step
    executor=dg.in_process_executor,
)
