"""The report's "Changes since" sections and its not-the-newest-dump note in headless Chromium."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.core.changes.changes import compare_boards
from arena_pipeline.core.freshness.freshness import Pending
from arena_pipeline.presentation.report import render_report
from arena_pipeline_tests import test_report_browser
from arena_pipeline_tests.support.synthetic_published import synthetic_published
from arena_pipeline_tests.test_report_browser import pytestmark  # noqa: F401 (Chromium's skip marks)

page = test_report_browser.page  # the headless Chromium page fixture

SINCE = {"publication_id": 7, "revision": "rev7", "published_at": dt.datetime(2026, 11, 1, 3, 0)}


def _changes() -> pl.DataFrame:
    """The synthetic boards against an earlier version of them: one model 40 points lower before,
    one model that was not there (new now), one that is gone."""
    after = synthetic_published().leaderboard
    models = after.filter(pl.col("category") == "overall").sort("rank").get_column("model").to_list()
    moved, new = models[1], models[-1]
    before = after.filter(pl.col("model") != new).with_columns(
        [pl.when(pl.col("model") == moved).then(pl.col(c) - 40.0).otherwise(pl.col(c)).alias(c)
         for c in ("rating", "ci_lower", "ci_upper")])
    gone = before.filter(pl.col("model") == models[0]).with_columns(model=pl.lit("retired-model"))
    return compare_boards(pl.concat([before, gone]), after, relation="votes added", settings_changed=False,
                          since=SINCE)


#: the newest dump revision seen, not published
PENDING = Pending("local-0123456789abcdef", "refused", "refused by the gate (run r1): publication refused",
                  dt.datetime(2026, 11, 20, 3, 0), dt.datetime(2026, 11, 20, 3, 0))


@pytest.fixture(scope="module")
def report_file(tmp_path_factory) -> Path:
    return render_report(synthetic_published(changes=_changes(), pending=(PENDING,)),
                         tmp_path_factory.mktemp("report") / "index.html")


def test_changes_section_and_the_pending_note_are_shown(page, report_file, tmp_path):
    page.open(report_file.as_uri())
    note = page.js("(() => { const p = document.querySelector('p.note.stale'); const r = p.getBoundingClientRect();"
                   " return [p.textContent, r.width, r.height]; })()")
    assert note[0].startswith("Not the newest dump: ") and f"revision {PENDING.revision} " in note[0]
    assert f"is not published: {PENDING.reason}" in note[0]
    assert note[1] > 200 and note[2] > 10  # laid out, visible under the title
    heading = page.js("document.getElementById('changes-overall').textContent")
    assert heading.startswith("Changes since publication 7")
    table = "document.getElementById('changes-overall').parentElement.querySelector('table.publication-changes')"
    rows = page.js(f"[...{table}.tBodies[0].rows].map(r => r.textContent)")
    assert any("+40.0" in r for r in rows)  # the model moved by 40 points, first by the size of its move
    assert "+40.0" in rows[0]
    assert any("new" in r for r in rows) and any("retired-model" in r and "gone" in r for r in rows)
    shot = page.screenshot(tmp_path / "changes.png")
    assert shot.stat().st_size > 50_000
    assert page.problems() == []
