"""Provisional models (under the display threshold) shown apart in the report and the CLI table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.presentation.markdown import top_n_markdown
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.presentation.report import build_report_html

FIXTURE = Path(__file__).parent / "data" / "ranking" / "synthetic_battles.parquet"


def boards() -> pl.DataFrame:
    battles = pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")
    every = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    tags = tag_rows(battles.get_column("id"), [every])
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=390)
    return compute_rankings(battles, tags, config)


def test_report_lists_provisional_models_after_the_shown_ones_marked():
    out = boards()
    board = out.leaderboard
    provisional = board.filter("provisional").get_column("model").to_list()
    shown = board.filter(~pl.col("provisional")).get_column("model").to_list()
    assert provisional and shown
    pub = PublicationView.from_output(out)
    markdown = top_n_markdown(pub, "overall", "bt", 10)
    positions = {m: markdown.index(f"| {m} ") for m in provisional + shown}
    assert max(positions[m] for m in shown) < min(positions[m] for m in provisional)
    html = build_report_html(pub)
    # the shown models' table, then the provisional ones' table of their own
    shown_table, provisional_table = html.split('<table class="sortable leaderboard')[1:3]
    assert provisional_table.startswith(' provisional"') and "Provisional models (" in shown_table
    assert all(f">{m}</a>" in shown_table for m in shown)
    assert all(f">{m}</a>" in provisional_table for m in provisional)
    assert not any(f">{m}</a>" in shown_table for m in provisional)
    assert "display_min_battles=390" in html  # the reason names the setting (its words: golden/report.txt)
    # a provisional model does not push a shown model down
    ranks = board.filter(~pl.col("provisional")).sort("rank").get_column("rank").to_numpy()
    assert np.array_equal(ranks, np.arange(1, len(shown) + 1))


def test_provisional_ranks_are_marked_wherever_a_rank_is_printed():
    """A provisional rank is its place among every model, so it repeats shown ranks (issue 36: a
    provisional rank 2 beside a shown rank 2): the report's tables, its model panels and the Markdown
    preview print it "prov. N", a shown rank as the bare number; the sort key stays the number."""
    out = boards()
    board = out.leaderboard
    repeated = set(board.filter("provisional")["rank"]) & set(board.filter(~pl.col("provisional"))["rank"])
    assert repeated  # the situation the mark is for
    pub = PublicationView.from_output(out)
    html = build_report_html(pub)
    shown_table, provisional_table = (t.split("</table>")[0] for t in html.split('<table class="sortable leaderboard')[1:3])
    for r in board.iter_rows(named=True):
        cell = (f'<td class="num" data-value="{r["rank"]}">prov. {r["rank"]}</td>' if r["provisional"]
                else f'<td class="num" data-value="{r["rank"]}">{r["rank"]}</td>')
        assert cell in (provisional_table if r["provisional"] else shown_table), r
    assert "prov." not in shown_table
    assert any("“prov.”" in note for note in re.findall(r'<p class="note">(.*?)</p>', html))  # the mark explained
    panels = html.split('model-ratings"')[1:]
    assert sum(">prov. " in p.split("</table>")[0] for p in panels) == board.filter("provisional").height
    markdown = top_n_markdown(pub, "overall", "bt", board.height)
    cells = {(c := [x.strip() for x in line.strip("|").split("|")])[2]: c[0] for line in markdown.splitlines()[4:]}
    for r in board.iter_rows(named=True):
        assert cells[r["model"]] == (f"prov. {r['rank']}" if r["provisional"] else str(r["rank"])), r
