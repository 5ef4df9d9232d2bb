"""Board-wide tests and rank sets (core.ranking.simultaneous): known answers, invariants, coverage."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.integrate import quad
from scipy.stats import norm, studentized_range

from arena_pipeline.core.ranking.board import Board, fit_bt_board
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.simultaneous import DRAWS, covariance_draws, max_quantile, step_down

I3, J3 = np.array([0, 0, 1]), np.array([1, 2, 2])


def draws(cov: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return covariance_draws(cov, DRAWS, rng)


def test_draws_have_the_differences_of_the_covariance_even_when_it_is_singular():
    """The draws' pairwise differences have the covariance's law (Cholesky of the differences from the
    first model); a singular one (a sum-zero Laplacian inverse, or an unbounded direction) too."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((5, 5))
    centred = np.eye(5) - 1.0 / 5
    tied = np.ones((5, 5)) + np.diag([0.0, 0.0, 1.0, 1.0, 1.0])  # models 0 and 1 move together: no Cholesky
    for cov in (centred @ a @ a.T @ centred, np.diag([1.0, 1.0, 1.0, 1.0, 0.0]), tied):
        z = covariance_draws(cov, 200_000, rng).astype(float)
        diff = z[:, 1:] - z[:, :1]
        expected = cov[1:, 1:] - cov[1:, :1] - cov[:1, 1:] + cov[0, 0]
        assert np.allclose(np.cov(diff, rowvar=False), expected, atol=0.02 * np.abs(expected).max())
    assert np.all(z[:, 1] == z[:, 0])


def range_probability(c: float, n: int = 3) -> float:
    """P(max_ij |Z_i - Z_j| / sqrt(2) <= c) for ``n`` independent standard normals: the range of the
    sample is at most ``c sqrt(2)`` (Tukey's studentized range with infinite degrees of freedom),
    ``n * int phi(x) (Phi(x + r) - Phi(x))^(n - 1) dx`` by quadrature."""
    r = c * np.sqrt(2.0)
    return n * quad(lambda x: norm.pdf(x) * (norm.cdf(x + r) - norm.cdf(x)) ** (n - 1), -np.inf, np.inf)[0]


def test_three_models_critical_value_is_the_quantile_of_the_maximum():
    """Three models, independent unit errors: the simulated critical value is Tukey's: the 95% point
    of the studentized range over sqrt(2) (3.314 / sqrt(2) = 2.344), up to the Monte Carlo error,
    between the per-pair z and Bonferroni's."""
    rng = np.random.default_rng(1)
    tests = step_down(np.zeros(3), np.eye(3), I3, J3, 0.95, draws(np.eye(3), rng))
    c = tests.critical
    assert norm.ppf(0.975) < c < norm.ppf(1 - 0.05 / 6)
    assert range_probability(c) == pytest.approx(0.95, abs=0.006)
    assert c == pytest.approx(studentized_range.ppf(0.95, 3, 1e6) / np.sqrt(2.0), rel=0.02)
    assert not tests.significant.any() and tests.steps == 1


def test_step_down_rejects_what_the_single_step_cannot():
    """Three models a, b, c with |T| = 2.3 (a, b), 10 (a, c), 7.7 (b, c): the single step (c ~ 2.39)
    rejects the two large ones; over the one pair left the critical value is the per-pair 1.96, which
    rejects (a, b) too."""
    se = np.sqrt(2.0)
    theta = np.array([0.0, 2.3 * se, 10.0 * se])
    tests = step_down(theta[I3] - theta[J3], np.eye(3), I3, J3, 0.95, draws(np.eye(3), np.random.default_rng(2)))
    assert tests.significant.all()
    assert tests.steps == 2
    assert tests.critical > 2.3 > tests.final_critical == pytest.approx(norm.ppf(0.975))
    above = tests.above(3, theta[I3] - theta[J3])
    assert above[2, 0] and above[2, 1] and above[1, 0] and not above[0].any()


def test_unbounded_models_are_never_significant_and_stay_out_of_the_maximum():
    theta = np.array([0.0, 10.0, 20.0])
    bounded = step_down(theta[I3] - theta[J3], np.eye(3), I3, J3, 0.95, draws(np.eye(3), np.random.default_rng(3)))
    cut = step_down(theta[I3] - theta[J3], np.eye(3), I3, J3, 0.95, draws(np.eye(3), np.random.default_rng(3)),
                    unbounded=np.array([False, False, True]))
    assert bounded.significant.all()
    assert cut.significant.tolist() == [True, False, False]


def test_the_maximum_is_the_same_in_any_chunking(monkeypatch):
    import arena_pipeline.core.ranking.simultaneous as simultaneous

    z = np.random.default_rng(4).standard_normal((500, 30))
    i, j = np.triu_indices(30, k=1)
    se = np.full(len(i), np.sqrt(2.0))
    whole = max_quantile(z, i, j, se, 0.95)
    monkeypatch.setattr(simultaneous, "CHUNK_ELEMENTS", 1_000)  # two pairs at a time
    assert max_quantile(z, i, j, se, 0.95) == whole


