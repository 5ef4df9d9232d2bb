"""The nightly schedule and the new-dump sensor, evaluated against the fake Hub on loopback."""

from __future__ import annotations

import json
import time

import dagster as dg
import pytest

from arena_pipeline.constants import PUBLISHED_TAG, REVISION_TAG
from arena_pipeline.core.ranking import REFERENCE_MODELS, RankingConfig
from arena_pipeline.core.store.records import ensure_catalog
from arena_pipeline.core.store.warehouse import connect, quoted
from arena_pipeline.definitions import defs
from arena_pipeline.refresh import SETTINGS_TAG, read_live
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline.schedules import make_nightly_schedule, nightly_refresh
from arena_pipeline.sensors import new_dump_sensor
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_dev.hub_server import fake_hub_server
from arena_pipeline_tests.support.publication_support import held_by_another_process
from arena_pipeline_tests.support.ticks import tick

REPO = "lmarena-ai/arena-human-preference-140k"
#: The ranking run configuration of the defaults, as a refresh states it.
DEFAULT_RUN = {"ties": "half", "bootstrap_rounds": 100, "style_bootstrap_rounds": 0, "primary_interval": "sandwich",
               "cluster_primary": True,
               "seed": 42, "min_battles": 1, "display_min_battles": 301, "anchor_models": list(REFERENCE_MODELS),
               "anchor_model": None, "anchor_rating": 1000.0, "style_method": "lmarena", "style_reg": 1.0,
               "style_l2": 1.0}


def test_names_and_cron_are_pinned():
    assert nightly_refresh.name == "nightly_refresh"
    assert nightly_refresh.cron_schedule == "0 3 * * *"
    assert nightly_refresh.execution_timezone == "UTC"
    assert make_nightly_schedule("30 1 * * *").cron_schedule == "30 1 * * *"
    assert new_dump_sensor.name == "new_dump_sensor"
    assert new_dump_sensor.job_name == "refresh_job"
    assert new_dump_sensor.minimum_interval_seconds == 600
    assert {s.name for s in defs.schedules} == {"nightly_refresh"}
    assert {s.name for s in defs.sensors} == {"new_dump_sensor", "board_freshness_sensor"}


@pytest.fixture
def hub(tmp_path):
    with fake_hub_server(tmp_path / "hub") as server:
        yield server


def _source(hub, tmp_path) -> DumpSource:
    return DumpSource(source=REPO, revision="main", cache_dir=str(tmp_path / "cache"),
                      hf_endpoint=hub.url, attempts=1, backoff_s=0.1, timeout_s=2)


def _warehouse(tmp_path) -> Warehouse:
    """A warehouse resource on a file no run has written yet (no live publication)."""
    return Warehouse(database=str(tmp_path / "warehouse.duckdb"))


def _resources(source: DumpSource, tmp_path) -> dict:
    return {"dump_source": source, "warehouse": _warehouse(tmp_path)}


def _evaluate(sensor_cursor, hub, tmp_path, instance):
    return tick(new_dump_sensor, instance, _resources(_source(hub, tmp_path), tmp_path), sensor_cursor)


@pytest.mark.slow
def test_sensor_new_revision_then_same_revision(hub, tmp_path, golden):
    shards = write_dump(tmp_path / "v1", 10, 1, seed=1)
    sha1 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
    with dg.instance_for_test() as instance:
        first = _evaluate(None, hub, tmp_path, instance)
        assert [r.run_key for r in first.run_requests] == [sha1]
        request = first.run_requests[0]
        assert request.tags[REVISION_TAG] == sha1
        assert request.run_config == {"ops": {"raw_dump": {"config": {"revision": sha1}}}}
        assert first.cursor == sha1

        started = time.perf_counter()
        same = _evaluate(sha1, hub, tmp_path, instance)
        elapsed = time.perf_counter() - started
        assert not same.run_requests
        golden.check("triggers", "skip: unchanged", same.skip_message, {sha1: "<revision>", sha1[:12]: "<revision>"})
        assert elapsed < 5
        assert not hub.file_gets()  # a tick never downloads

        v2 = write_dump(tmp_path / "v2", 12, 1, seed=2)
        sha2 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in v2})
        new = _evaluate(sha1, hub, tmp_path, instance)
        assert [r.run_key for r in new.run_requests] == [sha2]
        assert new.cursor == sha2


