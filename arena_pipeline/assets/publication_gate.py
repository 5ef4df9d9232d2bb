"""The publication gate: a run's tables made visible together, checked, recorded, and the report re-rendered."""

from typing import NamedTuple, NoReturn

import dagster as dg
import duckdb
from pydantic import Field

from arena_pipeline.assets.builds import finished_check, package_version, run_build
from arena_pipeline.assets.live import PUBLICATION_GATE, live_now, live_text
from arena_pipeline.assets.version_store import store_frame
from arena_pipeline.constants import (
    BATTLES_TABLE,
    LEADERBOARD_TABLE,
    PUBLICATION_CHANGES_TABLE,
    PUBLISHED_TAG,
    SCHEMA,
    SETTINGS_TAG,
)
from arena_pipeline.core.changes.changes import changes_against_live, stale_changes
from arena_pipeline.core.publication.gate import (
    GatePolicy,
    NothingBuiltError,
    board_problems,
    plan_tables,
    publication_settings,
    refusal_message,
    unchanged_publication,
)
from arena_pipeline.core.publication.settings_source import source_publication, stale_settings
from arena_pipeline.core.store.catalog import TableCatalog
from arena_pipeline.core.store.publish import PublishReport
from arena_pipeline.core.store.records import VERSIONS, live_publication
from arena_pipeline.core.store.versions import PublicationError, finish_build, refuse_build, reused_versions, versioned
from arena_pipeline.core.store.warehouse import WarehouseLockedError, read_frame
from arena_pipeline.core.text import one_line
from arena_pipeline.presentation.markdown import overall_chart_markdown
from arena_pipeline.presentation.read import PublicationView, read_published
from arena_pipeline.presentation.report import page_publication, why_not_written, write_live_report
from arena_pipeline.resources import ReportSettings, Warehouse

REPORT = dg.AssetKey("leaderboard_report")


class PublishConfig(dg.Config):
    """Settings of the publication gate (run configuration of publication_gate)."""

    allow_degenerate: bool = Field(
        default=False, description="Publish even an empty overall board or one that lost many models/categories.")
    max_model_drop: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="Largest share of the live overall board's models that may disappear.")
    max_category_drop: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Largest share of the live categories that may lose their board.")

    def policy(self) -> GatePolicy:
        return GatePolicy(self.allow_degenerate, self.max_model_drop, self.max_category_drop)


def publication_gate_asset(catalog: TableCatalog) -> dg.AssetsDefinition:
    """The publication gate over the published tables of ``catalog`` (``assets/catalog.py``: derived from
    the other assets), and the report; ``definitions.py`` makes it once the tables are loaded."""

    @dg.multi_asset(
        name="publication_gate",
        specs=_gate_specs([dg.AssetKey([SCHEMA, t]) for t in catalog.published]),
        can_subset=True,  # either may be materialized alone (`--select leaderboard_report`)
    )
    def publication_gate(context: dg.AssetExecutionContext, config: PublishConfig, warehouse: Warehouse,
                         report_settings: ReportSettings):
        """Publish this run's tables through the gate, then re-render the report.

        The gate's rules (what it publishes, when it refuses, retention) are stated once, numbered, in
        ``docs/publication-rules.md``; ``core.publication.gate.plan_tables`` (which versions,
        table rules) and ``core.publication.gate`` (board rules) implement them. What each table is
        (published, checked, with history, a Parquet file in the snapshot) comes from its asset's
        declaration, through ``catalog``. A run that built nothing publishes nothing and only re-renders
        the report; a refused run re-renders it too (the page then says which revision is not published
        and why).

        Either asset may be selected alone: the report alone is re-rendered from the live publication;
        the gate alone still re-renders the report file after a publication (what is live and the page
        must not disagree), without recording a materialization of the report. Once the gate has run, a
        report that cannot be written (an unwritable ARENA_REPORT, a file that is not a report) is one
        line, "published N; report not written: <why>", not a failure: the publication stands and the
        next tick of board_freshness_sensor, run or ``arena-pipeline report`` re-renders the page.

        The report is rendered by this step, not by an asset downstream of it: Dagster never starts the
        steps downstream of a failed one, and a refused run fails, yet its page must say so (publication
        rule 20); a refusal recorded with a failing check instead would skip the report too (blocking) or
        show the run as a success (non-blocking). Measured by ``assets/test_gate_design.py``; the choice is
        written down in docs/development.md ("The gate's step").
        """
        yield from _gate(context, config, warehouse, report_settings, catalog)

    return publication_gate


