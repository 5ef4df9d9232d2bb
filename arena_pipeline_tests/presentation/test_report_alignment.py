"""The report says how a board was aligned to a published board, or why not, and what bt_style left out."""

from __future__ import annotations

import dataclasses
import html as html_lib
import re
from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.core.validation.external import (
    alignment_record,
    alignment_shifts,
    apply_alignment,
    unaligned_record,
)
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.presentation.report import build_report_html

FIXTURE = Path(__file__).parents[1] / "data" / "ranking" / "synthetic_battles.parquet"


@pytest.fixture(scope="module")
def output():
    """The synthetic votes plus 200 votes from a dump without style counts."""
    styled = pl.read_parquet(FIXTURE)
    style = [c for c in styled.columns if c not in ("id", "model_a", "model_b", "winner")]
    old = styled.head(200).with_columns(
        [pl.lit(None, styled.schema[c]).alias(c) for c in style]).with_columns(id=pl.col("id") + "-old")
    battles = pl.concat([styled, old])
    every = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(battles.get_column("id"), [every])
    return compute_rankings(battles, categories, RankingConfig(bootstrap_rounds=0, display_min_battles=0))


def notes(html: str, kind: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", m) for m in re.findall(rf'<p class="note {kind}">(.*?)</p>', html)]


def test_aligned_and_unaligned_boards_say_so(output, golden):
    lb = output.leaderboard
    theirs = lb.filter(pl.col("method") == "bt").select(
        "category", "model", (pl.col("rating") + 265.6).alias("rating"), pl.lit("bt").alias("method"))
    shifts = alignment_shifts(lb, theirs)
    record = alignment_record(shifts, "boards/leaderboard-text.json", "0" * 64, "2025-11-05", 1000.0)
    pub = dataclasses.replace(PublicationView.from_output(output, alignment=record), leaderboard=apply_alignment(lb, shifts))
    said = notes(build_report_html(pub), "alignment")
    # the shift, its date and file, the reference's rating after it, what an aligned interval leaves out (issue 36)
    assert "+265.6 points" in said[0] and "is 1265.6." in said[0]
    golden.check("report", "alignment: an aligned board", html_lib.unescape(said[0]))
    golden.check("report", "alignment: a board not aligned", html_lib.unescape(said[1]))
    assert len(said) == len(pub.methods("overall"))  # one note per board


def test_an_alignment_that_could_not_be_made_says_why(output, golden):
    record = unaligned_record("boards/missing.json", "the published board is unusable: no such file")
    html = build_report_html(PublicationView.from_output(output, alignment=record))
    golden.check("report", "alignment: asked for, not made", html_lib.unescape(notes(html, "alignment")[0]))


def test_no_alignment_asked_for_says_nothing(output):
    assert notes(build_report_html(PublicationView.from_output(output)), "alignment") == []


def test_votes_without_style_counts_are_reported_as_left_out(output, golden):
    said = notes(build_report_html(PublicationView.from_output(output)), "style-left-out")
    (note,) = said
    assert note.startswith("200 of ") and "1,200 votes" in note
    golden.check("report", "style: votes without style counts", html_lib.unescape(note))


def test_the_changes_of_an_aligned_board_show_the_shifts_move(output):
    """Issue 36 item 2: the changes compare the ratings without the shifts; the report's changes panel
    says by how much the shift itself moved, so that After − Before is read right."""
    from arena_pipeline.core.changes.changes import board_shift, compare_boards

    lb = output.leaderboard
    records = []
    for shift in (250.0, 262.5):
        records.append({"requested": True, "board_sha256": "abc", "estimator": "median", "min_models": 3,
                        "boards": [{"category": "overall", "method": m, "shift": shift, "aligned": True}
                                   for m in ("bt", "bt_style")]})
    moved = [lb.with_columns(pl.col(c) + r["boards"][0]["shift"] for c in ("rating", "ci_lower", "ci_upper"))
             for r in records]
    changes = compare_boards(*moved, relation="same votes", settings_changed=False,
                             alignment_before=records[0], alignment_after=records[1],
                             since={"publication_id": 1, "revision": "r1", "published_at": None})
    assert board_shift(changes.filter(pl.col("method") == "bt")) == {"before": 250.0, "after": 262.5, "change": 12.5}
    assert not changes.get_column("beyond_interval").fill_null(False).any()  # the shift's move flags no model
    html = build_report_html(dataclasses.replace(PublicationView.from_output(output, alignment=records[1]),
                                                 leaderboard=moved[1], changes=changes))
    said = re.findall(r'<span class="shift-change">(.*?)</span>', html)
    assert len(said) == 1 and "the shift moved +12.5 points (+250.0 → +262.5)" in said[0]
    plain = compare_boards(lb, lb, relation="same votes", settings_changed=False)
    assert board_shift(plain) is None
    assert board_shift(plain.drop("shift_before", "shift_after", "shift_change")) is None
