"""Benchmark scores: the three layouts, name matching, agreement figures, the small-set rule, bad files."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from arena_pipeline.core.dataset.models import load_aliases
from arena_pipeline.core.validation.benchmarks import (
    BENCHMARK_AGREEMENT_SCHEMA,
    BENCHMARK_SCORES_SCHEMA,
    MAX_ABS_SCORE,
    OLL_BENCHMARKS,
    PANEL_POINTS_SCHEMA,
    READ_SCHEMA,
    BenchmarkFormatError,
    benchmark_agreement,
    benchmark_panel,
    hub_location,
    match_scores,
    read_benchmark_file,
    read_benchmarks,
    resampled_coefficients,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "benchmarks"
# two adjacent swaps among 8 models (ranks 2 1 3 4 5 6 8 7): 2 discordant pairs of 28, sum d^2 = 4
SWAPPED_KENDALL = (28 - 2 * 2) / 28
SWAPPED_SPEARMAN = 1 - 6 * 4 / (8 * (8**2 - 1))
#: benchmark names of the same constructed columns in each layout
COLUMNS = {
    "long": {"monotone": "monotone", "reversed": "reversed", "swapped": "swapped"},
    "oll": {"monotone": "IFEval", "reversed": "BBH", "swapped": "MATH Lvl 5"},
}


@pytest.fixture(scope="module")
def aliases() -> pl.DataFrame:
    return load_aliases()


@pytest.fixture(scope="module")
def board() -> pl.DataFrame:
    """The fixture's published board: 8 models, one category, one method."""
    return pl.read_csv(DATA / "board.csv").with_columns(
        category=pl.lit("overall"), method=pl.lit("bt"))


def oll_parquet(tmp_path: Path) -> Path:
    """The Open LLM Leaderboard fixture as parquet with the dataset's dtypes (floats, nulls, bools)."""
    frame = pl.read_csv(DATA / "open_llm_leaderboard.csv", infer_schema_length=None)
    path = tmp_path / "contents.parquet"
    frame.write_parquet(path)
    return path


def layouts(tmp_path: Path) -> dict[str, tuple[Path, dict[str, str]]]:
    return {
        "long": (DATA / "long.csv", COLUMNS["long"]),
        "wide": (DATA / "wide.csv", COLUMNS["long"]),
        "oll_csv": (DATA / "open_llm_leaderboard.csv", COLUMNS["oll"]),
        "oll_parquet": (oll_parquet(tmp_path), COLUMNS["oll"]),
    }


def agreement_for(path: Path, board: pl.DataFrame, aliases: pl.DataFrame, **kw) -> pl.DataFrame:
    scores = match_scores(read_benchmark_file(path, aliases), board.get_column("model"))
    return benchmark_agreement(board, scores, **kw)


@pytest.mark.parametrize("layout", ["long", "wide", "oll_csv", "oll_parquet"])
def test_each_layout_gives_the_constructed_coefficients(layout, tmp_path, board, aliases):
    path, names = layouts(tmp_path)[layout]
    table = agreement_for(path, board, aliases)
    assert table.schema == pl.Schema(BENCHMARK_AGREEMENT_SCHEMA)
    rows = {r["benchmark"]: r for r in table.iter_rows(named=True)}
    expected = {"monotone": (1.0, 1.0), "reversed": (-1.0, -1.0),
                "swapped": (SWAPPED_SPEARMAN, SWAPPED_KENDALL)}
    for kind, (spearman, kendall) in expected.items():
        row = rows[names[kind]]
        assert row["n_matched"] == 8 and not row["small_set"] and row["note"] is None
        assert row["spearman"] == pytest.approx(spearman, abs=1e-12)
        assert row["kendall"] == pytest.approx(kendall, abs=1e-12)
        for name in ("spearman", "kendall"):  # scipy's point estimate may sit 1 ulp off
            assert row[f"{name}_lower"] - 1e-12 <= row[name] <= row[f"{name}_upper"] + 1e-12
        assert row["bootstrap_rounds"] == 1000
    # a perfect order stays perfect in every resample (ties in both sides count as neither)
    monotone = rows[names["monotone"]]
    assert (monotone["kendall_lower"], monotone["kendall_upper"]) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert monotone["disagreements"] == []  # nothing disagrees
    reversed_ = rows[names["reversed"]]["disagreements"]
    assert [(d["model"], d["rank_difference"]) for d in reversed_] == [
        ("command-a-03-2025", 7), ("deepseek-r1-0528", -7), ("kimi-k2-0711-preview", -5)]
    # the disagreeing models of the swapped benchmark: the four moved by one place, ties by name
    swapped = rows[names["swapped"]]["disagreements"]
    assert [(d["model"], d["our_rank"], d["benchmark_rank"], d["rank_difference"]) for d in swapped] == [
        ("command-a-03-2025", 8, 7, 1), ("deepseek-r1-0528", 1, 2, -1), ("kimi-k2-0711-preview", 2, 1, 1)]


