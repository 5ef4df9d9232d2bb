"""What the schedule and the sensor share: look up the dump's revision and decide whether to run."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from arena_pipeline.assets.run_config import run_config_of
from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG, SCHEMA, SETTINGS_TAG
from arena_pipeline.core.dataset.manifest import combined_revision
from arena_pipeline.core.freshness.retry import MAX_ATTEMPTS, FailedRun, RetryPlan, plan_retry
from arena_pipeline.core.ingest.hub import HubError
from arena_pipeline.core.ingest.sources import SourceError
from arena_pipeline.core.publication.settings_source import SOURCE_FORMAT, ranking_settings
from arena_pipeline.core.ranking import RankingConfig
from arena_pipeline.core.store import warehouse as core_warehouse
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.core.text import one_line, short_revision
from arena_pipeline.resources import DumpSource, Warehouse

#: How long a tick waits for the warehouse while a run writes it, before ranking with the defaults.
SETTINGS_WAIT_S = 5.0
#: The tag saying, in one line, why the sensor or the schedule requested a refresh run.
REASON_TAG = "arena/requested_because"
#: The longest reason a tag or a skip shows (a Hub error can be long).
REASON_CHARS = 400
#: The tag numbering a revision's runs requested after a failure (core/freshness/retry.py).
ATTEMPT_TAG = "arena/attempt"

ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dataclass(frozen=True)
class Live:
    """What the warehouse shows, as far as a tick can tell."""

    #: False: the file could not be read within SETTINGS_WAIT_S (a run holds it, or it is damaged)
    known: bool = False
    publication_id: int | None = None
    revision: str | None = None
    #: the ranking settings the live boards were made with (None: nothing live, none recorded, or
    #: settings this version refuses: the run then ranks with the defaults)
    ranking: RankingConfig | None = None
    #: the source the live publication's dump was loaded from (``arena.dumps.source``), when recorded
    source: str | None = None
    #: why the live ranking settings are not given to the run (:func:`for_source`), else None
    settings_note: str | None = None


def read_live(warehouse: Warehouse | None) -> Live:
    """The live publication's id, revision and ranking settings, in one short read-only look;
    ``Live(known=True)`` when there is no warehouse file or no publication yet."""
    if warehouse is None:
        return Live()
    path = warehouse.database_path()
    if not Path(path).is_file():
        return Live(known=True)
    try:
        con = warehouse.reader(timeout_s=SETTINGS_WAIT_S)
        try:
            live = live_publication(con, SCHEMA)
            source = _dump_source(con, live["revision"]) if live else None
        finally:
            con.close()
    except (duckdb.Error, RuntimeError, ValueError):  # locked, damaged, unreadable settings
        return Live()
    if live is None:
        return Live(known=True)
    return Live(True, live["publication_id"], live["revision"], ranking_settings(live), source)


def _dump_source(con: duckdb.DuckDBPyConnection, revision: str | None) -> str | None:
    """The source ``arena.dumps`` records for ``revision`` (None: not recorded, or no such table)."""
    if revision is None or not core_warehouse.relation_exists(con, SCHEMA, "dumps"):
        return None
    row = con.execute(f"SELECT source FROM {core_warehouse.quoted(SCHEMA, 'dumps')} WHERE revision = ?",
                      [revision]).fetchone()
    return row[0] if row else None


def configured_source(dump_source: DumpSource) -> str | None:
    """What ``arena.dumps.source`` will record for the dump ``dump_source`` names (a local path resolved, a
    Hub id, several dumps' names joined by commas); None when it is not known before the fetch
    (``ARENA_DISCOVER``) or the source is refused (the run then says why)."""
    try:
        if dump_source.discovery_pattern():
            return None
        if dump_source.configured_datasets():
            return ",".join(dump_source.named_specs())
        return dump_source.spec().location
    except SourceError:
        return None


def for_source(live: Live, dump_source: DumpSource | None) -> Live:
    """``live`` with its ranking settings set aside when ``dump_source`` loads a dump from another source
    than the live publication's (a sample's ``display_min_battles: 0`` must not travel silently to
    another dump: the run ranks with the defaults, and :attr:`Live.settings_note` says why)."""
    if live.ranking is None or live.source is None or dump_source is None:
        return live
    now = configured_source(dump_source)
    if now is None or now == live.source:
        return live
    return replace(live, ranking=None, settings_note=(
        f"ranked with the defaults, not publication {live.publication_id}'s settings: its dump came from "
        f"another source ({live.source!r}; now {now!r})"))


@dataclass(frozen=True)
class Decision:
    """A revision to run for, or the reason to skip."""

    revision: str | None
    skip_reason: str | None
    #: with several dumps: each one's revision (what the run is pinned to), else empty
    revisions: dict[str, str] = field(default_factory=dict)
    #: with several dumps: what changed since the cursor (new dumps, moved revisions)
    changes: dict[str, list[str]] = field(default_factory=dict)
    live: Live = field(default_factory=Live)
    #: an earlier run already refreshed this revision (it is no longer, or not, what is live)
    again: bool = False
    #: the revision's earlier runs failed for a reason that can pass: this run is attempt N (else 0)
    retry: RetryPlan | None = None

    def skip_text(self) -> str | None:
        """The skip reason in one line (a Hub error's message may span several), or None."""
        return one_line(self.skip_reason, REASON_CHARS) if self.skip_reason else None

    def because(self) -> str:
        """Why a run is requested, in one line: what is new, and what is live."""
        live = self.live
        if not live.known:
            shown = "the live publication is unknown (the warehouse was busy)"
        elif live.publication_id is None:
            shown = "nothing is published yet"
        else:
            shown = f"live: publication {live.publication_id} of revision {short_revision(live.revision or '')}"
        if self.retry is not None:
            what = self.retry.reason
        elif self.again:
            what = f"dump revision {short_revision(self.revision or '')} was refreshed before but is not live"
        elif self.revisions:
            moved = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in self.changes.items() if names)
            what = (f"dump revisions changed ({moved or 'first look'}), combined revision "
                    f"{short_revision(self.revision or '')}")
        else:
            what = f"dump revision {short_revision(self.revision or '')} is not refreshed yet"
        note = f"; {live.settings_note}" if live.settings_note else ""
        return one_line(f"{what}; {shown}{note}", REASON_CHARS)

    def cursor(self) -> str | None:
        """What the sensor stores: the revision, or with several dumps a JSON of each one's."""
        if not self.revisions:
            return self.revision
        return json.dumps({"revision": self.revision, "dumps": self.revisions}, sort_keys=True)


