"""The presentation package: read API, Markdown previews, SVG charts and the HTML report page."""

from __future__ import annotations

import datetime as dt
import html
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.labels import rank_set_label
from arena_pipeline.core.ranking import RankingOutput
from arena_pipeline.core.readside.derived import (
    QUALITY_SUMMARY_SCHEMA,
    RANK_CHANGES_SCHEMA,
    Benchmarks,
    latest_quality_results,
)
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.presentation.charts import (
    benchmark_scatter_svg,
    heatmap_svg,
    profile_chart_svg,
    rating_chart_svg,
    svg_data_uri,
)
from arena_pipeline.presentation.markdown import frame_markdown, top_n_markdown
from arena_pipeline.presentation.read import PublicationView, read_published
from arena_pipeline.presentation.report import (
    MARKER_WITHIN,
    REPORT_MARKER,
    NotAReportError,
    build_report_html,
    catch_up_report,
    page_publication,
    render_report,
    report_lag,
)
from arena_pipeline_tests.support.synthetic_published import (
    REVISION,
    synthetic_benchmarks,
    synthetic_dump,
    synthetic_outputs,
    synthetic_published,
    synthetic_quality,
)


@pytest.fixture(scope="module")
def outputs() -> RankingOutput:
    return synthetic_outputs()


def pub_of(leaderboard: pl.DataFrame, outputs: RankingOutput | None = None, **extra) -> PublicationView:
    """A PublicationView of ``leaderboard`` (with the synthetic pairwise and style frames when given)."""
    if outputs is None:
        return PublicationView(leaderboard, **extra)
    return PublicationView(leaderboard, outputs.pairwise, outputs.style_coefficients, **extra)


class _Collector(HTMLParser):
    """Collects start tags with their attributes and checks that the document nests properly."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source", "wbr",
            "rect", "line", "circle", "polygon", "path", "stop"}

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}>, open: {self.stack[-3:]}")
            return
        self.stack.pop()


def _words(html: str) -> str:
    """The text of an HTML fragment as a reader sees it: tags dropped, entities read, blanks collapsed."""
    import html as markup

    return " ".join(markup.unescape(re.sub(r"<[^>]+>", "", html)).split())


def _notes(html: str) -> list[str]:
    """The text of every ``<p class="note...">`` of an HTML fragment, in order."""
    return [_words(note) for note in re.findall(r'<p class="note[^"]*">(.*?)</p>', html, flags=re.S)]


def _facts(html: str) -> dict[str, str]:
    """The ``<dt>name</dt><dd>value</dd>`` pairs of an HTML fragment, as text."""
    return {_words(k): _words(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", html, flags=re.S)}


def _parse(page: str) -> _Collector:
    parser = _Collector()
    parser.feed(page)
    parser.close()
    return parser


# ---------------------------------------------------------------------------------------------
# top_n_markdown
# ---------------------------------------------------------------------------------------------


def md_cells(line: str) -> list[str]:
    """A Markdown table line's cells without their padding (an escaped ``\\|`` is not a separator)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_top_n_markdown_lists_the_top_rows_in_rank_order(outputs):
    text = top_n_markdown(pub_of(outputs.leaderboard), "overall", "bt", n=3)
    lines = text.splitlines()
    assert md_cells(lines[2]) == ["Rank", "UB", "Model", "Rating", "95% CI", "Battles"]
    # numbers right-aligned (``---:``), text left
    assert [c.endswith(":") for c in md_cells(lines[3])] == [True, True, False, True, False, True]
    rows = [md_cells(line) for line in lines[4:]]
    assert len(rows) == 3
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt")).sort("rank")
    first = board.row(0, named=True)
    below, above = first["rating"] - first["ci_lower"], first["ci_upper"] - first["rating"]
    assert rows[0] == ["1", str(first["rank_ub"]), first["model"], f"{first['rating']:,.1f}",
                       f"−{below:.0f}/+{above:.0f}", f"{first['n_battles']:,}"]


def test_frame_markdown_rounds_floats_and_keeps_text_as_typed():
    frame = pl.DataFrame({"category": ["overall", "1e3"], "n_matched": [12, 7],
                          "spearman": [0.12345, None], "note": [None, "a|b"]})
    lines = frame_markdown(frame).splitlines()
    assert md_cells(lines[0]) == ["category", "n_matched", "spearman", "note"]
    assert [c.endswith(":") for c in md_cells(lines[1])] == [False, True, True, False]
    assert [md_cells(line) for line in lines[2:]] == [["overall", "12", "0.123", ""], ["1e3", "7", "", "a\\|b"]]
    assert frame_markdown(frame.clear()) == "no category in common"


def test_top_n_markdown_escapes_pipes_and_rejects_unknown_boards(outputs, golden):
    text = top_n_markdown(pub_of(outputs.leaderboard), "overall", "bt", n=20)
    assert "odd\\|model" in text and "odd|model" not in text
    with pytest.raises(ValueError) as unknown:
        top_n_markdown(pub_of(outputs.leaderboard), "nope")
    golden.check("report", "a board of an unknown category", str(unknown.value))
    only_bt = outputs.leaderboard.filter(pl.col("method") == "bt")
    with pytest.raises(ValueError) as unknown:
        top_n_markdown(pub_of(only_bt), "overall", "spectral")
    golden.check("report", "a board of an unknown method", str(unknown.value))


