"""Held-out goodness of fit (core/ranking/model_fit.py) against simulations whose true model is known."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.model_fit import (
    FOLDS,
    MODEL_FIT_CALIBRATION_SCHEMA,
    MODEL_FIT_SCHEMA,
    NO_GAIN,
    board_model_fit,
    calibration_error,
    calibration_table,
    clustered_mean_interval,
    compute_model_fit,
    held_out_predictions,
    logistic_log_loss,
    probability_log_loss,
    session_folds,
    win_rate_slope,
)
from arena_pipeline.core.ranking.tags import tag_rows

CONFIG = RankingConfig()
MODELS = 20
BATTLES = 40_000


def tournament(rng: np.random.Generator, theta: np.ndarray, n: int = BATTLES, draws: float = 0.0):
    """``n`` battles between uniformly drawn distinct models with Bradley-Terry probabilities
    ``p = sigmoid(theta_a - theta_b)``, in sessions of 1 to 5 votes of one pair. With ``draws``, a
    draw (tie or both_bad) happens with probability ``draws * 4 p (1 - p)`` and a win of a with
    ``p - draw / 2``, so the expected score of a stays ``p`` (as LMArena counts draws).
    Returns a, b, outcome codes, sessions and p."""
    m = len(theta)
    sizes = rng.integers(1, 6, n)
    ends = np.cumsum(sizes)
    sessions = int(np.searchsorted(ends, n - 1, side="right")) + 1
    session = np.repeat(np.arange(sessions), sizes[:sessions])[:n]
    first = rng.integers(0, m, sessions)
    second = (first + rng.integers(1, m, sessions)) % m
    swap = rng.random(n) < 0.5  # the pair of the session, on random sides
    a = np.where(swap, second[session], first[session])
    b = np.where(swap, first[session], second[session])
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    draw = draws * 4.0 * p * (1.0 - p)
    assert (draw / 2 <= np.minimum(p, 1 - p)).all(), "draws too frequent for these strengths"
    u = rng.random(n)
    o = np.where(u < p - draw / 2, 0, np.where(u < p + draw / 2, 2 + (u < p), 1))
    return a, b, o, session, p


def expected_loss_and_tolerance(p: np.ndarray, o: np.ndarray, m: int) -> tuple[float, float]:
    """The theoretical held-out log-loss and the test's tolerance.

    Theory: with the true ``p`` known, the expected log-loss of a battle is the entropy ``H(p)``
    (also with draws: the loss is linear in the outcome, whose mean is ``p``). Tolerance: 4
    standard errors of the mean loss (the loss at the true ``p`` has variance ``d^2 Var(y)``,
    ``d`` the log-odds, ``Var(y) = p (1 - p)`` without draws, else estimated) plus :func:`excess`.
    """
    d = np.log(p / (1.0 - p))
    entropy = -(p * np.log(p) + (1.0 - p) * np.log(1.0 - p))
    y = np.where(o == 0, 1.0, np.where(o == 1, 0.0, 0.5))
    var_y = np.full(len(p), np.mean((y - p) ** 2)) if (o >= 2).any() else p * (1.0 - p)
    se = math.sqrt(float(np.sum(d**2 * var_y))) / len(p)
    return float(entropy.mean()), 4 * se + excess(m, len(p))


def excess(m: int, n: int) -> float:
    """Twice the expected excess log-loss of a held-out fit over the truth: a maximum likelihood fit
    of ``m - 1`` free strengths on ``n_train`` battles is off by about ``(m - 1) / (2 n_train)`` per
    battle (the asymptotic expected Kullback-Leibler divergence), with ``n_train`` the
    ``(FOLDS - 1) / FOLDS`` of the ``n`` battles."""
    return (m - 1) / (n * (FOLDS - 1) / FOLDS)


@pytest.mark.parametrize("draws", [0.0, 0.35], ids=["no_draws", "lmarena_draws"])
def test_held_out_log_loss_is_the_entropy_of_the_true_probabilities(draws):
    rng = np.random.default_rng(20251125)
    theta = rng.normal(0.0, 0.8, MODELS)
    a, b, o, session, p = tournament(rng, theta, draws=draws)
    row, calibration, info = board_model_fit("sim", a, b, o, session, MODELS, CONFIG)
    entropy, tolerance = expected_loss_and_tolerance(p, o, MODELS)
    assert tolerance < 0.012  # a meaningful test: the entropy here is about 0.55
    assert abs(row["log_loss"] - entropy) < tolerance, (row["log_loss"], entropy, tolerance)
    # tighter, on the same outcomes: the held-out fit loses a little more than the truth, and about
    # (m - 1) / (2 n_train) more (the outcome noise cancels: the difference's s.e. is ~1e-4 here)
    fold = session_folds(session, FOLDS, np.random.default_rng(1))
    held, _ = held_out_predictions(a, b, o, MODELS, fold, FOLDS)
    gap = logistic_log_loss(held.log_odds, held.y) - logistic_log_loss(np.log(p / (1 - p)), held.y)
    se = gap.std() / math.sqrt(len(gap))
    assert -4 * se < gap.mean() < excess(MODELS, BATTLES) + 4 * se, (gap.mean(), se)
    # the model's own expected loss (mean entropy of its predictions) is near the truth's too
    assert abs(row["log_loss_expected"] - entropy) < tolerance
    assert row["scored"] == BATTLES and info["unscored"] == 0
    assert row["draw_share"] == pytest.approx(np.mean(o >= 2))
    if not draws:  # Brier score of the truth: its variance p (1 - p)
        assert abs(row["brier"] - float(np.mean(p * (1 - p)))) < 0.005
    # every model meets every other about equally often: the calibrated win rates predict almost as
    # well as Bradley-Terry (measured: gain 0.00024 of 0.535), and both are calibrated
    assert 0 <= row["log_loss_gain"] < 0.001 and row["log_loss"] < row["log_loss_baseline"]
    assert row["brier"] <= row["brier_baseline"]
    bt = calibration.filter(pl.col("predictor") == "bt")
    assert bt.height == 10 and bt["battles"].sum() == BATTLES
    assert (abs(bt["predicted"] - bt["observed"]) < 0.03).all()
    assert row["calibration_error"] < 0.015 and row["calibration_error_baseline"] < 0.015


def test_the_baseline_slope_is_the_logistic_regression_without_intercept():
    """Golden case: statsmodels' binomial GLM of the per-battle outcomes (a draw as 1/2, in a
    fractional-response logit) on x, without intercept, gives the same slope as the pair-count fit."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(4)
    pairs = 30
    x = rng.normal(0.0, 1.0, (2, pairs))
    x[1, :5] = 0.0  # pairs without two rated models add nothing
    played = rng.integers(1, 40, (2, pairs)).astype(float)
    for row in range(2):
        n = played[row].astype(int)
        xs = np.repeat(x[row], n)
        y = (rng.random(len(xs)) < 1.0 / (1.0 + np.exp(-0.7 * xs))).astype(float)
        y[rng.random(len(xs)) < 0.2] = 0.5
        score = np.bincount(np.repeat(np.arange(pairs), n), y, pairs)
        reference = sm.GLM(y, xs[:, None], family=sm.families.Binomial()).fit(tol=1e-12).params[0]
        assert win_rate_slope(x[row:row + 1], score[None], played[row:row + 1])[0] == pytest.approx(reference, abs=1e-7)
    assert win_rate_slope(np.zeros((1, 3)), np.ones((1, 3)), np.ones((1, 3)))[0] == 0.0