def _gate_specs(published: list[dg.AssetKey]) -> list[dg.AssetSpec]:
    return [
        dg.AssetSpec(PUBLICATION_GATE, group_name="publish", kinds={"duckdb"},
                     deps=published,
                     description="The publication gate: re-points every arena.* view at this run's tables "
                     "(with the live publication's for what the run did not rebuild) in one DuckDB "
                     "transaction, after checking them; recorded in arena.publications. Its arena.publication_changes "
                     "(the new boards against the live ones) is the run's, or recomputed by the gate when another "
                     "publication went live since it was computed."),
        dg.AssetSpec(REPORT, group_name="reports", kinds={"html"}, deps=[PUBLICATION_GATE], skippable=True,
                     description="A static, offline HTML report of the live publication (default "
                     "data/report/index.html), rendered once per publication by the gate's step (its benchmark "
                     "panel from the publication's own benchmark tables); the page carries the publication's id. "
                     "A page that cannot be written is logged and not materialized, and the publication stands; "
                     "board_freshness_sensor re-renders a page behind the live publication. Selected alone, it "
                     "re-renders the report of the live publication."),
    ]


class _Unchanged(NamedTuple):
    """The gate's outcome when the run would publish what publication ``live_id`` already shows (rule 23)."""

    revision: str
    live_id: int


def _gate(context: dg.AssetExecutionContext, config: PublishConfig, warehouse: Warehouse,
          report_settings: ReportSettings, catalog: TableCatalog):
    """The gate's step (:func:`publication_gate_asset`): plan, judge and publish (:func:`_decide_and_publish`),
    then say what it did (:func:`_published`) and re-render the report (:func:`_render_after_gate`)."""
    if PUBLICATION_GATE not in context.selected_asset_keys:
        yield _render_report(context, warehouse, report_settings)
        context.log.info(f"report re-rendered: {live_now(warehouse, report_settings)}")
        return
    try:
        outcome = _decide_and_publish(context, config, warehouse, report_settings, catalog)
    except _Refused as refused:  # the page says a newer revision was refused, then the run fails
        _render_after_refusal(context, warehouse, report_settings)
        raise dg.Failure(description=str(refused), allow_retries=False) from refused.__cause__
    if isinstance(outcome, _Unchanged):
        yield from _unchanged(context, warehouse, report_settings, outcome.revision, outcome.live_id)
        return
    if outcome is None:
        context.log.info("this run built no table: nothing new to publish; re-rendering the report")
        yield dg.MaterializeResult(asset_key=PUBLICATION_GATE, metadata={"status": "nothing new to publish"})
    else:
        yield _published(context, *outcome)
    done = "nothing new was published" if outcome is None else f"published {outcome[0].publication_id}"
    rendered = _render_after_gate(context, warehouse, report_settings, done)
    if rendered is not None and REPORT in context.selected_asset_keys:
        yield rendered
    # the step's last line: what users see now, where (a CLI user reads nothing else)
    context.log.info(f"{'nothing new was published' if outcome is None else 'published'}: "
                     f"{live_now(warehouse, report_settings)}")