# ---------------------------------------------------------------------------------------------
# SVG charts
# ---------------------------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def test_rating_chart_is_valid_svg_with_one_point_and_interval_per_model(outputs, golden):
    svg = rating_chart_svg(pub_of(outputs.leaderboard), "math", ("bt", "bt_style"))
    root = ET.fromstring(svg)  # well-formed XML, model names escaped
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    board = outputs.leaderboard.filter((pl.col("category") == "math") & (pl.col("method") == "bt"))
    assert len(root.findall(f".//{SVG}g[@class='series-bt']/{SVG}circle")) == board.height
    assert len(root.findall(f".//{SVG}g[@class='series-bt_style']/{SVG}polygon")) == board.height
    assert len(root.findall(f".//{SVG}polygon")) == board.height + 1  # + the legend's diamond
    # an interval (3 lines) per model and series but the reference's: an interval is of a rating's
    # difference from the reference, whose own rating is pinned
    assert len(root.findall(f".//{SVG}line[@class='ci']")) == 3 * 2 * (board.height - 1)
    reference = outputs.metadata["anchors"]["math"]
    titles = [g.find(f"{SVG}title").text for g in root.findall(f".//{SVG}g[@class='series-bt']")]
    (pinned,) = [t for t in titles if t.startswith(f"{reference} ")]
    assert pinned.endswith(f" {board.filter(pl.col('model') == reference).get_column('rank')[0]}")
    golden.check("report", "chart: the reference model's point", pinned, {reference: "<reference>"})
    assert "math" in root.find(f"{SVG}title").text.lower()
    assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_svg_data_uri_round_trips(outputs):
    import base64

    svg = rating_chart_svg(pub_of(outputs.leaderboard), "coding")
    uri = svg_data_uri(svg)
    assert uri.startswith("data:image/svg+xml;base64,")
    assert base64.b64decode(uri.split(",", 1)[1]).decode() == svg


def test_rating_chart_orders_models_by_rating_and_limits_them(outputs):
    svg = rating_chart_svg(pub_of(outputs.leaderboard), "overall", ("bt",), max_models=4)
    root = ET.fromstring(svg)
    labels = [t.find(f"{SVG}title").text for t in root.findall(f".//{SVG}text[@class='label']")]
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt")).sort("rank")
    assert labels == board.get_column("model").head(4).to_list()
    xs = [float(c.get("cx")) for c in root.findall(f".//{SVG}circle")]
    assert xs == sorted(xs, reverse=True)


def test_rating_chart_labels_provisional_models(outputs):
    """Issue 37: the provisional models the chart appends after the ranked ones are labelled '(prov.)'."""
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt")).sort("rank")
    provisional = set(board.get_column("model").tail(2))  # made provisional here
    marked = outputs.leaderboard.with_columns(provisional=pl.col("model").is_in(list(provisional)))
    root = ET.fromstring(rating_chart_svg(pub_of(marked), "overall", ("bt", "bt_style")))
    labels = [t.find(f"{SVG}title").text for t in root.findall(f".//{SVG}text[@class='label']")]
    assert provisional and len(labels) == board.height
    assert {label.removeprefix("(prov.) ") for label in labels if label.startswith("(prov.) ")} == provisional
    ranked = [m for m in board.get_column("model") if m not in provisional]
    assert labels[:len(ranked)] == ranked  # the ranked models unlabelled, first
    assert len(root.findall(f".//{SVG}g[@class='series-bt_style']/{SVG}polygon")) == board.height  # every row drawn
    assert f"(prov.): {len(provisional)} provisional models" in root.find(f"{SVG}desc").text


def test_rating_chart_draws_points_without_intervals_and_rejects_unknown(outputs):
    no_ci = outputs.leaderboard.with_columns(ci_lower=pl.lit(None, pl.Float64), ci_upper=pl.lit(None, pl.Float64))
    root = ET.fromstring(rating_chart_svg(pub_of(no_ci), "overall"))
    assert root.findall(f".//{SVG}line[@class='ci']") == [] and root.findall(f".//{SVG}circle")
    with pytest.raises(ValueError, match="unknown category"):
        rating_chart_svg(pub_of(outputs.leaderboard), "nope")
    with pytest.raises(ValueError, match="unknown method 'xx'"):
        rating_chart_svg(pub_of(outputs.leaderboard), "overall", ("xx",))