def _runs(instance: dg.DagsterInstance, tag: str, revision: str, statuses: list) -> list:
    return instance.get_runs(dg.RunsFilter(tags={tag: revision}, statuses=statuses), limit=1)


def already_handled_reason(instance: dg.DagsterInstance, revision: str, live: Live | None = None) -> str | None:
    """Why ``revision`` needs no new run, or None. A run for it is queued or running; or an earlier
    run refreshed it and it is still what the warehouse shows (or the warehouse cannot be read to
    tell). A revision refreshed before that is no longer live (the source was put back to earlier
    content, or the warehouse was rebuilt or moved away) is refreshed again."""
    live = live or Live()
    if active := _runs(instance, REVISION_TAG, revision, ACTIVE):
        return f"dump revision {revision} already has run {active[0].run_id} ({active[0].status.value})"
    if live.known and live.revision == revision:
        return f"dump revision {revision} is live (publication {live.publication_id})"
    if live.known:
        return None
    if published := _runs(instance, PUBLISHED_TAG, revision, [dg.DagsterRunStatus.SUCCESS]):
        return f"dump revision {revision} is already published (run {published[0].run_id})"
    if done := _runs(instance, REVISION_TAG, revision, [dg.DagsterRunStatus.SUCCESS]):
        return f"dump revision {revision} already has run {done[0].run_id} ({done[0].status.value})"
    return None


def _errors(instance: dg.DagsterInstance, run_id: str) -> tuple[tuple[str, str], ...]:
    """The (class name, message) chain of a failed run's step failures (else its run failure)."""
    chain: list[tuple[str, str]] = []
    for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE):
        for entry in instance.all_logs(run_id, of_type=kind):
            error = getattr(entry.dagster_event.event_specific_data, "error", None) if entry.dagster_event else None
            while error is not None:
                chain.append((error.cls_name or "", error.message or ""))
                error = error.cause or error.context
        if chain:
            break
    return tuple(chain)


def failed_runs(instance: dg.DagsterInstance, revision: str) -> list[FailedRun]:
    """The revision's consecutive failed runs, newest first (empty when its newest run did not fail)."""
    failed = []
    for record in instance.get_run_records(dg.RunsFilter(tags={REVISION_TAG: revision}), limit=MAX_ATTEMPTS + 1):
        if record.dagster_run.status != dg.DagsterRunStatus.FAILURE:
            break
        ended = record.end_time or record.update_timestamp.timestamp()
        errors = _errors(instance, record.dagster_run.run_id)
        failed.append(FailedRun(record.dagster_run.run_id,
                                dt.datetime.fromtimestamp(ended, dt.UTC).replace(tzinfo=None), errors,
                                refused=any("publication refused" in message for _, message in errors)))
    return failed