@pytest.mark.slow
def test_sensor_skips_when_hub_is_down(hub, tmp_path, golden):
    hub.set_faults(down=True)
    with dg.instance_for_test() as instance:
        result = _evaluate("a" * 40, hub, tmp_path, instance)
    assert not result.run_requests
    golden.check("triggers", "skip: the Hub is down", result.skip_message.partition(": HubUnavailable")[0])
    assert ": HubUnavailable" in result.skip_message  # then the client's own words
    assert result.cursor == "a" * 40


def test_sensor_skips_unreachable_endpoint(tmp_path):
    source = DumpSource(source=REPO, hf_endpoint="http://127.0.0.1:9", attempts=1, backoff_s=0.1, timeout_s=1)
    with dg.instance_for_test() as instance:
        result = tick(new_dump_sensor, instance, _resources(source, tmp_path))
    assert not result.run_requests and "could not look up" in result.skip_message


@pytest.mark.slow
def test_schedule_runs_once_per_revision(hub, tmp_path, golden):
    shards = write_dump(tmp_path / "v1", 10, 1, seed=1)
    sha = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
    with dg.instance_for_test() as instance:
        resources = _resources(_source(hub, tmp_path), tmp_path)
        first = tick(nightly_refresh, instance, resources)
        assert [r.run_key for r in first.run_requests] == [sha]
        # once a run published this revision and the warehouse shows it, the next night skips
        run = instance.add_run(
            dg.DagsterRun(job_name="refresh_job", run_id="r" * 8 + "-0000-0000-0000-000000000000",
                          tags={PUBLISHED_TAG: sha, REVISION_TAG: sha}, status=dg.DagsterRunStatus.SUCCESS)
        )
        assert run
        _publish_settings(tmp_path / "warehouse.duckdb", 1, {}, {}, revision=sha)
        again = tick(nightly_refresh, instance, resources)
        assert not again.run_requests
        golden.check("triggers", "skip: live", again.skip_message, {sha: "<revision>", sha[:12]: "<revision>"})
        # a warehouse the tick cannot read in time (a run writes it): the run records decide
        with held_by_another_process(tmp_path / "warehouse.duckdb"):
            busy = tick(nightly_refresh, instance, resources)
        assert not busy.run_requests and busy.skip_message.startswith(f"dump revision {sha} is already published")


def test_a_revision_refreshed_before_but_no_longer_live_is_refreshed_again(tmp_path):
    """The source put back to earlier content: its revision was published once (a run says so), but
    the warehouse now shows a later one, so the tick refreshes it again, under a new run key (Dagster
    drops a sensor request whose key it has seen). A warehouse moved away: the same."""
    write_dump(tmp_path / "dump", 6, 1)
    source = DumpSource(source=str(tmp_path / "dump"))
    revision = source.latest_revision()
    with dg.instance_for_test() as instance:
        instance.add_run(dg.DagsterRun(job_name="refresh_job", run_id="a" * 8 + "-0000-0000-0000-000000000000",
                                       tags={PUBLISHED_TAG: revision, REVISION_TAG: revision},
                                       status=dg.DagsterRunStatus.SUCCESS))
        _publish_settings(tmp_path / "warehouse.duckdb", 4, {"display_min_battles": 0}, {}, revision="local-later")
        for definition in (new_dump_sensor, nightly_refresh):
            (request,) = tick(definition, instance, _resources(source, tmp_path), "local-later").run_requests
            assert request.run_key == f"{revision} after publication 4" and request.tags[REVISION_TAG] == revision
            assert request.run_config["ops"]["rankings"] == {"config": {**DEFAULT_RUN, "display_min_battles": 0}}
        (tmp_path / "warehouse.duckdb").rename(tmp_path / "moved.duckdb")
        (request,) = tick(nightly_refresh, instance, _resources(source, tmp_path)).run_requests
        assert request.run_key == f"{revision} after publication None"


def test_sensor_local_source_fingerprint(tmp_path):
    write_dump(tmp_path / "dump", 6, 1)
    source = DumpSource(source=str(tmp_path / "dump"))
    with dg.instance_for_test() as instance:
        first = tick(new_dump_sensor, instance, _resources(source, tmp_path))
        (request,) = first.run_requests
        assert request.run_key.startswith("local-")
        assert not tick(new_dump_sensor, instance, _resources(source, tmp_path), request.run_key).run_requests