def _decide_and_publish(context: dg.AssetExecutionContext, config: PublishConfig, warehouse: Warehouse,
                        report_settings: ReportSettings, catalog: TableCatalog
                        ) -> tuple[PublishReport, dict[str, str], set[str]] | _Unchanged | None:
    """In one hold on the work file: the run's build, refused (:class:`_Refused`) when it ranked with
    settings another publication changed, when its tables break a table rule (:func:`_plan`) or its boards
    a board rule (:func:`_judge`); else published. Returns (what ``publish`` reports, the versions shown,
    those reused), :class:`_Unchanged` when that is what the live publication shows, or None when the run
    built nothing."""
    store = warehouse.store()
    # leaving the block (a refusal too) brings the readers' targets level with what it recorded; the run's last
    # write to the work file: checkpointed after it
    with store.work(checkpoint=True) as con:
        build = run_build(context, con)
        # ranked with the settings of a publication no longer live, which another one changed: refused
        stale = stale_settings(con, SCHEMA, source_publication(context.run.tags.get(SETTINGS_TAG)))
        if stale:
            _refuse(con, build, stale, warehouse, report_settings)
        planned = _plan(con, build, catalog, warehouse, report_settings)
        if planned is None:
            return None
        chosen, rebuilt = planned
        unchanged = unchanged_publication(con, SCHEMA, build, chosen, by_version=catalog.file_tables | catalog.heavy,
                                          ignore=(PUBLICATION_CHANGES_TABLE,))
        if unchanged is not None:  # what readers see already (rule 23): that publication stays live
            finish_build(con, build.build_id, "published", f"unchanged: publication {unchanged} stays live")
            return _Unchanged(build.revision, unchanged)
        live = live_publication(con, SCHEMA)
        refusal = _judge(con, live, chosen, config.policy())
        if refusal:
            _refuse(con, build, refusal, warehouse, report_settings)
        # what changed against the live publication (rule 18): the run's publication_changes, or
        # recomputed here when it no longer describes this publication
        chosen[PUBLICATION_CHANGES_TABLE] = _changes(context, con, build, live, chosen)
        rebuilt.append(PUBLICATION_CHANGES_TABLE)
        # exported: what `arena-pipeline export` writes of this publication (its tables' declarations)
        settings = {"package_version": package_version(), "gate": config.policy().__dict__,
                    "exported": list(catalog.exported),
                    "tables": publication_settings(con, chosen)}
        report = store.publish(con, build, chosen, file_tables=catalog.file_tables, rebuilt=rebuilt,
                               run_id=context.run_id, settings=settings, history_tables=catalog.history,
                               retention=warehouse.retention,
                               is_finished=finished_check(context.instance, warehouse.stale_build_hours))
        return report, chosen, reused_versions(con, [chosen[t] for t in report.rebuilt])


def _plan(con, build, catalog: TableCatalog, warehouse: Warehouse,
          report_settings: ReportSettings) -> tuple[dict[str, str], list[str]] | None:
    """Which version of each published table the publication shows and which the run rebuilt (the table
    rules, ``plan_tables``); None when the run built nothing; a broken rule refuses the run."""
    try:
        # publication_changes: always this publication's against the live one (_changes), not a table rule
        return plan_tables(con, SCHEMA, build, [t for t in catalog.published if t != PUBLICATION_CHANGES_TABLE],
                           derived_from=catalog.derived_from, built_together=catalog.built_together,
                           checked=catalog.checked)
    except NothingBuiltError:
        return None
    except PublicationError as exc:
        _refuse(con, build, str(exc), warehouse, report_settings, cause=exc)


def _judge(con, live: dict | None, chosen: dict[str, str], policy: GatePolicy) -> str | None:
    """The board rules: the refusal of the candidate leaderboard against the live one (both read back), or
    None when it may be published."""
    candidate = read_frame(con, f"SELECT * FROM {versioned(chosen[LEADERBOARD_TABLE])}")
    current = (read_frame(con, f"SELECT * FROM {versioned(live['tables'][LEADERBOARD_TABLE])}")
               if live and LEADERBOARD_TABLE in live["tables"] else None)
    problems = board_problems(candidate, current, policy)
    return refusal_message(problems, _sources(con, live, chosen)) if problems else None


