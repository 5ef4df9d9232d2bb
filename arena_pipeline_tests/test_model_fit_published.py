"""arena.model_fit and arena.model_fit_calibration go through the publication gate with the boards."""

from __future__ import annotations

import pytest

from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import copy_warehouse
from arena_pipeline_tests.support.publication_support import (
    RANKING_SELECTION,
    RERANK_SELECTION,
    Setup,
    publications,
    query,
)

pytestmark = pytest.mark.slow  # a whole-pipeline run of its own (module fixture), then re-ranks


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Setup:
    root = tmp_path_factory.mktemp("model_fit")
    write_dump(root / "dump", n_rows=240, n_shards=1, seed=5)
    setup = Setup(root, root / "dump", root / "warehouse.duckdb")
    assert setup.run(rank={"display_min_battles": 0}).success
    return setup


def test_model_fit_is_published_with_the_boards_and_shown_in_the_report(published):
    with connect_warehouse(str(published.warehouse), read_only=True) as con:
        boards = dict(con.execute("SELECT category, sum(n_battles) // 2 FROM arena.leaderboard "
                                  "WHERE method = 'bt' GROUP BY 1").fetchall())
        fit = {r[0]: r[1:] for r in con.execute(
            "SELECT category, battles, scored, ties, dump_revision FROM arena.model_fit").fetchall()}
        deciles = dict(con.execute("SELECT category, sum(battles) FROM arena.model_fit_calibration "
                                   "WHERE predictor = 'bt' GROUP BY 1").fetchall())
        revision = con.execute("SELECT revision FROM arena.publications").fetchone()[0]
    assert set(fit) == set(boards)  # one row per board, of exactly its fitted battles
    for category, (battles, scored, ties, dump_revision) in fit.items():
        assert battles == boards[category] and ties == "half" and dump_revision == revision
        assert deciles.get(category, 0) == scored <= battles
    page = (published.root / "report" / "index.html").read_text(encoding="utf-8")
    assert '<section id="model-fit"' in page and page.count('class="calibration-figure"') == sum(
        1 for _, scored, _, _ in fit.values() if scored)


def test_a_rerank_rebuilds_the_model_fit_with_its_settings(published, tmp_path):
    import shutil

    copy_warehouse(published.warehouse, tmp_path / "warehouse.duckdb")
    shutil.copytree(published.dump, tmp_path / "dump")
    shutil.copytree(published.root / "cache", tmp_path / "cache")
    setup = Setup(tmp_path, tmp_path / "dump", tmp_path / "warehouse.duckdb")
    # the fit tables without the boards (or the boards without them) are refused by the gate
    partial = [t for t in RANKING_SELECTION if "model_fit" not in t]
    refused = setup.run(selection=[*partial, "publication_gate"], rank={"display_min_battles": 0, "ties": "drop"})
    failures = [e.step_failure_data.error.message for e in refused.all_events if e.is_step_failure]
    assert not refused.success and any("model_fit, model_fit_calibration are computed together" in m
                                       for m in failures), failures
    assert setup.run(selection=RERANK_SELECTION, rank={"display_min_battles": 0, "ties": "drop"}).success
    *_, (_, _, rebuilt) = publications(setup.warehouse)
    assert {"model_fit", "model_fit_calibration", "leaderboard"} <= set(rebuilt)
    rows = query(setup.warehouse, "SELECT DISTINCT ties, draw_share FROM arena.model_fit")
    assert rows == [("drop", 0.0)]