def test_heatmap_cells_are_the_row_models_win_rates(outputs):
    svg = heatmap_svg(pub_of(outputs.leaderboard, outputs), "overall", max_models=5)
    root = ET.fromstring(svg)
    cells = root.findall(f".//{SVG}g[@class='cell']")
    assert len(cells) == 5 * 4  # every off-diagonal pair met in this data
    tips = {c.find(f"{SVG}title").text: c for c in cells}
    pair = outputs.pairwise.filter(pl.col("category") == "overall").row(0, named=True)
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt"))
    top5 = set(board.sort("rank").get_column("model").head(5).to_list())
    pair = next(
        r for r in outputs.pairwise.filter(pl.col("category") == "overall").iter_rows(named=True)
        if {r["model_1"], r["model_2"]} <= top5
    )
    forward = f"{pair['model_1']} vs {pair['model_2']}: won {pair['win_rate_1']:.0%} of {pair['battles']} battles"
    backward = f"{pair['model_2']} vs {pair['model_1']}: won {1 - pair['win_rate_1']:.0%} of {pair['battles']} battles"
    assert any(t.startswith(forward) for t in tips)
    assert any(t.startswith(backward) for t in tips)
    assert heatmap_svg(pub_of(outputs.leaderboard, outputs), "nope") == ""
    # 0 models: all of them, as --top 0 means in the CLI (it drew an empty grid)
    every = ET.fromstring(heatmap_svg(pub_of(outputs.leaderboard, outputs), "overall", max_models=0))
    n = board.height
    assert n > 5 and len(every.findall(f".//{SVG}g[@class='cell']")) + len(
        every.findall(f".//{SVG}rect[@class='cell empty']")) == n * (n - 1)
    page = build_report_html(pub_of(outputs.leaderboard, outputs), heatmap_models=0)
    assert f"Pairwise win rates (all {n} models)" in page


def test_heatmap_marks_pairs_that_never_met(outputs):
    pairwise = outputs.pairwise.filter(
        ~((pl.col("model_1") == "gemini-2.5-pro") | (pl.col("model_2") == "gemini-2.5-pro"))
    )
    root = ET.fromstring(heatmap_svg(PublicationView(outputs.leaderboard, pairwise), "overall", max_models=4))
    empty = root.findall(f".//{SVG}rect[@class='cell empty']")
    assert len(empty) == 2 * 3
    assert all(e.find(f"{SVG}title").text.endswith("no battles") for e in empty)



def test_every_chart_keeps_a_name_with_markup_as_text(outputs):
    """The template escapes text by hand where autoescaping every number would be slow: a model name
    with markup stays one text in every chart (titles, labels, tooltips, data attributes), never markup."""
    odd = "<b>odd|model</b> & co"
    pub = pub_of(outputs.leaderboard, outputs, benchmarks=synthetic_benchmarks())
    scatter = synthetic_published(benchmarks=synthetic_benchmarks()).benchmark_points("overall", "bt", "reasoning")
    svgs = {"rating": rating_chart_svg(pub, "overall", ("bt", "bt_style")), "heatmap": heatmap_svg(pub, "overall"),
            "profile": profile_chart_svg(pub.profile(odd)["ratings"], odd, "p1"),
            "scatter": benchmark_scatter_svg(scatter, odd, "overall", "s3")}
    for kind, svg in svgs.items():
        root = ET.fromstring(svg)  # well-formed: no raw '<b>' anywhere
        assert not root.findall(f".//{SVG}b") and "<b>" not in svg, kind
        texts = [e.text or "" for e in root.iter()] + [v for e in root.iter() for v in e.attrib.values()]
        assert any(odd in t for t in texts), kind
    heat = ET.fromstring(svgs["heatmap"])
    assert any(t.text.startswith(f"{odd} vs ") for t in heat.iter(f"{SVG}title") if t.text)
    assert ET.fromstring(svgs["scatter"]).get("data-benchmark") == odd

# ---------------------------------------------------------------------------------------------
# rank changes, quality summary
# ---------------------------------------------------------------------------------------------


def test_rank_changes_compare_bt_and_bt_style_ranks(outputs):
    changes = pub_of(outputs.leaderboard).rank_changes()
    assert changes.schema == pl.Schema(RANK_CHANGES_SCHEMA)
    assert changes.get_column("category").unique(maintain_order=True).to_list() == ["overall", "math", "coding"]
    assert (changes.get_column("rank_change") == changes.get_column("rank_bt") - changes.get_column("rank_bt_style")).all()
    lb = outputs.leaderboard
    for r in changes.head(3).iter_rows(named=True):
        style = lb.filter((pl.col("category") == r["category"]) & (pl.col("method") == "bt_style") & (pl.col("model") == r["model"]))
        assert style.get_column("rank").item() == r["rank_bt_style"]
    assert pub_of(lb.filter(pl.col("method") != "bt_style")).rank_changes().height == 0
    assert pub_of(lb).rank_changes("math").get_column("category").unique().to_list() == ["math"]


def test_quality_summary_counts_by_table_and_severity(outputs):
    summary = PublicationView(outputs.leaderboard, quality_results=synthetic_quality()).quality_summary()
    assert summary.schema == pl.Schema(QUALITY_SUMMARY_SCHEMA)
    assert summary.to_dicts() == [
        {"table": "battles", "checks": 2, "passed": 1, "failed_errors": 0, "failed_warnings": 1},
        {"table": "messages", "checks": 1, "passed": 1, "failed_errors": 0, "failed_warnings": 0},
    ]
    no_severity = synthetic_quality().with_columns(severity=pl.lit(None, pl.String), success=pl.lit(False))
    # a failed check without a severity counts as an error
    assert PublicationView(outputs.leaderboard, quality_results=no_severity).quality_summary().get_column("failed_errors").to_list() == [2, 1]
    assert PublicationView(outputs.leaderboard).quality_summary().height == 0


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------


