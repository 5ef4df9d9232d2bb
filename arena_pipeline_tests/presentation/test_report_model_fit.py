"""The report's goodness-of-fit section: arena.model_fit read back, its table and calibration charts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import lru_cache

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.ranking import RankingConfig
from arena_pipeline.core.ranking.model_fit import ModelFitOutput, compute_model_fit
from arena_pipeline.presentation.charts import calibration_chart_svg
from arena_pipeline.presentation.read import read_published
from arena_pipeline.presentation.report import build_report_html
from arena_pipeline_tests.support.synthetic_published import (
    synthetic_battles,
    synthetic_categories,
    synthetic_outputs,
    synthetic_published,
    with_champion,
)

SVG = "{http://www.w3.org/2000/svg}"


@lru_cache(maxsize=1)
def synthetic_fit() -> ModelFitOutput:
    """compute_model_fit of the synthetic boards, with the settings they were ranked with."""
    battles = with_champion(synthetic_battles())
    return compute_model_fit(battles, synthetic_categories(battles), synthetic_outputs().leaderboard,
                             RankingConfig(bootstrap_rounds=20, min_battles=20))


@pytest.fixture(scope="module")
def page() -> str:
    fit = synthetic_fit()
    return build_report_html(synthetic_published(model_fit=fit.summary, model_fit_calibration=fit.calibration))


def test_calibration_chart_draws_each_decile_of_both_predictors_and_the_diagonal():
    calibration = synthetic_fit().calibration.filter(pl.col("category") == "overall")
    root = ET.fromstring(calibration_chart_svg(calibration, "overall", "fit-overall"))
    assert root.get("id") == "fit-overall" and "Overall" in root.find(f"{SVG}title").text
    for predictor, label in (("bt", "Bradley-Terry"), ("win_rate", "Win rates")):
        points = root.findall(f".//{SVG}g[@class='point series-{predictor}']")
        rows = calibration.filter(pl.col("predictor") == predictor).sort("decile")
        assert len(points) == rows.height == 10
        first = rows.row(0, named=True)
        title = points[0].find(f"{SVG}title").text
        assert title.startswith(f"{label}, decile 1: predicted {first['predicted'] * 100:.1f}%")
        assert f"{first['battles']:,} battles" in title
        assert len(points[0].findall(f"{SVG}line")) == 1  # the observed rate's interval
    (diagonal,) = root.findall(f".//{SVG}line[@class='perfect']")
    x1, y1, x2, y2 = (float(diagonal.get(k)) for k in ("x1", "y1", "x2", "y2"))
    assert x2 - x1 == pytest.approx(y1 - y2, abs=0.2)  # 45 degrees: one scale on both axes
    assert calibration_chart_svg(calibration.clear(), "overall", "x") == ""


def test_report_section_has_a_row_and_a_chart_per_board(page):
    section = page[page.index('<section id="model-fit"'):]
    section = section[:section.index("</section>") + len("</section>")]
    fit = synthetic_fit().summary
    assert fit["category"].to_list() == ["overall", "math", "coding"]
    for r in fit.iter_rows(named=True):
        assert f'<a href="#fit-{r["category"]}">' in section
        assert f'id="fit-{r["category"]}"' in section
        assert f'{r["log_loss"]:.4f}' in section and f'{r["log_loss_baseline"]:.4f}' in section
    assert section.count('<figure class="calibration-figure">') == 3
    assert "ties: half" in section and "5 folds" in section
    for svg in section.split("<svg ")[1:]:
        ET.fromstring("<svg " + svg[:svg.index("</svg>") + len("</svg>")])  # well-formed
    assert '<section id="model-fit"' not in build_report_html(synthetic_published())  # no table: no section


def test_read_published_reads_the_model_fit_tables_back(tmp_path):
    fit = synthetic_fit()
    summary, calibration, leaderboard = fit.summary, fit.calibration, synthetic_outputs().leaderboard  # noqa: F841
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute("CREATE SCHEMA arena; CREATE TABLE arena.leaderboard AS SELECT * FROM leaderboard; "
                    "CREATE TABLE arena.model_fit AS SELECT * FROM summary; "
                    "CREATE TABLE arena.model_fit_calibration AS SELECT * FROM calibration")
        pub = read_published(con, style=False)
    assert pub.fit_summary().equals(summary)
    assert pub.calibration("math").equals(calibration.filter(pl.col("category") == "math").sort("predictor", "decile"))
    with duckdb.connect(str(tmp_path / "old.duckdb")) as con:  # a warehouse from before the tables
        con.execute("CREATE SCHEMA arena; CREATE TABLE arena.leaderboard AS SELECT * FROM leaderboard")
        assert read_published(con, style=False).model_fit.is_empty()