def _decision(instance: dg.DagsterInstance, revision: str, live: Live, failures: list[FailedRun] | None = None,
              **extra: Any) -> Decision:
    """The decision for ``revision`` (``failures``: its :func:`failed_runs`, when the caller has them)."""
    reason = already_handled_reason(instance, revision, live)
    if reason is None and (failures := failed_runs(instance, revision) if failures is None else failures):
        plan = plan_retry(short_revision(revision), failures, dt.datetime.now(dt.UTC).replace(tzinfo=None))
        return Decision(revision, None, live=live, retry=plan, **extra) if plan.retry else \
            Decision(revision, plan.reason, live=live, **extra)
    # unknown live state: a successful run would have been the reason to skip, so none exists
    again = reason is None and live.known and bool(_runs(instance, REVISION_TAG, revision,
                                                          [dg.DagsterRunStatus.SUCCESS]))
    return Decision(revision, reason, live=live, again=again, **extra)


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


def decide_many(instance: dg.DagsterInstance, dump_source: DumpSource, cursor: str | None,
                warehouse: Warehouse | None = None) -> Decision:
    """:func:`decide` for several dumps: one look-up per configured dump plus one Hub listing."""
    try:
        revisions = dump_source.latest_revisions()
    except (HubError, SourceError, OSError, ValueError) as exc:
        return Decision(None, f"could not look up the dump revisions: {type(exc).__name__}: {exc}")
    revision = combined_revision(revisions)
    previous, before = cursor_revisions(cursor)
    changes = _changes(before, revisions)
    failures = failed_runs(instance, revision) if previous == revision else None
    if previous == revision and not failures:
        return Decision(None, f"dump revisions unchanged since the last tick ({len(revisions)} dumps, {revision})",
                        revisions, changes)
    return _decision(instance, revision, for_source(read_live(warehouse), dump_source), failures, revisions=revisions,
                     changes=changes)


def decide(instance: dg.DagsterInstance, dump_source: DumpSource, cursor: str | None,
           warehouse: Warehouse | None = None) -> Decision:
    """Look up the current revision (one cheap call) and decide; never raises for an unreachable Hub.
    With ``warehouse``, what is live counts (:func:`already_handled_reason`) and the run is given
    the live ranking settings (:func:`run_request`). A readers' snapshot behind the work file (a run killed
    between its COMMIT and its rename) is brought level first: the revision it published is then live."""
    if warehouse is not None:
        warehouse.bring_readers_level()
    if dump_source.is_multi():
        return decide_many(instance, dump_source, cursor, warehouse)
    try:
        revision = dump_source.latest_revision()
    except (HubError, SourceError, OSError) as exc:
        return Decision(None, f"could not look up the dump revision: {type(exc).__name__}: {exc}")
    failures = failed_runs(instance, revision) if cursor == revision else None
    if cursor == revision and not failures:
        return Decision(None, f"dump revision {revision} unchanged since the last tick")
    return _decision(instance, revision, for_source(read_live(warehouse), dump_source), failures)


def run_request(decision: Decision) -> dg.RunRequest:
    """A refresh run pinned to the decision's revision (with several dumps: to each dump's
    revisions), keyed by it (idempotent; a revision refreshed again gets the live publication's id
    in its key, since Dagster drops a sensor request whose key it has seen). It ranks with the live
    publication's ranking settings, named in a tag: a refresh must not rank new votes under other
    settings than the boards it replaces (say, the default display threshold after a
    ``display_min_battles: 0`` publication, which the gate would refuse)."""
    revision, live = decision.revision, decision.live
    config: dict = {"revisions": dict(decision.revisions)} if decision.revisions else {"revision": revision}
    run_config: dict = {"ops": {"raw_dump": {"config": config}}}
    tags = {REVISION_TAG: revision, REASON_TAG: decision.because()}
    if live.ranking is not None:
        run_config["ops"]["rankings"] = {"config": run_config_of(live.ranking)}
        tags[SETTINGS_TAG] = SOURCE_FORMAT.format(live.publication_id)
    run_key = f"{revision} after publication {live.publication_id}" if decision.again else revision
    if decision.retry is not None:
        run_key += f" attempt {decision.retry.attempt}"
        tags[ATTEMPT_TAG] = str(decision.retry.attempt)
    return dg.RunRequest(run_key=run_key, run_config=run_config, tags=tags)
