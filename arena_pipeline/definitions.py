"""The one Definitions object of the code location: assets, checks, jobs, schedules, sensors, resources."""

from types import ModuleType

import dagster as dg

from arena_pipeline import assets
from arena_pipeline.assets.catalog import catalog_of
from arena_pipeline.assets.publication_gate import publication_gate_asset
from arena_pipeline.assets.version_store import VERSION_STORE, version_store
from arena_pipeline.checks import board_freshness, models_confusable, quality_check
from arena_pipeline.core.store.catalog import TableCatalog
from arena_pipeline.core.store.records import RECORD_TABLES
from arena_pipeline.jobs import refresh_job, rerank_job
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse
from arena_pipeline.schedules import nightly_refresh
from arena_pipeline.sensors import board_freshness_sensor, new_dump_sensor


def pipeline_assets(*modules: ModuleType) -> tuple[list, TableCatalog]:
    """The assets of the ``arena_pipeline.assets`` package and of ``modules`` (a test's table, say), the
    table catalogue derived from them (``assets/catalog.py``), and the publication gate over it.

    An asset of ``modules`` that makes every table of one of the package's steps replaces that step (a
    test's variant of a step: the fit with one more table, ``assets/rankings.fit_asset``)."""
    added = dg.load_assets_from_modules(modules)
    replaced = {key for node in added for key in node.keys}
    loaded = [*(node for node in dg.load_assets_from_package_module(assets) if not set(node.keys) <= replaced),
              *added]
    catalog = catalog_of(loaded, extra=RECORD_TABLES)
    return [*loaded, publication_gate_asset(catalog)], catalog


#: every asset, loaded from its module, and what each table is (derived from them, never listed)
ASSETS, CATALOG = pipeline_assets()
#: the expectation suites of the tables the catalogue says are checked, the model names, the live board's freshness
ASSET_CHECKS = [*(quality_check(table) for table in CATALOG.checked), models_confusable, board_freshness]


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
