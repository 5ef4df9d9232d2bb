"""When the sensor tries a failed revision again: failures that can pass, with a doubling wait and a bound."""

from __future__ import annotations

import datetime as dt

import pytest

from arena_pipeline.core.freshness.retry import FailedRun, passing_reason, plan_retry

NOW = dt.datetime(2026, 11, 27, 12, 0)
LOCKED = (("WarehouseLockedError", "work.duckdb is locked by another process (waited 120.0 s of 120 s): "
                                   "IO Error: Could not set lock on file"),)


def _failed(n: int, errors=LOCKED, minutes_ago: float = 60, refused: bool = False) -> list[FailedRun]:
    return [FailedRun(f"run-{i}", NOW - dt.timedelta(minutes=minutes_ago + 10 * i), errors, refused)
            for i in range(n)]


@pytest.mark.parametrize(("errors", "reason"), [
    ((("Failure", "x"), ("WarehouseLockedError", "locked")), "the work file was locked"),
    ((("ReadTimeout", "The read operation timed out"),), "a timeout"),
    ((("OSError", "[Errno 28] No space left on device"),), "a full disk"),
    ((("HubUnavailable", "the Hub answered 503 three times"),), "a network error"),
    ((("ConnectError", "[Errno 111] Connection refused"),), "a network error"),
])
def test_failures_that_can_pass_are_named(errors, reason):
    assert passing_reason(list(errors)) == reason


@pytest.mark.parametrize("errors", [(("SourceError", "shard 3 is not a parquet file"),),
                                    (("Failure", "ARENA_MODEL_ALIASES is 'x.csv', which is not a file"),), ()])
def test_failures_that_would_repeat_are_not_passing(errors):
    assert passing_reason(list(errors)) is None


def test_a_passing_failure_is_retried_after_a_doubling_wait_up_to_the_bound():
    # one failure 5 minutes ago: the first wait (10 min) has not passed
    waiting = plan_retry("rev", _failed(1, minutes_ago=5), NOW)
    assert not waiting.retry and "attempt 2 of 4 at 2026-11-27 12:05 UTC" in waiting.reason
    assert "the work file was locked" in waiting.reason
    due = plan_retry("rev", _failed(1, minutes_ago=11), NOW)
    assert due.retry and due.attempt == 2
    # two failures: the wait doubles (20 min after the newest)
    assert not plan_retry("rev", _failed(2, minutes_ago=15), NOW).retry
    assert plan_retry("rev", _failed(2, minutes_ago=21), NOW).attempt == 3
    # four failed runs: the bound
    stopped = plan_retry("rev", _failed(4, minutes_ago=600), NOW)
    assert not stopped.retry and "4 times; not retried any more" in stopped.reason


def test_a_refusal_or_a_repeating_failure_is_not_retried_and_says_so():
    refused = plan_retry("rev", _failed(1, (("Failure", "publication refused, nothing changed: x"),), refused=True),
                         NOW)
    assert not refused.retry and "refused" in refused.reason and "until something changes" in refused.reason
    broken = plan_retry("rev", _failed(1, (("SourceError", "shard 3 is not a parquet file"),)), NOW)
    assert not broken.retry and "shard 3 is not a parquet file" in broken.reason and "not retried" in broken.reason


def test_no_failure_is_an_unchanged_revision(golden):
    plan = plan_retry("rev", [], NOW)
    assert not plan.retry
    golden.check("triggers", "skip: unchanged", plan.reason, {"revision rev ": "revision <revision> "})
