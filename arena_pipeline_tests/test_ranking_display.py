"""Provisional models (under the display threshold) shown apart in the report and the CLI table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.report import build_report_html, top_n_markdown

FIXTURE = Path(__file__).parent / "data" / "ranking" / "synthetic_battles.parquet"


def boards() -> pl.DataFrame:
    battles = pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")
    tags = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=390)
    return compute_rankings(battles, tags, config)


def test_report_lists_provisional_models_after_the_shown_ones_marked():
    out = boards()
    board = out.leaderboard
    provisional = board.filter("provisional").get_column("model").to_list()
    shown = board.filter(~pl.col("provisional")).get_column("model").to_list()
    assert provisional and shown
    markdown = top_n_markdown(board, "overall", "bt", 10)
    positions = {m: markdown.index(f"| {m} ") for m in provisional + shown}
    assert max(positions[m] for m in shown) < min(positions[m] for m in provisional)
    html = build_report_html(board, out.pairwise, out.style_coefficients)
    assert html.count("(provisional)</small>") == len(provisional)
    assert "fewer than display_min_battles=390 battles" in html
    # a provisional model does not push a shown model down
    ranks = board.filter(~pl.col("provisional")).sort("rank").get_column("rank").to_numpy()
    assert np.array_equal(ranks, np.arange(1, len(shown) + 1))
