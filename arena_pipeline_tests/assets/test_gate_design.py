"""Why the gate's step renders the report itself (docs/development.md, "Why the report is rendered by the
gate"): the installed Dagster's semantics, measured on a two-asset job (gate -> report). If Dagster changes,
these fail, and the design is to be decided again (issue 46 item 5)."""

from __future__ import annotations

import dagster as dg

REFUSAL = "refusal"


def _run(refusal: str) -> tuple[dg.DagsterRunStatus, set[tuple[str, str]], list[str]]:
    """Materialize gate -> report with the gate refusing as ``refusal`` says: "failure" (today's design: the
    step fails), "blocking" or "non-blocking" (a materialization with a failing check of that kind).
    Returns the run's status, the (step, event) pairs and the assets materialized."""
    blocking = refusal == "blocking"
    specs = [] if refusal == "failure" else [dg.AssetCheckSpec(REFUSAL, asset="gate", blocking=blocking)]

    @dg.asset(check_specs=specs)
    def gate():
        if refusal == "failure":
            raise dg.Failure(description="publication refused", allow_retries=False)
        yield dg.MaterializeResult(check_results=[dg.AssetCheckResult(
            check_name=REFUSAL, passed=False, severity=dg.AssetCheckSeverity.ERROR)])

    @dg.asset(deps=[gate])
    def report():
        return dg.MaterializeResult()

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([gate, report], instance=instance, raise_on_error=False)
        status = instance.get_run_by_id(result.run_id).status
    events = {(event.step_key, event.event_type_value) for event in result.all_events if event.step_key}
    made = sorted(event.asset_key.to_user_string() for event in result.get_asset_materialization_events())
    return status, events, made


def test_a_refusal_that_fails_the_step_fails_the_run_and_no_step_downstream_starts():
    """Today's design: the refusal fails the gate's step, the run is a FAILURE (what the CLI and the UI show),
    and an asset downstream of the gate never starts: a separate report asset would not re-render the page
    after a refusal (publication rule 20), so the gate's step renders it."""
    status, events, made = _run("failure")
    assert status == dg.DagsterRunStatus.FAILURE and ("gate", "STEP_FAILURE") in events
    assert not any(step == "report" for step, _ in events) and made == []


def test_a_refusal_recorded_with_a_failing_blocking_check_still_skips_the_report():
    """A refusal as a materialization with a failing blocking check: the run fails too, and the report
    downstream still never starts: nothing gained."""
    status, events, made = _run("blocking")
    assert status == dg.DagsterRunStatus.FAILURE and ("gate", "STEP_FAILURE") in events
    assert not any(step == "report" for step, _ in events) and made == ["gate"]


def test_a_refusal_recorded_with_a_failing_non_blocking_check_shows_the_run_as_a_success():
    """A refusal as a materialization with a failing non-blocking check: the report downstream runs, but the
    run is a SUCCESS: a refused run shown as a success (worse for users), and the gate "materialized"."""
    status, events, made = _run("non-blocking")
    assert status == dg.DagsterRunStatus.SUCCESS and ("report", "STEP_SUCCESS") in events
    assert made == ["gate", "report"]

