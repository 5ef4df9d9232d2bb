"""Ingest assets: the raw dump (Hub download or local files) and the flat tables made from it."""


import dagster as dg

from pathlib import Path
from typing import Optional

from pydantic import Field

from arena_pipeline.constants import (
    BATTLES_TABLE,
    CONTEXT_MESSAGES_TABLE,
    MESSAGES_TABLE,
    QUARANTINE_TABLE,
    SCHEMA,
    VERSIONS_SCHEMA,
)
from arena_pipeline.assets.metadata import table_spec
from arena_pipeline.core.ingest import DumpManifest, load_dump
from arena_pipeline.core.sources import SourceError, new_fields
from arena_pipeline.core.warehouse import WarehouseLockedError
from arena_pipeline.core.schema import BATTLES_SCHEMA, CONTEXT_MESSAGES_SCHEMA, MESSAGES_SCHEMA, QUARANTINE_SCHEMA
from arena_pipeline.core.publication import record_dump, revision_key
from arena_pipeline.resources import DumpSource, ModelCatalog, Warehouse

RAW_DUMP = dg.AssetKey("raw_dump")
TABLE_KEYS = {
    name: dg.AssetKey([SCHEMA, name])
    for name in (BATTLES_TABLE, MESSAGES_TABLE, CONTEXT_MESSAGES_TABLE, QUARANTINE_TABLE)
}


class FetchConfig(dg.Config):
    """Run configuration of ``raw_dump``."""

    revision: Optional[str] = Field(
        default=None,
        description="Fetch this Hub revision instead of ARENA_REVISION (the new-dump sensor pins the sha it saw).",
    )


@dg.asset(
    key=RAW_DUMP,
    group_name="ingest",
    kinds={"huggingface", "parquet"},
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL),
)
def raw_dump(
    context: dg.AssetExecutionContext, config: FetchConfig, dump_source: DumpSource, warehouse: Warehouse
) -> dg.Output[DumpManifest]:
    """The dump's parquet shards (or CSV export), fetched and verified against the dataset card.

    Hub sources are resolved to a commit sha and downloaded into a cache keyed by that sha (a
    re-run with the same sha downloads nothing); local sources are read in place. Every parquet
    shard is opened and its schema checked before anything downstream uses it.
    """
    try:
        manifest = dump_source.fetch(revision=config.revision)
    except SourceError as exc:  # a broken file stays broken: fail now, no retry
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    extras = {f.name: new_fields(Path(f.path)) for f in manifest.files}
    extras = {name: fields for name, fields in extras.items() if fields}
    if extras:
        context.log.warning(f"fields the dataset card does not document (ignored, not fatal): {extras}")
    try:
        with warehouse.connection() as con:
            record_dump(
                con, SCHEMA, revision=manifest.revision, status="fetched", source=manifest.source,
                source_kind=manifest.source_kind, requested_revision=manifest.requested_revision,
                files=[{"file": f.name, "bytes": f.size, "rows": f.rows, "sha256": f.sha256}
                       for f in manifest.files],
                rows=manifest.rows,
            )
    except WarehouseLockedError as exc:  # it already waited lock_timeout_s: a retry would only wait again
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    context.log.info(f"dump {manifest.source} at {manifest.revision}: {len(manifest.files)} file(s)")
    return dg.Output(
        manifest,
        metadata={
            "source": manifest.source,
            "source_kind": manifest.source_kind,
            "requested_revision": manifest.requested_revision,
            "revision": manifest.revision,
            "files": dg.MetadataValue.json(
                [{"file": f.name, "bytes": f.size, "rows": f.rows, "sha256": f.sha256} for f in manifest.files]
            ),
            "bytes": manifest.bytes,
            "rows": manifest.rows,
            "new_fields": dg.MetadataValue.json(extras),
        },
    )


_FLAT = {"kinds": {"polars", "duckdb"}, "deps": [RAW_DUMP]}


@dg.multi_asset(
    specs=[
        table_spec(BATTLES_TABLE, BATTLES_SCHEMA, group="ingest", **_FLAT,
                   description="arena.battles: one row per vote with every scalar, conv_metadata and "
                   "category_tag field as a column."),
        table_spec(MESSAGES_TABLE, MESSAGES_SCHEMA, group="ingest", **_FLAT,
                   description="arena.messages: one row per message of conversation_a and conversation_b."),
        table_spec(CONTEXT_MESSAGES_TABLE, CONTEXT_MESSAGES_SCHEMA, group="ingest", **_FLAT,
                   description="arena.context_messages: the full_conversation turns of earlier evaluation "
                   "orders that precede each vote (not repeated in arena.messages)."),
        table_spec(QUARANTINE_TABLE, QUARANTINE_SCHEMA, group="quality", **_FLAT,
                   description="arena.quarantine: input rows kept out of arena.battles, with the rule broken."),
    ],
    ins={"manifest": dg.AssetIn(RAW_DUMP)},
)
def flat_tables(context: dg.AssetExecutionContext, manifest: DumpManifest, warehouse: Warehouse,
                model_catalog: ModelCatalog):
    """Flatten the dump's nested structs with Polars into this revision's versioned tables."""
    with warehouse.connection() as con:
        try:
            report = load_dump(manifest, con, VERSIONS_SCHEMA, suffix=f"__{revision_key(manifest.revision)}",
                               aliases=model_catalog.aliases())
        except Exception as exc:
            record_dump(con, SCHEMA, revision=manifest.revision, status="failed", detail=f"flatten: {exc}"[:2000])
            raise
        record_dump(con, SCHEMA, revision=manifest.revision, status="loaded")
    context.log.info(
        f"{report.rows_read} rows read -> {report.battles} battles, {report.messages} messages, "
        f"{report.quarantined} quarantined in {report.seconds:.1f} s"
    )
    common = {"revision": manifest.revision, "seconds": round(report.seconds, 3)}
    counts = {
        BATTLES_TABLE: report.battles,
        MESSAGES_TABLE: report.messages,
        CONTEXT_MESSAGES_TABLE: report.context_messages,
        QUARANTINE_TABLE: report.quarantined,
    }
    for name, rows in counts.items():
        extra = {}
        if name == BATTLES_TABLE:
            extra = {"rows_read": report.rows_read, "per_file": dg.MetadataValue.json(report.per_file),
                     "invariant": f"rows read {report.rows_read} = battles {report.battles} + "
                                  f"quarantined {report.quarantined}"}
        if name == QUARANTINE_TABLE:
            extra = {"by_rule": dg.MetadataValue.json(report.quarantine_by_rule)}
        yield dg.MaterializeResult(
            asset_key=TABLE_KEYS[name],
            metadata={**common, **extra, "dagster/row_count": rows,
                      "table": f"{SCHEMA}.{name}"},
            data_version=dg.DataVersion(manifest.revision),
        )
