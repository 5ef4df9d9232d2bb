"""The board-freshness checks and sensor on a published warehouse, and the refresh triggers' decisions in the UI.

Each test copies one published warehouse and runs in its own Dagster instance (``instance_for_test``):
the checks in a run and from the sensor on a stale and a pending publication, and the one-line
reasons of the new-dump sensor's and the nightly schedule's ticks.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import time

import dagster as dg
import duckdb
import pytest

from arena_pipeline.assets.publication_gate import PUBLICATION_GATE
from arena_pipeline.checks import board_freshness
from arena_pipeline.constants import REVISION_TAG
from arena_pipeline.core.ingest.sources import SourceError
from arena_pipeline.definitions import defs
from arena_pipeline.freshness import AGE_CHECK, PENDING_CHECK
from arena_pipeline.presentation.report import page_publication
from arena_pipeline.refresh import REASON_TAG, Decision, Live
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse
from arena_pipeline.schedules import nightly_refresh
from arena_pipeline.sensors import board_freshness_sensor, new_dump_sensor
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import copy_warehouse, materialize, materialized, rank_config
from arena_pipeline_tests.support.publication_support import RANK, Setup, query
from arena_pipeline_tests.support.ticks import tick

ROWS = 200


def _run(setup: Setup, instance: dg.DagsterInstance, selection=None, rank: dict | None = None, **resources):
    return materialize(setup.resources(**resources), selection=selection, instance=instance,
                       run_config=rank_config(**{**RANK, **(rank or {})}) if selection is None else None)


def by_name(evaluations) -> dict:
    return {e.check_name: e for e in evaluations if e.asset_key == PUBLICATION_GATE}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """One publication of a fixture dump, and the freshness checks of the run that made it."""
    root = tmp_path_factory.mktemp("fresh")
    write_dump(root / "dump", n_rows=ROWS, n_shards=1, seed=11)
    setup = Setup(root, root / "dump", root / "warehouse.duckdb")
    with dg.instance_for_test() as instance:
        result = _run(setup, instance)
        assert result.success
        checks = by_name(result.get_asset_check_evaluations())
    return setup, checks


@pytest.fixture
def setup(published, tmp_path) -> Setup:
    copy_warehouse(published[0].warehouse, tmp_path / "warehouse.duckdb")
    shutil.copytree(published[0].dump, tmp_path / "dump")
    shutil.copytree(published[0].root / "report", tmp_path / "report")  # the page of the live publication
    return Setup(tmp_path, tmp_path / "dump", tmp_path / "warehouse.duckdb")


def live_revision(setup: Setup) -> str:
    return query(setup.warehouse, "SELECT revision FROM arena.publications ORDER BY publication_id DESC LIMIT 1")[0][0]


def freshness_tick(setup: Setup, instance, cursor: str | None = None, **warehouse):
    return tick(board_freshness_sensor, instance,
                {"warehouse": Warehouse(database=str(setup.warehouse), **warehouse),
                 "report_settings": ReportSettings(report_path=str(setup.root / "report" / "index.html"))}, cursor)


_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( ?UTC|Z|[+-]\d{2}:?\d{2})?")


def _timeless(text: str) -> str:
    """``text`` with its dates and times as ``<time>`` (the golden files hold the words, not the clock)."""
    return _TIME.sub("<time>", text)


def test_names_and_settings_are_pinned():
    assert board_freshness_sensor.name == "board_freshness_sensor"
    assert board_freshness_sensor.minimum_interval_seconds == 600
    assert board_freshness_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert not board_freshness_sensor.targets  # it reports check evaluations; it launches nothing
    assert {s.name for s in defs.sensors} == {"new_dump_sensor", "board_freshness_sensor"}
    specs = {spec.name: spec for spec in board_freshness.check_specs}
    assert set(specs) == {AGE_CHECK, PENDING_CHECK}
    assert all(spec.asset_key == PUBLICATION_GATE and not spec.blocking for spec in specs.values())
    for job in ("refresh_job", "rerank_job"):  # both end in a publication: both check it
        keys = defs.resolve_job_def(job).asset_layer.asset_graph.asset_check_keys
        assert {dg.AssetCheckKey(PUBLICATION_GATE, name) for name in specs} <= set(keys)
    assert Warehouse().max_publication_age().total_seconds() == 7 * 24 * 3600



@pytest.mark.parametrize("hours", ["1e8", "1e300", "1e-300", "0.01", "87661"])
def test_max_publication_age_out_of_range_is_one_line(hours, monkeypatch, golden):
    """1e8 and 1e300 hours used to raise OverflowError in the sensor's tick and the run's check step
    (1e300 in the timedelta, 1e8 subtracted from now); 1e-300 was accepted as "0 min" (issue 38, 7)."""
    monkeypatch.setenv("ARENA_MAX_PUBLICATION_AGE_HOURS", hours)
    with pytest.raises(ValueError) as raised:
        Warehouse().max_publication_age()
    golden.check("freshness", f"age limit out of range: {hours}", str(raised.value))
    with pytest.raises(ValueError) as field:  # the field, as the environment
        Warehouse(max_publication_age_hours=float(hours)).max_publication_age()
    assert str(field.value).partition(", got")[0] == str(raised.value).partition(", got")[0]


@pytest.mark.parametrize(("hours", "seconds"), [(str(1 / 60), 60), ("87660", 87660 * 3600)])
def test_max_publication_age_bounds_are_accepted(hours, seconds, monkeypatch):
    """Both ends of the range are usable: the age limit can be subtracted from any date the check sees."""
    monkeypatch.setenv("ARENA_MAX_PUBLICATION_AGE_HOURS", hours)
    age = Warehouse().max_publication_age()
    assert round(age.total_seconds()) == seconds
    assert (dt.datetime(2025, 1, 1) - age).year in (2015, 2024)

@pytest.mark.slow
def test_the_publishing_run_finds_its_board_fresh(published, golden):
    setup, checks = published
    revision = live_revision(setup)
    age, pending = checks[AGE_CHECK], checks[PENDING_CHECK]
    assert age.passed and pending.passed
    assert age.metadata["publication_id"].value == 1 and age.metadata["max_age_hours"].value == 168
    golden.check("freshness", "fresh: age", _timeless(age.description), {revision: "<revision>"})
    golden.check("freshness", "fresh: pending", pending.description, {revision: "<revision>"})


@pytest.mark.slow
def test_stale_publication(setup, monkeypatch, golden):
    """Ten days after the publication (its recorded time moved back): the check fails, as a run and
    from the sensor, which reports it once (its cursor) and says the state on every tick."""
    con = duckdb.connect(str(setup.warehouse))
    con.execute("UPDATE arena.publications SET published_at = published_at - INTERVAL 10 DAY")
    con.close()
    monkeypatch.delenv("ARENA_MAX_PUBLICATION_AGE_HOURS", raising=False)
    with dg.instance_for_test() as instance:
        run = _run(setup, instance, selection=dg.AssetSelection.checks_for_assets(PUBLICATION_GATE))
        assert run.success  # a failed warning check does not fail the run
        age = by_name(run.get_asset_check_evaluations())[AGE_CHECK]
        assert not age.passed and age.severity == dg.AssetCheckSeverity.WARN
        golden.check("freshness", "stale: age (run)", _timeless(age.description), {live_revision(setup): "<revision>"})
        assert 240 <= age.metadata["age_hours_at_evaluation"].value < 241

        first = freshness_tick(setup, instance)
        events = by_name(first.asset_events)
        assert not events[AGE_CHECK].passed and events[PENDING_CHECK].passed
        golden.check("freshness", "stale: tick", _timeless(first.skip_message), {live_revision(setup): "<revision>"})
        for event in first.asset_events:
            instance.report_runless_asset_event(event)  # what the daemon does with them: no run
        assert not instance.get_runs()[1:]  # only the check run above

        again = freshness_tick(setup, instance, cursor=first.cursor)
        assert not again.asset_events and again.skip_message == first.skip_message + " (as last reported)"

        # the setting, as a field or from the environment: a month is fresh again (a change: reported)
        month = freshness_tick(setup, instance, cursor=first.cursor, max_publication_age_hours=24 * 30)
        assert by_name(month.asset_events)[AGE_CHECK].passed and month.cursor != first.cursor
        monkeypatch.setenv("ARENA_MAX_PUBLICATION_AGE_HOURS", "300")
        assert by_name(freshness_tick(setup, instance).asset_events)[AGE_CHECK].passed
        monkeypatch.setenv("ARENA_MAX_PUBLICATION_AGE_HOURS", "a week")
        bad = freshness_tick(setup, instance)
        assert not bad.asset_events
        golden.check("freshness", "age limit not a number: tick", bad.skip_message)


@pytest.mark.slow
def test_a_publication_stands_when_its_page_or_its_freshness_check_fails(setup, monkeypatch, golden):
    """An unwritable ARENA_REPORT failed the run after the gate's commit, and the freshness sensor skipped
    the live revision: publication N live, the page at N-1, the run FAILED (issue 38, item 3). Now the run
    succeeds and says "published N; report not written: <why>"; an age limit that overflows fails both
    freshness checks with the reason instead of the step; the next sensor tick re-renders the page."""
    write_dump(setup.dump, n_rows=ROWS, n_shards=1, seed=13)  # new content: a new revision to publish
    blocker = setup.root / "blocker"
    blocker.write_text("a file where the report's folder would be")
    page = setup.root / "report" / "index.html"
    assert page_publication(page) == 1
    monkeypatch.setenv("ARENA_MAX_PUBLICATION_AGE_HOURS", "1e300")
    with dg.instance_for_test() as instance:
        result = _run(setup, instance, report_settings=ReportSettings(report_path=str(blocker / "index.html")))
        assert result.success
        assert [p for (p,) in query(setup.warehouse, "SELECT publication_id FROM arena.publications")] == [1, 2]
        assert "leaderboard_report" not in materialized(result) and "publication_gate" in materialized(result)
        logs = [e.user_message for e in instance.all_logs(result.run_id)]
        golden.check("freshness", "report not written: run log", next(line for line in logs if "report not" in line))
        checks = by_name(result.get_asset_check_evaluations())
        for name in (AGE_CHECK, PENDING_CHECK):
            assert not checks[name].passed and checks[name].severity == dg.AssetCheckSeverity.ERROR
            golden.check("freshness", "age limit out of range: check", checks[name].description)
        assert page_publication(page) == 1  # behind the live publication

        monkeypatch.delenv("ARENA_MAX_PUBLICATION_AGE_HOURS")
        caught_up = freshness_tick(setup, instance)
        assert page_publication(page) == 2 and by_name(caught_up.asset_events)[AGE_CHECK].passed
        golden.check("freshness", "report re-rendered: tick", caught_up.skip_message.rpartition("; ")[2])
        again = freshness_tick(setup, instance, cursor=caught_up.cursor)
        assert again.skip_message.endswith("(as last reported)") and page_publication(page) == 2

        # a page that cannot be written: the tick says so in its line and still evaluates the checks
        unwritable = tick(board_freshness_sensor, instance, {
            "warehouse": Warehouse(database=str(setup.warehouse)),
            "report_settings": ReportSettings(report_path=str(blocker / "index.html"))})
        assert unwritable.asset_events
        golden.check("freshness", "report not re-rendered: tick", unwritable.skip_message.rpartition("; ")[2])


@pytest.mark.slow
def test_pending_publication_refused_then_a_newer_one_queued(setup, golden):
    """A new revision of the dump whose run the gate refuses: pending, refused, with the gate's
    message (ERROR). Then the sensor requests a run for a later revision, running now: that one
    leads (WARN), the refused one is listed with it."""
    live = live_revision(setup)
    write_dump(setup.dump, n_rows=ROWS, n_shards=1, seed=12)  # new content, new revision
    with dg.instance_for_test() as instance:
        refused = _run(setup, instance, rank={"min_battles": 100000})
        assert not refused.success
        assert not by_name(refused.get_asset_check_evaluations())  # the gate failed: its checks did not run
        revision = next(r for (r,) in query(setup.warehouse, "SELECT revision FROM arena.dumps") if r != live)
        # the gate re-rendered the live publication's page, which now says the newest dump is not on it
        page = (setup.root / "report" / "index.html").read_text(encoding="utf-8")
        assert f"<code>{revision}</code>" in page and "refused by the gate" in page  # the report's words: golden/report

        result = freshness_tick(setup, instance)
        events = by_name(result.asset_events)
        assert events[AGE_CHECK].passed  # the live board is young, but not the newest dump
        pending = events[PENDING_CHECK]
        assert not pending.passed and pending.severity == dg.AssetCheckSeverity.ERROR
        said = {revision: "<revision>", refused.run_id: "<run>"}
        golden.check("freshness", "pending: refused (check)", _timeless(pending.description), said)
        assert pending.metadata["state"].value == "refused"
        assert pending.metadata["run"].value == refused.run_id
        golden.check("freshness", "pending: refused (tick)", result.skip_message.partition("; ")[2], said)

        instance.add_run(dg.DagsterRun(job_name="refresh_job", run_id="r" * 8 + "-0000-0000-0000-000000000000",
                                       tags={REVISION_TAG: "local-later"}, status=dg.DagsterRunStatus.STARTED))
        running = freshness_tick(setup, instance, cursor=result.cursor)
        pending = by_name(running.asset_events)[PENDING_CHECK]
        assert not pending.passed and pending.severity == dg.AssetCheckSeverity.WARN
        golden.check("freshness", "pending: running (check)", _timeless(pending.description), {revision: "<revision>"})
        assert [p["state"] for p in pending.metadata["pending"].value] == ["running", "refused"]


@pytest.mark.slow
def test_the_sensor_says_why_it_did_not_evaluate(setup, golden):
    """A run holding the warehouse (a writer in another process) is waited for 5 s at most; the
    tick then says so, and the checks' last evaluations stand."""
    code = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", code, str(setup.warehouse)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with dg.instance_for_test() as instance:
            started = time.monotonic()
            result = freshness_tick(setup, instance)
            waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert not result.asset_events and 5 <= waited < 30
    golden.check("freshness", "warehouse held: tick", result.skip_message)