def test_report_page_has_every_section_per_category(outputs, tmp_path):
    out = render_report(
        PublicationView.from_output(outputs, quality_results=synthetic_quality(), dump=synthetic_dump()),
        tmp_path / "site" / "index.html", generated_at=dt.datetime(2025, 7, 2, 12, 0, tzinfo=dt.UTC),
    )
    assert out == tmp_path / "site" / "index.html"
    assert [p.name for p in out.parent.iterdir()] == ["index.html"]  # no temporary file left
    page = out.read_text(encoding="utf-8")
    doc = _parse(page)
    assert doc.errors == [] and doc.stack == []
    tags = doc.tags
    tabs = [a for t, a in tags if a.get("role") == "tab"]
    assert [t["aria-controls"] for t in tabs] == ["cat-overall", "cat-math", "cat-coding"]
    panels = [a["id"] for t, a in tags if a.get("role") == "tabpanel"]
    assert panels == ["cat-overall", "cat-math", "cat-coding"]
    for category in ("overall", "math", "coding"):
        section = page.split(f'id="cat-{category}"')[1].split("</section>")[0]
        assert 'class="sortable leaderboard' in section  # shown models, else only provisional ones
        assert 'class="chart rating-chart"' in section
        assert 'class="chart heatmap"' in section
        assert 'class="sortable rank-changes' in section  # shown models, else only provisional ones
        assert 'class="style-coefficients"' in section
    board = outputs.leaderboard.filter(pl.col("method") == "bt")
    assert page.count('<th scope="row"') >= board.height  # one row header per model and board
    assert REVISION in page and "2025-07-01 03:04 UTC" in page and "Generated 2025-07-02 12:00 UTC" in page
    assert "1 warning" in page and "winner_in_set" in page


def test_report_replaces_only_a_report_it_wrote(outputs, tmp_path, golden):
    """ARENA_REPORT equal to ARENA_WAREHOUSE had the run's report replace the warehouse (issue 38, item 2):
    the writer refuses any existing file without the page's generator tag, and leaves it as it was."""
    pub = PublicationView.from_output(outputs, quality_results=synthetic_quality(), dump=synthetic_dump())
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    before = warehouse.read_bytes()
    with pytest.raises(NotAReportError) as raised:
        render_report(pub, warehouse)
    golden.check("report", "not written over a file it did not write", raised.value.strerror)
    assert warehouse.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["warehouse.duckdb"]
    # the marker must be in the page's head: one deep inside a large file does not count
    late = tmp_path / "late.html"
    late.write_bytes(b"x" * MARKER_WITHIN + REPORT_MARKER + b'">')
    with pytest.raises(NotAReportError):
        render_report(pub, late)
    page = render_report(pub, tmp_path / "index.html")
    assert REPORT_MARKER in page.read_bytes()[:MARKER_WITHIN]
    assert render_report(pub, page, title="Again") == page  # a report it wrote is replaced
    assert "<title>Again</title>" in page.read_text(encoding="utf-8")


def _publication(publication_id: int, board_rows: int) -> dict:
    """A row of arena.publications as ``live_publication`` gives it (``rows`` as JSON text)."""
    return {"publication_id": publication_id, "revision": REVISION, "tables": {}, "settings": {},
            "rows": f'{{"leaderboard": {board_rows}, "battles": 10}}'}


def test_the_page_carries_its_publication_and_says_when_it_is_behind(outputs, tmp_path, golden):
    """A run killed after the gate's commit, or one that could not write the page, left publication N live
    and the page at N-1 with nothing to tell them apart (issue 38, item 3): the page carries its id."""
    page = tmp_path / "index.html"
    assert page_publication(page) is None
    golden.check("report", "lag: no page", report_lag(page, _publication(4, 9)))
    assert report_lag(page, None) is None  # nothing published: nothing to show
    render_report(pub_of(outputs.leaderboard, outputs, publication_id=3), page)
    assert page_publication(page) == 3
    assert report_lag(page, _publication(3, 9)) is None
    golden.check("report", "lag: an older publication", report_lag(page, _publication(4, 9)))
    # an empty board published on purpose has no page: a page left from before is behind, no page is not
    golden.check("report", "lag: the live board is empty", report_lag(page, _publication(4, 0)))
    assert report_lag(tmp_path / "none.html", _publication(4, 0)) is None
    # a page written before pages carried the id is behind; a file that is not a report never is (not replaced)
    render_report(pub_of(outputs.leaderboard, outputs), page)
    assert page_publication(page) is None
    golden.check("report", "lag: a page of an unknown publication", report_lag(page, _publication(3, 9)))
    foreign = tmp_path / "notes.html"
    foreign.write_text('<meta name="arena-publication" content="1">')
    assert page_publication(foreign) is None and report_lag(foreign, _publication(3, 9)) is None


