"""Two writers, one outcome: a refresh that ranked with publication 1's settings is refused at the gate once a
re-rank published other ranking settings (another bootstrap seed) meanwhile, naming that publication, instead of
silently undoing them."""

from __future__ import annotations

import duckdb
import pytest

from arena_pipeline.constants import SETTINGS_TAG
from arena_pipeline_tests.support.materialize import (
    SAMPLE_RUN_CONFIG,
    copy_warehouse,
    materialize,
    rank_config,
    sample_resources,
)
from arena_pipeline_tests.support.publication_support import RERANK_SELECTION


def _live(path) -> tuple[int, str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT publication_id, settings->>'$.tables.leaderboard.ranking.seed' "
                           "FROM arena.publications ORDER BY publication_id DESC LIMIT 1").fetchone()


@pytest.mark.slow
def test_a_refresh_ranked_with_settings_another_publication_changed_is_refused(sample_run, tmp_path, golden):
    warehouse = copy_warehouse(sample_run.root / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    (first, seed) = _live(warehouse)
    resources = sample_resources(tmp_path)
    # the re-rank started with the refresh publishes first: another bootstrap seed
    changed = rank_config(min_battles=3, bootstrap_rounds=5, seed=int(seed) + 1)
    rerank = materialize(resources, selection=RERANK_SELECTION, run_config=changed)
    assert rerank.success and _live(warehouse) == (first + 1, str(int(seed) + 1))
    # the refresh read publication 1's settings when it started (its tag says so, as the sensor's and CLI's)
    refresh = materialize(resources, run_config=SAMPLE_RUN_CONFIG, tags={SETTINGS_TAG: f"publication {first}"})
    assert not refresh.success
    (failure,) = [e for e in refresh.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    golden.check("refusals", "ranked with the settings of a publication no longer live",
                 message[message.index("this run ranked"):], {rerank.run_id: "<run>"})
    assert f"seed {int(seed)} -> {int(seed) + 1}" in message
    assert _live(warehouse) == (first + 1, str(int(seed) + 1))  # the re-rank's settings stay live
    # a refresh given the live publication's settings is not refused: its tables are what that publication shows
    # (the same dump and settings), so it stays live (publication rule 23)
    again = materialize(resources, run_config=changed, tags={SETTINGS_TAG: f"publication {first + 1}"})
    assert again.success and _live(warehouse) == (first + 1, str(int(seed) + 1))
    (gate,) = [e for e in again.get_asset_materialization_events() if e.asset_key.to_user_string() == "publication_gate"]
    assert gate.materialization.metadata["live_publication_id"].value == first + 1
