"""What the schedule and the sensor share: look up the dump's revision and decide whether to run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import dagster as dg

from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG
from arena_pipeline.core.hub import HubError
from arena_pipeline.core.manifest import combined_revision
from arena_pipeline.core.sources import SourceError
from arena_pipeline.resources import DumpSource

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


def run_request(revision: str, revisions: dict[str, str] | None = None) -> dg.RunRequest:
    """A refresh run pinned to ``revision`` (with several dumps: to each dump's ``revisions``); the
    revision is also its run key (idempotent)."""
    config: dict = {"revision": revision}
    if revisions:
        config = {"revisions": dict(revisions)}
    return dg.RunRequest(
        run_key=revision,
        run_config={"ops": {"raw_dump": {"config": config}}},
        tags={REVISION_TAG: revision},
    )
