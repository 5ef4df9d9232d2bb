"""What the schedule and the sensor share: look up the dump's revision and decide whether to run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from arena_pipeline.assets.rankings import RankingRunConfig
from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG, SCHEMA
from arena_pipeline.core import warehouse as core_warehouse
from arena_pipeline.core.hub import HubError
from arena_pipeline.core.manifest import combined_revision
from arena_pipeline.core.publication import live_publication
from arena_pipeline.core.sources import SourceError
from arena_pipeline.resources import DumpSource, Warehouse

#: How long a tick waits for the warehouse while a run writes it, before ranking with the defaults.
SETTINGS_WAIT_S = 5.0
#: The tag naming the publication whose ranking settings a refresh run was given.
SETTINGS_TAG = "arena/ranking_settings_of"

ACTIVE_OR_DONE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.SUCCESS,
]


@dataclass(frozen=True)
class Decision:
    """A revision to run for, or the reason to skip."""

    revision: str | None
    skip_reason: str | None
    #: with several dumps: each one's revision (what the run is pinned to), else empty
    revisions: dict[str, str] = field(default_factory=dict)
    #: with several dumps: what changed since the cursor (new dumps, moved revisions)
    changes: dict[str, list[str]] = field(default_factory=dict)

    def cursor(self) -> str | None:
        """What the sensor stores: the revision, or with several dumps a JSON of each one's."""
        if not self.revisions:
            return self.revision
        return json.dumps({"revision": self.revision, "dumps": self.revisions}, sort_keys=True)


def already_handled_reason(instance: dg.DagsterInstance, revision: str) -> str | None:
    """Why ``revision`` needs no new run (a run for it is queued, running or done), or None."""
    published = instance.get_runs(
        dg.RunsFilter(tags={PUBLISHED_TAG: revision}, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1
    )
    if published:
        return f"dump revision {revision} is already published (run {published[0].run_id})"
    runs = instance.get_runs(dg.RunsFilter(tags={REVISION_TAG: revision}, statuses=ACTIVE_OR_DONE), limit=1)
    if runs:
        return f"dump revision {revision} already has run {runs[0].run_id} ({runs[0].status.value})"
    return None


def cursor_revisions(cursor: str | None) -> tuple[str | None, dict[str, str]]:
    """(revision, per-dump revisions) of a stored cursor (a plain revision has no per-dump part)."""
    if cursor and cursor.startswith("{"):
        try:
            data = json.loads(cursor)
            return data.get("revision"), dict(data.get("dumps") or {})
        except ValueError:
            return None, {}
    return cursor, {}


def _changes(before: dict[str, str], now: dict[str, str]) -> dict[str, list[str]]:
    return {"new": [d for d in now if d not in before],
            "changed": [d for d in now if d in before and before[d] != now[d]],
            "gone": [d for d in before if d not in now]}


def decide_many(instance: dg.DagsterInstance, dump_source: DumpSource, cursor: str | None) -> Decision:
    """:func:`decide` for several dumps: one look-up per configured dump plus one Hub listing."""
    try:
        revisions = dump_source.latest_revisions()
    except (HubError, SourceError, OSError, ValueError) as exc:
        return Decision(None, f"could not look up the dump revisions: {type(exc).__name__}: {exc}")
    revision = combined_revision(revisions)
    previous, before = cursor_revisions(cursor)
    changes = _changes(before, revisions)
    if previous == revision:
        return Decision(None, f"dump revisions unchanged since the last tick ({len(revisions)} dumps, {revision})",
                        revisions, changes)
    reason = already_handled_reason(instance, revision)
    return Decision(revision, reason, revisions, changes)


def decide(instance: dg.DagsterInstance, dump_source: DumpSource, cursor: str | None) -> Decision:
    """Look up the current revision (one cheap call) and decide; never raises for an unreachable Hub."""
    if dump_source.is_multi():
        return decide_many(instance, dump_source, cursor)
    try:
        revision = dump_source.latest_revision()
    except (HubError, SourceError, OSError) as exc:
        return Decision(None, f"could not look up the dump revision: {type(exc).__name__}: {exc}")
    if cursor == revision:
        return Decision(None, f"dump revision {revision} unchanged since the last tick")
    reason = already_handled_reason(instance, revision)
    if reason:
        return Decision(revision, reason)
    return Decision(revision, None)


def live_ranking_settings(warehouse: Warehouse) -> tuple[int | None, dict[str, Any]]:
    """The live publication's id and the ranking run configuration it was made with (the fields of
    ``RankingRunConfig`` in its settings); (None, {}) without a warehouse or a publication, or when
    the file cannot be read within :data:`SETTINGS_WAIT_S` (a run holds it, or it is damaged)."""
    path = warehouse.database_path()
    if not Path(path).is_file():
        return None, {}
    try:
        con = core_warehouse.connect(path, read_only=True, timeout_s=SETTINGS_WAIT_S,
                                     memory_limit=warehouse.memory_limit)
        try:
            live = live_publication(con, SCHEMA)
        finally:
            con.close()
    except (duckdb.Error, RuntimeError, ValueError):  # locked, damaged, unreadable settings
        return None, {}
    if live is None:
        return None, {}
    ranking = live["settings"].get("tables", {}).get("leaderboard", {}).get("ranking") or {}
    return live["publication_id"], {k: ranking[k] for k in RankingRunConfig.model_fields if k in ranking}


def run_request(revision: str, revisions: dict[str, str] | None = None,
                warehouse: Warehouse | None = None) -> dg.RunRequest:
    """A refresh run pinned to ``revision`` (with several dumps: to each dump's ``revisions``); the
    revision is also its run key (idempotent). With ``warehouse``, the run ranks with the live
    publication's ranking settings (:func:`live_ranking_settings`, named in a tag): a refresh must
    not rank new votes under other settings than the boards it replaces (say, the default
    display threshold after a ``display_min_battles: 0`` publication, which the gate would refuse)."""
    config: dict = {"revision": revision}
    if revisions:
        config = {"revisions": dict(revisions)}
    run_config: dict = {"ops": {"raw_dump": {"config": config}}}
    tags = {REVISION_TAG: revision}
    publication, ranking = live_ranking_settings(warehouse) if warehouse is not None else (None, {})
    if ranking:
        run_config["ops"]["rankings"] = {"config": ranking}
        tags[SETTINGS_TAG] = f"publication {publication}"
    return dg.RunRequest(run_key=revision, run_config=run_config, tags=tags)