def _refuse(con, build, why: str, warehouse: Warehouse, report_settings: ReportSettings,
            cause: Exception | None = None) -> NoReturn:
    """Record the build as refused for ``why`` and raise :class:`_Refused` (ended by what is still live);
    leaving the store's block brings the readers level."""
    refuse_build(con, SCHEMA, build, why)
    raise _Refused(_still_live(why, con, warehouse, report_settings)) from cause


def _published(context: dg.AssetExecutionContext, report: PublishReport, chosen: dict[str, str],
               reused: set[str]) -> dg.MaterializeResult:
    """The run tagged with the published revision, the publication's log line, and its materialization."""
    context.instance.add_run_tags(context.run_id, {PUBLISHED_TAG: report.revision})
    # one wording with flat_tables' step: a reused version is a view of an earlier one, nothing read or written
    made = [t for t in report.rebuilt if chosen[t] not in reused]
    kept = [t for t in report.rebuilt if chosen[t] in reused]
    context.log.info(f"publication {report.publication_id}: {report.revision} (previous: {report.previous}); "
                     + "; ".join([f"rebuilt {', '.join(made)}"] * bool(made)
                                 + [f"reused (nothing read or written) {', '.join(kept)}"] * bool(kept)))
    return dg.MaterializeResult(
        asset_key=PUBLICATION_GATE,
        metadata={
            "publication_id": report.publication_id,
            "revision": report.revision,
            "previous_revision": report.previous or "",
            "rebuilt": dg.MetadataValue.json(report.rebuilt),
            "tables": dg.MetadataValue.json(report.tables),
            "settings": dg.MetadataValue.json(report.settings),
            "dropped_versions": dg.MetadataValue.json(report.dropped),
        },
        data_version=dg.DataVersion(f"{report.revision}/{report.publication_id}"),
    )


def _unchanged(context: dg.AssetExecutionContext, warehouse: Warehouse, report_settings: ReportSettings,
               revision: str, live_id: int):
    """The gate's outcome when the run's tables are what publication ``live_id`` shows (publication rule 23):
    nothing published, that publication stays live (its data version too); the report is re-rendered only
    when the page is not of it."""
    context.instance.add_run_tags(context.run_id, {PUBLISHED_TAG: revision})
    context.log.info(f"unchanged: the run's tables are those publication {live_id} shows (the same versions, "
                     "settings and rows); nothing is published, it stays live")
    yield dg.MaterializeResult(asset_key=PUBLICATION_GATE,
                               metadata={"status": "unchanged", "live_publication_id": live_id, "revision": revision},
                               data_version=dg.DataVersion(f"{revision}/{live_id}"))
    if page_publication(report_settings.path(warehouse.database_path())) != live_id:
        rendered = _render_after_gate(context, warehouse, report_settings, "nothing new was published")
        if rendered is not None and REPORT in context.selected_asset_keys:
            yield rendered
    context.log.info(f"unchanged, publication {live_id} stays live: {live_now(warehouse, report_settings)}")


def _changes(context: dg.AssetExecutionContext, con, build, live: dict | None, chosen: dict[str, str]) -> str:
    """The version of arena.publication_changes the publication shows (publication rule 18): the run's,
    computed by its ``publication_changes`` step against the live publication, or, when that step did not
    run or another publication went live since (``stale_changes``), recomputed now, inside the gate's
    hold on the warehouse, against the publication this one replaces."""
    own = con.execute(f"SELECT version FROM {VERSIONS} WHERE build_id = ? AND table_name = ?",
                      [build.build_id, PUBLICATION_CHANGES_TABLE]).fetchone()
    stale = stale_changes(con, own[0] if own else None, live)
    if stale is None:
        return own[0]
    context.log.info(f"{SCHEMA}.{PUBLICATION_CHANGES_TABLE} recomputed by the gate: {stale}")
    frame, settings = changes_against_live(con, live, chosen)
    return store_frame(con, PUBLICATION_CHANGES_TABLE, build, frame, settings)


def _still_live(refusal: str, con, warehouse: Warehouse, report_settings: ReportSettings) -> str:
    """A refusal ended by what is still live (``con`` is the gate's connection)."""
    live = live_text(live_publication(con, SCHEMA), warehouse, report_settings)
    return f"{refusal.rstrip('.')}. Nothing was published: {live}"