class UnreachableSource(DumpSource):
    """A dump source whose look-up fails with a message of several lines, as a Hub error can."""

    def latest_revision(self) -> str:
        raise SourceError("the listing failed:\n  502 Bad Gateway\n  retry later")


def test_every_skip_of_the_triggers_is_one_line_with_the_reason(tmp_path, golden):
    resources = {"dump_source": UnreachableSource(), "warehouse": Warehouse(database=str(tmp_path / "w.duckdb"))}
    with dg.instance_for_test() as instance:
        for definition in (new_dump_sensor, nightly_refresh):
            result = tick(definition, instance, resources, "a" * 40 if definition is new_dump_sensor else None)
            assert not result.run_requests
            golden.check("triggers", "the source cannot be looked up", result.skip_message)


@pytest.mark.slow
def test_a_requested_run_says_why_in_a_tag(setup, tmp_path, golden):
    fresh = tmp_path / "fresh"
    write_dump(fresh, n_rows=20, n_shards=1, seed=3)
    source = DumpSource(source=str(fresh))
    with dg.instance_for_test() as instance:
        (request,) = tick(nightly_refresh, instance, {
            "dump_source": source, "warehouse": Warehouse(database=str(tmp_path / "none.duckdb"))}).run_requests
        revision = request.tags[REVISION_TAG]
        golden.check("triggers", "reason: nothing published", request.tags[REASON_TAG], {revision: "<revision>"})
        live = live_revision(setup)
        (request,) = tick(new_dump_sensor, instance, {
            "dump_source": source, "warehouse": Warehouse(database=str(setup.warehouse))}, live).run_requests
        golden.check("triggers", "reason: a new revision", request.tags[REASON_TAG],
                     {revision: "<revision>", live: "<live revision>"})
        assert "rankings" not in request.run_config["ops"]  # another source: its settings are not carried (issue 47)


