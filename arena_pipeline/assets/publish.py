"""The publication asset: every table of one dump revision made visible together."""

import dagster as dg

from arena_pipeline.assets.ingest import RAW_DUMP
from arena_pipeline.constants import HISTORY_TABLES, PUBLISHED_TABLES, PUBLISHED_TAG, SCHEMA
from arena_pipeline.core.ingest import DumpManifest
from arena_pipeline.core.publication import publish
from arena_pipeline.resources import Warehouse

PUBLISHED_DUMP = dg.AssetKey("published_dump")


@dg.asset(
    key=PUBLISHED_DUMP,
    group_name="publish",
    kinds={"duckdb"},
    deps=[dg.AssetKey([SCHEMA, t]) for t in PUBLISHED_TABLES] + [RAW_DUMP],
    ins={"manifest": dg.AssetIn(RAW_DUMP)},
)
def published_dump(context: dg.AssetExecutionContext, manifest: DumpManifest, warehouse: Warehouse) -> dg.MaterializeResult:
    """Re-point every arena.* view at this dump's tables in one DuckDB transaction.

    Readers see the previous dump or this one, never a mix: the versioned tables are complete
    before this step runs, and nothing here is visible until COMMIT. Runs only after every table
    of the dump (and the blocking quality checks) succeeded.
    """
    with warehouse.connection() as con:
        report = publish(
            con, SCHEMA, manifest.revision, list(PUBLISHED_TABLES),
            history_tables=HISTORY_TABLES, retention=warehouse.retention,
        )
    context.instance.add_run_tags(context.run_id, {PUBLISHED_TAG: report.revision})
    context.log.info(f"published {report.revision} (previous: {report.previous})")
    return dg.MaterializeResult(
        metadata={
            "revision": report.revision,
            "previous_revision": report.previous or "",
            "views": dg.MetadataValue.json(report.views + report.history_views),
            "dropped_versions": dg.MetadataValue.json(report.dropped),
        },
        data_version=dg.DataVersion(report.revision),
    )
