"""What the schedule and the sensor share: look up the dump's revision and decide whether to run."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG
from arena_pipeline.core.hub import HubError
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


def decide(instance: dg.DagsterInstance, dump_source: DumpSource, cursor: str | None) -> Decision:
    """Look up the current revision (one cheap call) and decide; never raises for an unreachable Hub."""
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


def run_request(revision: str) -> dg.RunRequest:
    """A refresh run pinned to ``revision``; the revision is also its run key (idempotent)."""
    return dg.RunRequest(
        run_key=revision,
        run_config={"ops": {"raw_dump": {"config": {"revision": revision}}}},
        tags={REVISION_TAG: revision},
    )
