"""The version store: the one IO manager that reads and writes the run's table versions (core/store/versions.py).

An asset built on it declares its inputs and returns its table; it never names a build or a version:

- an input annotated ``pl.DataFrame`` is the version of that table this run reads
  (``core.store.versions.input_version``: this run's, else the live publication's of the same dump), read
  whole or, with the input metadata ``{"columns": "id, model_a, ..."}``, only those columns; an input
  annotated :class:`TableRef` is a reference to that version, queried inside DuckDB. A heavy table
  (``TableSpec.heavy`` on its asset) loads only as a reference: its rows never enter Python.
- the output is a ``pl.DataFrame``, a :class:`Fill` (SQL work the store runs inside DuckDB, into the
  version's staging table), a :class:`FillTogether` (one pass that writes several tables of a step as
  Parquet files, which are their versions: the load's vote tables) or a :class:`Versioned` around one of them. ``Versioned`` carries the settings
  recorded with the version (what the gate compares and ``inputs_key`` hashes; ``package_version``
  is always added) and ``reuse``: when an earlier version has the same inputs, settings and code
  (``core.store.versions.reusable_version``) the new version is a view of it and nothing is written.
  A bare frame or Fill is ``Versioned(it)``: the package version only, no reuse. A :class:`Later` is a
  frame made only when no version can be reused: the store looks for one first, so a step whose inputs,
  settings and code are unchanged computes nothing (the fits of an unchanged re-run).
- a table whose spec says ``file_view`` (the vote tables) is stored as Parquet files, which are its
  version (``core.store.versions.write_file_versions``): written once, read through DuckDB scans, shown
  to readers as they are; any other table is a DuckDB table of the work file.
- a frame whose declared columns (the asset's ``dagster/column_schema``) include ``dump_revision`` and
  that lacks it gets the build's revision there: the revision is the version's, so an asset invoked
  directly on frames returns its table without it.

The table is the asset key's last part; the build is the run's (``core.store.versions.current_build``);
the version's inputs (what its reuse key hashes) are the tables the asset graph computes it from, as the
step's asset definition states them (no list of lineage elsewhere).
Each stored output gets ``revision`` and ``dagster/row_count`` metadata, and after the step's last
output the store logs the "this run publishes nothing" line (``assets.live.note_if_unpublished``):
a multi-asset yields its outputs in the order of its specs.

Within one process the store remembers the run's build and each version it stored: a later step of the run
reads such a table as a :class:`TableRef` without opening the work file (the step that stores a version is
its only writer; the gate's recomputed ``arena.publication_changes`` aside, which no later step reads). The
outputs a step reused are logged in one line after its last output. A step's first reused ``Later`` output
also reuses, in the same hold of the work file, its later outputs that can be with the same settings (the fits'
nine tables: one hold, not nine; ``VersionStore._reuse_ahead``).

The store takes the run's ``warehouse`` resource by key (``required_resource_keys``), not as a nested
resource field: Dagster matches a nested resource by object, so a run that sets ``warehouse`` (as
every test does) would otherwise leave the store on the default warehouse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl

from arena_pipeline.assets.builds import build_of_run, package_version, run_failure
from arena_pipeline.assets.live import note_if_unpublished
from arena_pipeline.assets.metadata import COLUMN_SCHEMA, spec_of
from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.versions import (
    FailureOf,
    base_version,
    drop_version,
    input_version,
    read_input,
    reusable_version,
    reuse_together,
    reuse_version,
    version_name,
    versioned,
    write_file_versions,
    write_part,
    write_version,
    write_version_with,
)
from arena_pipeline.resources import Warehouse

#: The key assets and inputs name the store by.
VERSION_STORE = "version_store"
REVISION_COLUMN = "dump_revision"


@dataclass(frozen=True)
class TableRef:
    """A version an asset reads inside DuckDB (never whole in Python).

    ``version`` is the version's unquoted name, ``base`` the version whose table holds its rows
    (itself, or the one it reuses: read by row ranges, say), ``revision`` the dump revision.
    """

    version: str
    revision: str
    base: str

    @property
    def name(self) -> str:
        """The quoted, schema-qualified name to query."""
        return versioned(self.version)

    @property
    def base_name(self) -> str:
        """The quoted name of the table holding the rows."""
        return versioned(self.base)


@dataclass(frozen=True)
class Fill:
    """SQL work the store runs inside DuckDB: ``make(con, target)`` creates and fills the table
    ``target`` (quoted, does not exist yet) and returns its rows, or (rows, metadata for the output)."""

    make: Callable[[duckdb.DuckDBPyConnection, str], int | tuple[int, Mapping]]


@dataclass(frozen=True, eq=False)
class FillTogether:
    """Work that makes several tables of one step in one pass, as Parquet files (the load's five vote
    tables): ``make(con, folders)`` gets ``{table: a new, empty folder}`` and the work file's connection,
    writes each table's part files (``part-*.parquet``) into its folder and returns per table its rows,
    or (rows, metadata for its output).

    Each of the step's outputs returns the same object (in a :class:`Versioned`, with the same settings);
    the store runs ``make`` at the first of them; the files are the versions (written once, never
    copied; ``core.store.versions.write_file_versions``: folders unique to the attempt, registered
    together), or, with ``reuse``, every table is a view of one earlier build's versions when that build
    made them all with the same inputs, settings and code (``core.store.versions.reuse_together``): all
    or none.
    """

    tables: tuple[str, ...]
    make: Callable[[duckdb.DuckDBPyConnection, Mapping[str, Path]], Mapping[str, int | tuple[int, Mapping]]]
    #: per table, (rows, output metadata) once stored
    stored: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True, eq=False)
class Later:
    """A table the store makes only when no earlier version can be reused (``Versioned(Later(make),
    settings, reuse=True)``): ``make()`` returns the frame, or (frame, metadata for the output). The
    reusable version is looked for before ``make`` runs, so a reused table is never computed."""

    make: Callable[[], pl.DataFrame | tuple[pl.DataFrame, Mapping]]


@dataclass
class Versioned:
    """A table with the settings recorded with its version, and whether an equal version may be reused."""

    table: pl.DataFrame | Fill | FillTogether | Later | None
    settings: Mapping = field(default_factory=dict)
    reuse: bool = False

    def release(self) -> None:
        """Let go of the table once its version is stored (``table`` becomes None). Dagster's
        ``execute_in_process`` (the refresh commands, the tests, bench_scale) keeps every output's value until
        the run ends (its output capture): a stored frame held here, or a :class:`Later` holding the fit
        that made it, would stay in memory through every later step (at 10x, ~0.8 GB when `rankings` began)."""
        self.table = None


def _declared_columns(context: dg.OutputContext) -> set[str]:
    schema = context.definition_metadata.get(COLUMN_SCHEMA)
    return {column.name for column in schema.columns} if schema is not None else set()


class VersionStore(dg.IOManager):
    """Loads inputs from, and stores outputs as, the table versions of run ``run_id`` in ``warehouse``."""

    def __init__(self, warehouse: Warehouse, run_id: str, failure_of: FailureOf | None = None):
        # failure_of: why an ended build's run failed (assets.builds.run_failure), for the builds it closes
        self.warehouse, self.run_id, self.failure_of = warehouse, run_id, failure_of
        #: the run's build once found (its row never changes), and what this store stored in this process:
        #: table -> its reference (a later step of the run reads it as a TableRef without opening the work file)
        self._run_build = None
        self._stored: dict[str, TableRef] = {}
        #: per step, its reused outputs not logged yet (one line after its last output)
        self._reused: dict[str | None, list[str]] = {}
        #: per step, the later outputs its first reused :class:`Later` output made views of in the same hold
        #: (:meth:`_reuse_ahead`): table -> (reused version, rows, the settings they were looked up with)
        self._ahead: dict[str | None, dict[str, tuple[str, int, dict]]] = {}

    def _build(self, con: duckdb.DuckDBPyConnection):
        """The run's build (``assets.builds.build_of_run``), looked up once."""
        if self._run_build is None:
            self._run_build = build_of_run(con, self.run_id, self.failure_of)
        return self._run_build

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        self._store(context, obj)
        if isinstance(obj, Versioned):  # stored: nothing of it needs to stay in memory (Versioned.release)
            obj.release()

    def _store(self, context: dg.OutputContext, obj) -> None:
        stored = obj if isinstance(obj, Versioned) else Versioned(obj)
        if not isinstance(stored.table, (pl.DataFrame, Fill, FillTogether, Later)):
            raise TypeError("the version store stores a polars DataFrame or a Fill (or a FillTogether), "
                            f"not {type(stored.table).__name__}")
        table = context.asset_key.path[-1]
        # package_version first, unless the settings name it already (in their own order: the recorded text)
        settings = dict(stored.settings) if "package_version" in stored.settings else {
            "package_version": package_version(), **stored.settings}
        inputs = _input_tables(context)
        extra: dict = {}
        # reused already by the step's first reused output (_reuse_ahead); its view stands only for a Later
        # output with the same settings, else it is dropped and the output stored as any other
        ahead = self._ahead.get(_step_key(context), {}).pop(table, None)
        if isinstance(stored.table, Later):  # an earlier version reused, or the table made now
            if ahead is not None and stored.reuse and ahead[2] == settings and self._run_build is not None:
                self._log_reused(context, f"{SCHEMA}.{table} ({ahead[0]}, not computed)")
                return self._stored_output(context, table, self._run_build, ahead[1], {"reused": ahead[0]})
            build, rows, stored = self._reuse_or_make(context, table, stored, settings, inputs, extra, ahead)
            if stored is None:
                return self._stored_output(context, table, build, rows, extra)
            ahead = None  # dropped by _reuse_or_make
        if isinstance(stored.table, FillTogether) and stored.table.stored and self._run_build is not None:
            # stored with the step's first output: nothing to open
            rows, more = stored.table.stored[table]
            return self._stored_output(context, table, self._run_build, rows, {**extra, **more})
        with self.warehouse.connection() as con:
            build = self._build(con)
            if ahead is not None:
                drop_version(con, table, build)
            reusable = (reusable_version(con, table, build, settings, inputs)
                        if stored.reuse and not isinstance(stored.table, FillTogether) else None)
            if isinstance(stored.table, FillTogether):  # made (or reused) at the step's first output
                if not stored.table.stored:
                    self._store_together(context, con, build, stored, settings, inputs)
                rows, more = stored.table.stored[table]
                extra.update(more)
            elif reusable is not None:  # same inputs, settings and code: the earlier version, as a view
                base, rows = reusable
                reuse_version(con, table, build, base, rows, settings)
                self._log_reused(context, f"{SCHEMA}.{table} ({base})")
                extra["reused"] = base
            elif isinstance(stored.table, Fill):
                def fill(target: str) -> int:
                    made = stored.table.make(con, target)
                    rows, metadata = made if isinstance(made, tuple) else (made, {})
                    extra.update(metadata)
                    return rows

                rows = write_version_with(con, table, build, fill, settings, inputs)
            else:
                frame = stored.table
                if REVISION_COLUMN in _declared_columns(context) and REVISION_COLUMN not in frame.columns:
                    frame = frame.with_columns(pl.lit(build.revision).alias(REVISION_COLUMN))
                spec = spec_of(context.definition_metadata)
                if spec is not None and spec.file_view:  # a vote table (battle_categories): its Parquet file
                    rows = write_file_versions(con, (table,), build, self.warehouse.files_path(),
                                               lambda folders: {table: write_part(folders[table], frame)},
                                               settings, inputs)[table]
                else:
                    rows = write_version(con, table, build, frame, settings, inputs)
        return self._stored_output(context, table, build, rows, extra)

    def _stored_output(self, context: dg.OutputContext, table: str, build, rows: int, extra: Mapping) -> None:
        """The output's metadata, once its version is stored (remembered for the run's later steps), and the
        step's lines after its last output."""
        version = version_name(table, build)
        self._stored[table] = TableRef(version, build.revision, extra.get("reused") or version)
        context.add_output_metadata({"revision": build.revision, "dagster/row_count": rows, **extra})
        self._note_after_last_output(context)

    def _reuse_or_make(self, context: dg.OutputContext, table: str, stored: Versioned, settings: Mapping,
                       inputs: tuple[str, ...], extra: dict, ahead: tuple | None = None):
        """A :class:`Later`: (build, rows, None) when an earlier version with the same inputs, settings and code
        is reused (as a view; ``make`` is not called), else (build, 0, the made frame as a Versioned to store).
        The work file is not held while ``make`` runs. ``ahead``: a view :meth:`_reuse_ahead` made of ``table``
        with other settings, dropped first."""
        with self.warehouse.connection() as con:
            build = self._build(con)
            if ahead is not None:
                drop_version(con, table, build)
            reusable = reusable_version(con, table, build, settings, inputs) if stored.reuse else None
            if reusable is not None:
                base, rows = reusable
                reuse_version(con, table, build, base, rows, settings)
                self._log_reused(context, f"{SCHEMA}.{table} ({base}, not computed)")
                extra["reused"] = base
                self._reuse_ahead(context, con, build, settings)
                return build, rows, None
        made = stored.table.make()
        frame, metadata = made if isinstance(made, tuple) else (made, {})
        extra.update(metadata)
        return build, 0, Versioned(frame, settings)

    def _reuse_ahead(self, context: dg.OutputContext, con: duckdb.DuckDBPyConnection, build, settings: Mapping) -> None:
        """In the hold of a step's reused :class:`Later` output, make views of the earlier versions its later
        outputs (selected, stored here) can reuse with the same settings, so that each of them needs no hold of
        its own (the fits: one hold, not nine). The lookup and the registry rows are one hold of the work file:
        no other run's retention can drop a reused version in between. An output that then comes with other
        settings, or not as a reusable ``Later``, drops its view and is stored as any other."""
        step = _current_step()
        if step is None:
            return
        keys = [spec.key for spec in step.assets_def.specs if spec.key in step.selected_asset_keys]
        ahead = {}
        for key in keys[keys.index(context.asset_key) + 1:] if context.asset_key in keys else ():
            if step.assets_def.get_io_manager_key_for_asset_key(key) != VERSION_STORE:
                continue
            table = key.path[-1]
            if (found := reusable_version(con, table, build, settings, _deps(step, key))) is not None:
                reuse_version(con, table, build, *found, settings)
                ahead[table] = (*found, dict(settings))
        if ahead:
            self._ahead[_step_key(context)] = ahead

    def _store_together(self, context: dg.OutputContext, con: duckdb.DuckDBPyConnection, build, stored: Versioned,
                        settings: Mapping, inputs: tuple[str, ...]) -> None:
        """Store every table of a :class:`FillTogether` (at its step's first output): reused together, or
        made by one ``make`` and swapped in together."""
        together: FillTogether = stored.table
        reused = reuse_together(con, together.tables, build, settings, inputs) if stored.reuse else None
        if reused is not None:
            context.log.info(f"{', '.join(f'{SCHEMA}.{t}' for t in together.tables)}: inputs unchanged, "
                             f"the versions of one earlier build reused "
                             f"({', '.join(f'{t} {rows}' for t, (_, rows) in reused.items())} rows), "
                             "nothing is read or written")
            together.stored.update({t: (rows, {"reused": base}) for t, (base, rows) in reused.items()})
            return
        metadata: dict[str, Mapping] = {}

        def fill(folders: dict[str, Path]) -> dict[str, int]:
            rows = {}
            for t, made in together.make(con, folders).items():
                rows[t], metadata[t] = made if isinstance(made, tuple) else (made, {})
            return rows

        rows = write_file_versions(con, together.tables, build, self.warehouse.files_path(), fill, settings, inputs)
        together.stored.update({t: (rows[t], metadata.get(t, {})) for t in together.tables})

    def load_input(self, context: dg.InputContext):
        table = context.asset_key.path[-1]
        reference = context.dagster_type.typing_type is TableRef
        upstream = context.upstream_output
        spec = spec_of(upstream.definition_metadata if upstream is not None else None)
        if spec is not None and spec.heavy and not reference:
            raise TypeError(f"{SCHEMA}.{table} is too large to load into Python: declare the input as a TableRef")
        if reference and table in self._stored:  # stored by this store in this run: known without a lookup
            return self._stored[table]
        with self.warehouse.connection() as con:
            build = self._build(con)
            if not reference:
                return read_input(con, SCHEMA, table, build, (context.definition_metadata or {}).get("columns", "*"))
            version = input_version(con, SCHEMA, table, build)
            return TableRef(version, build.revision, base_version(con, version))

    def _log_reused(self, context: dg.OutputContext, what: str) -> None:
        """Note a reused output; the step logs them in one line after its last output (a Dagster event each
        costs a write)."""
        self._reused.setdefault(_step_key(context), []).append(what)

    def _note_after_last_output(self, context: dg.OutputContext) -> None:
        """After the step's last output: one line naming the step's reused outputs, and the "publishes nothing"
        line, when the run publishes nothing."""
        step = _current_step()  # None: an output context built outside a step (a test): its last
        if step is not None:
            last = [spec.key for spec in step.assets_def.specs if spec.key in step.selected_asset_keys][-1]
            if context.asset_key != last:
                return
        if left := self._ahead.pop(_step_key(context), None):  # outputs the step did not yield after all
            with self.warehouse.connection() as con:
                for table in left:
                    drop_version(con, table, self._build(con))
        if reused := self._reused.pop(_step_key(context), None):
            context.log.info(f"inputs unchanged, the earlier versions reused: {', '.join(reused)}")
        if step is not None:
            note_if_unpublished(step, self.warehouse)


