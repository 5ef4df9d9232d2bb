"""Aligning the published boards to a published board's scale (ARENA_ALIGN_TO_PUBLISHED_BOARD), materialized."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.core.validation.external import to_lmarena_json
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse
from arena_pipeline_tests.support.materialize import REAL_CSV, materialize
from arena_pipeline_tests.support.publication_support import RERANK_SELECTION

#: every model shown (the 100-row sample has no model over LMArena's 300 battles)
RUN_CONFIG = {"ops": {"rankings": {"config": {"min_battles": 3, "bootstrap_rounds": 5, "display_min_battles": 0}}}}
SHIFT = 265.6


def _materialize(tmp_path: Path, catalog: ModelCatalog, selection=None) -> dg.ExecuteInProcessResult:
    """The real sample with ``catalog`` into ``tmp_path/w.duckdb`` (every model shown)."""
    return materialize({"dump_source": DumpSource(source=str(REAL_CSV)),
                        "warehouse": Warehouse(database=str(tmp_path / "w.duckdb"), retention=10),
                        "report_settings": ReportSettings(report_path=str(tmp_path / "report.html")),
                        "model_catalog": catalog}, selection=selection, run_config=RUN_CONFIG)


def _frame(tmp_path: Path, sql: str) -> pl.DataFrame:
    with connect_warehouse(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).pl()


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    """Publish once on our own scale, then re-rank aligned to a board that is our bt board + 265.6."""
    tmp_path = tmp_path_factory.mktemp("align")
    assert _materialize(tmp_path, ModelCatalog()).success
    before = _frame(tmp_path, "SELECT * FROM arena.leaderboard")
    dumps_before = _frame(tmp_path, "SELECT * FROM arena.dump_leaderboard")
    plain = before.filter(pl.col("method") == "bt").with_columns(pl.col("rating") + SHIFT)
    board = tmp_path / "published.json"
    board.write_text(json.dumps(to_lmarena_json(plain)), encoding="utf-8")
    catalog = ModelCatalog(published_board=str(board), align_to_published_board=True,
                           published_board_date="2025-11-05")
    result = _materialize(tmp_path, catalog, RERANK_SELECTION)
    return {"result": result, "before": before, "dumps_before": dumps_before, "path": tmp_path}


@pytest.mark.slow
def test_boards_move_by_the_recovered_shift_and_it_is_recorded(aligned, golden):
    tmp_path, before = aligned["path"], aligned["before"]
    assert aligned["result"].success
    after = _frame(tmp_path, "SELECT * FROM arena.leaderboard")
    keys = ["category", "method", "model"]
    both = before.join(after, on=keys, suffix="_after")
    assert both.height == before.height == after.height
    bt = both.filter(pl.col("method") == "bt")
    assert (bt["rating_after"] - bt["rating"]).to_list() == pytest.approx([SHIFT] * bt.height, abs=1e-6)
    bounded = bt.filter(pl.col("ci_lower").is_not_null())
    assert (bounded["ci_lower_after"] - bounded["ci_lower"]).to_list() == pytest.approx(
        [SHIFT] * bounded.height, abs=1e-6)
    assert bt["rank"].to_list() == bt["rank_after"].to_list()
    # the plain board of the JSON has no style-controlled board: bt_style stays on our scale
    others = both.filter(pl.col("method") != "bt")
    assert others.height and (others["rating_after"] - others["rating"]).abs().max() < 1e-9
    # the per-dump boards are not aligned
    dumps = _frame(tmp_path, "SELECT * FROM arena.dump_leaderboard")
    assert dumps.sort(keys)["rating"].to_list() == pytest.approx(
        aligned["dumps_before"].sort(keys)["rating"].to_list())

    settings, = _frame(tmp_path, "SELECT settings FROM arena.publications ORDER BY publication_id DESC LIMIT 1")
    record = json.loads(settings[0])["tables"]["leaderboard"]["alignment"]
    assert record["board_name"] == "published.json" and record["board_date"] == "2025-11-05"
    entries = {(e["category"], e["method"]): e for e in record["boards"]}
    overall = entries[("overall", "bt")]
    assert overall["aligned"] and overall["published_board"] == "full"
    assert overall["shift"] == pytest.approx(SHIFT, abs=1e-6)
    assert overall["n_matched"] == before.filter((pl.col("category") == "overall") & (pl.col("method") == "bt")).height
    assert not entries[("overall", "bt_style")]["aligned"]

    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    said = [html.unescape(re.sub(r"<[^>]+>", "", note))
            for note in re.findall(r'<p class="note alignment">(.*?)</p>', page)]  # the overall board's: bt first
    assert f"board of 2025-11-05 (published.json) by +{SHIFT:.1f} points" in said[0]
    golden.check("report", "alignment: a board not aligned", said[1])


@pytest.mark.slow
def test_the_docs_query_of_the_alignment_record_runs(aligned):
    page = (Path(__file__).resolve().parents[2] / "docs" / "comparisons.md").read_text(encoding="utf-8")
    sql = page.split("The alignment record of the live publication:", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    rows = {(r[0], r[1]): r for r in _frame(aligned["path"], sql).iter_rows()}
    assert rows[("overall", "bt")][2:5] == ("full", rows[("overall", "bt")][3], round(SHIFT, 1))
    assert rows[("overall", "bt_style")][4] is None and "bt_style" in rows[("overall", "bt_style")][5]


@pytest.mark.parametrize(("value", "expected"), [(None, False), ("", False), ("true", True), ("1", True),
                                                 ("off", False), ("No", False)])
def test_the_setting_is_off_unless_asked_for(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("ARENA_ALIGN_TO_PUBLISHED_BOARD", raising=False)
    else:
        monkeypatch.setenv("ARENA_ALIGN_TO_PUBLISHED_BOARD", value)
    assert ModelCatalog().align_to_board() is expected
    assert ModelCatalog(align_to_published_board=True).align_to_board() is True


def test_a_value_that_is_not_yes_or_no_is_refused(monkeypatch):
    monkeypatch.setenv("ARENA_ALIGN_TO_PUBLISHED_BOARD", "sometimes")
    with pytest.raises(ValueError, match="must be true or false"):
        ModelCatalog().align_to_board()


HISTORY = Path(__file__).parents[1] / "data" / "external" / "leaderboard_dataset"


@pytest.mark.slow
def test_lmarenas_ratings_history_is_compared_and_aligned_at_the_publication_nearest_the_last_vote(tmp_path):
    """ARENA_PUBLISHED_BOARD names a local copy of lmarena-ai/leaderboard-dataset (constructed, three
    publications): the comparison and the alignment read the publication nearest the dump's last vote, plain
    boards against `text`, style-controlled ones against `text_style_control`, and record which and why."""
    result = _materialize(tmp_path, ModelCatalog(published_board=str(HISTORY), align_to_published_board=True))
    assert result.success
    (last_vote,), = _frame(tmp_path, "SELECT max(timestamp) FROM arena.battles").rows()
    (settings,), = _frame(tmp_path, "SELECT settings FROM arena.publications ORDER BY publication_id DESC LIMIT 1").rows()
    tables = json.loads(settings)["tables"]
    alignment, compared = tables["leaderboard"]["alignment"], tables["external_comparison"]["published_board"]
    dates = ["2025-06-02", "2025-08-14", "2025-11-05"]
    nearest = min(dates, key=lambda d: (abs((pl.Series([d]).str.to_date().item() - last_vote.date()).days), d))
    for record in (alignment["history"], compared["history"]):
        assert {s["publish_date"] for s in record["subsets"].values()} == {nearest}
        assert record["subsets"]["text"]["chosen"] == f"nearest the dump's last vote ({last_vote.date().isoformat()})"
    assert alignment["board_date"] == compared["board_date"] == nearest
    assert alignment["board_sha256"] == compared["sha256"]
    keys = {(b["category"], b["method"]): b for b in alignment["boards"]}
    assert keys[("overall", "bt")]["published_board"] == "full" and keys[("overall", "bt_style")]["published_board"] == "full"
    methods = set(_frame(tmp_path, "SELECT DISTINCT method FROM arena.external_comparison WHERE n_matched > 0")
                  .get_column("method"))
    assert {"bt", "bt_style"} <= methods