def test_bradley_terry_gains_over_calibrated_win_rates_where_opponents_differ():
    """Models mostly meet neighbours in strength (as on LMArena, where new strong models meet strong
    ones): a win rate near 1/2 means little, whom a model met is what Bradley-Terry adds. The gain is
    significant (measured 0.0121, interval from 0.0105, of 0.670), and the baseline, calibrated by its
    slope, predicts better than the raw rates' average used before (measured 0.6822 against 0.6848)."""
    rng = np.random.default_rng(12)
    theta = np.sort(rng.normal(0.0, 1.0, MODELS))
    n = BATTLES
    first = rng.integers(0, MODELS, n)
    second = np.clip(first + rng.choice([-3, -2, -1, 1, 2, 3], n), 0, MODELS - 1)
    keep = first != second
    a, b = first[keep], second[keep]
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    o = np.where(rng.random(len(a)) < p, 0, 1)
    session = np.arange(len(a))
    row, _, info = board_model_fit("neighbours", a, b, o, session, MODELS, CONFIG)
    assert row["log_loss_gain_lower"] > 0.005 and row["note"] is None
    assert all(slope > 0 for slope in info["baseline_slope"])
    fold = session_folds(session, FOLDS, np.random.default_rng(1))
    held, _ = held_out_predictions(a, b, o, MODELS, fold, FOLDS)
    # the raw average of the training rates (the baseline before): less well calibrated, worse
    played = np.zeros((FOLDS, MODELS))
    won = np.zeros((FOLDS, MODELS))
    for f in range(FOLDS):
        t = fold != f
        played[f] = np.bincount(a[t], minlength=MODELS) + np.bincount(b[t], minlength=MODELS)
        won[f] = np.bincount(a[t], held.y[t], MODELS) + np.bincount(b[t], 1 - held.y[t], MODELS)
    rate = won / played
    raw = 0.5 * (rate[fold, a] + 1.0 - rate[fold, b])
    assert row["log_loss_baseline"] + 0.001 < float(probability_log_loss(raw, held.y).mean())