def _publish_settings(path, publication_id: int, ranking: dict, gate: dict, revision: str = "local-0") -> None:
    """A live publication row as the gate writes it: its revision, ranking and gate settings."""
    con = connect(str(path))
    try:
        ensure_catalog(con, "arena")
        settings = json.dumps({"gate": gate, "tables": {"leaderboard": {"ranking": ranking}}})
        con.execute(f"INSERT INTO {quoted('arena', 'publications')} (publication_id, revision, tables, settings) "
                    "VALUES (?, ?, '{}', ?)", [publication_id, revision, settings])
    finally:
        con.close()




def test_refresh_ranks_with_the_live_publications_settings(tmp_path):
    """A refresh after a display_min_battles=0 publication ranks the new dump the same way (the
    default display threshold would hide every model and the gate would refuse the run). The gate's
    own settings are not carried over: allow_degenerate stays a decision of each run."""
    write_dump(tmp_path / "dump", 6, 1)
    source, warehouse = DumpSource(source=str(tmp_path / "dump")), _warehouse(tmp_path)
    ranking = {"display_min_battles": 0, "bootstrap_rounds": 7, "anchor_models": ["a", "b"], "tol": 1e-8,
               "scale": 400.0}
    _publish_settings(tmp_path / "warehouse.duckdb", 3, ranking, {"allow_degenerate": True})
    live = read_live(warehouse)
    assert live.ranking == RankingConfig(display_min_battles=0, bootstrap_rounds=7, anchor_models=("a", "b"))
    job = defs.resolve_job_def("refresh_job")
    with dg.instance_for_test() as instance:
        for definition in (new_dump_sensor, nightly_refresh):
            (request,) = tick(definition, instance, {"dump_source": source, "warehouse": warehouse}).run_requests
            # the recorded run settings, the defaults for those not recorded; tol and scale are not run settings
            assert request.run_config["ops"]["rankings"] == {"config": {
                **DEFAULT_RUN, "display_min_battles": 0, "bootstrap_rounds": 7, "anchor_models": ["a", "b"]}}
            assert "publication_gate" not in request.run_config["ops"]
            assert request.tags[SETTINGS_TAG] == "publication 3"
            dg.validate_run_config(job, request.run_config)  # the job accepts it as it stands
    # no warehouse, or one the tick cannot open in time: the defaults, said by the missing tag
    other = Warehouse(database=str(tmp_path / "none.duckdb"))
    with dg.instance_for_test() as instance:
        (request,) = tick(new_dump_sensor, instance, {"dump_source": source, "warehouse": other}).run_requests
        assert "rankings" not in request.run_config["ops"] and SETTINGS_TAG not in request.tags


def test_the_sensor_does_not_carry_a_publications_settings_to_a_dump_from_another_source(sample_run, tmp_path,
                                                                                          golden):
    """Issue 47: the sample's settings (its min_battles 3, bootstrap_rounds 5) went with the sensor's refresh
    of another dump; a refresh of the live publication's source still ranks with them, another source's
    with the defaults, and the run's reason says so."""
    from arena_pipeline.refresh import Decision, configured_source, for_source, run_request
    from arena_pipeline_tests.support.bad_inputs import REAL_CSV, read_real_csv, write_csv

    live = read_live(Warehouse(database=str(sample_run.warehouse)))
    assert live.source == configured_source(DumpSource(source=str(REAL_CSV))) == str(REAL_CSV.resolve())
    same = run_request(Decision("r1", None, live=for_source(live, DumpSource(source=str(REAL_CSV)))))
    assert same.run_config["ops"]["rankings"]["config"]["min_battles"] == 3 and same.tags[SETTINGS_TAG]
    header, records = read_real_csv()
    other = write_csv(tmp_path / "own_dump.csv", header, records[:60])
    moved = run_request(Decision("r2", None, live=for_source(live, DumpSource(source=str(other)))))
    assert "rankings" not in moved.run_config["ops"] and SETTINGS_TAG not in moved.tags
    because = moved.tags["arena/requested_because"]
    assert because.endswith(f"({str(REAL_CSV.resolve())!r}; now {str(other.resolve())!r})")
    golden.check("triggers", "reason: a dump of another source", because, {str(REAL_CSV.resolve()): "<sample>"})