@pytest.mark.parametrize("share", [1.0, 0.3])
def test_maxima_are_the_brute_force_ones_run_by_run_or_gathered(share):
    """A board's whole triangle (runs of consecutive pairs) and a scattered third of it (gathered) give
    the maximum and its pair of the dense computation."""
    from arena_pipeline.core.ranking.simultaneous import maxima

    rng = np.random.default_rng(10)
    z = rng.standard_normal((300, 40)).astype(np.float32)
    i, j = np.triu_indices(40, k=1)
    keep = rng.random(len(i)) < share
    i, j, se = i[keep], j[keep], rng.uniform(0.5, 2.0, keep.sum())
    best, where = maxima(z, i, j, se)
    dense = np.abs(z[:, i] - z[:, j]) * (1.0 / se).astype(np.float32)
    assert np.array_equal(best, dense.max(axis=1)) and np.array_equal(where, dense.argmax(axis=1))


def board_of(theta: np.ndarray, per_pair: int, rng: np.random.Generator, config: RankingConfig) -> Board:
    m = len(theta)
    lo, hi = np.triu_indices(m, k=1)
    a, b = np.repeat(lo, per_pair), np.repeat(hi, per_pair)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    o = np.where(rng.random(len(a)) < p, 0, 1)
    return Board("sim", config, [f"m{i:02d}" for i in range(m)], a, b, o, None, None)


def test_equal_records_give_every_model_every_rank():
    """Every pair split evenly: all ratings equal, no claim, and both rank sets are [1, m]."""
    m = 6
    lo, hi = np.triu_indices(m, k=1)
    a, b = np.repeat(lo, 40), np.repeat(hi, 40)
    o = np.tile(np.r_[np.zeros(20, int), np.ones(20, int)], len(lo))
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=0)
    result = fit_bt_board(Board("even", config, [f"m{i}" for i in range(m)], a, b, o, None, None))
    board = result.frame
    assert board.get_column("rank_ub_simultaneous").to_list() == [1] * m
    assert board.get_column("rank_lb_simultaneous").to_list() == [m] * m
    assert not result.significance.get_column("significant_simultaneous").any()


def test_simultaneous_sets_contain_the_per_model_ones_and_separate_far_models():
    """simultaneous ⊇ per-model, significant_simultaneous ⇒ significant, and models 3 points of
    log-odds apart with 200 votes a pair are told apart by both."""
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=0)
    theta = np.r_[np.linspace(0.0, 0.3, 8), 3.0]
    result = fit_bt_board(board_of(theta, 200, np.random.default_rng(5), config))
    board, tests = result.frame, result.significance
    assert (board["rank_ub_simultaneous"] <= board["rank_ub"]).all()
    assert (board["rank_lb_simultaneous"] >= board["rank_lb"]).all()
    assert (board["rank_ub_simultaneous"] <= board["rank"]).all()
    assert (board["rank"] <= board["rank_lb_simultaneous"]).all()
    assert tests.filter(pl.col("significant_simultaneous") & ~pl.col("significant")).height == 0
    top = board.filter(pl.col("model") == "m08").row(0, named=True)
    assert (top["rank_ub_simultaneous"], top["rank_lb_simultaneous"]) == (1, 1)
    assert tests.filter(pl.col("model_2") == "m08").get_column("significant_simultaneous").all()


def test_provisional_models_are_ranked_among_all_in_their_own_family():
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=200)
    theta = np.linspace(0.0, 2.0, 6)
    board = board_of(theta, 60, np.random.default_rng(6), config)
    keep = ~((board.b == 5) & (board.a < 4))  # model 5 keeps its 60 battles against model 4: provisional
    board = Board("sim", config, board.models, board.a[keep], board.b[keep], board.o[keep], None, None)
    frame = fit_bt_board(board).frame
    row = frame.filter(pl.col("provisional")).row(0, named=True)
    assert row["model"] == "m05" and 1 <= row["rank_ub_simultaneous"] <= row["rank_lb_simultaneous"] <= 6
    shown = frame.filter(~pl.col("provisional"))
    assert shown["rank_lb_simultaneous"].max() <= 5


@pytest.mark.slow
def test_simultaneous_rank_sets_cover_every_model_at_once():
    """200 boards of 12 models (strengths N(0, 0.5), 80 votes a pair): the per-model sets cover all
    true ranks at once on clearly fewer boards than the simultaneous ones, which cover on at least
    95% - 3 s.e.; no board-wide false claim on more than 5% + 3 s.e. of boards."""
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=0)
    rng = np.random.default_rng(7)
    joint = per_model = false_claims = 0
    boards = 200
    for _ in range(boards):
        theta = rng.normal(0.0, 0.5, 12)
        result = fit_bt_board(board_of(theta, 80, rng, config))
        board = result.frame.sort("model")
        true_rank = 1 + (theta[None, :] > theta[:, None]).sum(axis=1)
        joint += bool(((board["rank_ub_simultaneous"].to_numpy() <= true_rank)
                       & (true_rank <= board["rank_lb_simultaneous"].to_numpy())).all())
        per_model += bool(((board["rank_ub"].to_numpy() <= true_rank) & (true_rank <= board["rank_lb"].to_numpy())).all())
        claims = result.significance.filter("significant_simultaneous")
        one = np.array([int(s[1:]) for s in claims["model_1"]], dtype=int)
        two = np.array([int(s[1:]) for s in claims["model_2"]], dtype=int)
        false_claims += bool((np.sign(claims["difference"].to_numpy()) != np.sign(theta[one] - theta[two])).any())
    se = np.sqrt(0.05 * 0.95 / boards)
    assert joint / boards >= 0.95 - 3 * se
    assert false_claims / boards <= 0.05 + 3 * se
    assert per_model < joint
