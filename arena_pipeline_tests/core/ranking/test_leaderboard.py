"""`compute_rankings` end to end: frames and their schemas, ranks, seeds, categories, metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import (
    LEADERBOARD_SCHEMA,
    PAIRWISE_SCHEMA,
    PAIRWISE_SIGNIFICANCE_SCHEMA,
    STYLE_COEFFICIENTS_SCHEMA,
    RankingConfig,
    compute_rankings,
)
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"


def with_flags(frame: pl.DataFrame) -> pl.DataFrame:
    """The fixture plus deterministic math / creative_writing flags (no is_code etc.)."""
    n = frame.height
    return frame.with_columns(
        math=pl.Series(np.arange(n) % 3 == 0),
        creative_writing=pl.Series(np.arange(n) % 4 == 1),
    )


@pytest.fixture(scope="module")
def battles() -> pl.DataFrame:
    return with_flags(pl.read_parquet(FIXTURE))


@pytest.fixture(scope="module")
def output(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    config = RankingConfig(
        bootstrap_rounds=30, style_bootstrap_rounds=10, min_battles=20, display_min_battles=130
    )
    return compute_rankings(battles, tagged, config)


def test_frames_have_their_schemas_and_order(output):
    assert output.leaderboard.schema == pl.Schema(LEADERBOARD_SCHEMA)
    assert output.style_coefficients.schema == pl.Schema(STYLE_COEFFICIENTS_SCHEMA)
    assert output.pairwise.schema == pl.Schema(PAIRWISE_SCHEMA)
    board = output.leaderboard
    keys = board.select("category", "method", "model")
    assert keys.n_unique() == board.height
    assert keys.get_column("category").unique(maintain_order=True).to_list() == [
        "overall",
        "creative_writing",
        "math",
        "no_tie",  # the fixture has winners, so LMArena's no-tie board exists
    ]
    no_tie = board.filter(pl.col("category") == "no_tie", pl.col("method") == "bt")
    assert no_tie.get_column("ties").sum() == 0
    per_category = board.filter(pl.col("category") == "math")
    assert per_category.get_column("method").unique(maintain_order=True).to_list() == [
        "bt",
        "bt_style",
        "spectral",
    ]
    primary = board.filter(pl.col("method") != "spectral").get_column("ci_method").unique()
    assert primary.to_list() == ["sandwich"]
    spectral = board.filter(pl.col("method") == "spectral").get_column("ci_method").unique()
    assert spectral.to_list() == ["bootstrap"]
    fitted = board.filter(pl.col("method") != "spectral")
    assert fitted.select("bootstrap_lower", "bootstrap_upper").null_count().sum_horizontal().item() == 0
    assert fitted.get_column("ci_lower").equals(fitted.get_column("sandwich_lower"), check_names=False)


def test_rank_and_rank_bounds_follow_their_definitions(output):
    """rank: 1 + the shown models rated higher. rank_ub / rank_lb / significantly_above (issue 36):
    from the pairwise tests published in pairwise_significance: 1 + the shown models significantly
    above, the shown models - those significantly below, and that count; a provisional model is
    ranked among all models, so its bounds only bracket its rank."""
    tests = output.pairwise_significance
    for (category, method), board in output.leaderboard.group_by("category", "method", maintain_order=True):
        rating = board.get_column("rating").to_numpy()
        provisional = board.get_column("provisional").to_list()
        shown = ~np.array(provisional)
        expected_rank = [
            1 + int((rating[np.ones_like(shown) if p else shown] > r).sum())
            for r, p in zip(rating, provisional, strict=True)
        ]
        assert board.get_column("rank").to_list() == expected_rank
        pairs = tests.filter(pl.col("category") == category, pl.col("method") == method)
        assert pairs.height == shown.sum() * (shown.sum() - 1) // 2
        winners = pairs.filter("significant").select(
            winner=pl.when(pl.col("difference") > 0).then("model_1").otherwise("model_2"),
            loser=pl.when(pl.col("difference") > 0).then("model_2").otherwise("model_1"))
        beaten = dict(winners.group_by("winner").len().iter_rows())
        beaten_by = dict(winners.group_by("loser").len().iter_rows())
        for row in board.filter(~pl.col("provisional")).iter_rows(named=True):
            assert row["rank_ub"] == 1 + beaten_by.get(row["model"], 0), row
            assert row["significantly_above"] == beaten.get(row["model"], 0), row
            assert row["rank_lb"] == shown.sum() - beaten.get(row["model"], 0), row
        assert (board.get_column("rank_ub") <= board.get_column("rank")).all()
        assert (board.get_column("rank") <= board.get_column("rank_lb")).all()


@pytest.mark.parametrize("primary", ["sandwich", "bootstrap"])
def test_pairwise_significance_is_the_difference_with_its_interval(battles, primary):
    """Each row: model_1 < model_2 by name, difference = R_1 - R_2 of the board, the primary method's
    interval around it (containing it for the sandwich), significant when it excludes 0, the expected
    score 1 / (1 + 10^(-difference / 400)). Against the board's reference model, the difference's
    interval is the reference's displayed interval of the other model (R - 1000: the same contrast;
    for the bootstrap, the same re-anchored replicates)."""
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    anchor = battles.get_column("model_a").mode().sort()[0]
    output = compute_rankings(battles, tagged, RankingConfig(
        methods=("bt", "spectral"), bootstrap_rounds=30, min_battles=20, display_min_battles=130,
        anchor_model=anchor, primary_interval=primary))
    tests = output.pairwise_significance
    assert tests.schema == pl.Schema(PAIRWISE_SIGNIFICANCE_SCHEMA)
    assert (tests.get_column("model_1") < tests.get_column("model_2")).all()
    board = output.leaderboard.select("category", "method", "model", "rating", "ci_lower", "ci_upper", "ci_method")
    joined = (tests.join(board.rename(lambda c: c if c in ("category", "method") else f"{c}_a"),
                         left_on=["category", "method", "model_1"], right_on=["category", "method", "model_a"])
              .join(board.rename(lambda c: c if c in ("category", "method") else f"{c}_b"),
                    left_on=["category", "method", "model_2"], right_on=["category", "method", "model_b"]))
    assert joined.height == tests.height
    assert np.allclose(joined["difference"], joined["rating_a"] - joined["rating_b"], atol=1e-9)
    assert (joined["ci_method"] == joined["ci_method_a"]).all()
    assert set(joined["ci_method"]) == ({"sandwich", "bootstrap"} if primary == "sandwich" else {"bootstrap"})
    sandwich = joined.filter(pl.col("ci_method") == "sandwich")
    assert ((sandwich["ci_lower"] <= sandwich["difference"]) & (sandwich["difference"] <= sandwich["ci_upper"])).all()
    excludes = (joined["ci_lower"] > 0) | (joined["ci_upper"] < 0)
    assert joined["significant"].equals(excludes, check_names=False)
    assert np.allclose(joined["expected_score_1"], 1 / (1 + 10 ** (-joined["difference"] / 400)))
    # the reference (null bounds) against a model: the model's displayed interval, sign as the names go
    ref_b = joined.filter(pl.col("ci_lower_b").is_null(), pl.col("ci_lower_a").is_not_null())
    ref_a = joined.filter(pl.col("ci_lower_a").is_null(), pl.col("ci_lower_b").is_not_null())
    assert ref_a.height + ref_b.height > 0
    assert np.allclose(ref_b["ci_lower"], ref_b["ci_lower_a"] - 1000, atol=1e-6)
    assert np.allclose(ref_b["ci_upper"], ref_b["ci_upper_a"] - 1000, atol=1e-6)
    assert np.allclose(ref_a["ci_lower"], 1000 - ref_a["ci_upper_b"], atol=1e-6)
    assert np.allclose(ref_a["ci_upper"], 1000 - ref_a["ci_lower_b"], atol=1e-6)


def test_every_battle_is_fitted_and_low_counts_are_provisional(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=390)
    out = compute_rankings(battles, tagged, config)
    cw = out.leaderboard.filter(pl.col("category") == "overall")
    counts = cw.get_column("n_battles").to_numpy()
    assert cw.get_column("provisional").to_list() == (counts < 390).tolist()
    assert (counts < 390).any() and (counts >= 390).any()
    reasons = cw.filter("provisional").get_column("provisional_reason").unique().to_list()
    assert reasons == ["fewer than display_min_battles=390 battles"]
    assert cw.filter(~pl.col("provisional")).get_column("provisional_reason").null_count() == (
        counts >= 390
    ).sum()
    # shown models are ranked 1..k among themselves: a provisional model moves no one
    shown = cw.filter(~pl.col("provisional")).sort("rank")
    assert shown.get_column("rank").to_list() == list(range(1, shown.height + 1))
    # the display threshold does not change the fit (every battle is in it)
    loose = compute_rankings(battles, tagged, RankingConfig(methods=("bt",), bootstrap_rounds=0))
    same = loose.leaderboard.filter(pl.col("category") == "overall").sort("model")
    assert np.allclose(same.get_column("rating"), cw.sort("model").get_column("rating"))
    assert loose.metadata["excluded_models"]["creative_writing"] == []
    cw_board = loose.leaderboard.filter(pl.col("category") == "creative_writing")
    assert cw_board.get_column("n_battles").sum() == 2 * tagged.filter(
        pl.col("category") == "creative_writing"
    ).height


def test_counts_add_up(output, battles):
    board = output.leaderboard.filter(pl.col("category") == "overall", pl.col("method") == "bt")
    total = board.select(pl.col("wins") + pl.col("losses") + pl.col("ties"))
    assert total.to_series().equals(board.get_column("n_battles"), check_names=False)
    assert board.get_column("n_battles").sum() == 2 * battles.height
    rate = board.select((pl.col("wins") + 0.5 * pl.col("ties")) / pl.col("n_battles")).to_series()
    assert np.allclose(rate.to_numpy(), board.get_column("win_rate").to_numpy())


def test_pairwise_counts_and_predictions(output, battles):
    pairs = output.pairwise.filter(pl.col("category") == "overall")
    assert pairs.get_column("battles").sum() == battles.height
    assert (pairs.get_column("model_1") < pairs.get_column("model_2")).all()
    parts = pairs.select(pl.col("wins_1") + pl.col("wins_2") + pl.col("ties") + pl.col("both_bad"))
    assert parts.to_series().equals(pairs.get_column("battles"), check_names=False)
    bt = output.leaderboard.filter(pl.col("category") == "overall", pl.col("method") == "bt")
    rating = dict(zip(bt.get_column("model"), bt.get_column("rating"), strict=True))
    row = pairs.row(0, named=True)
    diff = rating[row["model_2"]] - rating[row["model_1"]]
    assert row["predicted_win_rate_1"] == pytest.approx(1.0 / (1.0 + 10.0 ** (diff / 400.0)))
    expected = (row["wins_1"] + 0.5 * (row["ties"] + row["both_bad"])) / row["battles"]
    assert row["win_rate_1"] == pytest.approx(expected)
    # model-a's wins over all its pairs equal its leaderboard wins
    wins = pairs.select(
        pl.when(pl.col("model_1") == "model-a").then("wins_1")
        .when(pl.col("model_2") == "model-a").then("wins_2")
        .otherwise(0)
        .sum()
    ).item()
    assert wins == bt.filter(pl.col("model") == "model-a").get_column("wins").item()


def test_fixed_seed_gives_identical_output(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    config = RankingConfig(bootstrap_rounds=20, min_battles=20, seed=11)
    one = compute_rankings(battles, tagged, config)
    two = compute_rankings(battles, tagged, config)
    assert one.leaderboard.equals(two.leaderboard)
    assert one.style_coefficients.equals(two.style_coefficients)
    assert one.pairwise.equals(two.pairwise)
    # a board does not depend on which other boards are computed
    only_math = compute_rankings(battles, tagged.filter(pl.col("category") == "math"), config)
    assert only_math.leaderboard.equals(one.leaderboard.filter(pl.col("category") == "math"))
    other = compute_rankings(battles, tagged, RankingConfig(bootstrap_rounds=20, min_battles=20))
    assert not other.leaderboard.equals(one.leaderboard)


def test_min_battles_exclusions_are_listed(output, battles):
    assert output.metadata["excluded_models"]["overall"] == []
    for entry in output.metadata["excluded_models"]["creative_writing"]:
        assert entry["n_battles"] < 20 and entry["reason"].startswith("fewer than min_battles")
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    strict = compute_rankings(
        battles, tagged, RankingConfig(methods=("bt",), bootstrap_rounds=0, min_battles=10_000)
    )
    assert strict.leaderboard.height == 0
    excluded = strict.metadata["excluded_models"]["overall"]
    assert sorted(e["model"] for e in excluded) == [f"model-{c}" for c in "abcdef"]
    assert strict.metadata["categories"]["overall"]["note"] == "fewer than 2 models left: no board"


def test_ties_drop_removes_draws_from_fits_and_counts(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    out = compute_rankings(
        battles, tagged, RankingConfig(ties="drop", methods=("bt",), bootstrap_rounds=0)
    )
    board = out.leaderboard.filter(pl.col("category") == "overall")
    decided = battles.filter(pl.col("winner").is_in(["model_a", "model_b"])).height
    assert board.get_column("ties").sum() == 0
    assert board.get_column("n_battles").sum() == 2 * decided
    pairs = out.pairwise.filter(pl.col("category") == "overall")
    assert pairs.get_column("battles").sum() == battles.height  # the table keeps every battle


def test_self_battles_are_dropped_and_bad_winners_rejected(battles):
    core = battles.select("id", "model_a", "model_b", "winner")
    mirror = pl.DataFrame(
        {"id": ["self-1"], "model_a": ["model-a"], "model_b": ["model-a"], "winner": ["model_a"]}
    )
    frame = pl.concat([core, mirror])
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0)
    out = compute_rankings(frame, categories, config)
    assert out.metadata["dropped"]["self_battles"] == 1
    base = compute_rankings(core, tag_rows(core.get_column("id"), [every]), config)  # the mirror's tag: no battle
    assert out.leaderboard.equals(base.leaderboard)
    broken = frame.with_columns(winner=pl.lit("model_c"))
    with pytest.raises(ValueError, match="winner"):
        compute_rankings(broken, categories, config)


def test_missing_anchor_falls_back_to_centring(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, anchor_model="not-a-model")
    out = compute_rankings(battles, tagged, config)
    assert out.metadata["categories"]["overall"]["anchor_missing"] is True
    mean = out.leaderboard.filter(pl.col("category") == "overall").get_column("rating").mean()
    assert mean == pytest.approx(1000.0)


def test_timings_and_convergence_are_reported(output):
    meta = output.metadata
    assert meta["timings_s"]["total"] > 0
    for category in ("overall", "creative_writing", "math"):
        info = meta["categories"][category]
        assert info["bt"]["grad_norm"] < 1e-8
        assert info["bt_style"]["grad_norm"] < 1e-8
        assert set(info["timings_s"]) >= {"bt", "bt_style", "spectral", "total"}
        assert -1.0 <= meta["kendall_tau"][category] <= 1.0


@pytest.mark.parametrize(
    "bad",
    [
        {"ties": "third"},
        {"methods": ("elo",)},
        {"methods": ()},
        {"bootstrap_rounds": -1},
        {"confidence": 1.5},
        {"display_min_battles": -1},
        {"primary_interval": "bootstrap", "bootstrap_rounds": 0},
    ],
)
def test_config_is_validated(bad):
    with pytest.raises(ValueError):
        RankingConfig(**bad)


def test_reference_model_is_pinned_on_every_board_it_is_on(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    settings = {"bootstrap_rounds": 30, "primary_interval": "bootstrap"}
    config = RankingConfig(
        methods=("bt", "spectral"), anchor_models=("not-here", "model-c", "model-a"), **settings
    )
    out = compute_rankings(battles, tagged, config)
    assert set(out.metadata["anchors"].values()) == {"model-c"}
    pinned = out.leaderboard.filter(pl.col("model") == "model-c")
    assert np.allclose(pinned.get_column("rating").to_numpy(), 1000.0)
    # the reference's rating is exact by definition: no interval of any kind
    bounds = pinned.select("^.*_(lower|upper)$")
    assert bounds.null_count().sum_horizontal().item() == bounds.width * bounds.height
    # anchoring moves the ratings by one constant; rank_ub, which compares models with each other
    # (not with the reference), is that of the centred board, whichever interval feeds it
    centred = compute_rankings(
        battles, tagged, RankingConfig(methods=("bt", "spectral"), anchor_models=(), **settings)
    ).leaderboard.filter(pl.col("category") == "math").sort("method", "model")
    anchored = out.leaderboard.filter(pl.col("category") == "math").sort("method", "model")
    assert centred.filter(pl.col("method") == "bt").get_column("rating").mean() == pytest.approx(1000.0)
    for method in ("bt", "spectral"):
        diff = (anchored.filter(pl.col("method") == method).get_column("rating")
                - centred.filter(pl.col("method") == method).get_column("rating")).to_numpy()
        assert np.allclose(diff, diff[0]) and abs(diff[0]) > 1.0
    assert anchored.get_column("rank_ub").equals(centred.get_column("rank_ub"))
    assert anchored.get_column("rank").equals(centred.get_column("rank"))
    # the others' intervals are of the difference from the reference: each replicate re-anchored
    others = anchored.filter(pl.col("model") != "model-c")
    assert (others.get_column("ci_lower") < others.get_column("rating")).all()
    assert (others.get_column("rating") < others.get_column("ci_upper")).all()
    assert others.select("^.*_(lower|upper)$").drop("^cluster_.*$").null_count().sum_horizontal().sum() == (
        others.filter(pl.col("method") == "spectral").height * 2  # spectral has no sandwich
    )


def test_board_without_any_reference_is_centred(battles):
    tagged = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    out = compute_rankings(battles, tagged, RankingConfig(methods=("bt",), bootstrap_rounds=0))
    # the fixture's models are none of the packaged reference models
    assert set(out.metadata["anchors"].values()) == {None}
    board = out.leaderboard.filter(pl.col("category") == "overall")
    assert board.get_column("rating").mean() == pytest.approx(1000.0)
