"""The HTML report in a real headless Chromium: it renders, sorts, switches tabs, logs no error
and fetches nothing but its own file.

Chromium is driven by ``support/browser.py`` through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON), so no websocket client, driver or browser download is
needed: only Debian's ``chromium`` package. The browser runs in its own process group, is
asked to close over the protocol, and is killed by that group id if it does not exit.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.core.labels import rank_label
from arena_pipeline.presentation.report import render_report
from arena_pipeline_tests.support.browser import CHROMIUM, DevToolsPipe, Page
from arena_pipeline_tests.support.synthetic_published import (
    CHAMPION,
    synthetic_benchmarks,
    synthetic_outputs,
    synthetic_published,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install -y chromium); CI installs it",
    ),
]


@pytest.fixture(scope="module")
def report_file(tmp_path_factory) -> Path:
    return render_report(synthetic_published(), tmp_path_factory.mktemp("report") / "index.html")


@pytest.fixture
def page(tmp_path):
    browser = DevToolsPipe(CHROMIUM, tmp_path / "profile")
    try:
        yield Page(browser)
    finally:
        browser.close()


#: What the page shows, read in the browser: the tabs' labels, which panels are hidden
TAB_LABELS = "[...document.querySelectorAll('[role=tab]')].map(t => t.textContent)"
PANELS_HIDDEN = "[...document.querySelectorAll('[role=tabpanel]')].map(p => p.hidden)"


def _count(panel: str, selector: str) -> str:
    """The expression counting the elements of ``panel`` that ``selector`` finds."""
    return f"{panel}.querySelectorAll({selector!r}).length"


def _board(category: str, method: str = "bt") -> pl.DataFrame:
    lb = synthetic_outputs().leaderboard
    return lb.filter((pl.col("category") == category) & (pl.col("method") == method)).sort("rank")


def test_report_renders_offline_without_errors(page, report_file, tmp_path):
    page.open(report_file.as_uri())

    # tabs: built by the script, one per category, only the first panel visible
    assert page.js("document.getElementById('category-tabs').hidden") is False
    assert page.js(TAB_LABELS) == ["Overall", "Math", "Coding"]
    assert page.js(PANELS_HIDDEN) == [False, True, True]

    # the visible panel: leaderboard rows, one chart point per model, a full heatmap
    board = _board("overall")
    panel = "document.getElementById('cat-overall')"
    assert page.js(f"{panel}.querySelectorAll('table.leaderboard')[0].tBodies[0].rows.length") == board.height
    assert page.js(_count(panel, "svg.rating-chart g.series-bt circle")) == board.height
    assert page.js(_count(panel, "svg.heatmap g.cell")) == 9 * 8
    size = page.js(f"(() => {{ const r = {panel}.querySelector('svg.rating-chart').getBoundingClientRect();"
                   " return [r.width, r.height]; })()")
    assert size[0] > 500 and size[1] > 150
    shown_models = page.js(
        f"[...{panel}.querySelector('table.leaderboard').tBodies[0].rows].map(r => r.cells[4].textContent)")
    assert shown_models == board.get_column("model").to_list()  # escaped name shown verbatim
    above = page.js(f"[...{panel}.querySelector('table.leaderboard').tBodies[0].rows].map(r => r.cells[3].textContent)")
    assert above == [str(n) if n is not None else "–" for n in board.get_column("significantly_above").to_list()]

    screenshot = page.screenshot(tmp_path / "report.png")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 50_000
    print(f"screenshot: {screenshot}")

    assert page.problems() == []
    urls = page.requested_urls()
    assert urls and all(u.startswith("file://") for u in urls), urls


def test_sorting_and_tab_switching(page, report_file):
    page.open(report_file.as_uri())
    table = "document.querySelector('#cat-overall table.leaderboard')"
    ratings = f"[...{table}.tBodies[0].rows].map(r => parseFloat(r.cells[5].dataset.value))"
    header = f"[...{table}.tHead.rows[0].cells].find(th => th.textContent.trim() === '{{}}')"

    page.js(f"{header.format('Rating')}.querySelector('button').click()")
    values = page.js(ratings)
    assert values == sorted(values)
    assert page.js(f"{header.format('Rating')}.getAttribute('aria-sort')") == "ascending"
    assert page.js(f"{header.format('Rank')}.hasAttribute('aria-sort')") is False  # old mark gone
    page.js(f"{header.format('Rating')}.querySelector('button').click()")
    assert page.js(ratings) == sorted(values, reverse=True)
    page.js(f"{header.format('Model')}.querySelector('button').click()")
    models = page.js(f"[...{table}.tBodies[0].rows].map(r => r.cells[4].textContent)")
    assert models == sorted(models, key=str.lower)

    page.js("document.getElementById('tab-math').click()")
    assert page.js(PANELS_HIDDEN) == [True, False, True]
    assert page.js("document.getElementById('tab-math').getAttribute('aria-selected')") == "true"
    assert page.js("location.hash") == "#cat-math"
    page.js("document.getElementById('tab-math').dispatchEvent("
            "new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}))")
    assert page.js("document.activeElement.id") == "tab-coding"
    assert page.js("document.getElementById('cat-coding').hidden") is False
    math_rows = page.js("document.querySelector('#cat-math table.leaderboard').tBodies[0].rows.length")
    assert math_rows == _board("math").height
    assert page.problems() == []


def test_without_javascript_every_category_is_shown(page, report_file):
    page.send("Emulation.setScriptExecutionDisabled", {"value": True})
    page.open(report_file.as_uri())
    page.send("Emulation.setScriptExecutionDisabled", {"value": False})  # to query the DOM
    assert page.js("document.getElementById('category-tabs').hidden") is True
    assert page.js(PANELS_HIDDEN) == [False, False, False]


def _open_panel(page, link: str) -> dict:
    """Click a model link and return what the open panel shows."""
    page.js(f"{link}.click()")
    return page.js("""(() => {
      const open = [...document.querySelectorAll('.model-panel')].filter(p => getComputedStyle(p).display !== 'none');
      const p = open[0];
      const rows = sel => [...p.querySelectorAll(sel + ' tbody tr')].map(r => [...r.cells].map(c => c.textContent));
      return {count: open.length, fixed: getComputedStyle(p).position, title: p.querySelector('h3').textContent,
              focused: document.activeElement === p.querySelector('h3'),
              ratings: rows('table.model-ratings'), opponents: rows('table.opponents'), style: rows('table.style-profile'),
              chart: p.querySelectorAll('svg.profile-chart g.series-bt circle').length};
    })()""")


def test_model_panel_opens_from_any_board_with_the_models_numbers(page, report_file):
    page.open(report_file.as_uri())
    model = "gpt-4.1-2025-04-14"
    # closed until asked for
    closed = "[...document.querySelectorAll('.model-panel')].every(p => getComputedStyle(p).display === 'none')"
    assert page.js(closed)
    link = (f"[...document.querySelectorAll('#cat-overall table.leaderboard a.model-link')]"
            f".find(a => a.textContent === '{model}')")
    shown = _open_panel(page, link)
    assert shown["count"] == 1 and shown["fixed"] == "fixed" and shown["title"] == model and shown["focused"]
    lb = synthetic_outputs().leaderboard.filter((pl.col("model") == model) & (pl.col("method") == "bt"))
    assert [r[0] for r in shown["ratings"]] == ["Overall", "Math", "Coding"]
    for cells, row in zip(shown["ratings"], lb.iter_rows(named=True), strict=True):
        assert cells[1] == rank_label(row["rank"], row["provisional"]) and cells[2] == f"{row['rating']:,.1f}"
        assert cells[3] == f"+{row['ci_upper'] - row['rating']:.1f} / −{row['rating'] - row['ci_lower']:.1f}"
        above = row["significantly_above"]
        assert cells[4] == (f"{above} model{'' if above == 1 else 's'}" if above is not None else "–")
        assert cells[5] == f"{row['n_battles']:,}"
    assert shown["chart"] == 3  # one point per category
    pairs = synthetic_outputs().pairwise.filter(pl.col("category") == "overall")
    opponents = {cells[0]: cells for cells in shown["opponents"]}
    assert len(opponents) == 9  # 8 rated models and the unrated champion
    for r in pairs.filter((pl.col("model_1") == model) | (pl.col("model_2") == model)).iter_rows(named=True):
        first = r["model_1"] == model
        other, rate = (r["model_2"], r["win_rate_1"]) if first else (r["model_1"], 1 - r["win_rate_1"])
        wins, losses = (r["wins_1"], r["wins_2"]) if first else (r["wins_2"], r["wins_1"])
        cells = opponents[other]
        assert cells[1] == f"{r['battles']:,}" and cells[2] == f"{wins} / {losses} / {r['ties'] + r['both_bad']}"
        assert cells[3] == f"{rate:.1%}"
    assert [c[0] for c in shown["style"]] == ["Answer length (tokens)", "Markdown headers", "List items", "Bold spans"]

    # Escape closes it and gives the focus back to the link
    page.js("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}))")
    assert page.js("document.querySelectorAll('.model-panel.open').length") == 0
    assert page.js(f"document.activeElement === {link}")

    # the same panel from another tab's board (math: provisional models only)
    page.js("document.getElementById('tab-math').click()")
    other = (f"[...document.querySelectorAll('#cat-math table.leaderboard a.model-link')]"
             f".find(a => a.textContent === '{model}')")
    again = _open_panel(page, other)
    assert again["title"] == model and again["ratings"] == shown["ratings"]
    page.js("document.querySelector('.model-panel.open .close').click()")
    assert page.js("document.querySelectorAll('.model-panel.open').length") == 0
    assert page.problems() == []


def test_unrated_models_and_categories_without_a_board_are_listed(page, report_file, golden):
    page.open(report_file.as_uri())
    unrated = page.js("[...document.querySelectorAll('#unrated table.unrated tbody tr')]"
                      ".map(r => [...r.cells].map(c => c.textContent))")
    assert [row[:4] for row in unrated] == [["Overall", CHAMPION, "24", "24 / 0 / 0"]]
    golden.check("report", "unrated: only wins", unrated[0][4])
    status = synthetic_outputs().board_status.filter(pl.col("status") != "board")
    rows = page.js("[...document.querySelectorAll('#no-board table.no-board tbody tr')]"
                   ".map(r => [...r.cells].map(c => c.textContent))")
    assert len(rows) == status.height == 19
    by_name = {r[0]: r for r in rows}
    assert by_name["Math"][1:4] == ["no board", "622", "9"] and by_name["No refusal"][1:4] == ["unavailable", "0", "0"]
    golden.check("report", "no board: its reasons", "\n".join(f"{r[0]}: {r[4]}" for r in rows))
    # both are outside the tab panels: visible whichever tab is selected
    assert page.js("document.getElementById('unrated').getBoundingClientRect().height") > 50
    assert page.js("document.getElementById('no-board').getBoundingClientRect().height") > 50
    # the header links to the explanation
    link = "document.querySelector('header.page a[href=\"#no-board\"]')"
    assert page.js(f"{link} !== null")
    assert page.problems() == []


@pytest.fixture(scope="module")
def benchmark_report(tmp_path_factory) -> Path:
    pub = synthetic_published(benchmarks=synthetic_benchmarks())
    return render_report(pub, tmp_path_factory.mktemp("bench-report") / "index.html")


def _coef(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def test_benchmark_panel_scatter_and_agreement_figures(page, benchmark_report, tmp_path, golden):
    page.open(benchmark_report.as_uri())
    bench = synthetic_benchmarks()
    for category, visible in (("overall", True), ("math", False)):
        if not visible:
            page.js(f"document.getElementById('tab-{category}').click()")
        panel = f"document.getElementById('benchmarks-{category}')"
        assert page.js(f"{panel}.getBoundingClientRect().height") > 300
        # the agreement figures are arena.benchmark_agreement's, row by row
        rows = page.js(f"[...{panel}.querySelectorAll('table.benchmark-agreement tbody tr')]"
                       ".map(r => [...r.cells].map(c => c.textContent))")
        expected = bench.agreement.filter((pl.col("category") == category) & (pl.col("method") == "bt"))
        assert [r[0] for r in rows] == expected.get_column("benchmark").to_list() == ["reasoning", "tiny"]
        for cells, row in zip(rows, expected.iter_rows(named=True), strict=True):
            assert cells[1] == str(row["n_matched"])
            assert cells[2] == _coef(row["spearman"]) and cells[4] == _coef(row["kendall"])
            if row["spearman"] is not None:
                assert cells[3] == f"[{_coef(row['spearman_lower'])}, {_coef(row['spearman_upper'])}]"
                assert cells[5] == f"[{_coef(row['kendall_lower'])}, {_coef(row['kendall_upper'])}]"
            else:
                assert cells[6] == f"small set {row['note']}"
            for d in row["disagreements"]:
                assert f"{d['model']} ({d['our_rank']} here, {d['benchmark_rank']} there)" in cells[7]
        # one scatter per benchmark, one point per matched model, placed by score (x) and rating (y)
        shown = page.js(f"""[...{panel}.querySelectorAll('svg.benchmark-scatter')].map(svg => ({{
            benchmark: svg.dataset.benchmark, width: svg.getBoundingClientRect().width,
            label: [...svg.getAttribute('aria-labelledby').split(' ')].map(i => document.getElementById(i).textContent),
            points: [...svg.querySelectorAll('g.point')].map(g => {{
              const c = g.querySelector('circle').getBoundingClientRect(), l = g.querySelector('line.ci'),
                    bar = l ? l.getBoundingClientRect() : null;
              return {{model: g.dataset.model, title: g.querySelector('title').textContent,
                       x: c.x + c.width / 2, y: c.y + c.height / 2,
                       top: bar ? bar.top : null, bottom: bar ? bar.bottom : null}}; }})}}))""")
        assert [s["benchmark"] for s in shown] == ["reasoning", "tiny"]
        board = synthetic_outputs().leaderboard.filter(
            (pl.col("category") == category) & (pl.col("method") == "bt"))
        for svg, row in zip(shown, expected.iter_rows(named=True), strict=True):
            assert svg["width"] > 300
            assert svg["label"][0] == f"Rating against {svg['benchmark']}, {category.title()}"
            matched = bench.scores.filter(pl.col("matched") & (pl.col("benchmark") == svg["benchmark"])).join(
                board, left_on="canonical", right_on="model")
            assert len(svg["points"]) == matched.height == row["n_matched"]
            by_model = {p["model"]: p for p in svg["points"]}
            assert set(by_model) == set(matched.get_column("canonical"))
            for m in matched.iter_rows(named=True):
                p = by_model[m["canonical"]]
                assert p["title"].startswith(f"{m['canonical']}: {svg['benchmark']} ")
                assert f"rating {m['rating']:,.1f}" in p["title"]
                if m["ci_lower"] is None:  # the board's reference: its rating is the anchor, no interval
                    assert p["top"] is None and "no interval" in p["title"], p
                else:
                    assert p["top"] <= p["y"] <= p["bottom"]  # the interval bar spans the point
            ordered = matched.sort("score")
            xs = [by_model[m]["x"] for m in ordered.get_column("canonical")]
            assert xs == sorted(xs)
            ordered = matched.sort("rating")
            ys = [by_model[m]["y"] for m in ordered.get_column("canonical")]
            assert ys == sorted(ys, reverse=True)  # higher rating, higher on the page
    # the source and matching section, outside the tabs
    section = " ".join(page.js("document.getElementById('benchmarks').textContent").split())
    golden.check("report", "benchmarks: the source and matching", section)
    assert page.problems() == []
    urls = page.requested_urls()
    assert urls and all(u.startswith("file://") for u in urls), urls
    page.js("document.getElementById('tab-overall').click()")
    page.js("document.getElementById('benchmarks-overall').scrollIntoView()")
    print(f"screenshot: {page.screenshot(tmp_path / 'benchmarks.png')}")