def test_open_llm_leaderboard_columns_constant_and_missing_scores(tmp_path, board, aliases):
    read = read_benchmark_file(oll_parquet(tmp_path), aliases)
    assert read.schema == pl.Schema(READ_SCHEMA)
    assert set(read.get_column("benchmark")) == set(OLL_BENCHMARKS.values())
    table = agreement_for(oll_parquet(tmp_path), board, aliases)
    rows = {r["benchmark"]: r for r in table.iter_rows(named=True)}
    # GPQA and MMLU-PRO are constant over the matched models: no coefficient, and it says why
    for name in ("GPQA", "MMLU-PRO"):
        assert rows[name]["n_matched"] == 8 and rows[name]["spearman"] is None
        assert "constant" in rows[name]["note"]
    # MUSR: DeepSeek-V3's score is missing (a null in the dataset); the seven others are monotone
    assert rows["MUSR"]["n_matched"] == 7 and rows["MUSR"]["spearman"] == pytest.approx(1.0)
    scores = match_scores(read, board.get_column("model"))
    missing = scores.filter(pl.col("benchmark") == "MUSR", ~pl.col("matched"))
    assert sorted(missing.get_column("reason").to_list()) == ["no score", "not on our published leaderboard"]
    # the Average column against scipy directly
    joined = board.join(scores.filter(pl.col("matched"), pl.col("benchmark") == "Average")
                        .select(pl.col("canonical").alias("model"), "score"), on="model")
    x, y = joined.get_column("rating").to_numpy(), joined.get_column("score").to_numpy()
    assert rows["Average"]["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert rows["Average"]["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_names_are_matched_through_normalization_and_aliases(board, aliases):
    scores = match_scores(read_benchmark_file(DATA / "long.csv", aliases), board.get_column("model"))
    assert scores.schema == pl.Schema(BENCHMARK_SCORES_SCHEMA)
    monotone = {r["model"]: r for r in scores.filter(pl.col("benchmark") == "monotone").iter_rows(named=True)}
    assert monotone["google/gemma-3-27b-it"]["canonical"] == "gemma-3-27b-it"
    assert monotone["google/gemma-3-27b-it"]["reason"] == "matched through the alias table"
    assert monotone["Kimi K2 0711 Preview"]["canonical"] == "kimi-k2-0711-preview"
    assert monotone["Kimi K2 0711 Preview"]["reason"] == "matched by name"
    unknown = monotone["some-lab/a-model-we-never-saw"]
    assert not unknown["matched"] and unknown["reason"] == "not on our published leaderboard"
    assert (unknown["source"], unknown["line"]) == (str(DATA / "long.csv"), 10)


def test_open_llm_leaderboard_repo_names_match_the_packaged_aliases(board, aliases):
    scores = match_scores(read_benchmark_file(DATA / "open_llm_leaderboard.csv", aliases),
                          board.get_column("model"))
    ifeval = scores.filter(pl.col("benchmark") == "IFEval")
    assert ifeval.filter(pl.col("matched")).height == 8
    assert dict(zip(ifeval.get_column("model"), ifeval.get_column("canonical"), strict=True))[
        "moonshotai/Kimi-K2-Instruct"] == "kimi-k2-0711-preview"


def test_two_names_of_one_model_are_ambiguous_and_neither_is_used(tmp_path, board, aliases, golden):
    path = tmp_path / "twice.csv"
    path.write_text("model,benchmark,score\ngemma-3-27b-it,X,1\ngoogle/gemma-3-27b-it,X,2\n"
                    "deepseek-v3-0324,X,3\n", encoding="utf-8")
    scores = match_scores(read_benchmark_file(path, aliases), board.get_column("model"))
    reasons = scores.get_column("reason").to_list()
    assert reasons[0] == reasons[1]
    golden.check("benchmarks", "two names of one model", reasons[0])
    assert reasons[2] == "matched by name"
    assert scores.get_column("matched").to_list() == [False, False, True]


def test_open_llm_leaderboard_repeated_evaluations_are_ambiguous(tmp_path, board, aliases):
    frame = pl.read_csv(DATA / "open_llm_leaderboard.csv", infer_schema_length=None)
    twice = pl.concat([frame, frame.head(1).with_columns(pl.lit("float16").alias("Precision"))])
    path = tmp_path / "twice.parquet"
    twice.write_parquet(path)
    scores = match_scores(read_benchmark_file(path, aliases), board.get_column("model"))
    r1 = scores.filter(pl.col("canonical") == "deepseek-r1-0528", pl.col("benchmark") == "IFEval")
    assert r1.height == 2 and not r1.get_column("matched").any()
    assert r1.get_column("reason").str.starts_with("ambiguous: 2 rows").all()


def test_small_sets_give_no_coefficient_and_are_reported(board, aliases, golden):
    table = agreement_for(DATA / "long.csv", board, aliases)
    tiny = table.filter(pl.col("benchmark") == "tiny").row(0, named=True)
    assert tiny["n_matched"] == 3 and tiny["small_set"]
    golden.check("benchmarks", "a small set: no coefficient", tiny["note"])
    assert tiny["spearman"] is None and tiny["kendall"] is None and tiny["spearman_lower"] is None
    assert tiny["disagreements"] == []  # the three agree; the rows are still in the table
    # exactly the threshold computes; one less does not
    scores = match_scores(read_benchmark_file(DATA / "long.csv", aliases), board.get_column("model"))
    five = board.head(5)
    assert benchmark_agreement(five, scores).filter(pl.col("benchmark") == "monotone")["spearman"][0] == pytest.approx(1.0)
    four = benchmark_agreement(board.head(4), scores).filter(pl.col("benchmark") == "monotone").row(0, named=True)
    assert four["small_set"] and four["spearman"] is None and four["n_matched"] == 4
    # a benchmark nobody matched still gets its row
    none = benchmark_agreement(board.filter(pl.col("model") == "gemma-3-27b-it"), scores)
    assert none.filter(pl.col("benchmark") == "tiny")["note"][0] == "no matched model: no coefficient"


def test_rows_per_category_and_method(board, aliases):
    two = pl.concat([board, board.with_columns(category=pl.lit("math"), rating=-pl.col("rating")),
                     board.with_columns(method=pl.lit("bt_style"))])
    table = agreement_for(DATA / "wide.csv", two, aliases)
    assert table.select("category", "method").unique(maintain_order=True).rows() == [
        ("overall", "bt"), ("overall", "bt_style"), ("math", "bt")]
    assert table.height == 3 * 4
    math_monotone = table.filter(pl.col("category") == "math", pl.col("benchmark") == "monotone")
    assert math_monotone["spearman"][0] == pytest.approx(-1.0)


def test_vectorised_resamples_equal_scipy():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 12).astype(float)  # ties on purpose
    y = x + rng.normal(0, 2, 12).round()
    index = rng.integers(0, 12, size=(200, 12))
    spearman, kendall = resampled_coefficients(x, y, index)
    for i in range(200):
        xs, ys = x[index[i]], y[index[i]]
        if np.ptp(xs) == 0 or np.ptp(ys) == 0:
            assert math.isnan(spearman[i]) and math.isnan(kendall[i])
            continue
        assert spearman[i] == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=1e-12)
        assert kendall[i] == pytest.approx(stats.kendalltau(xs, ys).statistic, abs=1e-12)