def test_coin_flips_score_ln2_and_gain_nothing_over_win_rates():
    rng = np.random.default_rng(7)
    a, b, o, session, p = tournament(rng, np.zeros(MODELS))
    row, calibration, _ = board_model_fit("coin", a, b, o, session, MODELS, CONFIG)
    entropy, tolerance = expected_loss_and_tolerance(p, o, MODELS)
    assert entropy == pytest.approx(math.log(2))
    assert abs(row["log_loss"] - math.log(2)) < tolerance
    assert abs(row["log_loss_baseline"] - math.log(2)) < tolerance
    assert not row["log_loss_gain_lower"] > 0  # not better than the baseline
    assert abs(row["log_loss_gain"]) < 0.002
    assert row["note"] == NO_GAIN
    assert abs(row["brier"] - 0.25) < 0.002
    # every prediction is near 1/2, and so is every decile's observed rate
    assert (calibration["predicted"] < 0.56).all() and (abs(calibration["observed"] - 0.5) < 0.03).all()


def test_a_board_of_mostly_draws_stays_near_ln2_and_says_why():
    rng = np.random.default_rng(9)
    a, b, o, session, p = tournament(rng, np.zeros(MODELS), n=20_000, draws=0.85)
    row, _, _ = board_model_fit("draws", a, b, o, session, MODELS, CONFIG)
    entropy, tolerance = expected_loss_and_tolerance(p, o, MODELS)
    assert row["draw_share"] > 0.8 and abs(row["log_loss"] - math.log(2)) < tolerance
    assert "draws (tie, both_bad) are 8" in row["note"] and "at least ln 2" in row["note"]


def test_an_intransitive_cycle_is_flagged_as_poorly_described():
    """Rock-paper-scissors (each model beats the next 80% of the time): the votes are very
    predictable (entropy 0.50) but Bradley-Terry rates the three equal and predicts coin flips."""
    rng = np.random.default_rng(3)
    n = 30_000
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    p = np.where((b - a) % 3 == 1, 0.8, 0.2)
    o = np.where(rng.random(n) < p, 0, 1)
    row, _, _ = board_model_fit("cycle", a, b, o, np.arange(n), 3, CONFIG)
    assert abs(row["log_loss"] - math.log(2)) < 0.005
    assert row["note"] == NO_GAIN


def test_swapping_sides_changes_nothing():
    rng = np.random.default_rng(11)
    theta = rng.normal(0.0, 0.5, 8)
    a, b, o, session, _ = tournament(rng, theta, n=5_000, draws=0.3)
    flipped = np.where(o == 0, 1, np.where(o == 1, 0, o))
    row, calibration, _ = board_model_fit("x", a, b, o, session, 8, CONFIG)
    row_s, calibration_s, _ = board_model_fit("x", b, a, flipped, session, 8, CONFIG)
    for key in ("log_loss", "log_loss_baseline", "brier", "brier_baseline", "log_loss_gain_lower"):
        assert row_s[key] == pytest.approx(row[key], abs=1e-9)
    assert calibration_s["battles"].sum() == calibration["battles"].sum()


def test_folds_keep_each_session_whole_and_are_balanced():
    session = np.repeat(np.arange(1000), np.arange(1000) % 4 + 1)
    fold = session_folds(session, 5, np.random.default_rng(0))
    per_session = pl.DataFrame({"s": session, "f": fold}).group_by("s").agg(pl.col("f").n_unique())
    assert (per_session["f"] == 1).all()
    sizes = np.bincount(fold)
    assert len(sizes) == 5 and sizes.min() > 0.85 * sizes.mean()
    with pytest.raises(ValueError, match="at least 2"):
        session_folds(session, 1, np.random.default_rng(0))


