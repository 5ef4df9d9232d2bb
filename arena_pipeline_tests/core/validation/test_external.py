"""Reading published leaderboards (LMArena JSON, CSV) and comparing them with ours."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.dataset.models import load_aliases
from arena_pipeline.core.ranking import LEADERBOARD_SCHEMA, RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.core.validation import external
from arena_pipeline.core.validation.external import (
    BOARD_SCHEMA,
    COMPARISON_MODELS_SCHEMA,
    SUMMARY_SCHEMA,
    BoardFormatError,
    alignment_record,
    alignment_shifts,
    apply_alignment,
    compare_boards,
    load_category_map,
    read_published_board,
    to_lmarena_json,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "external"


@pytest.fixture(scope="module")
def aliases() -> pl.DataFrame:
    return load_aliases()


def leaderboard(rows: list[tuple[str, str, float]], method: str = "bt") -> pl.DataFrame:
    """LEADERBOARD_SCHEMA rows (category, model, rating); the other columns are filler."""
    frame = pl.DataFrame(rows, schema=["category", "model", "rating"], orient="row")
    return frame.with_columns(
        method=pl.lit(method),
        ci_lower=pl.col("rating") - 5.0,
        ci_upper=pl.col("rating") + 5.0,
        ci_method=pl.lit("sandwich"),
        rank=pl.col("rating").rank("min", descending=True).over("category"),
        rank_ub=pl.lit(1),
        rank_lb=pl.len().over("category"),
        rank_ub_simultaneous=pl.lit(1),
        rank_lb_simultaneous=pl.len().over("category"),
        significantly_above=pl.lit(0),
        n_battles=pl.lit(100),
        wins=pl.lit(50),
        losses=pl.lit(40),
        ties=pl.lit(10),
        win_rate=pl.lit(0.55),
        sandwich_lower=pl.col("rating") - 5.0,
        sandwich_upper=pl.col("rating") + 5.0,
        bootstrap_lower=pl.col("rating") - 6.0,
        bootstrap_upper=pl.col("rating") + 6.0,
        **{f"cluster_{kind}_{side}": pl.lit(None, dtype=pl.Float64)
           for kind in ("sandwich", "bootstrap") for side in ("lower", "upper")},
        provisional=pl.lit(False),
        provisional_reason=pl.lit(None, dtype=pl.String),
    ).select([pl.col(c).cast(t) for c, t in LEADERBOARD_SCHEMA.items()])


OURS = leaderboard(
    [
        ("overall", "gemini-2.5-pro", 1060.0),
        ("overall", "claude-opus-4-20250514", 1040.0),
        ("overall", "deepseek-v3-0324", 1020.0),
        ("overall", "amazon.nova-pro-v1:0", 880.0),
        ("hard_prompt", "gemini-2.5-pro", 1050.0),
        ("hard_prompt", "o3-2025-04-16", 1030.0),
        ("hard_prompt", "gpt-4.1-2025-04-14", 920.0),
        ("math", "o3-2025-04-16", 1000.0),
    ]
)


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def test_category_map_is_data() -> None:
    mapping = load_category_map()
    plain = dict(
        mapping.filter(pl.col("method") == "bt").select("external", "category").iter_rows()
    )
    assert plain == {
        "full": "overall",
        "creative_writing": "creative_writing",
        "math": "math",
        "if": "instruction_following",
        "coding": "coding",
        "hard_6": "hard_prompt",
        "long_user": "longer_query",
        "multiturn": "multi_turn",
        **{lang: lang for lang in ("english", "chinese", "french", "german", "japanese",
                                   "korean", "russian", "spanish", "no_short", "no_tie",
                                   "no_refusal")},
        "hard_english_6": "hard_prompt_english",
    }
    styled = mapping.filter(pl.col("method") == "bt_style")
    assert styled.height == 20
    assert set(styled.get_column("external")) == {f"{k}_style_control" for k in plain}


def test_read_json_board(aliases: pl.DataFrame) -> None:
    board = read_published_board(DATA / "board.json", aliases)
    assert board.schema == pl.Schema(BOARD_SCHEMA)
    assert board.select(
        "category", "source_category", "method", "category_known", "model", "canonical"
    ).rows() == [
        ("overall", "full", "bt", True, "gemini-2.5-pro", "gemini-2.5-pro"),
        ("overall", "full", "bt", True, "Claude Opus 4 (20250514)", "claude-opus-4-20250514"),
        ("overall", "full", "bt", True, "deepseek-v3-0324", "deepseek-v3-0324"),
        ("overall", "full", "bt", True, "amazon-nova-pro-v1.0", "amazon.nova-pro-v1:0"),
        (
            "overall",
            "full",
            "bt",
            True,
            "mixtral-8x7b-instruct-v0.1",
            "mixtral-8x7b-instruct-v0.1",
        ),
        ("overall", "full_style_control", "bt_style", True, "gemini-2.5-pro", "gemini-2.5-pro"),
        (
            "overall",
            "full_style_control",
            "bt_style",
            True,
            "claude-opus-4-20250514",
            "claude-opus-4-20250514",
        ),
        ("hard_prompt", "hard_6", "bt", True, "gemini-2.5-pro", "gemini-2.5-pro"),
        ("hard_prompt", "hard_6", "bt", True, "o3-2025-04-16", "o3-2025-04-16"),
        ("hard_prompt", "hard_6", "bt", True, "gpt-4.1-2025-04-14", "gpt-4.1-2025-04-14"),
        ("hard_prompt", "hard_6", "bt", True, "gpt-4.1", "gpt-4.1-2025-04-14"),
        # LMArena's english board maps to our english category
        ("english", "english", "bt", True, "gemini-2.5-pro", "gemini-2.5-pro"),
        ("english", "english", "bt", True, "o3-2025-04-16", "o3-2025-04-16"),
    ]
    first = board.row(0, named=True)
    assert (first["rating"], first["ci_lower"], first["ci_upper"]) == (1270.0, 1266.0, 1274.0)
    gpt = board.filter(pl.col("model") == "gpt-4.1").row(0, named=True)
    assert gpt["ci_lower"] is None and gpt["ci_upper"] is None  # absent q025/q975


def test_read_csv_board(aliases: pl.DataFrame) -> None:
    board = read_published_board(DATA / "board.csv", aliases)
    assert board.schema == pl.Schema(BOARD_SCHEMA)
    assert board.select(
        "category", "source_category", "method", "category_known", "canonical", "rating"
    ).rows() == [
        ("overall", "full", "bt", True, "amazon.nova-pro-v1:0", 1150.0),
        ("overall", "overall", None, True, "gemini-2.5-pro", 1270.0),  # empty cell = overall
        ("overall", "overall", None, True, "claude-opus-4-20250514", 1250.0),
        ("overall", "overall", None, True, "mixtral-8x7b-instruct-v0.1", 1114.0),
        ("instruction_following", "if", "bt", True, "o3-2025-04-16", 1262.5),
        ("instruction_following", "if", "bt", True, "gpt-4.1-2025-04-14", 1201.0),
        ("instruction_following", "if", "bt", True, "gpt-4.1-2025-04-14", 1200.0),
        ("english", "english", "bt", True, "gemini-2.5-pro", 1275.0),
    ]
    nova = board.row(0, named=True)
    assert nova["model"] == "amazon-nova-pro-v1.0"
    assert nova["ci_lower"] is None and nova["ci_upper"] is None


def test_csv_without_category_column_is_overall(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("Model , Rating\ngemini-2.5-pro,1270\no3,1250\n", encoding="utf-8")
    board = read_published_board(path)
    assert board.get_column("category").to_list() == ["overall", "overall"]
    assert board.get_column("canonical").to_list() == ["gemini-2.5-pro", "o3-2025-04-16"]
    assert board.get_column("ci_lower").null_count() == 2


def test_user_category_map(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    path.write_text("external,category,method\nenglish,overall,bt\n", encoding="utf-8")
    board = read_published_board(DATA / "board.json", category_map=load_category_map(path))
    english = board.filter(pl.col("source_category") == "english")
    assert english.get_column("category").unique().to_list() == ["overall"]
    assert english.get_column("category_known").all()
    bad = tmp_path / "bad_map.csv"
    bad.write_text("external,category\nenglish,klingon\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad_map.csv: line 2"):
        load_category_map(bad)


MALFORMED = [
    ("empty.json", "", "the file is empty"),
    ("blank.json", "  \n", "the file is empty"),
    ("truncated.json", '{"full": {"a": {"rating": 1}', "invalid JSON at line 1 column"),
    ("list.json", "[1, 2]", "expected a JSON object shaped"),
    ("no_categories.json", "{}", "the board is empty"),
    ("category_list.json", '{"full": [1, 2]}', "category 'full': expected an object of models"),
    ("no_models.json", '{"full": {}}', "category 'full' has no models"),
    ("bare_number.json", '{"full": {"a": 1200}}', "model 'a': expected an object with 'rating'"),
    ("no_rating.json", '{"full": {"a": {"rating_q025": 1}}}', "model 'a': missing 'rating'"),
    ("null_rating.json", '{"full": {"a": {"rating": null}}}', "model 'a': missing 'rating'"),
    ("text_rating.json", '{"full": {"a": {"rating": "1200"}}}', "'rating' must be a number"),
    ("bool_rating.json", '{"full": {"a": {"rating": true}}}', "'rating' must be a number"),
    ("nan_rating.json", '{"full": {"a": {"rating": NaN}}}', "non-finite number NaN"),
    ("text_q025.json", '{"full": {"a": {"rating": 1, "rating_q025": "x"}}}', "'rating_q025' must"),
    ("duplicate.json", '{"full": {"a": {"rating": 1}, "a": {"rating": 2}}}', "duplicate JSON key"),
    (
        "inverted.json",
        '{"full": {"a": {"rating": 1, "rating_q025": 3, "rating_q975": 2}}}',
        "model 'a': ci_lower 3.0 > ci_upper 2.0",
    ),
    ("empty.csv", "", "the file is empty"),
    ("header_only.csv", "model,rating\n", "the board is empty (no rows)"),
    ("no_rating_column.csv", "model,score\na,1\n", r"missing column(s) ['rating']"),
    ("missing_rating.csv", "model,rating\na,1\nb,\n", "missing rating on line(s) [3]"),
    ("text_rating.csv", "model,rating\na,1200\nb,high\n", "line 3 has 'high'"),
    ("inf_rating.csv", "model,rating\na,inf\n", "rating must be a finite number"),
    ("text_ci.csv", "model,rating,ci_lower\na,1,low\n", "ci_lower must be a finite number"),
    ("empty_model.csv", "model,rating\n,1200\n", "empty model name on line(s) [2]"),
    ("duplicate.csv", "model,rating\na,1\na,2\n", "model 'a' appears more than once"),
    ("bad_method.csv", "model,rating,method\na,1,elo\n", "method must be one of"),
    ("board.txt", "model,rating\na,1\n", "unknown format 'txt'"),
    # finite but out of all proportion: an alignment shift of them overflowed to inf (issue 38, item 4)
    ("huge_rating.json", '{"full": {"a": {"rating": 1200}, "b": {"rating": 1.7e308}}}',
     "category 'full', model 'b': rating 1.7e+308 is not between -1,000,000 and 1,000,000"),
    ("huge_q025.json", '{"full": {"a": {"rating": 1200, "rating_q025": -1.7e308}}}',
     "model 'a': ci_lower -1.7e+308 is not between -1,000,000 and 1,000,000"),
    ("huge_rating.csv", "model,rating\na,1200\nb,-1.7e308\nc,2e6\n",
     "category 'overall', model 'b': rating -1.7e+308 is not between -1,000,000 and 1,000,000 (2 such entries)"),
    ("huge_ci.csv", "model,rating,ci_upper\na,1200,1000001\n", "ci_upper 1e+06 is not between"),
]


@pytest.mark.parametrize(("name", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_board(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BoardFormatError) as err:
        read_published_board(path)
    assert err.value.path == str(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in err.value.problem


def test_a_board_of_30k_models_is_read_in_one_pass(tmp_path: Path, golden) -> None:
    """The duplicate-key check counted every key once per key: quadratic, minutes at 30k models
    (issue 38, item 6). Linear now; a repeated key among them is still found and named."""
    models = {f"model-{i:05d}": {"rating": 1000.0 + i % 700, "rating_q025": 990.0, "rating_q975": 1800.0}
              for i in range(30_000)}
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"full": models}), encoding="utf-8")
    board = read_published_board(path)
    assert board.height == 30_000 and board.get_column("model").n_unique() == 30_000
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-2] + ', "model-00007": {"rating": 1}, "model-29999": {"rating": 2}}}', encoding="utf-8")
    with pytest.raises(BoardFormatError) as err:
        read_published_board(path)
    golden.check("boards", "a board with duplicate keys", err.value.problem)


@pytest.mark.parametrize("name", ["board.json", "board.csv"])
def test_board_files_over_the_size_or_entry_limits_are_one_line(tmp_path: Path, monkeypatch, name: str, golden) -> None:
    """A board file is read whole: its bytes and its (category, model) entries are bounded (issue 38, item 6)."""
    path = tmp_path / name
    path.write_bytes((DATA / name).read_bytes())
    entries = read_published_board(path).height
    monkeypatch.setattr(external, "MAX_BOARD_ENTRIES", entries - 1)
    with pytest.raises(BoardFormatError) as err:
        read_published_board(path)
    golden.check("boards", f"{name} over the entry limit", err.value.problem, {f"{entries - 1:,}": "<limit>"})
    monkeypatch.setattr(external, "MAX_BOARD_BYTES", path.stat().st_size - 1)
    with pytest.raises(BoardFormatError) as err:
        read_published_board(path)
    golden.check("boards", f"{name} over the size limit", err.value.problem,
                 {f"{path.stat().st_size:,}": "<size>", f"{path.stat().st_size - 1:,}": "<limit>"})


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("model,rating\ncafé,1\n".encode("latin-1"))
    with pytest.raises(BoardFormatError, match="not UTF-8"):
        read_published_board(path)


def test_urls_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="only local files"):
        read_published_board("https://example.org/board.json")
    with pytest.raises(FileNotFoundError):
        read_published_board(tmp_path / "absent.json")


# ---------------------------------------------------------------------------
# comparing
# ---------------------------------------------------------------------------


def test_hand_computed_agreement() -> None:
    ours = leaderboard(
        [("math", "a", 1030.0), ("math", "b", 1010.0), ("math", "c", 990.0), ("math", "d", 970.0)]
    )
    theirs = pl.DataFrame(
        {
            "category": "math",
            "model": ["a", "b", "c", "d"],
            "rating": [1250.0, 1200.0, 1210.0, 1140.0],
        }
    )
    result = compare_boards(ours, theirs)
    # centred: ours 30, 10, -10, -30; theirs 50, 0, 10, -60; diff = ours - theirs
    # ranks ours 1 2 3 4, theirs 1 3 2 4: d^2 = 2, rho = 1 - 6*2 / (4*15) = 0.8
    # one discordant pair (b, c) of 6: tau = (5 - 1) / 6; slope = 3200 / 2000
    summary = result.summary.row(0, named=True)
    assert summary["n_ours"] == summary["n_theirs"] == summary["n_matched"] == 4
    assert summary["spearman"] == pytest.approx(0.8, abs=1e-12)
    assert summary["kendall"] == pytest.approx(2 / 3, abs=1e-12)
    assert summary["mean_abs_diff"] == pytest.approx(20.0, abs=1e-12)
    assert summary["max_abs_diff"] == pytest.approx(30.0, abs=1e-12)
    assert summary["slope"] == pytest.approx(1.6, abs=1e-12)
    # theirs ~ a + b ours: a = 1200 - 1.6 * 1000; residuals 2, -16, 26, -12
    assert summary["intercept"] == pytest.approx(-400.0, abs=1e-9)
    assert summary["rms_residual"] == pytest.approx((1080 / 4) ** 0.5, abs=1e-9)
    # theirs - ours = 220, 190, 220, 170: median 205; after the mean shift -20, 10, -20, 30
    assert summary["median_shift"] == pytest.approx(205.0, abs=1e-12)
    assert summary["rms_after_shift"] == pytest.approx((1800 / 4) ** 0.5, abs=1e-9)
    models = result.models
    assert models.get_column("our_rank").to_list() == [1, 2, 3, 4]
    assert models.get_column("their_rank").to_list() == [1, 3, 2, 4]
    assert models.get_column("diff").to_list() == pytest.approx([-20.0, 10.0, -20.0, 30.0])
    assert models.get_column("their_centred").to_list() == pytest.approx([50.0, 0.0, 10.0, -60.0])
    assert (models.get_column("status") == "matched").all()


def test_ties_small_boards_and_constant_ratings() -> None:
    ours = leaderboard(
        [
            ("overall", "a", 1000.0),
            ("overall", "b", 1000.0),
            ("overall", "c", 990.0),
            ("math", "a", 1000.0),
            ("coding", "a", 1000.0),
            ("coding", "b", 1000.0),
        ]
    )
    theirs = pl.DataFrame(
        {
            "category": ["overall"] * 3 + ["math", "coding", "coding"],
            "model": ["a", "b", "c", "a", "a", "b"],
            "rating": [1200.0, 1190.0, 1180.0, 1300.0, 1250.0, 1240.0],
        }
    )
    summary = {r["category"]: r for r in compare_boards(ours, theirs).summary.to_dicts()}
    models = compare_boards(ours, theirs).models
    overall = models.filter(pl.col("category") == "overall")
    assert overall.get_column("our_rank").to_list() == [1, 1, 3]  # ties share a rank
    assert summary["math"]["n_matched"] == 1
    assert summary["math"]["spearman"] is None and summary["math"]["slope"] is None
    assert summary["math"]["mean_abs_diff"] == 0.0
    assert summary["coding"]["spearman"] is None  # our ratings are constant
    assert summary["coding"]["slope"] is None
    assert summary["coding"]["mean_abs_diff"] == pytest.approx(5.0)


def test_compare_with_json_board(aliases: pl.DataFrame) -> None:
    theirs = read_published_board(DATA / "board.json", aliases)
    result = compare_boards(OURS, theirs, aliases)
    assert result.summary.schema == pl.Schema(SUMMARY_SCHEMA)
    assert result.models.schema == pl.Schema(COMPARISON_MODELS_SCHEMA)
    assert result.method == "bt"
    summary = {r["category"]: r for r in result.summary.to_dicts()}
    assert list(summary) == ["overall", "math", "hard_prompt", "english"]

    overall = summary["overall"]
    # renamed models resolved: 'Claude Opus 4 (20250514)' by normalization,
    # 'amazon-nova-pro-v1.0' by the alias table
    assert (overall["n_ours"], overall["n_theirs"], overall["n_matched"]) == (4, 5, 4)
    assert overall["unmatched_ours"] == []
    assert overall["unmatched_theirs"] == ["mixtral-8x7b-instruct-v0.1"]
    assert overall["ambiguous"] == []
    # ours centred 60 40 20 -120, theirs (1270 1250 1230 1150) centred 45 25 5 -75
    assert overall["spearman"] == pytest.approx(1.0)
    assert overall["kendall"] == pytest.approx(1.0)
    assert overall["mean_abs_diff"] == pytest.approx((15 + 15 + 15 + 45) / 4)
    assert overall["max_abs_diff"] == pytest.approx(45.0)
    assert overall["slope"] == pytest.approx((60 * 45 + 40 * 25 + 20 * 5 + 120 * 75) / 20000)

    hard = summary["hard_prompt"]  # 'gpt-4.1' and 'gpt-4.1-2025-04-14' are one model
    assert hard["ambiguous"] == ["gpt-4.1", "gpt-4.1-2025-04-14"]
    assert (hard["n_ours"], hard["n_theirs"], hard["n_matched"]) == (3, 4, 2)
    assert hard["unmatched_ours"] == [] and hard["unmatched_theirs"] == []
    assert summary["math"]["unmatched_ours"] == ["o3-2025-04-16"]
    assert summary["english"]["n_ours"] == 0
    assert summary["english"]["unmatched_theirs"] == ["gemini-2.5-pro", "o3-2025-04-16"]

    # style-controlled rows are another method: left out and reported
    assert result.skipped.rows() == [("overall", "full_style_control", "bt_style", 2)]
    # every input row is accounted for
    statuses = result.models.group_by("status").len().sort("status").rows()
    assert statuses == [("ambiguous", 2), ("matched", 6), ("only_ours", 1), ("only_theirs", 3)]
    amb = result.models.filter(pl.col("status") == "ambiguous")
    assert amb.get_column("our_rating").to_list() == [920.0, 920.0]
    metadata = result.to_metadata()
    assert json.loads(json.dumps(metadata)) == metadata
    assert metadata["categories"]["overall"]["n_matched"] == 4


def test_every_method_compared_makes_duplicates_ambiguous(aliases: pl.DataFrame) -> None:
    theirs = read_published_board(DATA / "board.json", aliases)
    result = compare_boards(OURS, theirs, aliases, their_method=None)
    overall = result.summary.row(0, named=True)
    assert result.skipped.height == 0
    assert overall["ambiguous"] == [
        "Claude Opus 4 (20250514)",
        "claude-opus-4-20250514",
        "gemini-2.5-pro",
        "gemini-2.5-pro",
    ]
    assert overall["n_matched"] == 2


def test_compare_with_csv_board(aliases: pl.DataFrame) -> None:
    ours = pl.concat(
        [OURS, leaderboard([("instruction_following", "o3-2025-04-16", 1040.0)])]
    )
    result = compare_boards(ours, read_published_board(DATA / "board.csv", aliases), aliases)
    summary = {r["category"]: r for r in result.summary.to_dicts()}
    assert summary["overall"]["unmatched_ours"] == ["deepseek-v3-0324"]
    assert summary["overall"]["unmatched_theirs"] == ["mixtral-8x7b-instruct-v0.1"]
    assert summary["overall"]["n_matched"] == 3
    assert summary["instruction_following"]["n_matched"] == 1
    assert summary["instruction_following"]["ambiguous"] == ["gpt-4.1", "gpt-4.1-2025-04-14"]
    assert summary["hard_prompt"]["n_theirs"] == 0


def test_compare_rejects_bad_ours() -> None:
    theirs = pl.DataFrame({"category": ["overall"], "model": ["a"], "rating": [1.0]})
    mixed = pl.concat(
        [leaderboard([("overall", "a", 1.0)]), leaderboard([("overall", "a", 2.0)], "spectral")]
    )
    with pytest.raises(ValueError, match="several methods"):
        compare_boards(mixed, theirs)
    twice = leaderboard([("overall", "o3", 1.0), ("overall", "o3-2025-04-16", 2.0)])
    with pytest.raises(ValueError, match="several rows per"):
        compare_boards(twice, theirs)
    with pytest.raises(ValueError, match="lacks columns"):
        compare_boards(theirs.drop("rating"), theirs)


def test_our_board_round_trips_through_lmarena_json(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    models = ["gemini-2.5-pro", "o3-2025-04-16", "claude-opus-4-20250514", "qwq-32b"]
    strength = dict(zip(models, (0.6, 0.3, 0.0, -0.8), strict=True))
    n = 2000
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    p = 1 / (1 + np.exp([strength[models[j]] - strength[models[i]] for i, j in zip(a, b, strict=True)]))
    battles = pl.DataFrame(
        {
            "id": [str(i) for i in range(n)],
            "model_a": [models[i] for i in a],
            "model_b": [models[j] for j in b],
            "winner": np.where(rng.random(n) < p, "model_a", "model_b"),
        }
    )
    categories = pl.DataFrame({"battle_id": battles.get_column("id"), "category": "overall"})
    ours = compute_rankings(
        battles, tag_rows(battles.get_column("id"), [categories]), RankingConfig(methods=("bt",), bootstrap_rounds=0)
    ).leaderboard
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(to_lmarena_json(ours)), encoding="utf-8")
    theirs = read_published_board(path)
    assert theirs.get_column("source_category").unique().to_list() == ["full"]
    assert theirs.get_column("ci_lower").to_list() == pytest.approx(
        ours.get_column("ci_lower").to_list()
    )
    summary = compare_boards(ours, theirs).summary.row(0, named=True)
    assert summary["n_matched"] == 4
    assert summary["spearman"] == pytest.approx(1.0)
    assert summary["max_abs_diff"] == pytest.approx(0.0, abs=1e-9)
    assert summary["slope"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no external key"):
        to_lmarena_json(ours.with_columns(method=pl.lit("spectral")))


# ---------------------------------------------------------------------------
# alignment to the published scale
# ---------------------------------------------------------------------------


def test_shift_is_recovered_exactly_from_a_translated_copy(tmp_path: Path) -> None:
    """Their board = ours + 265.6 (written as LMArena JSON and read back): the shift is 265.6,
    the aligned ratings and bounds are theirs, ranks do not move, slope 1 and RMS 0."""
    rng = np.random.default_rng(11)
    names = ["gemini-2.5-pro", "o3-2025-04-16", "claude-opus-4-20250514", "qwq-32b",
             "gpt-4.1-2025-04-14", "deepseek-v3-0324"]
    rows = [(c, m, float(r)) for c in ("overall", "math") for m, r in zip(names, 1000 + rng.normal(0, 60, 6),
                                                                           strict=True)]
    ours = leaderboard(rows)
    translated = apply_alignment(ours, pl.DataFrame({"category": ["overall", "math"], "method": "bt",
                                                     "shift": 265.6, "aligned": True}))
    path = tmp_path / "published.json"
    path.write_text(json.dumps(to_lmarena_json(translated)), encoding="utf-8")
    theirs = read_published_board(path)

    shifts = alignment_shifts(ours, theirs)
    assert shifts.get_column("category").to_list() == ["overall", "math"]
    assert shifts.get_column("published_board").to_list() == ["full", "math"]
    assert shifts.get_column("n_matched").to_list() == [6, 6]
    assert shifts.get_column("aligned").all()
    assert shifts.get_column("shift").to_list() == pytest.approx([265.6, 265.6], abs=1e-9)

    aligned = apply_alignment(ours, shifts)
    assert aligned.columns == ours.columns
    for column in ("rating", "ci_lower", "ci_upper", "sandwich_lower", "bootstrap_upper"):
        assert (aligned[column] - ours[column]).to_list() == pytest.approx([265.6] * 12, abs=1e-9)
    assert aligned["cluster_sandwich_lower"].is_null().all()  # absent bounds stay absent
    assert aligned["rank"].to_list() == ours["rank"].to_list()
    assert aligned["rating"].to_list() == pytest.approx(translated["rating"].to_list(), abs=1e-9)

    summary = {r["category"]: r for r in compare_boards(ours, theirs).summary.to_dicts()}
    for row in summary.values():
        assert row["slope"] == pytest.approx(1.0, abs=1e-12)
        assert row["intercept"] == pytest.approx(265.6, abs=1e-9)
        assert row["rms_residual"] == pytest.approx(0.0, abs=1e-9)
        assert row["rms_after_shift"] == pytest.approx(0.0, abs=1e-9)
        assert row["median_shift"] == pytest.approx(265.6, abs=1e-9)
    after = compare_boards(aligned, theirs).summary
    assert after["median_shift"].to_list() == pytest.approx([0.0, 0.0], abs=1e-9)


def test_shift_uses_shown_models_and_the_median() -> None:
    """A provisional model and one outlier do not move the shift; their median does not care."""
    ours = leaderboard([("overall", m, 1000.0 + 10 * i) for i, m in enumerate("abcdef")]).with_columns(
        provisional=pl.col("model") == "f")
    offsets = {"a": 250.0, "b": 250.0, "c": 252.0, "d": 248.0, "e": 400.0, "f": -900.0}
    theirs = pl.DataFrame({"category": "overall", "model": list(offsets),
                           "rating": [1000.0 + 10 * i + o for i, o in enumerate(offsets.values())]})
    row = alignment_shifts(ours, theirs).row(0, named=True)
    assert row["n_matched"] == 5  # f is provisional
    assert row["shift"] == pytest.approx(250.0)  # median of 250, 250, 252, 248, 400


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_shift_out_of_all_proportion_is_refused(golden) -> None:
    """Ratings near the float limit made an infinite shift, and inf ratings were published (issue 38, 4):
    such a board stays on our scale and the record says why. Boards read from a file cannot hold them any
    more (test_malformed_board); these frames stand for a board that slipped through."""
    ours = pl.concat([leaderboard([("overall", m, -1.7e308) for m in "abc"]),
                      leaderboard([("math", m, 1000.0) for m in "abc"])])
    theirs = pl.DataFrame({"category": ["overall"] * 3 + ["math"] * 3, "model": list("abc") * 2,
                           "rating": [1.7e308] * 3 + [5e6] * 3})
    shifts = {r["category"]: r for r in alignment_shifts(ours, theirs).to_dicts()}
    golden.check("boards", "shifts out of all proportion", f"{shifts['overall']['reason']}\n{shifts['math']['reason']}")
    assert not any(r["aligned"] or r["shift"] is not None for r in shifts.values())
    aligned = apply_alignment(ours, alignment_shifts(ours, theirs))
    assert aligned["rating"].to_list() == ours["rating"].to_list()


def test_boards_that_cannot_be_aligned_stay_as_they_are() -> None:
    ours = pl.concat([
        leaderboard([("overall", m, 1000.0 + i) for i, m in enumerate("abcd")]),
        leaderboard([("overall", m, 990.0 + i) for i, m in enumerate("abcd")], method="bt_style"),
        leaderboard([("math", "a", 1000.0), ("math", "b", 1010.0)]),
    ])
    # a plain board only (as benchmarks/data's CSV): no style-controlled board to align bt_style to
    theirs = pl.DataFrame({"category": ["overall"] * 4 + ["math"] * 2, "method": "bt",
                           "model": ["a", "b", "c", "d", "a", "b"],
                           "rating": [1300.0, 1301.0, 1302.0, 1303.0, 1250.0, 1260.0]})
    shifts = {(r["category"], r["method"]): r for r in alignment_shifts(ours, theirs).to_dicts()}
    assert shifts[("overall", "bt")]["shift"] == pytest.approx(300.0)
    style = shifts[("overall", "bt_style")]
    assert not style["aligned"] and style["shift"] is None and style["published_board"] is None
    assert "no overall board for method bt_style" in style["reason"]
    math = shifts[("math", "bt")]
    assert not math["aligned"] and math["n_matched"] == 2 and "fewer than the 3" in math["reason"]
    aligned = apply_alignment(ours, alignment_shifts(ours, theirs))
    moved = (aligned["rating"] - ours["rating"]).to_list()
    assert moved == pytest.approx([300.0] * 4 + [0.0] * 6)
    record = alignment_record(alignment_shifts(ours, theirs), "boards/published.csv", "abc", "2025-11-05", 1000.0)
    assert record["board_name"] == "published.csv" and record["board_date"] == "2025-11-05"
    assert [b["aligned"] for b in record["boards"]] == [True, False, False]
    json.dumps(record)  # plain data: it goes into arena.publications' settings