def _step_key(context: dg.OutputContext) -> str | None:
    """The output's step (None for an output context built without one: a test)."""
    try:
        return context.step_key
    except dg.DagsterInvariantViolationError:
        return None


def _current_step() -> dg.AssetExecutionContext | None:
    """The step running now (None for an output context built outside a step: a test)."""
    try:
        return dg.AssetExecutionContext.get()
    except dg.DagsterInvariantViolationError:
        return None


def _deps(step: dg.AssetExecutionContext, key: dg.AssetKey) -> tuple[str, ...]:
    """The tables asset ``key`` of ``step`` is computed from, as its asset definition states them (ins and
    internal dependencies)."""
    deps = step.assets_def.asset_deps.get(key, ())
    return tuple(sorted(dep.path[-1] for dep in deps if len(dep.path) == 2 and dep.path[0] == SCHEMA))


def _input_tables(context: dg.OutputContext) -> tuple[str, ...]:
    """The tables the output's asset is computed from (:func:`_deps`); () outside a step (a test)."""
    step = _current_step()
    return _deps(step, context.asset_key) if step is not None else ()


@dg.io_manager(required_resource_keys={"warehouse"},
               description="The run's table versions in the warehouse (arena_pipeline/assets/version_store.py).")
def version_store(init_context: dg.InitResourceContext) -> VersionStore:
    """The :class:`VersionStore` of the run, on its ``warehouse`` resource."""
    instance = init_context.instance
    return VersionStore(init_context.resources.warehouse, init_context.run.run_id,
                        run_failure(instance) if instance is not None else None)


def store_frame(con: duckdb.DuckDBPyConnection, table: str, build, frame: pl.DataFrame,
                settings: Mapping | None = None) -> str:
    """Write ``frame`` as ``build``'s version of ``table`` and register it, as the store writes an output
    (``package_version`` added), for a version a step makes inside its own hold on the warehouse: the gate's
    recomputed ``arena.publication_changes`` (publication rule 18). Returns the version's name."""
    write_version(con, table, build, frame, {"package_version": package_version(), **(settings or {})})
    return version_name(table, build)


def stored_input(key: dg.AssetKey, columns: str | None = None) -> dg.AssetIn:
    """An input read through the version store (only ``columns``, a SQL column list, when given)."""
    return dg.AssetIn(key=key, input_manager_key=VERSION_STORE,
                      metadata={"columns": columns} if columns else None)
