"""What is live, in words, and the line a step ends with when its run publishes nothing (no gate in it)."""

from pathlib import Path

import dagster as dg
import duckdb

from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.core.store.warehouse import WarehouseLockedError
from arena_pipeline.resources import ReportSettings, Warehouse

#: The publication gate's asset key (assets/publication_gate.py): only a run that selects it publishes.
PUBLICATION_GATE = dg.AssetKey("publication_gate")


def live_text(live: dict | None, warehouse: Warehouse, report_settings: ReportSettings | None = None) -> str:
    """What users see, in words: the live publication, the warehouse file and the report file."""
    where = f"warehouse {Path(warehouse.database_path()).resolve()}"
    if live is None:
        return f"nothing is published yet in {where}"
    text = f"live is publication {live['publication_id']} (revision {live['revision']}) in {where}"
    if report_settings is not None:
        report = report_settings.path(warehouse.database_path()).resolve()
        text += f", report {report}" if report.is_file() else f", no report at {report}"
    return text


def live_now(warehouse: Warehouse, report_settings: ReportSettings | None = None) -> str:
    """:func:`live_text` of what is live now, in one short read-only look (a line to log: a warehouse
    that cannot be read now is said so, it does not fail the step)."""
    try:
        with warehouse.reader() as con:
            return live_text(live_publication(con, SCHEMA), warehouse, report_settings)
    except (WarehouseLockedError, duckdb.Error) as exc:
        return f"warehouse {Path(warehouse.database_path()).resolve()} (what is live could not be read now: {exc})"


def note_if_unpublished(context: dg.AssetExecutionContext, warehouse: Warehouse) -> None:
    """End a step that built tables with one line when its run publishes nothing: the run's selection
    has no publication_gate and no selected asset comes after this step's. The line says that what
    users see did not change, what is live, and the selection that publishes (only the gate does)."""
    graph = context.job_def.asset_layer.asset_graph  # the run's job (a repository is not always there)
    selection = set(context.run.asset_selection or graph.executable_asset_keys)
    if PUBLICATION_GATE in selection:
        return
    later = dg.AssetSelection.assets(*context.selected_asset_keys).downstream(include_self=False).resolve(graph)
    if later & selection:  # a later step of this run ends it
        return
    context.log.info(
        f"this run publishes nothing: its tables are built beside the live ones and what users see is unchanged, "
        f"{live_now(warehouse)}. Only the publication gate changes it: add publication_gate,leaderboard_report to "
        "the selection (a re-rank: with the ranking tables and the validation tables computed from them, or "
        "the rerank_job; a rebuild: --select '*')")
