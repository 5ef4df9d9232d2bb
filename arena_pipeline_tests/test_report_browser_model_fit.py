"""The report's goodness-of-fit section in headless Chromium: drawn, sortable, no console problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_pipeline.presentation.report import render_report
from arena_pipeline_tests import test_report_browser
from arena_pipeline_tests.presentation.test_report_model_fit import synthetic_fit
from arena_pipeline_tests.support.synthetic_published import synthetic_published
from arena_pipeline_tests.test_report_browser import pytestmark  # noqa: F401 (Chromium's skip marks)

page = test_report_browser.page  # the headless Chromium page fixture


@pytest.fixture(scope="module")
def report_file(tmp_path_factory) -> Path:
    fit = synthetic_fit()
    return render_report(synthetic_published(model_fit=fit.summary, model_fit_calibration=fit.calibration),
                         tmp_path_factory.mktemp("report") / "index.html")


def test_model_fit_section_draws_a_calibration_chart_per_board_and_sorts(page, report_file, tmp_path):
    page.open(report_file.as_uri())
    fit = synthetic_fit().summary
    table = "document.querySelector('#model-fit table.model-fit')"
    assert page.js(f"{table}.tBodies[0].rows.length") == fit.height
    charts = page.js("[...document.querySelectorAll('#model-fit svg.calibration-chart')].map(s => {"
                     " const r = s.getBoundingClientRect(); return [s.id, r.width, r.height,"
                     " s.querySelectorAll('g.point').length]; })")
    assert [c[0] for c in charts] == [f"fit-{c}" for c in fit["category"]]
    assert all(w > 250 and h > 250 and points == 20 for _, w, h, points in charts)  # 10 deciles x 2
    header = f"[...{table}.tHead.rows[0].cells].find(th => th.textContent.trim() === 'Log-loss')"
    page.js(f"{header}.querySelector('button').click()")
    values = page.js(f"[...{table}.tBodies[0].rows].map(r => parseFloat(r.cells[3].dataset.value))")
    assert values == sorted(fit["log_loss"].to_list())
    page.js("document.querySelector('#model-fit a[href=\"#fit-math\"]').click()")
    assert page.js("location.hash") == "#fit-math"
    shot = page.screenshot(tmp_path / "model_fit.png")
    assert shot.stat().st_size > 50_000
    assert page.problems() == []
