"""Ingest assets: the raw dump (Hub download or local files) and the flat tables made from it."""

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import dagster as dg
from pydantic import Field

from arena_pipeline.assets.builds import package_version, run_build, run_failure, table_sha256
from arena_pipeline.assets.metadata import table_spec
from arena_pipeline.assets.run_config import check_ranking_run_config
from arena_pipeline.assets.version_store import VERSION_STORE, FillTogether, Versioned
from arena_pipeline.constants import BATTLES_TABLE, QUARANTINE_TABLE, SCHEMA
from arena_pipeline.core.dataset.manifest import DumpManifest
from arena_pipeline.core.dataset.models import normalization_versions
from arena_pipeline.core.ingest.load import FileChangedError, LoadReport, fill_dump
from arena_pipeline.core.ingest.local_dump import local_revision
from arena_pipeline.core.ingest.sources import SourceError, new_fields
from arena_pipeline.core.ingest.tables import LOAD_TABLES, LoadTable
from arena_pipeline.core.store.records import record_dump
from arena_pipeline.core.store.versions import finish_build, start_build, version_name
from arena_pipeline.core.store.warehouse import WarehouseCorruptError, WarehouseLockedError
from arena_pipeline.core.validation.quality import import_in_background
from arena_pipeline.environment import environment_warnings
from arena_pipeline.resources import DumpSource, ModelCatalog, Warehouse

RAW_DUMP = dg.AssetKey("raw_dump")
#: the load's tables' keys (its tables are declared once: core/ingest/tables.py's LOAD_TABLES)
TABLE_KEYS = {table.name: dg.AssetKey([SCHEMA, table.name]) for table in LOAD_TABLES}


class FetchConfig(dg.Config):
    """Run configuration of ``raw_dump``."""

    revision: str | None = Field(
        default=None,
        description="Fetch this Hub revision instead of ARENA_REVISION (the new-dump sensor pins the sha it saw).",
    )
    revisions: dict[str, str] | None = Field(
        default=None,
        description="With several dumps (ARENA_DATASETS / ARENA_DISCOVER): the dumps to load and each one's "
        "revision, in load order (the sensor pins what it saw).",
    )


def _files(manifest: DumpManifest) -> list[dict]:
    revisions = {dump: revision for dump, _, revision in manifest.parts}
    return [{"file": f.name, "bytes": f.size, "rows": f.rows, "sha256": f.sha256,
             **({"dump": f.dump, "dump_revision": revisions.get(f.dump)} if f.dump else {})}
            for f in manifest.files]


def _new_fields(manifest: DumpManifest) -> dict[str, list]:
    """The fields each file has beyond the dataset card's (a warning only). A file that cannot be read
    again now (it changed since the fetch) is left out: the load names it as changed."""
    found = {}
    for f in manifest.files:
        try:
            found[f.name] = new_fields(Path(f.path))
        except (OSError, ValueError):  # pyarrow's errors of a file cut short are ValueError or OSError
            continue
    return found


def _record_rejected(dump_source: DumpSource, warehouse: Warehouse, exc: SourceError,
                     requested: str | None = None, warn: Callable[[str], None] | None = None) -> None:
    """Record a rejected dump in arena.dumps as failed, with the reason.

    A local dump is recorded under its content revision (known without reading it); a Hub dump
    under the commit whose shard failed the schema check after download. A Hub error that says
    nothing of the dump's content (a lookup that failed, a transfer that never matched) records
    nothing. Several dumps (ARENA_DATASETS / ARENA_DISCOVER) have no one revision to record: the
    run's failure names the dump and file. Readers get the record on leaving the block; a snapshot that
    cannot be written then is ``warn``'s line, so the run fails with the dump's own error.
    """
    if dump_source.is_multi():
        return
    spec = dump_source.spec()
    if spec.kind == "hub":
        revision = getattr(exc, "sha", None)
        if revision is None:
            return
        try:
            requested = requested or dump_source.requested_revision()
        except SourceError:
            requested = None
    else:
        try:
            revision = local_revision(spec, dump_source.content_hashes())
        except (OSError, SourceError):
            return
        requested = "local"
    with warehouse.store().work(warn=warn) as con:
        record_dump(con, SCHEMA, revision=revision, status="failed", source=spec.location,
                    source_kind=spec.kind, requested_revision=requested, detail=f"rejected: {exc}"[:2000])


def _run_config(context: dg.AssetExecutionContext) -> dict:
    """The run's configuration ({} for an asset invoked directly, which has no run)."""
    try:
        return context.run.run_config
    except dg.DagsterError:
        return {}