def test_bootstrap_interval_matches_scipy_bootstrap():
    """Our percentile interval over models against scipy.stats.bootstrap (paired, percentile) on the
    same data: both are Monte Carlo estimates of the same quantiles, so they agree within 0.02 (seen: 0.007)."""
    rng = np.random.default_rng(11)
    n = 30
    rating = np.linspace(1300, 1000, n)
    score = rating / 10 + rng.normal(0, 6, n)
    names = [f"m{i:02d}" for i in range(n)]
    lb = pl.DataFrame({"category": "overall", "method": "bt", "model": names, "rating": rating,
                       "ci_lower": rating - 5, "ci_upper": rating + 5})
    read = pl.DataFrame({"model": names, "canonical": names, "benchmark": "b", "score": score,
                         "source": "s", "line": range(n)})
    row = benchmark_agreement(lb, match_scores(read, names), rounds=4000).row(0, named=True)
    for name, fn in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        reference = stats.bootstrap((rating, score), lambda a, b, fn=fn: fn(a, b).statistic, paired=True,
                                    vectorized=False, n_resamples=4000, method="percentile",
                                    random_state=np.random.default_rng(5)).confidence_interval
        assert row[f"{name}_lower"] == pytest.approx(reference.low, abs=0.02)
        assert row[f"{name}_upper"] == pytest.approx(reference.high, abs=0.02)
        assert row[f"{name}_upper"] - row[f"{name}_lower"] > 0.1  # a real interval, not a point