def test_a_page_behind_the_live_publication_is_brought_up_to_it(outputs, tmp_path, golden):
    """``catch_up_report`` (the freshness sensor's): one look at the publication and the page when the page
    is current; the live publication's page written when it is behind, or the stale page removed when the
    live board is empty."""
    path = tmp_path / "w.duckdb"
    lb = outputs.leaderboard.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841 - read by DuckDB
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA arena")
        con.execute("CREATE TABLE arena.leaderboard AS SELECT * FROM lb")
        con.execute("CREATE TABLE arena.publications (publication_id BIGINT, revision VARCHAR, tables JSON, "
                    "settings JSON, rows JSON)")
        con.execute("INSERT INTO arena.publications VALUES (1, ?, '{}', '{}', ?), (2, ?, '{}', '{}', ?)",
                    [REVISION, f'{{"leaderboard": {lb.height}}}', REVISION, f'{{"leaderboard": {lb.height}}}'])
    page = tmp_path / "report" / "index.html"
    render_report(pub_of(outputs.leaderboard, outputs, publication_id=1), page)
    with connect_warehouse(str(path), read_only=True) as con:
        done = catch_up_report(con, page)
        golden.check("report", "caught up: re-rendered", done)
        assert page_publication(page) == 2 and REVISION in page.read_text(encoding="utf-8")
        written = page.stat().st_mtime_ns
        assert catch_up_report(con, page) is None and page.stat().st_mtime_ns == written  # current: untouched
    with duckdb.connect(str(path)) as con:  # publication 3: an empty board
        con.execute("DELETE FROM arena.leaderboard")
        con.execute("""INSERT INTO arena.publications VALUES (3, 'r3', '{}', '{}', '{"leaderboard": 0}')""")
    with connect_warehouse(str(path), read_only=True) as con:
        golden.check("report", "caught up: removed", catch_up_report(con, page))
        assert not page.exists() and catch_up_report(con, page) is None


def test_report_page_is_self_contained_and_escapes_names(outputs):
    page = build_report_html(pub_of(outputs.leaderboard, outputs))
    doc = _parse(page)
    assert not [t for t, a in doc.tags if t in ("link", "img", "iframe", "object", "embed")]
    assert all("src" not in a for t, a in doc.tags if t == "script")
    hrefs = [a["href"] for t, a in doc.tags if "href" in a]
    assert hrefs and all(h.startswith("#") for h in hrefs)
    assert not re.search(r"url\((?!#)", page)  # only in-document SVG references
    assert "@import" not in page
    without_ns = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http://" not in without_ns and "https://" not in without_ns
    assert "default-src 'none'" in page  # the CSP forbids any fetch
    assert "<b>odd" not in page and "&lt;b&gt;odd|model&lt;/b&gt; &amp; co" in page
    assert "No data-quality results" in page and "No dump information" in page


def test_report_takes_the_dumps_row_or_the_leaderboard_revision(outputs):
    lb = outputs.leaderboard.with_columns(dump_revision=pl.lit("local-abc123"))
    page = build_report_html(pub_of(lb, outputs))
    assert "local-abc123" in page
    page = build_report_html(pub_of(outputs.leaderboard, outputs, dump=synthetic_dump()))
    assert REVISION in page and "lmarena-ai/arena-human-preference-140k" in page


def test_report_with_bt_only_and_no_pairwise(outputs):
    lb = outputs.leaderboard.filter(pl.col("method") == "bt")
    page = build_report_html(PublicationView(lb))
    assert "this category lacks one" in page
    assert 'class="chart rating-chart"' in page
    assert page.count('class="cell empty"') > 0