def test_calibration_table_golden_case():
    # favourites: 0.9 (won), 0.8 (side b, won: a scored 1 so b scored 0), 0.6 (draw), 0.5 (side a, lost)
    p = np.array([0.9, 0.2, 0.6, 0.5])
    y = np.array([1.0, 1.0, 0.5, 0.0])
    table = calibration_table(p, y, bins=2)
    assert table["decile"].tolist() == [1, 2] and table["battles"].tolist() == [2, 2]
    assert table["predicted"] == pytest.approx([0.55, 0.85])
    assert table["observed"] == pytest.approx([0.25, 0.5])
    assert table["predicted_min"] == pytest.approx([0.5, 0.8])
    assert table["predicted_max"] == pytest.approx([0.6, 0.9])
    assert calibration_error(table) == pytest.approx((2 * 0.3 + 2 * 0.35) / 4)
    assert len(calibration_table(p[:1], y[:1])["decile"]) == 1  # fewer battles than groups


def test_clustered_interval_widens_when_sessions_repeat_a_vote():
    rng = np.random.default_rng(5)
    values = rng.normal(size=2000)
    mean, lower, upper = clustered_mean_interval(values, np.arange(2000))
    assert mean == pytest.approx(values.mean())
    assert (upper - lower) / 2 == pytest.approx(1.96 * values.std(ddof=1) / math.sqrt(2000), rel=1e-3)
    # each vote repeated in its session: twice the votes, no more information
    twice = clustered_mean_interval(np.repeat(values, 2), np.repeat(np.arange(2000), 2))
    assert (twice[2] - twice[1]) == pytest.approx(upper - lower, rel=1e-3)


def _battles(rng: np.random.Generator, n: int = 6_000) -> pl.DataFrame:
    """A battles frame of 8 models plus one that only loses (unrated), two categories."""
    names = [f"model-{i}" for i in range(8)]
    a, b, o, session, _ = tournament(rng, rng.normal(0.0, 0.6, 8), n=n, draws=0.3)
    winner = np.array(["model_a", "model_b", "tie", "both_bad"])[o]
    frame = pl.DataFrame({
        "id": [f"b{i}" for i in range(n)], "model_a": np.array(names)[a], "model_b": np.array(names)[b],
        "winner": winner, "evaluation_session_id": [f"s{s}" for s in session],
    })
    loser = pl.DataFrame({"id": ["l1", "l2", "self"], "model_a": ["loser", "model-1", "model-2"],
                          "model_b": ["model-0", "loser", "model-2"], "winner": ["model_b", "model_a", "tie"],
                          "evaluation_session_id": [None, "s-l", "s-l"]})
    return pl.concat([frame, loser])


def test_compute_model_fit_scores_exactly_the_boards_battles():
    battles = _battles(np.random.default_rng(2))
    ids = battles.get_column("id")
    tags = pl.concat([pl.DataFrame({"battle_id": ids, "category": "overall"}),
                      pl.DataFrame({"battle_id": ids.filter(ids.str.ends_with("0")), "category": "math"})])
    tags = tag_rows(ids, [tags])
    for ties in ("half", "drop"):
        config = RankingConfig(ties=ties, methods=("bt",), bootstrap_rounds=0, display_min_battles=0)
        board = compute_rankings(battles, tags, config).leaderboard
        out = compute_model_fit(battles, tags, board, config)
        assert out.summary.schema == pl.Schema(MODEL_FIT_SCHEMA)
        assert out.calibration.schema == pl.Schema(MODEL_FIT_CALIBRATION_SCHEMA)
        assert out.summary["category"].to_list() == ["overall", "math"]
        fitted = board.group_by("category").agg((pl.col("n_battles").sum() // 2).alias("fitted"))
        joined = out.summary.join(fitted, on="category")
        assert (joined["battles"] == joined["fitted"]).all()  # no self-battle, no unrated model's
        assert (out.summary["scored"] <= out.summary["battles"]).all()
        overall = out.summary.row(0, named=True)
        assert overall["ties"] == ties and overall["folds"] == FOLDS
        assert (overall["draw_share"] == 0) == (ties == "drop")
        counts = out.calibration.group_by("category", "predictor").agg(pl.col("battles").sum())
        scored = counts.join(out.summary.select("category", "scored"), on="category")
        assert (scored["battles"] == scored["scored"]).all()  # each predictor's deciles hold every scored battle
        again = compute_model_fit(battles, tags, board, config)
        assert again.summary.equals(out.summary) and again.calibration.equals(out.calibration)
        # a (category, battle) row given twice is one battle, as compute_rankings counts it
        twice = compute_model_fit(battles, pl.concat([tags, tags.head(50)]), board, config)
        assert twice.summary["battles"].equals(out.summary["battles"])