class _Refused(Exception):
    """The gate refused this run's tables (the message says why and what is still live)."""


def _render_after_refusal(context: dg.AssetExecutionContext, warehouse: Warehouse,
                          report_settings: ReportSettings) -> None:
    """Re-render the live publication's report after a refusal, so that the page says the newest dump
    revision is not published and why (a report that cannot be rendered now is logged, not raised:
    the refusal is what the run reports)."""
    try:
        _render_report(context, warehouse, report_settings)
    except (LookupError, dg.Failure, duckdb.Error, OSError) as exc:
        context.log.warning(f"the report was not re-rendered after the refusal: {exc}")


def _render_after_gate(context: dg.AssetExecutionContext, warehouse: Warehouse, report_settings: ReportSettings,
                       done: str) -> dg.MaterializeResult | None:
    """:func:`_render_report` once the gate has run (``done``: what it did, in words), or None with a
    warning "<done>; report not written: <why>" when the page cannot be written: the publication is
    committed whatever happens to the page, and a page behind it is re-rendered later (the freshness
    sensor, the next run, the ``report`` command)."""
    try:
        return _render_report(context, warehouse, report_settings)
    except Exception as exc:  # whatever the page's failure, the publication stands
        why = exc.description if isinstance(exc, dg.Failure) else why_not_written(exc)
        context.log.warning(one_line(f"{done}; report not written: {why}"))
        return None


def _sources(con, live: dict | None, chosen: dict[str, str]) -> tuple[str | None, str | None] | None:
    """(the live boards' source, this run's), as recorded with their battles versions; None before the
    first publication."""
    if not live or BATTLES_TABLE not in live["tables"]:
        return None
    return tuple(publication_settings(con, {BATTLES_TABLE: version}).get(BATTLES_TABLE, {}).get("source")
                 for version in (live["tables"][BATTLES_TABLE], chosen[BATTLES_TABLE]))


def _render_report(context: dg.AssetExecutionContext, warehouse: Warehouse,
                   report_settings: ReportSettings) -> dg.MaterializeResult:
    """Render the report of what is live now (after the publication committed)."""
    try:
        with warehouse.reader() as con:
            pub = read_published(con, SCHEMA)
    except WarehouseLockedError as exc:
        raise dg.Failure(description=f"report not rendered: {exc}", allow_retries=False) from exc
    return dg.MaterializeResult(asset_key=REPORT, metadata=_write_report(context, pub, report_settings,
                                                                      warehouse.database_path()))


def _write_report(context: dg.AssetExecutionContext, pub: PublicationView, report_settings: ReportSettings,
                  warehouse: str) -> dict:
    """Write the report of ``pub`` (the live publication, its benchmark panel included) atomically and
    return its metadata; with an empty leaderboard (published on purpose) no report is written and a
    previous one is removed. The one writer of the report."""
    out = report_settings.path(warehouse)
    existed = out.is_file()
    path = write_live_report(pub, out, warehouse=warehouse)
    if path is None:  # an empty leaderboard, published on purpose (allow_degenerate): no stale board stays
        context.log.warning("the published leaderboard is empty: no report written"
                            + (f"; the previous report {out} was removed (its board is no longer live)" if existed else ""))
        return {"status": "empty leaderboard: no report written", "removed_stale_report": existed}
    chart = overall_chart_markdown(pub)
    return {
        "path": dg.MetadataValue.path(str(path.resolve())),
        "bytes": path.stat().st_size,
        "publication_id": pub.publication_id if pub.publication_id is not None else "",
        "revision": (pub.dump or {}).get("revision", ""),
        "benchmark_panel": ("the benchmark file failed its check" if pub.benchmarks and pub.benchmarks.problem
                            else f"publication {pub.benchmarks.publication_id}" if pub.benchmarks else "none"),
        **({"overall_ratings": dg.MetadataValue.md(chart)} if chart else {}),
    }
