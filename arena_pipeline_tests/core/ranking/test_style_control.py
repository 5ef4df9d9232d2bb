"""Style control (`bt_style`): features, an independent penalised fit, sandwich, invariants."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy.optimize import minimize

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.style_control import STYLE_FEATURES, style_feature_exprs
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"
PPL = 400.0 / math.log(10.0)
Z95 = 1.959963984540054


def load_fixture() -> pl.DataFrame:
    return pl.read_parquet(FIXTURE)


def run(frame: pl.DataFrame, **config):
    settings = {"methods": ("bt_style",), "bootstrap_rounds": 0, "min_battles": 1, **config}
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
    return compute_rankings(frame, categories, RankingConfig(**settings))


def reference_design(frame: pl.DataFrame):
    """Models, +1/-1 model design, standardised style features and outcomes, from scratch."""
    models = sorted(set(frame.get_column("model_a")) | set(frame.get_column("model_b")))
    index = {m: i for i, m in enumerate(models)}
    n = frame.height
    x = np.zeros((n, len(models)))
    x[np.arange(n), [index[m] for m in frame.get_column("model_a")]] = 1.0
    x[np.arange(n), [index[m] for m in frame.get_column("model_b")]] = -1.0
    groups = {
        "tokens": ["sum_assistant_{s}_tokens"],
        "headers": [f"header_count_{{s}}_h{i}" for i in range(1, 7)],
        "lists": ["list_count_{s}_ordered", "list_count_{s}_unordered"],
        "bold": ["bold_count_{s}_asterisk", "bold_count_{s}_underscore"],
    }
    feats = []
    for cols in groups.values():
        side = {
            s: sum(frame.get_column(c.format(s=s)).fill_null(0).to_numpy() for c in cols)
            for s in "ab"
        }
        total = (side["a"] + side["b"]).astype(float)
        feats.append(np.divide(side["a"] - side["b"], total, out=np.zeros(n), where=total > 0))
    f = np.column_stack(feats)
    f = (f - f.mean(axis=0)) / f.std(axis=0)
    winner = frame.get_column("winner").to_numpy()
    y = np.where(winner == "model_a", 1.0, np.where(winner == "model_b", 0.0, 0.5))
    return models, x, f, y


def test_style_features_are_normalised_differences():
    frame = pl.DataFrame(
        {
            "sum_assistant_a_tokens": [300, 0, 100],
            "sum_assistant_b_tokens": [100, 0, None],
            **{f"header_count_{s}_h{i}": [0, 0, 0] for s in "ab" for i in range(1, 7)},
            "list_count_a_ordered": [1, 0, 0],
            "list_count_a_unordered": [1, 0, 0],
            "list_count_b_ordered": [0, 0, 0],
            "list_count_b_unordered": [2, 0, 0],
            "bold_count_a_asterisk": [0, 0, 3],
            "bold_count_a_underscore": [0, 0, 0],
            "bold_count_b_asterisk": [0, 0, 0],
            "bold_count_b_underscore": [0, 0, 1],
        }
    )
    out = frame.select(style_feature_exprs())
    assert out.columns == list(STYLE_FEATURES) == ["tokens", "headers", "lists", "bold"]
    assert out.get_column("tokens").to_list() == [0.5, 0.0, 1.0]  # both 0 -> 0; null -> 0
    assert out.get_column("headers").to_list() == [0.0, 0.0, 0.0]
    assert out.get_column("lists").to_list() == [0.0, 0.0, 0.0]
    assert out.get_column("bold").to_list() == [0.0, 0.0, 0.5]


@pytest.mark.parametrize("l2", [1.0, 25.0])
def test_matches_independent_penalised_logistic_fit(l2):
    """bt_style == scipy trust-region fit of the same penalised per-battle likelihood.

    Reference: dense design [model columns without the first model, z-scored features],
    ties as y = 0.5 (the same log-likelihood as two half-weight rows), penalty l2/2 |beta|^2.
    Tolerances: 0.01 rating points, 1e-6 on coefficients (log-odds per SD).
    """
    frame = load_fixture()
    models, x, f, y = reference_design(frame)
    design = np.hstack([x[:, 1:], f])
    k = f.shape[1]
    pen = np.concatenate([np.zeros(len(models) - 1), np.full(k, l2)])

    def objective(w):
        eta = design @ w
        return np.sum(np.logaddexp(0.0, eta) - y * eta) + 0.5 * np.sum(pen * w**2)

    def gradient(w):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        return design.T @ (p - y) + pen * w

    def hessian(w):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        return (design * (p * (1 - p))[:, None]).T @ design + np.diag(pen)

    ref = minimize(
        objective,
        np.zeros(design.shape[1]),
        jac=gradient,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-9},
    )
    # trust-exact stops on rounding near 1e-7; parameter error is then ~1e-9 log-odds
    assert np.linalg.norm(gradient(ref.x)) < 1e-6
    theta = np.concatenate([[0.0], ref.x[: len(models) - 1]])
    expected = dict(zip(models, 1000.0 + PPL * (theta - theta.mean()), strict=True))
    out = run(frame, style_method="unweighted", style_l2=l2)
    board = out.leaderboard
    got = dict(zip(board.get_column("model"), board.get_column("rating"), strict=True))
    assert max(abs(got[m] - expected[m]) for m in models) < 0.01
    coefs = out.style_coefficients
    assert coefs.get_column("feature").to_list() == list(STYLE_FEATURES)
    assert np.allclose(coefs.get_column("coefficient").to_numpy(), ref.x[-k:], atol=1e-6)
    assert out.metadata["categories"]["overall"]["bt_style"]["grad_norm"] < 1e-8


def test_unpenalised_sandwich_matches_statsmodels_hc0():
    """With style_l2=0, sandwich intervals == statsmodels GLM HC0 (relative tol 1e-6)."""
    frame = load_fixture()
    models, x, f, y = reference_design(frame)
    m = len(models)
    fit = sm.GLM(y, np.hstack([x[:, 1:], f]), family=sm.families.Binomial()).fit(
        tol=1e-13, maxiter=200, cov_type="HC0"
    )
    cov = fit.cov_params()
    embed = np.vstack([np.zeros(m - 1), np.eye(m - 1)])
    contrast = (np.eye(m) - 1.0 / m) @ embed
    rating_se = PPL * np.sqrt(np.diag(contrast @ cov[: m - 1, : m - 1] @ contrast.T))
    out = run(frame, style_method="unweighted", style_l2=0.0)
    board = out.leaderboard.sort("model")
    half = (board.get_column("sandwich_upper") - board.get_column("rating")).to_numpy()
    assert np.allclose(half, Z95 * rating_se, rtol=1e-6)
    coefs = out.style_coefficients
    coef_half = (coefs.get_column("sandwich_upper") - coefs.get_column("coefficient")).to_numpy()
    assert np.allclose(coef_half, Z95 * np.sqrt(np.diag(cov)[m - 1 :]), rtol=1e-6)
    assert np.allclose(coefs.get_column("coefficient").to_numpy(), fit.params[m - 1 :], atol=1e-6)


def test_length_effect_is_recovered_and_bootstrap_is_reproducible():
    # the fixture was drawn with a positive effect of answer length (make_synthetic_battles.py)
    frame = load_fixture()
    first = run(frame, style_bootstrap_rounds=40, seed=7)
    again = run(frame, style_bootstrap_rounds=40, seed=7)
    assert first.leaderboard.equals(again.leaderboard)
    assert first.style_coefficients.equals(again.style_coefficients)
    tokens = first.style_coefficients.filter(pl.col("feature") == "tokens").row(0, named=True)
    assert tokens["ci_method"] == "sandwich"
    assert 0.0 < tokens["ci_lower"] < tokens["coefficient"] < tokens["ci_upper"]
    assert 0.0 < tokens["bootstrap_lower"] < tokens["coefficient"] < tokens["bootstrap_upper"]
    other = run(frame, style_bootstrap_rounds=40, seed=8)
    assert not first.style_coefficients.equals(other.style_coefficients)


def test_swapping_sides_changes_nothing():
    frame = load_fixture()
    flip = {"model_a": "model_b", "model_b": "model_a", "tie": "tie", "both_bad": "both_bad"}
    swap = {
        c: c.replace("_a_", "_T_").replace("_b_", "_a_").replace("_T_", "_b_")
        for c in frame.columns
    }
    swapped = frame.rename(swap).with_columns(
        model_a=pl.col("model_b"),
        model_b=pl.col("model_a"),
        winner=pl.col("winner").replace_strict(flip),
    )
    one = run(frame, style_bootstrap_rounds=20)
    two = run(swapped, style_bootstrap_rounds=20)
    cols = ["rating", "ci_lower", "ci_upper", "bootstrap_lower", "bootstrap_upper"]
    diff = one.leaderboard.select(cols).to_numpy() - two.leaderboard.select(cols).to_numpy()
    assert np.abs(diff).max() < 1e-6
    coef_cols = ["coefficient", "ci_lower", "ci_upper", "bootstrap_lower", "bootstrap_upper"]
    a = one.style_coefficients.select(coef_cols).to_numpy()
    b = two.style_coefficients.select(coef_cols).to_numpy()
    assert np.abs(a - b).max() < 1e-9


def test_missing_style_columns_raise():
    frame = load_fixture().drop("bold_count_b_underscore")
    with pytest.raises(ValueError, match="bold_count_b_underscore"):
        run(frame)


REFERENCE = FIXTURE.parent / "arena_rank_style_reference.json"


def skewed_subset(frame: pl.DataFrame) -> pl.DataFrame:
    """The ``skewed`` battle set of benchmarks/arena_rank_style_reference.py."""
    keep = (
        (pl.col("model_a") == "model-a")
        | (pl.col("model_b") == "model-a")
        | (pl.int_range(pl.len()) % 5 == 0)
    )
    return frame.filter(keep)


@pytest.mark.parametrize("subset", ["all", "skewed"])
def test_default_style_control_matches_arena_rank(subset):
    """Default bt_style == arena-rank 0.1.1 ContextualBradleyTerry on the same battles.

    Reference numbers were computed once with arena-rank (benchmarks/arena_rank_style_reference.py,
    stored in data/ranking/arena_rank_style_reference.json). arena-rank stops L-BFGS at ftol/gtol
    1e-9 on the mean loss; tolerance 0.5 rating points (the issue's bar; observed < 0.01) and 2%
    relative on coefficients. arena-rank's sandwich leaves the penalty out of the Hessian's
    coefficient block (it adds only 1e-5); ours uses the penalised Hessian, the sandwich of the
    penalised estimator, so the interval half-widths differ: within 20% here (observed up to 15%,
    ours the narrower, and within a few points of our own 200-round bootstrap).
    """
    import json

    reference = json.loads(REFERENCE.read_text())[subset]
    frame = load_fixture()
    frame = skewed_subset(frame) if subset == "skewed" else frame
    assert frame.height == reference["battles"]
    out = run(frame)
    board = out.leaderboard
    got = dict(zip(board.get_column("model"), board.get_column("rating"), strict=True))
    expected = dict(zip(reference["models"], reference["rating"], strict=True))
    assert max(abs(got[m] - expected[m]) for m in expected) < 0.5
    half = dict(zip(board.get_column("model"), board.get_column("ci_upper") - board.get_column("rating"), strict=True))
    ref_half = dict(zip(reference["models"], np.subtract(reference["rating_upper"], reference["rating"]), strict=True))
    for m in expected:
        assert 0.8 < half[m] / ref_half[m] < 1.2
    names = {"tokens": "sum_assistant_tokens", "headers": "header_count",
             "lists": "list_count", "bold": "bold_count"}
    coefs = dict(zip(out.style_coefficients.get_column("feature"),
                     out.style_coefficients.get_column("coefficient"), strict=True))
    for ours, theirs in names.items():
        assert coefs[ours] == pytest.approx(reference["coefficients"][theirs], rel=0.02, abs=1e-4)
    # the earlier unweighted variant does not meet this bar on the skewed set
    if subset == "skewed":
        old = run(frame, style_method="unweighted").leaderboard
        old_rating = dict(zip(old.get_column("model"), old.get_column("rating"), strict=True))
        assert max(abs(old_rating[m] - expected[m]) for m in expected) > 0.5


def test_coefficient_rows_say_how_far_the_penalty_shrinks():
    """Issue 44: coefficient_unpenalised is the fit without penalty (statsmodels' unpenalised logistic
    coefficients, weighted as LMArena's, to 1e-6), share_kept = coefficient / coefficient_unpenalised;
    LMArena's default penalty (style_reg 1) keeps less of the length effect than style_reg 0.01, and
    style_reg 0 keeps all of it."""
    frame = load_fixture()
    models, x, f, y = reference_design(frame)
    default = run(frame).style_coefficients
    light = run(frame, style_reg=0.01).style_coefficients
    free = run(frame, style_reg=0.0).style_coefficients
    assert np.allclose(default["coefficient_unpenalised"].to_numpy(), free["coefficient"].to_numpy(), atol=1e-6)
    assert np.allclose(default["share_kept"].to_numpy(),
                       (default["coefficient"] / default["coefficient_unpenalised"]).to_numpy())
    assert np.allclose(free["share_kept"].to_numpy(), 1.0, atol=1e-6)
    tokens = {name: t.filter(pl.col("feature") == "tokens").row(0, named=True)
              for name, t in (("default", default), ("light", light))}
    assert 0.0 < tokens["default"]["share_kept"] < tokens["light"]["share_kept"] < 1.0
    # the unweighted variant: its unpenalised coefficients are statsmodels' plain logistic regression
    unweighted = run(frame, style_method="unweighted", style_l2=25.0).style_coefficients
    glm = sm.GLM(y, np.hstack([x[:, 1:], f]), family=sm.families.Binomial()).fit(tol=1e-13, maxiter=200)
    assert np.allclose(unweighted["coefficient_unpenalised"].to_numpy(), glm.params[len(models) - 1:], atol=1e-6)
    # the penalty shrinks the coefficient vector; a small coefficient of correlated features may grow
    assert unweighted.filter(pl.col("feature") == "tokens")["share_kept"].item() < 1.0
    assert (np.abs(unweighted["coefficient"]) ** 2).sum() < (np.abs(unweighted["coefficient_unpenalised"]) ** 2).sum()



def test_an_unpenalised_fit_without_a_finite_optimum_is_null_not_a_failed_board(monkeypatch):
    """Where the unpenalised fit has no usable optimum (a singular Hessian, as a 10-vote dump of
    test_bad_inputs gave, or no convergence) its coefficients are NaN (null in the table) and the board
    is still fitted; where it converges they are the fit's."""
    from types import SimpleNamespace

    import numpy as np

    from arena_pipeline.core.ranking import style_board
    from arena_pipeline.core.ranking.style_board import UNPENALISED, _unpenalised
    from arena_pipeline.core.ranking.style_control import StyleDesign, fit_bt_style

    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 60)
    b = (a + rng.integers(1, 3, 60)) % 3
    feats = rng.normal(size=(60, 4))
    y = (rng.random(60) < 0.5).astype(float)
    design = StyleDesign.build(a, b, y, feats, 3)
    weights = np.ones(len(y))
    penalised = fit_bt_style(design, 1.0 * len(y), weights).x[0]
    settings = SimpleNamespace(tol=1e-8, max_iter=50)
    beta, _, grad = _unpenalised(design, UNPENALISED * len(y), weights, penalised, settings, 3)
    assert np.isfinite(beta).all() and grad < 1e-8  # converged: the fit's own coefficients
    unfinished, _, _ = _unpenalised(design, UNPENALISED * len(y), weights, penalised,
                                    SimpleNamespace(tol=1e-30, max_iter=1), 3)
    assert np.isnan(unfinished).all()  # not converged: no coefficient claimed

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(style_board, "fit_bt_style", singular)
    failed, _, _ = _unpenalised(design, UNPENALISED * len(y), weights, penalised, settings, 3)
    assert np.isnan(failed).all()