def test_the_reason_tag_of_every_kind_of_request(golden):
    sha = "0123456789abcdef0123456789abcdef01234567"
    live = Live(True, 4, "local-older")
    golden.check("triggers", "reason: not refreshed yet", Decision(sha, None, live=live).because())
    golden.check("triggers", "reason: refreshed before", Decision(sha, None, live=live, again=True).because())
    several = Decision(sha, None, revisions={"a/x": "1", "b/y": "2"}, changes={"new": ["b/y"], "changed": ["a/x"],
                                                                               "gone": []}, live=Live())
    golden.check("triggers", "reason: several dumps changed", several.because())
    assert Decision(None, "a\nb").skip_text() == "a b" and Decision(sha, None).skip_text() is None


def test_a_missing_warehouse_file_is_not_read_as_never_published(tmp_path, golden):
    """A deleted or moved ARENA_WAREHOUSE read like a new deployment, "nothing is published yet" (issue 38,
    item 8): with the pipeline's store folder beside it, or a publication recorded in the instance, the
    checks say the file is missing (ERROR); with neither, nothing is published yet (WARN), as before."""
    from arena_pipeline.constants import PUBLISHED_TAG

    path = tmp_path / "warehouse.duckdb"
    resources = {"warehouse": Warehouse(database=str(path)),
                 "report_settings": ReportSettings(report_path=str(tmp_path / "report" / "index.html"))}
    with dg.instance_for_test() as instance:
        fresh = tick(board_freshness_sensor, instance, resources)
        age = by_name(fresh.asset_events)[AGE_CHECK]
        assert age.severity == dg.AssetCheckSeverity.WARN and age.description.startswith("nothing is published yet")

        (tmp_path / "warehouse.pipeline").mkdir()  # the store folder every run writes
        stored = tick(board_freshness_sensor, instance, resources, fresh.cursor)
        age = by_name(stored.asset_events)[AGE_CHECK]
        assert not age.passed and age.severity == dg.AssetCheckSeverity.ERROR
        golden.check("freshness", "missing file beside its store: check", age.description)
        assert stored.skip_message.startswith(age.description.partition(",")[0])

        (tmp_path / "warehouse.pipeline").rmdir()
        instance.add_run(dg.DagsterRun(job_name="refresh_job", run_id="p" * 8 + "-0000-0000-0000-000000000000",
                                       tags={PUBLISHED_TAG: "local-abc"}, status=dg.DagsterRunStatus.SUCCESS))
        recorded = tick(board_freshness_sensor, instance, resources, stored.cursor)
        golden.check("freshness", "missing file, published per the instance: check",
                     by_name(recorded.asset_events)[AGE_CHECK].description)