def test_bootstrap_is_seeded_per_row_and_narrows_with_more_models(board, aliases):
    scores = match_scores(read_benchmark_file(DATA / "long.csv", aliases), board.get_column("model"))
    first = benchmark_agreement(board, scores)
    assert first.equals(benchmark_agreement(board, scores))
    # a row's interval does not depend on the other rows computed with it
    alone = benchmark_agreement(board, scores.filter(pl.col("benchmark") == "swapped"))
    assert alone.drop("disagreements").row(0) == first.filter(
        pl.col("benchmark") == "swapped").drop("disagreements").row(0)
    assert not first.equals(benchmark_agreement(board, scores, seed=1))

    # more models with the same noise level: a narrower Spearman interval
    rng = np.random.default_rng(0)

    def width(n: int) -> float:
        names = [f"m{i}" for i in range(n)]
        rating = np.linspace(1400, 1000, n)
        lb = pl.DataFrame({"category": "overall", "method": "bt", "model": names, "rating": rating,
                           "ci_lower": rating - 5, "ci_upper": rating + 5})
        read = pl.DataFrame({"model": names, "canonical": names, "benchmark": "b",
                             "score": rating + rng.normal(0, 80, n), "source": "s", "line": range(n)})
        row = benchmark_agreement(lb, match_scores(read, names)).row(0, named=True)
        return row["spearman_upper"] - row["spearman_lower"]

    assert width(200) < width(10)


def test_panel_frames(board, aliases):
    scores = match_scores(read_benchmark_file(DATA / "wide.csv", aliases), board.get_column("model"))
    panel = benchmark_panel(board, scores)
    assert panel.points.schema == pl.Schema(PANEL_POINTS_SCHEMA)
    monotone = panel.points.filter(pl.col("benchmark") == "monotone")
    assert monotone.height == 8 and monotone.get_column("our_rank").to_list() == list(range(1, 9))
    assert (monotone.get_column("our_rank") == monotone.get_column("benchmark_rank")).all()
    assert monotone.filter(pl.col("model") == "gemma-3-27b-it").select("rating", "ci_lower", "ci_upper", "score").row(0) \
        == (1340.0, 1330.0, 1350.0, 40.0)
    assert panel.agreement.height == 4 and set(panel.agreement.get_column("method")) == {"bt"}


# ---------------------------------------------------------------------------
# Bad files: the message names the file and the line
# ---------------------------------------------------------------------------

