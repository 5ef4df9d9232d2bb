"""When a failed refresh of a dump revision is tried again: what failure can pass, and the backoff.

A failure that can pass (another pipeline process held the work file past the lock timeout, a
timeout, a full disk, the network) is retried by the new-dump sensor's next tick after a wait that
doubles with each failed attempt, up to :data:`MAX_ATTEMPTS` runs of the revision. Any other
failure (a file that cannot be read, a setting out of bounds, a refusal of the gate) would fail
the same way again: it is not retried until something changes, and every skipped tick says so.

Dagster's own run retries (``run_retries`` in ``dagster_home/dagster.yaml``) retry a run whose
process crashed, at once and without a backoff; they do not look at why a step failed, so the
sensor does that here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: Runs of one revision that may fail for a passing reason before the sensor stops trying.
MAX_ATTEMPTS = 4
#: The wait after the first failed run; doubled after each further one.
FIRST_WAIT = dt.timedelta(minutes=10)

#: Lower-case fragments of an error's class name or message that mark a failure that can pass.
PASSING_MARKERS: dict[str, str] = {
    "warehouselockederror": "the work file was locked",
    "could not set lock": "the work file was locked",
    "conflicting lock": "the work file was locked",
    "timeout": "a timeout",
    "timed out": "a timeout",
    "no space left on device": "a full disk",
    "errno 28": "a full disk",
    "connecterror": "a network error",
    "connectionerror": "a network error",
    "connection reset": "a network error",
    "connection refused": "a network error",
    "temporary failure in name resolution": "a network error",
    "hubunavailable": "a network error",
    "remotedisconnected": "a network error",
}


def passing_reason(errors: list[tuple[str, str]]) -> str | None:
    """What makes a failure one that can pass (say "a timeout"), or None when it would repeat.

    ``errors`` are the (class name, message) pairs of the failed step's error and its causes.
    """
    for name, message in errors:
        text = f"{name} {message}".lower()
        for marker, reason in PASSING_MARKERS.items():
            if marker in text:
                return reason
    return None


@dataclass(frozen=True)
class FailedRun:
    """One failed run of a revision: its id, when it ended, and its error chain (class, message)."""

    run_id: str
    ended_at: dt.datetime
    errors: tuple[tuple[str, str], ...] = ()
    #: the gate refused the run's tables (the build's record): never a passing failure
    refused: bool = False


@dataclass(frozen=True)
class RetryPlan:
    """Whether to request another run of the revision now (``attempt``: its number), else why not."""

    retry: bool
    attempt: int
    reason: str


def plan_retry(revision: str, failures: list[FailedRun], now: dt.datetime, *, max_attempts: int = MAX_ATTEMPTS,
               first_wait: dt.timedelta = FIRST_WAIT) -> RetryPlan:
    """The plan for ``revision`` after its consecutive failed runs ``failures`` (newest first).

    Retried when the newest failure can pass, fewer than ``max_attempts`` runs failed, and
    ``first_wait * 2**(failures - 1)`` has passed since the newest one ended.
    """
    if not failures:
        return RetryPlan(False, 0, f"dump revision {revision} unchanged since the last tick")
    newest = failures[0]
    attempts = len(failures)
    first_line = (newest.errors[0][1].strip().splitlines() or [""])[0] if newest.errors else ""
    what = f"dump revision {revision} is pending: run {newest.run_id} failed"
    if newest.refused:
        return RetryPlan(False, attempts, f"{what}: the publication gate refused it ({first_line}); not retried "
                                          "until something changes (a new revision, or refresh_job launched "
                                          "by hand with other settings)")
    reason = passing_reason(list(newest.errors))
    if reason is None:
        return RetryPlan(False, attempts, f"{what} ({first_line}); not retried: it would fail the same way until "
                                          "the file, the settings or the code change (launch refresh_job by "
                                          "hand then)")
    if attempts >= max_attempts:
        return RetryPlan(False, attempts, f"{what} ({reason}) {attempts} times; not retried any more (at most "
                                          f"{max_attempts} runs): launch refresh_job by hand")
    due = newest.ended_at + first_wait * 2 ** (attempts - 1)
    if now < due:
        return RetryPlan(False, attempts, f"{what} ({reason}); attempt {attempts + 1} of {max_attempts} at "
                                          f"{due:%Y-%m-%d %H:%M} UTC")
    return RetryPlan(True, attempts + 1, f"{what} ({reason}); attempt {attempts + 1} of {max_attempts}")
