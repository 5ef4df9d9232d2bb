"""The benchmark comparison materialized before the gate, published with the board it describes: tables, the
check, and a bad file that fails only itself."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from scipy import stats

from arena_pipeline.assets.benchmarks import benchmark_comparison
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.core.validation.benchmarks import benchmark_panel
from arena_pipeline.resources import DumpSource, ModelCatalog
from arena_pipeline_tests.support.materialize import REAL_CSV, materialized, run_sample, work_file

OLL = Path(__file__).parents[1] / "data" / "benchmarks" / "open_llm_leaderboard.csv"
FEW = ["gemma-3-27b-it", "o3-mini", "claude-3-5-sonnet-20241022"]  # the three most-voted models of the sample


def _frame(tmp_path: Path, sql: str, work: bool = False) -> pl.DataFrame:
    """``sql`` on the readers' snapshot, or with ``work`` on the pipeline's work file."""
    path = tmp_path / "warehouse.duckdb"
    with connect_warehouse(str(work_file(path) if work else path), read_only=True) as con:
        return con.execute(sql).pl()


def _published_versions(root: Path) -> dict[str, str]:
    """The live publication's versions of the benchmark tables."""
    (tables,), = _frame(root, "select tables from arena.publications order by publication_id desc limit 1").rows()
    return {t: v for t, v in json.loads(tables).items() if t.startswith("benchmark_")}


def _run_versions(root: Path, run_id: str) -> dict[str, str]:
    """The versions of the benchmark tables that run ``run_id`` wrote."""
    return dict(_frame(root, "select table_name, version from arena_versions.versions where build_id = "
                             f"'{run_id}' and table_name like 'benchmark_%'", work=True).rows())


def _scores_file(tmp_path: Path) -> Path:
    """Every model of the sample with a made-up score (name length), and a benchmark with three models;
    gemma under its Hub repo id."""
    votes = pl.read_csv(REAL_CSV, infer_schema=False)
    names = pl.concat([votes.get_column("model_a"), votes.get_column("model_b")]).unique().sort()
    table = pl.DataFrame({"model": names}).with_columns(
        pl.when(pl.col("model") == "gemma-3-27b-it").then(pl.lit("google/gemma-3-27b-it"))
        .otherwise(pl.col("model")).alias("model"),
        (pl.col("model").str.len_chars() * 3 + pl.int_range(pl.len()) % 7).cast(pl.Float64).alias("made_up"),
        pl.when(pl.col("model").is_in(FEW)).then(pl.col("model").str.len_chars()).alias("few"),
    )
    path = tmp_path / "scores.csv"
    table.write_csv(path)
    return path


def _overall_tab(tmp_path: Path) -> str:
    """The overall category's tab panel of the written report."""
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    start = page.index('<section class="category" id="cat-overall"')
    return page[start:page.index("</section>", start)]