BAD_CSV = {
    "ragged": ("model,benchmark,score\na,X,1\nb,X\n", 3, "2 fields, but the header has 3"),
    "text score": ("model,benchmark,score\na,X,1\nb,X,high\n", 3, "must be a finite number, got 'high'"),
    "infinite": ("model,X,Y\na,1,2\nb,inf,3\n", 3, "must be a finite number, got 'inf'"),
    "huge": ("model,X,Y\na,1,2\nb,1.7e308,3\n", 3,
             "score for 'X' must be between -1,000,000 and 1,000,000, got '1.7e308'"),
    "huge negative": ("model,benchmark,score\na,X,1\nb,X,-1.7e308\n", 3, "got '-1.7e308'"),
    "just past the bound": ("model,benchmark,score\na,X,1\nb,X,1000000.5\n", 3, "got '1000000.5'"),
    "empty model": ("model,benchmark,score\na,X,1\n ,X,2\n", 3, "empty model name"),
    "empty benchmark": ("model,benchmark,score\na,X,1\nb,,2\n", 3, "empty benchmark name"),
    "repeated": ("model,benchmark,score\na,X,1\nb,X,2\na,X,3\n", 4, "more than one 'X' score (lines [2, 4])"),
    "unknown layout": ("name,points\na,1\n", 1, "cannot tell the layout"),
    "duplicate column": ("model,X,X\na,1,2\n", 1, "appear more than once"),
    "unclosed quote": ('model,benchmark,score\na,X,1\n"b,X,2\n', 3, "malformed CSV"),
    "oll text score": ("fullname,IFEval,BBH\norg/a,1,2\norg/b,n/a,3\n", 3, "'IFEval' must be a finite number"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_malformed_csv_names_file_and_line(case, tmp_path):
    text, line, problem = BAD_CSV[case]
    path = tmp_path / f"{case.replace(' ', '_')}.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchmarkFormatError) as info:
        read_benchmark_file(path)
    assert str(info.value).startswith(f"{path}: line {line}: ")
    assert problem in str(info.value)
    assert info.value.line == line and info.value.path == str(path)


def test_other_bad_files(tmp_path, golden):
    latin = tmp_path / "latin.csv"
    latin.write_bytes("model,benchmark,score\ncaf\xe9,X,1\n".encode("latin-1"))
    with pytest.raises(BenchmarkFormatError, match="latin.csv: not UTF-8"):
        read_benchmark_file(latin)
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1 not really")
    with pytest.raises(BenchmarkFormatError, match="damaged.parquet: not a readable parquet"):
        read_benchmark_file(damaged)
    huge = tmp_path / "huge.parquet"
    pl.DataFrame({"model": ["a", "b"], "benchmark": "X", "score": [1.0, -1.7e308]}).write_parquet(huge)
    with pytest.raises(BenchmarkFormatError) as refused:
        read_benchmark_file(huge)
    golden.check("benchmarks", "a score out of range", str(refused.value))
    text_scores = tmp_path / "scores.parquet"
    pl.DataFrame({"model": ["a", "b", "c"], "benchmark": "X", "score": ["1", "2", "lots"]}).write_parquet(text_scores)
    with pytest.raises(BenchmarkFormatError) as refused:
        read_benchmark_file(text_scores)
    golden.check("benchmarks", "a score that is no number", str(refused.value))
    header_only = tmp_path / "header.csv"
    header_only.write_text("model,benchmark,score\n", encoding="utf-8")
    with pytest.raises(BenchmarkFormatError, match="header.csv: no rows"):
        read_benchmark_file(header_only)
    other = tmp_path / "scores.json"
    other.write_text("{}", encoding="utf-8")
    with pytest.raises(BenchmarkFormatError, match="unknown file type '.json'"):
        read_benchmark_file(other)
    with pytest.raises(FileNotFoundError, match="absent.csv does not exist"):
        read_benchmarks(tmp_path / "absent.csv")


def test_hub_location(tmp_path, monkeypatch):
    assert hub_location("open-llm-leaderboard/contents") == ("open-llm-leaderboard/contents", None)
    assert hub_location("hf://datasets/open-llm-leaderboard/contents@v2") == ("open-llm-leaderboard/contents", "v2")
    assert hub_location("scores/file.csv") is None  # a file suffix: a (missing) local path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").write_text("model,X\na,1\n", encoding="utf-8")
    assert hub_location("org/name") is None  # an existing local path wins
    with pytest.raises(ValueError, match="hf://datasets/<org>/<name>"):
        hub_location("hf://datasets/just-a-name")


@pytest.mark.slow  # starts the fake Hub server
def test_reads_the_open_llm_leaderboard_from_the_fake_hub(tmp_path, board, aliases):
    from arena_pipeline_dev.hub_server import fake_hub_server

    with fake_hub_server(tmp_path / "hub") as hub:
        sha = hub.publish("open-llm-leaderboard/contents", "main",
                          {"data/train-00000-of-00001.parquet": oll_parquet(tmp_path)})
        read = read_benchmarks("open-llm-leaderboard/contents", aliases, cache_dir=tmp_path / "cache",
                               endpoint=hub.url)
        assert read.get_column("source").unique().to_list() == [
            f"hf://datasets/open-llm-leaderboard/contents@{sha}/data/train-00000-of-00001.parquet"]
        gets = len(hub.file_gets())
        assert gets == 1
        # pinned to the commit: served from the cache without a request
        again = read_benchmarks(f"hf://datasets/open-llm-leaderboard/contents@{sha}", aliases,
                                cache_dir=tmp_path / "cache", endpoint=hub.url)
        assert len(hub.file_gets()) == gets
    assert again.equals(read)
    local = read_benchmark_file(oll_parquet(tmp_path), aliases)
    assert read.drop("source").equals(local.drop("source"))
    table = benchmark_agreement(board, match_scores(read, board.get_column("model")))
    assert table.filter(pl.col("benchmark") == "MATH Lvl 5")["kendall"][0] == pytest.approx(SWAPPED_KENDALL)


def test_fixture_files_are_consistent():
    """The long and wide fixtures hold the same scores (so they must give the same table)."""
    with (DATA / "long.csv").open(encoding="utf-8") as handle:
        long = {(r["model"], r["benchmark"]): float(r["score"]) for r in csv.DictReader(handle)}
    with (DATA / "wide.csv").open(encoding="utf-8") as handle:
        wide = {(r["model"], b): float(v) for r in csv.DictReader(handle)
                for b, v in r.items() if b != "model" and v}
    assert long == wide


def test_every_score_that_passes_validation_can_be_drawn(tmp_path, board, aliases):
    """Scores up to the bound, spread or all equal, draw in the report's scatter: the bound is what keeps
    it from failing (a flat range of equal scores above ~2e6 divides by zero there, 1.7e308 overflows)."""
    import xml.etree.ElementTree as ET

    from arena_pipeline.presentation.charts import benchmark_scatter_svg

    models = board.get_column("model").to_list()
    columns = {
        "spread": np.linspace(-MAX_ABS_SCORE, MAX_ABS_SCORE, len(models)),
        "top": np.full(len(models), MAX_ABS_SCORE),
        "bottom": np.full(len(models), -MAX_ABS_SCORE),
        "one ulp": [MAX_ABS_SCORE, np.nextafter(MAX_ABS_SCORE, 0.0)] * (len(models) // 2),
    }
    path = tmp_path / "edge.csv"
    pl.DataFrame({"model": models, **{k: [repr(float(v)) for v in vs] for k, vs in columns.items()}}).write_csv(path)
    read = read_benchmark_file(path, aliases)  # accepted: every score is within the bound
    points = benchmark_panel(board, match_scores(read, board.get_column("model"))).points
    for benchmark in columns:
        svg = benchmark_scatter_svg(points.filter(pl.col("benchmark") == benchmark), benchmark, "overall", "s")
        cx = [float(c.get("cx")) for c in ET.fromstring(svg).findall(".//{http://www.w3.org/2000/svg}circle")]
        assert len(cx) == len(models) and all(map(math.isfinite, cx)), benchmark
        if benchmark == "spread":  # the eight scores in order, apart
            assert len(set(cx)) == len(models)