@dg.asset(key=RAW_DUMP, group_name="ingest", kinds={"huggingface", "parquet"})
def raw_dump(
    context: dg.AssetExecutionContext, config: FetchConfig, dump_source: DumpSource, warehouse: Warehouse
) -> dg.MaterializeResult:
    """The dump's parquet shards (or CSV export), fetched and verified against the dataset card.

    Hub sources are resolved to a commit sha and downloaded into a cache keyed by that sha (a
    re-run with the same sha downloads nothing); local sources are read in place and identified by
    their content (sha256). Every parquet shard is opened and its schema checked before anything
    downstream uses it. This step starts the run's build: every table the run writes is a version
    of its own, published only by publication_gate. Hub errors are retried inside the Hub client
    only; the step itself is not retried. The run's ranking settings are checked first (a size
    setting out of range fails here, with the memory it would need, not after the load), then the readers'
    file: one this store may not replace (a user's database, another store's snapshot) fails the run here.
    """
    try:
        check_ranking_run_config(_run_config(context))
    except ValueError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    for line in environment_warnings():  # a misspelt ARENA_* variable: in `dagster dev`'s runs too
        context.log.warning(line)
    try:  # a readers' file the store may not replace: refused before the download
        warehouse.check_readers_file()
    except (WarehouseLockedError, WarehouseCorruptError) as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    try:
        manifest = dump_source.fetch(revision=config.revision, revisions=config.revisions)
    except SourceError as exc:  # a broken file stays broken: fail now, no retry
        try:
            _record_rejected(dump_source, warehouse, exc, config.revision, warn=context.log.warning)
        except (WarehouseLockedError, WarehouseCorruptError):
            pass
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    extras = {name: fields for name, fields in _new_fields(manifest).items() if fields}
    if extras:
        context.log.warning(f"fields the dataset card does not document (ignored, not fatal): {extras}")
    try:
        with warehouse.connection() as con:
            record_dump(
                con, SCHEMA, revision=manifest.revision, status="fetched", source=manifest.source,
                source_kind=manifest.source_kind, requested_revision=manifest.requested_revision,
                files=_files(manifest), rows=manifest.rows,
            )
            start_build(con, SCHEMA, context.run_id, manifest, run_failure(context.instance))
    except (WarehouseLockedError, WarehouseCorruptError) as exc:  # waited already / damaged: no retry
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    context.log.info(f"dump {manifest.source} at {manifest.revision}: {len(manifest.files)} file(s)")
    return dg.MaterializeResult(
        metadata={
            "source": manifest.source,
            "source_kind": manifest.source_kind,
            "requested_revision": manifest.requested_revision,
            "revision": manifest.revision,
            "files": dg.MetadataValue.json(_files(manifest)),
            "bytes": manifest.bytes,
            "rows": manifest.rows,
            "new_fields": dg.MetadataValue.json(extras),
            "dumps": dg.MetadataValue.json([{"dump": d, "requested": q, "revision": r} for d, q, r in manifest.parts]),
        },
        data_version=dg.DataVersion(manifest.revision),
    )


def _asset_spec(table: LoadTable) -> dg.AssetSpec:
    """The spec of one table of the load (raw_dump is the multi-asset's dependency: an AssetOut has no deps)."""
    return table_spec(table.name, dict(table.columns), table.spec, group=table.group, kinds={"polars", "duckdb"},
                      deps=[], description=table.description)