@pytest.mark.slow
def test_scores_and_agreement_after_publication_and_a_bad_file_fails_only_itself(tmp_path, golden):
    scores = _scores_file(tmp_path)
    first = run_sample(tmp_path, model_catalog=ModelCatalog(benchmarks=str(scores)))
    assert first.success
    assert {"arena/benchmark_scores", "arena/benchmark_agreement", "publication_gate"} <= materialized(first)
    check = {e.check_name: e for e in first.get_asset_check_evaluations()}["benchmark_file_valid"]
    assert check.passed

    (publication,), = _frame(tmp_path, "select max(publication_id) from arena.publications").rows()
    read = _frame(tmp_path, "select * from arena.benchmark_scores")
    assert "publication_id" not in read.columns  # the view is the publication's: no stamp
    assert _published_versions(tmp_path) == _run_versions(tmp_path, first.run_id)
    gemma = read.filter(pl.col("model") == "google/gemma-3-27b-it").row(0, named=True)
    assert (gemma["canonical"], gemma["matched"], gemma["reason"], gemma["line"]) == (
        "gemma-3-27b-it", True, "matched through the alias table",
        2 + pl.read_csv(scores).get_column("model").to_list().index("google/gemma-3-27b-it"))

    # the overall bt row against scipy on the live leaderboard, joined independently here
    board = _frame(tmp_path, "select model, rating from arena.leaderboard where category = 'overall' and method = 'bt'")
    joined = board.join(pl.read_csv(scores).with_columns(
        pl.col("model").str.replace("google/", "")), on="model")
    row = _frame(tmp_path, "select * from arena.benchmark_agreement "
                           "where category = 'overall' and method = 'bt' and benchmark = 'made_up'").row(0, named=True)
    assert row["n_matched"] == joined.height >= 5
    x, y = joined.get_column("rating").to_numpy(), joined.get_column("made_up").to_numpy()
    assert row["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert row["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    # the report panel's data, from the published tables as a reader gets them
    panel = benchmark_panel(_frame(tmp_path, "select * from arena.leaderboard"), read,
                            _frame(tmp_path, "select * from arena.benchmark_agreement"))
    points = panel.points.filter(pl.col("category") == "overall", pl.col("benchmark") == "made_up")
    assert sorted(points.get_column("model")) == sorted(joined.get_column("model"))
    assert (points.get_column("ci_lower") <= points.get_column("rating")).all()
    assert panel.agreement.filter(pl.col("category") == "overall", pl.col("benchmark") == "made_up")[
        "spearman"][0] == row["spearman"]
    # the report, rendered once by the gate's step, shows the panel with these figures
    tab = _overall_tab(tmp_path)
    figures = re.search(r'<th scope="row" data-value="made_up">made_up</th><td class="num" data-value="(\d+)">\d+</td>'
                        r'<td class="num" data-value="[^"]+">([^<]+)</td><td class="num">\[([^,]+), ([^\]]+)\]</td>'
                        r'<td class="num" data-value="[^"]+">([^<]+)</td>', tab)
    assert figures, "no agreement row for made_up in the overall tab"
    assert int(figures[1]) == row["n_matched"]
    assert [float(v) for v in figures.groups()[1:]] == pytest.approx(
        [row["spearman"], row["spearman_lower"], row["spearman_upper"], row["kendall"]], abs=5e-4)
    scatter = re.search(r'<svg [^>]*class="chart benchmark-scatter"[^>]*data-benchmark="made_up">.*?</svg>', tab)
    assert scatter, "no made_up scatter in the overall tab"
    assert sorted(re.findall(r'<g class="point" data-model="([^"]+)">', scatter[0])) == sorted(
        escape(m) for m in joined.get_column("model"))
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert f"compared with publication {publication}:" in page and str(scores) in page

    # categories with small boards are listed, with the reason, not hidden
    small = _frame(tmp_path, "select benchmark, n_matched, note, spearman from arena.benchmark_agreement where small_set")
    categories = _frame(tmp_path, "select distinct category, method from arena.leaderboard").height
    assert small.height == categories and set(small.get_column("benchmark")) == {"few"}
    (note,) = small.get_column("note").unique().to_list()
    golden.check("benchmarks", "a small set: no coefficient", note)
    assert escape(note) in tab  # the small set, shown
    assert small.get_column("spearman").is_null().all()

    # a malformed file: the run and its publication stand; only the check fails, and the new publication
    # shows no comparison (empty versions of its own, the problem in their settings), never the old one's
    bad = tmp_path / "bad.csv"
    bad.write_text("model,benchmark,score\ngemma-3-27b-it,X,1\no3-mini,X,lots\n", encoding="utf-8")
    second = run_sample(tmp_path, model_catalog=ModelCatalog(benchmarks=str(bad)))
    assert second.success
    assert not [e for e in second.all_events if e.event_type_value == "STEP_FAILURE"]
    assert {"publication_gate", "arena/benchmark_scores", "arena/benchmark_agreement"} <= materialized(second)
    check = {e.check_name: e for e in second.get_asset_check_evaluations()}["benchmark_file_valid"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    golden.check("benchmarks", "a score that is no number: the check", check.description)
    assert check.metadata["line"].value == 3
    (latest,), = _frame(tmp_path, "select max(publication_id) from arena.publications").rows()
    assert latest == publication + 1  # the new publication is live
    assert _published_versions(tmp_path) == _run_versions(tmp_path, second.run_id)
    for table in ("benchmark_scores", "benchmark_agreement"):
        assert _frame(tmp_path, f"select count(*) as n from arena.{table}")["n"][0] == 0
    (recorded,), = _frame(tmp_path, "select settings->'$.tables.benchmark_scores.benchmarks' as b "
                                    "from arena.publications order by publication_id desc limit 1").rows()
    assert json.loads(recorded)["problem"].startswith(f"{bad}: line 3:")
    # the report says so, and shows no figure of the older publication's tables
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "The benchmark file failed its check" in page and f"{bad}: line 3:" in page
    assert 'class="chart benchmark-scatter"' not in page and 'class="benchmarks"' not in page


def test_no_benchmark_file_publishes_empty_tables_that_say_so(sample_run):
    """The session's sample run has no benchmark file (ARENA_BENCHMARKS is unset for every test): the
    publication's benchmark tables are empty versions whose settings say why, the check is not run."""
    result = sample_run.result
    assert result.success
    assert {"publication_gate", "arena/benchmark_scores", "arena/benchmark_agreement"} <= materialized(result)
    assert "benchmark_file_valid" not in {e.check_name for e in result.get_asset_check_evaluations()}
    for table in ("benchmark_scores", "benchmark_agreement"):
        assert _frame(sample_run.root, f"select count(*) as n from arena.{table}")["n"][0] == 0
    (settings,), = _frame(sample_run.root, "select settings from arena.publications").rows()
    assert {t: json.loads(settings)["tables"][t]["benchmarks"]["status"] for t in ("benchmark_scores", "benchmark_agreement")} \
        == dict.fromkeys(("benchmark_scores", "benchmark_agreement"), "not configured")
    page = sample_run.report.read_text(encoding="utf-8")
    # and the report has no panel
    assert 'id="benchmarks"' not in page and 'class="chart benchmark-scatter"' not in page


@pytest.mark.slow  # starts the fake Hub server
def test_the_setting_is_read_at_run_time_and_a_hub_id_goes_through_hf_endpoint(tmp_path, monkeypatch):
    from arena_pipeline.core.dataset.models import load_aliases
    from arena_pipeline_dev.hub_server import fake_hub_server

    # built before the variables are set: nothing is read at construction
    catalog, source = ModelCatalog(), DumpSource()
    aliases = load_aliases()
    assert catalog.read_benchmarks(aliases, source.hub_access()) is None
    monkeypatch.setenv("ARENA_BENCHMARKS", str(OLL))
    assert catalog.read_benchmarks(aliases, source.hub_access()).height == 9 * 7
    parquet = tmp_path / "contents.parquet"
    pl.read_csv(OLL, infer_schema_length=None).write_parquet(parquet)
    with fake_hub_server(tmp_path / "hub") as hub:
        hub.publish("open-llm-leaderboard/contents", "main", {"data/train-00000-of-00001.parquet": parquet})
        monkeypatch.setenv("ARENA_BENCHMARKS", "open-llm-leaderboard/contents")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
        read = catalog.read_benchmarks(aliases, source.hub_access())
        assert hub.file_gets() and read.get_column("source")[0].startswith(
            "hf://datasets/open-llm-leaderboard/contents@")
        # the dump source's own fields are the Hub settings of every Hub read, not the variables
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
        explicit = DumpSource(hf_endpoint=hub.url, cache_dir=str(tmp_path / "cache2"))
        assert catalog.read_benchmarks(aliases, explicit.hub_access()).height == read.height
    assert list((tmp_path / "cache").iterdir())  # downloaded into ARENA_CACHE_DIR
    assert list((tmp_path / "cache2").iterdir())  # and into the dump source's cache_dir


BOARD = OLL.parent / "board.csv"  # 8 models of one board, the names of long.csv after normalization


def _invoke(tmp_path: Path, benchmarks: str | None) -> list:
    """benchmark_comparison invoked directly on a leaderboard frame: what it yields, in order."""
    leaderboard = pl.read_csv(BOARD).with_columns(category=pl.lit("overall"), method=pl.lit("bt"))
    resources = {"model_catalog": ModelCatalog(benchmarks=benchmarks),
                 "dump_source": DumpSource(cache_dir=str(tmp_path / "cache"))}
    with dg.build_asset_context(resources=resources) as context:
        return list(benchmark_comparison(context, leaderboard=leaderboard))


def test_benchmark_comparison_invoked_directly_on_a_leaderboard_frame(tmp_path):
    check, scores, agreement = _invoke(tmp_path, str(OLL.parent / "long.csv"))
    assert isinstance(check, dg.AssetCheckResult) and check.passed and check.metadata["rows"].value == 28
    assert [scores.output_name, agreement.output_name] == ["benchmark_scores", "benchmark_agreement"]
    # the settings the gate compares: one record, the alias hash inside it (not a top-level setting)
    assert scores.value.settings == agreement.value.settings and list(scores.value.settings) == ["benchmarks"]
    assert "aliases_sha256" in scores.value.settings["benchmarks"]
    table = scores.value.table
    assert table.filter(pl.col("matched")).get_column("canonical").n_unique() == 8
    assert table.filter(~pl.col("matched")).get_column("model").to_list() == ["some-lab/a-model-we-never-saw"]
    assert scores.metadata["matched_models"].value == 8
    rows = {r["benchmark"]: r for r in agreement.value.table.iter_rows(named=True)}
    assert rows["monotone"]["spearman"] == pytest.approx(1.0) and rows["reversed"]["spearman"] == pytest.approx(-1.0)
    assert rows["tiny"]["spearman"] is None and rows["tiny"]["small_set"]


def test_benchmark_comparison_without_a_usable_file_yields_empty_versions_that_say_why(tmp_path):
    # no file configured: no check, empty tables, the status recorded
    scores, agreement = _invoke(tmp_path, None)
    assert scores.value.table.is_empty() and agreement.value.table.is_empty()
    assert scores.value.settings["benchmarks"]["status"] == "not configured"
    # an unusable file: the check fails (an error, with the line), the tables are empty, the problem recorded
    bad = tmp_path / "bad.csv"
    bad.write_text("model,benchmark,score\ngemma-3-27b-it,X,1\no3-mini,X,lots\n", encoding="utf-8")
    check, scores, agreement = _invoke(tmp_path, str(bad))
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR and check.metadata["line"].value == 3
    assert scores.value.table.is_empty() and agreement.value.table.is_empty()
    assert agreement.value.settings["benchmarks"]["problem"].startswith(f"{bad}: line 3:")
