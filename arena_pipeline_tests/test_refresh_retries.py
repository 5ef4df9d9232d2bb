"""A refresh that failed for a passing reason is requested again by the new-dump sensor (with a
backoff, up to a bound); one that would fail the same way is not, and every tick says which and why."""

from __future__ import annotations

import datetime as dt
import functools
import re

import dagster as dg
import pytest

from arena_pipeline import refresh
from arena_pipeline.constants import REVISION_TAG
from arena_pipeline.core.freshness import retry
from arena_pipeline.resources import DumpSource, ModelCatalog, Warehouse
from arena_pipeline.sensors import new_dump_sensor
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import materialize, rank_config, sample_resources
from arena_pipeline_tests.support.publication_support import held_by_another_process
from arena_pipeline_tests.support.ticks import tick


@pytest.mark.slow
def test_a_run_failed_by_a_lock_is_retried_by_the_sensor_a_repeating_failure_is_not(tmp_path, monkeypatch, golden):
    write_dump(tmp_path / "dump", 8, 1)
    source = DumpSource(source=str(tmp_path / "dump"), cache_dir=str(tmp_path / "cache"))
    revision = source.latest_revision()
    warehouse = Warehouse(database=str(tmp_path / "warehouse.duckdb"), lock_timeout_s=0.5)
    with warehouse.connection():  # the work file exists (empty): another pipeline process holds it below
        pass
    resources = sample_resources(tmp_path, dump_source=source, warehouse=warehouse)
    sensor_resources = {"dump_source": source, "warehouse": warehouse}
    with dg.instance_for_test() as instance:
        with held_by_another_process(warehouse.work_path()):
            failed = materialize(resources, run_config=rank_config(min_battles=1), instance=instance,
                                 tags={REVISION_TAG: revision})
        assert not failed.success
        # the next tick: the revision is pending, retried once the first wait has passed
        waiting = tick(new_dump_sensor, instance, sensor_resources, revision)
        assert not waiting.run_requests
        assert failed.run_id in waiting.skip_message and "attempt 2 of 4" in waiting.skip_message
        golden.check("triggers", "skip: a retry waits", re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})?( UTC)?", "<time>", waiting.skip_message),
                     {failed.run_id: "<run>", revision: "<revision>"})
        # the wait over: the next tick requests attempt 2
        monkeypatch.setattr(refresh, "plan_retry", functools.partial(retry.plan_retry, first_wait=dt.timedelta(0)))
        (request,) = tick(new_dump_sensor, instance, sensor_resources, revision).run_requests
        assert request.run_key == f"{revision} attempt 2"
        assert request.tags[refresh.ATTEMPT_TAG] == "2" and request.tags[REVISION_TAG] == revision
        assert "attempt 2 of 4" in request.tags[refresh.REASON_TAG]

        # a run that fails the same way whatever the time (an alias file that is not there) is not retried
        broken = materialize({**resources, "model_catalog": ModelCatalog(aliases_path=str(tmp_path / "no.csv"))},
                             run_config=rank_config(min_battles=1), instance=instance, tags={REVISION_TAG: revision})
        assert not broken.success
        skipped = tick(new_dump_sensor, instance, sensor_resources, revision)
        assert not skipped.run_requests
        assert f"run {broken.run_id} failed" in skipped.skip_message and "not retried" in skipped.skip_message

        # once a run of the revision succeeds, the revision is simply unchanged
        assert materialize(resources, run_config=rank_config(min_battles=1), instance=instance,
                           tags={REVISION_TAG: revision}).success
        done = tick(new_dump_sensor, instance, sensor_resources, revision)
        assert not done.run_requests
        golden.check("triggers", "skip: unchanged", done.skip_message, {revision: "<revision>"})