def load_asset(tables: tuple[LoadTable, ...] = LOAD_TABLES) -> dg.AssetsDefinition:
    """The load step: one multi-asset whose outputs, keys and catalogue entries are ``tables``, all written by
    one pass over the dump."""

    @dg.multi_asset(
        name="flat_tables",
        # outputs the version store keeps, in declaration order (the store's last-output line follows the last)
        outs={table.name: dg.AssetOut.from_spec(_asset_spec(table), io_manager_key=VERSION_STORE)
              for table in tables},
        deps=[RAW_DUMP],
    )
    def flat_tables(context: dg.AssetExecutionContext, warehouse: Warehouse, model_catalog: ModelCatalog):
        """Flatten the dump's nested structs with Polars into this run's versions of the flat tables and the
        preference pairs (made from each batch's conversations while the batch is in memory).

        The load's tables (``LOAD_TABLES``) are written in one pass (:func:`~arena_pipeline.core.ingest.load.fill_dump`)
        as Parquet part files into the folders the version store names (a :class:`FillTogether`): the files
        are the versions, registered together and never copied, or the store reuses an earlier build's
        tables when it loaded this revision with the same settings and code (nothing is read or written then).
        """
        aliases = model_catalog.aliases()
        with warehouse.connection() as con:
            build = run_build(context, con)
        settings = flat_settings(aliases, build.manifest)

        def load(con, folders: Mapping[str, Path]) -> dict[str, tuple[int, dict]]:
            report = _load(con, build, aliases, folders, warehouse, tables)
            counts = ", ".join(f"{rows} {name.replace('_', ' ')}" for name, rows in report.rows.items())
            context.log.info(f"{report.rows_read} rows read -> {counts} in {report.seconds:.1f} s")
            return _load_results(report)

        together = FillTogether(tuple(table.name for table in tables), load)
        common = {"version_suffix": version_name("", build)}
        for table in tables:
            with warnings.catch_warnings():  # an Output's data_version is in beta: Dagster warns of its own API
                warnings.simplefilter("ignore", dg.BetaWarning)
                output = dg.Output(Versioned(together, settings, reuse=True), output_name=table.name,
                                   metadata={**common, "table": f"{SCHEMA}.{table.name}"},
                                   data_version=dg.DataVersion(build.revision))
            yield output
        with warehouse.connection() as con:
            record_dump(con, SCHEMA, revision=build.revision, status="loaded")

    return flat_tables


flat_tables = load_asset()


def flat_settings(aliases, manifest: DumpManifest | None) -> dict:
    """What the flat tables are made from besides the revision and the code: their reuse key's settings
    (every table derived from them keys on theirs). The library versions of name normalization are in it:
    an upgrade of Polars or of Python's Unicode database loads the dump again instead of reusing names
    normalized the old way."""
    return {"aliases_sha256": table_sha256(aliases), "source": manifest.source if manifest else None,
            "csv_max_cell_bytes": manifest.csv_max_cell_bytes if manifest else None,
            "normalization": normalization_versions(), "package_version": package_version()}


def _load(con, build, aliases, folders: Mapping[str, Path], warehouse: Warehouse,
          tables: tuple[LoadTable, ...] = LOAD_TABLES) -> LoadReport:
    """Flatten the build's dump into Parquet part files in the ``folders`` the version store named (a
    failure is recorded on the dump and the build, and raised: the store then deletes the folders)."""
    manifest = build.manifest
    if manifest is None or any(not Path(f.path).exists() for f in manifest.files):
        raise dg.Failure(description=f"the files of revision {build.revision} are not available any more: "
                         "include raw_dump in the selection", allow_retries=False)
    try:
        return fill_dump(manifest, folders, aliases=aliases, when_read=import_in_background, tables=tables,
                         workers=warehouse.load_processes(manifest))
    except Exception as exc:
        if isinstance(exc, FileChangedError):  # not a bad dump: its files changed after the fetch
            record_dump(con, SCHEMA, revision=manifest.revision, status="fetched", detail=f"not loaded: {exc}"[:2000])
            finish_build(con, build.build_id, "failed", f"not loaded, its files changed: {exc}"[:2000])
        else:
            record_dump(con, SCHEMA, revision=manifest.revision, status="failed", detail=f"flatten: {exc}"[:2000])
            finish_build(con, build.build_id, "failed", f"flatten: {exc}"[:2000])
        if isinstance(exc, SourceError):  # a file that is not what was fetched: one line, no retry
            raise dg.Failure(description=str(exc), allow_retries=False) from exc
        raise


def _load_results(report: LoadReport) -> dict[str, tuple[int, dict]]:
    """Rows and output metadata of each table of the load, from the load's figures: every table its seconds;
    arena.battles the files read and the invariant, arena.quarantine its rows by rule."""
    seconds = {"seconds": round(report.seconds, 3)}
    results = {name: (rows, dict(seconds)) for name, rows in report.rows.items()}
    battles, quarantine = results[BATTLES_TABLE][1], results[QUARANTINE_TABLE][1]
    battles.update({"rows_read": report.rows_read, "per_file": dg.MetadataValue.json(report.per_file),
                    "invariant": f"rows read {report.rows_read} = battles {report.battles} + "
                                 f"quarantined {report.quarantined}"})
    if report.per_dump:
        battles["per_dump"] = dg.MetadataValue.json(report.per_dump)
    quarantine["by_rule"] = dg.MetadataValue.json(report.quarantine_by_rule)
    return results
