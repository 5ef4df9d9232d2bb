"""The report says when the newest dump revision seen is not published, and why."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.core.freshness.freshness import Pending
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.presentation.report import build_report_html

FIXTURE = Path(__file__).parents[1] / "data" / "ranking" / "synthetic_battles.parquet"


@pytest.fixture(scope="module")
def output():
    battles = pl.read_parquet(FIXTURE)
    every = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(battles.get_column("id"), [every])
    return compute_rankings(battles, categories, RankingConfig(bootstrap_rounds=0, display_min_battles=0))


def _stale_notes(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", m) for m in re.findall(r'<p class="note stale"[^>]*>(.*?)</p>', html, re.S)]


def _pending(revision: str, state: str, reason: str) -> Pending:
    seen = dt.datetime(2026, 11, 20, 3, 0)
    return Pending(revision, state, reason, seen, seen)


def test_no_note_when_every_seen_revision_is_published(output):
    assert _stale_notes(build_report_html(PublicationView.from_output(output))) == []


def test_the_newest_unpublished_revision_and_its_reason_are_on_the_page(output):
    pending = (_pending("local-bbb", "refused", "refused by the gate (run r1): publication refused, nothing changed"),
               _pending("local-aaa", "failed", "failed (run r0): flatten: boom"))
    (note,) = _stale_notes(build_report_html(PublicationView.from_output(output, pending=pending)))
    assert f"revision {pending[0].revision} " in note and f"is not published: {pending[0].reason}" in note
    assert "1 other unpublished revision seen too" in note
    assert "local-aaa" not in note  # only the newest is named