def test_report_refuses_an_empty_leaderboard(outputs, tmp_path):
    with pytest.raises(ValueError, match="empty"):
        render_report(pub_of(outputs.leaderboard.clear(), outputs), tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


def test_quality_failures_table_lists_only_the_failed_checks(outputs):
    page = build_report_html(pub_of(outputs.leaderboard, outputs, quality_results=synthetic_quality()))
    failures = page.split('class="quality-failures"')[1].split("</table>")[0]
    assert "<td>winner_in_set</td><td>winner</td><td>warning</td>" in failures
    assert failures.count("<tr>") == 2 and "id_unique" not in failures  # the header row and the one failure
    passed = synthetic_quality().with_columns(success=pl.lit(True))
    assert 'class="quality-failures"' not in build_report_html(pub_of(outputs.leaderboard, outputs, quality_results=passed))


def test_latest_quality_results_keeps_the_revision_and_each_tables_last_run():
    first = synthetic_quality()
    rerun = first.filter(pl.col("table_name") == "battles").with_columns(
        checked_at=pl.lit(dt.datetime(2025, 7, 1, 4, 0)), success=pl.lit(True)
    )
    other = first.with_columns(dump_revision=pl.lit("older"))
    latest = latest_quality_results(pl.concat([first, rerun, other]), REVISION)
    assert latest.height == 3
    assert latest.filter(pl.col("table_name") == "battles").get_column("success").to_list() == [True, True]
    assert PublicationView(pl.DataFrame(), quality_results=latest).quality_summary().get_column("failed_warnings").to_list() == [0, 0]
    assert latest_quality_results(first, None).height == 3


def test_quality_results_are_those_of_the_published_versions():
    """A later run of the same revision that the gate refused adds its check results; the boards'
    quality summary still describes the versions the live publication shows."""
    published = synthetic_quality().with_columns(table_version=pl.col("table_name") + "__v1")
    refused = published.with_columns(table_version=pl.col("table_name") + "__v2", success=pl.lit(True),
                                     checked_at=pl.lit(dt.datetime(2025, 7, 2, 4, 0)))
    both = pl.concat([published, refused])
    versions = {"battles": "battles__v1", "messages": "messages__v1"}
    assert latest_quality_results(both, REVISION, versions).equals(published)
    assert not latest_quality_results(both, REVISION).get_column("success").is_in([False]).any()  # without: v2 wins
    # results that name no version (an older warehouse): the revision's latest run, as before
    unnamed = both.with_columns(table_version=pl.lit(None, pl.String))
    assert latest_quality_results(unnamed, REVISION, versions).height == refused.height


def test_read_published_reads_one_snapshot(outputs, tmp_path):
    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    lb = outputs.leaderboard.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841 - read by DuckDB
    quality = pl.concat([synthetic_quality(), synthetic_quality().with_columns(dump_revision=pl.lit("old"))])  # noqa: F841
    con.execute("CREATE SCHEMA arena")
    con.execute("CREATE TABLE arena.leaderboard AS SELECT * FROM lb")
    con.execute("CREATE TABLE arena.quality_results AS SELECT * FROM quality")
    con.close()
    con = connect_warehouse(str(path), read_only=True)
    try:
        pub = read_published(con)
    finally:
        con.close()
    assert pub.leaderboard.height == outputs.leaderboard.height
    assert pub.pairwise.height == 0 and pub.style_coefficients.height == 0
    assert pub.unrated_models.height == 0 and pub.board_status.height == 0 and pub.style_profile.height == 0
    assert pub.quality_results.height == 3  # only the leaderboard's revision
    assert pub.dump is None and pub.revision == REVISION
    assert pub.loaded.is_empty()  # no battles or quarantine table: nothing to say


def test_the_dump_section_says_where_the_input_rows_went(outputs, tmp_path):
    """Rows = battles + quarantined: the report's dump section gives both, the quarantine by rule
    (most rows first), so a reader of the boards sees what was kept out of them."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    lb = outputs.leaderboard.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841 - read by DuckDB
    con.execute("CREATE SCHEMA arena")
    con.execute("CREATE TABLE arena.leaderboard AS SELECT * FROM lb")
    con.execute("CREATE TABLE arena.battles AS SELECT range AS id, 'm1' AS model_a, 'm2' AS model_b FROM range(101)")
    con.execute("CREATE TABLE arena.quarantine AS SELECT * FROM (VALUES ('a', 'null_required'), "
                "('b', 'same_model'), ('c', 'same_model')) t(id, rule)")
    con.execute("CREATE TABLE arena.dumps AS SELECT 'r1' AS revision, 104 AS rows, 'published' AS status, "
                "now()::TIMESTAMP AS published_at")
    pub = read_published(con)
    con.close()
    assert pub.loaded.rows() == [("battles", 101), ("same_model", 2), ("null_required", 1)]
    page = build_report_html(pub)
    facts = _facts(page)
    assert (facts["Rows"], facts["Battles"], facts["Quarantined"]) == ("104", "101", "3: same_model 2, null_required 1")
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("DELETE FROM arena.quarantine")
    assert _facts(build_report_html(read_published(con)))["Quarantined"] == "none"
    con.close()


def test_top_n_markdown_rows_stay_narrow_beside_long_model_names(outputs):
    """The UI's metadata panel on a 1400 px screen: besides the model name, a rendered line takes at
    most 44 characters (the header; a row with two-digit ranks and 5-digit battles takes 43, and took
    52 with the '[lower, upper]' interval and the 'Rank (UB)' header). Measured on the cells without
    the padding tabulate adds to the source text, which a Markdown renderer does not show."""
    text = top_n_markdown(pub_of(outputs.leaderboard), "overall", "bt", n=10)
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt"))
    longest = max(len(m.replace("|", "\\|")) for m in board.get_column("model"))
    lines = text.splitlines()
    widths = [len("| " + " | ".join(md_cells(line)) + " |") for line in [lines[2], *lines[4:]]]
    assert max(widths) <= longest + 44


def test_the_reference_model_and_an_unbounded_interval_render_in_words(outputs):
    """The reference model (null bounds on a board with an interval) reads "reference" in the
    Markdown table, the report's tables and the chart's tooltip; an infinite bound (a clustered
    interval of a model seen in one session) reads "unbounded" and draws no bar."""
    reference = outputs.metadata["anchors"]["overall"]
    pub = pub_of(outputs.leaderboard)
    lines = top_n_markdown(pub, "overall", "bt", n=20).splitlines()
    row = next(md_cells(line) for line in lines if f"| {reference} " in line)
    assert row[3:5] == ["1,000.0", "reference"]
    page = build_report_html(PublicationView.from_output(outputs), generated_at=dt.datetime(2025, 7, 2, tzinfo=dt.UTC))
    cells = re.findall(rf'>{re.escape(reference)}</a></th><td class="num" data-value="1000.0">1,000.0</td>'
                       r'<td class="num" data-value="([^"]*)">([^<]*)</td>', page)
    assert cells and set(cells) == {("0.0", "reference")}
    model = outputs.leaderboard.filter(pl.col("model") != reference).get_column("model")[0]
    unbounded = outputs.leaderboard.with_columns(
        ci_lower=pl.when(pl.col("model") == model).then(float("-inf")).otherwise("ci_lower"),
        ci_upper=pl.when(pl.col("model") == model).then(float("inf")).otherwise("ci_upper"))
    pub = pub_of(unbounded)
    root = ET.fromstring(rating_chart_svg(pub, "overall"))
    group = next(g for g in root.findall(f".//{SVG}g[@class='series-bt']")
                 if g.find(f"{SVG}title").text.startswith(f"{model} "))
    assert "95% CI unbounded" in group.find(f"{SVG}title").text and group.find(f"{SVG}line") is None
    lines = top_n_markdown(pub, "overall", "bt", n=20).splitlines()
    assert next(md_cells(line) for line in lines if f"| {model} " in line)[4] == "unbounded"


def test_benchmark_scatter_places_each_model_by_score_and_rating():
    pub = synthetic_published(benchmarks=synthetic_benchmarks())
    points = pub.benchmark_points("overall", "bt", "reasoning")
    svg = benchmark_scatter_svg(points, "reasoning", "overall", "s1", "figures in words")
    root = ET.fromstring(svg)  # well-formed XML, the odd model name escaped
    assert root.get("role") == "img" and root.get("aria-labelledby") == "s1-title s1-desc"
    assert root.find(f"{SVG}desc").text.endswith("figures in words")
    groups = root.findall(f".//{SVG}g[@class='point']")
    assert sorted(g.get("data-model") for g in groups) == sorted(points.get_column("model"))
    cx = {g.get("data-model"): float(g.find(f"{SVG}circle").get("cx")) for g in groups}
    cy = {g.get("data-model"): float(g.find(f"{SVG}circle").get("cy")) for g in groups}
    by_score = points.sort("score").get_column("model").to_list()
    by_rating = points.sort("rating").get_column("model").to_list()
    assert [cx[m] for m in by_score] == sorted(cx.values())
    assert [cy[m] for m in by_rating] == sorted(cy.values(), reverse=True)  # SVG y grows downwards
    for g in groups:  # the vertical 95% bar through the point, but for the reference model
        line, circle = g.find(f"{SVG}line"), g.find(f"{SVG}circle")
        if line is None:
            assert g.get("data-model") == pub.leaderboard.filter(pl.col("ci_lower").is_null()).get_column(
                "model").unique().item()
            assert "no interval" in g.find(f"{SVG}title").text
            continue
        assert line.get("x1") == line.get("x2") == circle.get("cx")
        assert float(line.get("y2")) <= float(circle.get("cy")) <= float(line.get("y1"))
    # one model, no interval, a flat score range: still a valid chart
    one = points.head(1).with_columns(ci_lower=None, ci_upper=None)
    root = ET.fromstring(benchmark_scatter_svg(one, "x", "overall", "s2"))
    assert len(root.findall(f".//{SVG}circle")) == 1 and not root.findall(f".//{SVG}line[@class='ci']")


def test_report_benchmark_panel_only_with_the_live_comparison():
    plain = build_report_html(synthetic_published())
    assert 'id="benchmarks"' not in plain and 'class="chart benchmark-scatter"' not in plain
    page = build_report_html(synthetic_published(benchmarks=synthetic_benchmarks()))
    assert page.count('class="chart benchmark-scatter"') == 2 * 3  # two benchmarks, three categories
    assert _parse(page).errors == []  # nests properly
    failed = build_report_html(synthetic_published(benchmarks=Benchmarks(problem="scores.csv: line 3: bad")))
    assert "failed its check" in failed and "scores.csv: line 3: bad" in failed
    assert 'class="chart benchmark-scatter"' not in failed


def test_provisional_note_says_how_many_the_threshold_keeps_out_and_never_points_at_no_model(outputs, golden):
    """A tab with shown models says its provisional ones are not ranked among them, how many the
    display threshold keeps out and how to rank them all; a tab with none shown says they are
    ranked among themselves ('the models above' pointed at nothing)."""
    board = outputs.leaderboard.filter(pl.col("category") == "overall")
    mixed = board.with_columns(provisional=pl.col("rank") > 2,
                               provisional_reason=pl.lit("fewer than 301 battles"))
    none_shown = board.with_columns(provisional=pl.lit(True), provisional_reason=pl.lit("fewer than 301 battles"))
    for frame, shown in ((mixed, True), (none_shown, False)):
        page = build_report_html(pub_of(frame, outputs))
        section = page.split('id="cat-overall"')[1].split("</section>")[0]
        bt = frame.filter(pl.col("method") == "bt")
        kept_out = bt.filter("provisional").height
        note = next(n for n in _notes(section) if "keeps" in n)  # the first board's (bt)
        assert f"keeps {kept_out} of this board's {bt.height} models" in note
        golden.check("report", f"the provisional models' note ({'some' if shown else 'none'} shown)", note)
        assert "arena-pipeline rerank --display-min-battles 0" in section and "docs/refresh.md" in section
        assert ("Not ranked among the models above" in section) is shown
        assert ("Ranked among themselves" in section) is not shown


def test_rank_changes_keep_provisional_models_apart(outputs, golden):
    """Ranks among the shown models and ranks among every model are never in one column: the
    provisional models come after the shown ones and get a table of their own on the page."""
    lb = outputs.leaderboard.filter(pl.col("category") == "overall").with_columns(
        provisional=pl.col("model").is_in(outputs.leaderboard.filter(
            (pl.col("category") == "overall") & (pl.col("method") == "bt")).sort("rank").get_column("model")[1:3]
            .implode()))
    changes = pub_of(lb).rank_changes()
    flags = changes.get_column("provisional").to_list()
    assert flags == sorted(flags) and sum(flags) == 2  # shown first, then the two provisional
    page = build_report_html(pub_of(lb, outputs))
    section = page.split('id="cat-overall"')[1].split("</section>")[0]
    tables = section.split('<table class="sortable rank-changes')[1:]
    assert len(tables) == 2 and tables[1].startswith(' provisional"')
    captions = [_words(re.search(r"<caption>(.*?)</caption>", table, flags=re.S).group(1)) for table in tables]
    assert f"of {len(flags) - 2} models" in captions[0] and f"of {sum(flags)} models" in captions[1]
    golden.check("report", "rank changes: the provisional models' caption", captions[1])
    for model in changes.filter("provisional").get_column("model"):
        assert f'data-value="{model}"' in tables[1].split("</table>")[0] or model in tables[1].split("</table>")[0]
        assert model not in tables[0].split("</table>")[0]


def test_spectral_is_presented_as_a_cross_check_not_the_same_scale(outputs, golden):
    """Rank Centrality's board says, where it is shown, that it is a differently targeted, less
    efficient cross-check whose ratings are not on Bradley-Terry's scale (issue 36); bt's does not."""
    page = build_report_html(pub_of(outputs.leaderboard, outputs))
    section = page.split('id="cat-overall"')[1].split("</section>")[0]
    spectral = section.split("<summary>Rank Centrality cross-check (spectral) leaderboard")[1].split("</details>")[0]
    (note,) = _notes(spectral)
    golden.check("report", "spectral: the cross-check note", note)
    assert section.count('class="note method-note"') == 1
    assert "differently targeted and less efficient" in page


def test_the_board_says_which_statement_each_rank_set_makes(outputs, golden):
    """Issue 44: the report's board shows the rank spread (for this model) and the rank set for every
    model at once, each with what it states; the first shown row's cells are its two sets."""
    page = build_report_html(PublicationView.from_output(outputs), generated_at=dt.datetime(2025, 7, 2, tzinfo=dt.UTC))
    headings = {label: html.unescape(title) for title, label in re.findall(r'<abbr title="([^"]*)">([^<]*)</abbr>', page)
                if label in ("Rank spread", "All at once")}
    assert list(headings) == ["Rank spread", "All at once"]  # each set's column says what it states
    golden.check("report", "board: the rank sets' headings", "\n".join(f"{k}: {v}" for k, v in headings.items()))
    assert "95% for the whole table" in page and "95% for each model alone" in page
    board = outputs.leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt")
                                       & ~pl.col("provisional")).sort("rank", "model")
    first = board.row(0, named=True)
    spread = rank_set_label(first["rank_ub"], first["rank_lb"])
    joint = rank_set_label(first["rank_ub_simultaneous"], first["rank_lb_simultaneous"])
    assert (f'<td class="num" data-value="{first["rank_ub"]}">{spread}</td>'
            f'<td class="num" data-value="{first["rank_ub_simultaneous"]}">{joint}</td>') in page


def test_the_style_table_says_how_much_the_penalty_keeps(outputs):
    """Issue 44: each style coefficient is shown beside its unpenalised fit and the share kept."""
    page = build_report_html(PublicationView.from_output(outputs), generated_at=dt.datetime(2025, 7, 2, tzinfo=dt.UTC))
    row = outputs.style_coefficients.filter(pl.col("category") == "overall").row(0, named=True)
    assert 0.0 < row["share_kept"] < 1.0
    assert (f'<td class="num">{row["coefficient_unpenalised"]:,.3f}</td><td class="num">{row["share_kept"]:.1%}</td>'
            in page)
