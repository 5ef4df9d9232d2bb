"""Intervals clustered by evaluation session: golden identities and a session-effect simulation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.board import Board, fit_bt_board
from arena_pipeline.core.ranking.bradley_terry import (
    aggregate_pairs,
    battle_cells,
    bt_cluster_sandwich_covariance,
    bt_sandwich_covariance,
    fit_bt,
)
from arena_pipeline.core.ranking.config import RankingConfig as Config
from arena_pipeline.core.ranking.scale import anchor_matrix, to_ratings
from arena_pipeline.core.ranking.style_board import fit_style_board
from arena_pipeline.core.ranking.style_control import (
    StyleDesign,
    bt_style_cluster_sandwich_covariance,
    bt_style_sandwich_covariance,
    fit_bt_style,
)
from arena_pipeline.core.ranking.tags import tag_rows

MODELS = 16
REPLICATES = 200


def test_one_vote_per_session_equals_the_vote_level_sandwich():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, 400)
    b = (a + rng.integers(1, 5, 400)) % 5
    o = rng.integers(0, 4, 400)
    pairs = aggregate_pairs(a, b, o, 5)
    theta = fit_bt(pairs).x[0]
    plain = bt_sandwich_covariance(pairs, theta)
    clustered = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, np.arange(400), correction="CR0")
    assert np.allclose(plain, clustered.cov, atol=1e-12)
    assert not clustered.unbounded.any()
    # battle_cells indexes the aggregated counts
    assert np.array_equal(np.bincount(battle_cells(a, b, o, 5), minlength=pairs.counts.size),
                          pairs.counts.ravel())


def test_bt_style_clustered_covariance_without_style_is_bts():
    """With every style difference 0 the style-controlled fit is Bradley-Terry's, and its CR3
    covariance of the strengths is bt's (sessions of 1-4 votes, ties included; rel. tol 1e-8);
    the coefficients' block is decoupled (their variance is 0: no feature varies)."""
    rng = np.random.default_rng(11)
    size = rng.integers(1, 5, 150)
    cluster = np.repeat(np.arange(150), size)
    a = np.repeat(rng.integers(0, 5, 150), size)
    b = (a + np.repeat(rng.integers(1, 5, 150), size)) % 5
    o = rng.integers(0, 4, a.size)
    pairs = aggregate_pairs(a, b, o, 5)
    theta = fit_bt(pairs).x[0]
    expected = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster).cov
    y = np.where(o == 0, 1.0, np.where(o == 1, 0.0, 0.5))
    design = StyleDesign.build(a, b, y, np.zeros((a.size, 4)), 5)
    got = bt_style_cluster_sandwich_covariance(design, np.r_[theta, np.zeros(4)], 1.0, cluster)
    assert np.allclose(got.cov[:5, :5], expected, rtol=1e-8, atol=1e-14)
    assert np.allclose(got.cov[5:], 0.0) and not got.unbounded.any()


def test_bt_style_clustered_covariance_with_one_vote_per_session_is_near_the_vote_level_one():
    """Sessions of one vote: CR3 is the vote-level sandwich with each score divided by 1 - leverage,
    a little wider, by about the leverages (the board's parameters / votes: under 2% here)."""
    rng = np.random.default_rng(12)
    n = 3000
    a = rng.integers(0, 6, n)
    b = (a + rng.integers(1, 6, n)) % 6
    feats = rng.standard_normal((n, 4))
    theta = rng.normal(0.0, 0.5, 6)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b] + feats @ np.array([0.3, 0.0, 0.1, 0.0]))))
    y = (rng.random(n) < p).astype(float)
    design = StyleDesign.build(a, b, y, feats, 6)
    x = fit_bt_style(design, 1.0).x[0]
    plain = bt_style_sandwich_covariance(design, x, 1.0)
    cr3 = bt_style_cluster_sandwich_covariance(design, x, 1.0, np.arange(n)).cov
    ratio = np.diag(cr3)[1:] / np.diag(plain)[1:]
    assert (ratio > 1.0).all() and (ratio < 1.02).all(), ratio


def test_duplicated_sessions_double_the_variance():
    # every vote copied within its session: the CR0 variance is twice the vote-level one
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, 300)
    b = (a + rng.integers(1, 4, 300)) % 4
    o = rng.integers(0, 2, 300)
    a2, b2, o2 = np.repeat(a, 2), np.repeat(b, 2), np.repeat(o, 2)
    pairs = aggregate_pairs(a2, b2, o2, 4)
    theta = fit_bt(pairs).x[0]
    plain = bt_sandwich_covariance(pairs, theta)
    clustered = bt_cluster_sandwich_covariance(
        pairs, theta, a2, b2, o2, np.repeat(np.arange(300), 2), correction="CR0"
    )
    assert np.allclose(clustered.cov, 2.0 * plain, rtol=1e-9, atol=1e-14)


def test_cr3_of_two_models_has_its_closed_form():
    """Two models, sessions of 1-4 votes: the variance of theta_0 - theta_1 is
    ``sum_c (R_c / (1 - h_c))^2 / S^2`` with ``R_c`` the session's residual sum, ``S`` the summed
    weights ``p (1 - p)`` and ``h_c = s_c / S`` the session's share of them (rel. tol 1e-9)."""
    rng = np.random.default_rng(3)
    size = rng.integers(1, 5, 40)
    cluster = np.repeat(np.arange(40), size)
    n = cluster.size
    flip = rng.random(n) < 0.5
    a, b = np.where(flip, 1, 0), np.where(flip, 0, 1)
    o = rng.choice([0, 1, 2, 3], n, p=[0.4, 0.3, 0.2, 0.1])
    pairs = aggregate_pairs(a, b, o, 2)
    theta = fit_bt(pairs).x[0]
    d = theta[0] - theta[1]
    p0 = 1.0 / (1.0 + np.exp(-d))  # P(model 0 wins)
    y0 = np.where(o >= 2, 0.5, np.where((o == 0) == (a == 0), 1.0, 0.0))  # model 0's score
    r = np.bincount(cluster, y0 - p0)
    share = size / n  # every vote has the same weight p (1 - p)
    expected = ((r / (1.0 - share)) ** 2).sum() / (n * p0 * (1.0 - p0)) ** 2
    cov = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster).cov
    assert cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1] == pytest.approx(expected, rel=1e-9)
    cr0 = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster, correction="CR0").cov
    assert cr0[0, 0] + cr0[1, 1] - 2.0 * cr0[0, 1] == pytest.approx(
        (r**2).sum() / (n * p0 * (1.0 - p0)) ** 2, rel=1e-9)


def mixed_sessions(seed: int, models: int = 6, n_sessions: int = 120):
    """Sessions of 1-5 votes, some on one pair, some on several (the general CR3 path)."""
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 6, n_sessions)
    cluster = np.repeat(np.arange(n_sessions), size)
    one_pair = np.repeat(rng.random(n_sessions) < 0.5, size)
    a = rng.integers(0, models, cluster.size)
    b = (a + rng.integers(1, models, cluster.size)) % models
    first = np.r_[0, np.cumsum(size)[:-1]]
    a = np.where(one_pair, a[first][cluster], a)
    b = np.where(one_pair, b[first][cluster], b)
    theta = rng.normal(0.0, 0.5, models)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(cluster.size)
    o = np.where(u < 0.8 * p, 0, np.where(u < 0.8 * p + 0.2, 2, 1))
    return a, b, o, cluster, models


def dense_cr3(a, b, o, cluster, theta, models):
    """CR3 by its definition, one battle per row and a k x k matrix per session (Bell and
    McCaffrey 2002): ``u_c = X_c^T W_c^(1/2) (I - H_cc)^(-1) W_c^(-1/2) r_c``."""
    n = a.size
    x = np.zeros((n, models))
    x[np.arange(n), a] = 1.0
    x[np.arange(n), b] = -1.0
    p = 1.0 / (1.0 + np.exp(-(x @ theta)))
    w = p * (1.0 - p)
    r = np.where(o == 0, 1.0, np.where(o == 1, 0.0, 0.5)) - p
    bread = np.linalg.pinv(x.T @ (w[:, None] * x))
    meat = np.zeros((models, models))
    for c in np.unique(cluster):
        rows = cluster == c
        root = np.sqrt(w[rows])
        h = root[:, None] * (x[rows] @ bread @ x[rows].T) * root[None, :]
        u = x[rows].T @ (root * np.linalg.solve(np.eye(rows.sum()) - h, r[rows] / root))
        meat += np.outer(u, u)
    return bread @ meat @ bread


def test_cr3_matches_its_dense_definition():
    """Sessions on one pair and on several: the batched computation (pairs aggregated per
    session, one eigen-decomposition per session) equals the dense per-battle definition
    on every contrast (rel. tol 1e-8)."""
    a, b, o, cluster, m = mixed_sessions(7)
    pairs = aggregate_pairs(a, b, o, m)
    theta = fit_bt(pairs).x[0]
    got = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster)
    centre = np.eye(m) - 1.0 / m
    expected = centre @ dense_cr3(a, b, o, cluster, theta, m) @ centre
    assert np.allclose(centre @ got.cov @ centre, expected, rtol=1e-8, atol=1e-12)
    assert not got.unbounded.any()


def test_cr3_is_close_to_the_delete_one_session_jackknife():
    """CR3 is the one-step delete-a-session jackknife: against the exact jackknife (every
    session deleted and the board refitted, ``sum_c (theta_(c) - theta)^2`` per reference
    contrast), within 10% here (about 3% observed); CR0 is lower than both."""
    a, b, o, cluster, m = mixed_sessions(11, models=5, n_sessions=150)
    pairs = aggregate_pairs(a, b, o, m)
    theta = fit_bt(pairs).x[0]
    cells = battle_cells(a, b, o, m)
    per_session = np.zeros((cluster.max() + 1, pairs.counts.size))
    np.add.at(per_session, (cluster, cells), 1.0)
    deleted = pairs.counts.ravel()[None, :] - per_session
    refit = fit_bt(pairs, deleted.reshape(-1, *pairs.counts.shape), theta0=theta).x
    contrast = anchor_matrix(m, 0)[1:]
    jack = (((refit - theta) @ contrast.T) ** 2).sum(axis=0)
    cr3 = np.diag(contrast @ bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster).cov @ contrast.T)
    cr0 = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster, correction="CR0").cov
    assert np.allclose(cr3, jack, rtol=0.03)
    assert (np.diag(contrast @ cr0 @ contrast.T) < cr3).all()


def test_a_model_seen_in_one_session_only_has_no_bounded_clustered_interval():
    """Deleting that session leaves the model without an estimate (leverage 1): CR3 marks it
    unbounded (infinite bounds, here and in rank_ub's comparison), CR0 would give it a finite
    interval built only from its opponents' sessions. The other models stay finite."""
    a, b, o, cluster, m = mixed_sessions(5, models=5, n_sessions=150)
    extra = np.array([0, 1, 2])  # the newcomer (model 5) against model 0: a win, a loss, a tie
    a = np.r_[a, np.full(3, 5)]
    b = np.r_[b, np.zeros(3, dtype=int)]
    o = np.r_[o, extra]
    cluster = np.r_[cluster, np.full(3, cluster.max() + 1)]
    pairs = aggregate_pairs(a, b, o, m + 1)
    theta = fit_bt(pairs).x[0]
    robust = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, cluster)
    assert robust.unbounded.tolist() == [False] * m + [True]
    assert np.isfinite(robust.cov).all()
    config = Config(methods=("bt",), bootstrap_rounds=0, display_min_battles=0,
                    primary_interval="cluster_sandwich")
    names = [f"m{i}" for i in range(m + 1)]
    for anchor in (None, 1):
        fit = fit_bt_board(Board("sim", config, names, a, b, o, None, anchor, cluster))
        frame = fit.frame
        lower, upper = frame.get_column("ci_lower").to_numpy(), frame.get_column("ci_upper").to_numpy()
        assert lower[5] == -np.inf and upper[5] == np.inf
        others = [i for i in range(m) if i != anchor]
        assert np.isfinite(lower[others]).all() and np.isfinite(upper[others]).all()
        assert frame.get_column("rank_ub")[5] == 1  # nothing is surely above it
        assert fit.info["cluster_unbounded_models"] == ["m5"]


def sessions(rng: np.random.Generator, n_sessions: int):
    """A session: one model pair, Geometric(0.4) votes (1 or more, mean 2.5, like multi-vote sessions)."""
    lo, hi = np.triu_indices(MODELS, k=1)
    pick = rng.integers(0, lo.size, n_sessions)
    size = rng.geometric(0.4, n_sessions)
    cluster = np.repeat(np.arange(n_sessions), size)
    return np.repeat(lo[pick], size), np.repeat(hi[pick], size), cluster, size


@pytest.fixture(scope="module")
def simulated():
    """Votes within a session repeat the previous vote with probability 0.6, else are drawn afresh.

    Each vote's marginal outcome is exactly Bradley-Terry (the chain's stationary law), so the
    true ratings are known; only the independence of votes fails. The board is anchored on
    model 0 and every interval is scored on what the page states: ``rating - 1000`` is the
    reference contrast (model 0 itself, exact by definition, is left out). 200 replicates of 15
    scored models; the indicators of one replicate share the reference's error, so the
    standard error of a coverage is about 0.7 points (printed by ``-s``): the bounds below are
    +-2 standard errors, the benchmark (``benchmarks/bench_coverage.py``) measures closer.
    """
    rng = np.random.default_rng(20251123)
    theta = rng.normal(0.0, 0.5, MODELS)
    a, b, cluster, size = sessions(rng, 4000)
    first = np.r_[True, cluster[1:] != cluster[:-1]]
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    config = Config(methods=("bt",), bootstrap_rounds=100, display_min_battles=0)
    truth = to_ratings(theta, 0, config.anchor_rating)
    style = Config(methods=("bt_style",), bootstrap_rounds=0, display_min_battles=0)
    hits = {k: [] for k in ("sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap", "bt_style sandwich",
                            "bt_style cluster_sandwich", "bt_style ci")}
    widths = {k: [] for k in hits}
    for _ in range(REPLICATES):
        fresh = (rng.random(a.size) < p).astype(int)
        repeat = rng.random(a.size) < 0.6
        # a repeated vote copies the session's latest fresh draw: forward-fill of fresh positions
        source = np.maximum.accumulate(np.where(first | ~repeat, np.arange(a.size), 0))
        o = np.where(fresh[source] == 1, 0, 1)
        board = Board("sim", config, [f"m{i}" for i in range(MODELS)], a, b, o, None, 0, cluster)
        fitted = fit_bt_board(board)
        frame = fitted.frame
        assert frame.row(0, named=True)["cluster_sandwich_lower"] is None  # the reference
        # bt_style on the same votes, with style differences unrelated to the outcome (issue 44)
        styled = Board("sim", style, board.models, a, b, o, rng.uniform(-1.0, 1.0, (a.size, 4)), 0, cluster)
        style_frame = fit_style_board(styled, fitted.theta)[0][1:]
        frame = frame[1:]
        for k in hits:
            source, column = (style_frame, k.removeprefix("bt_style ")) if k.startswith("bt_style") else (frame, k)
            lower = source.get_column(f"{column}_lower").to_numpy()
            upper = source.get_column(f"{column}_upper").to_numpy()
            hits[k].append((lower <= truth[1:]) & (truth[1:] <= upper))
            widths[k].append(upper - lower)
    per_replicate = {k: np.mean(v, axis=1) for k, v in hits.items()}
    print({k: f"{v.mean():.3f} +- {v.std(ddof=1) / np.sqrt(len(v)):.3f}" for k, v in per_replicate.items()})
    return {k: v.mean() for k, v in per_replicate.items()}, {k: np.mean(v) for k, v in widths.items()}


@pytest.mark.slow
def test_vote_level_intervals_under_cover_with_session_effects(simulated):
    coverage, _ = simulated
    assert coverage["sandwich"] < 0.90, coverage
    assert coverage["bootstrap"] < 0.90, coverage
    assert coverage["bt_style sandwich"] < 0.90, coverage


@pytest.mark.slow
def test_clustered_intervals_hold_95_percent(simulated):
    coverage, widths = simulated
    assert 0.935 <= coverage["cluster_sandwich"] <= 0.965, coverage
    assert 0.935 <= coverage["cluster_bootstrap"] <= 0.965, coverage
    assert widths["cluster_sandwich"] > 1.2 * widths["sandwich"]


@pytest.mark.slow
def test_bt_style_is_clustered_where_sessions_exist(simulated):
    """Issue 44: bt_style's primary interval (ci) is its session-clustered sandwich, and it holds 95%
    under re-vote sessions (its vote-level one does not: the test above)."""
    coverage, widths = simulated
    assert coverage["bt_style ci"] == coverage["bt_style cluster_sandwich"]
    assert 0.935 <= coverage["bt_style cluster_sandwich"] <= 0.965, coverage
    assert widths["bt_style cluster_sandwich"] > 1.2 * widths["bt_style sandwich"]


def session_votes(seed: int = 5, n_sessions: int = 600, known: float = 6 / 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Votes in sessions of one pair, a ``1 - known`` share of the sessions without an id (null)."""
    rng = np.random.default_rng(seed)
    a, b, cluster, _ = sessions(rng, n_sessions)
    names = np.array([f"m{i:02d}" for i in range(MODELS)])
    with_id = rng.random(n_sessions) < known
    frame = pl.DataFrame({
        "id": [f"v{i}" for i in range(a.size)],
        "model_a": names[a], "model_b": names[b],
        "winner": np.where(rng.random(a.size) < 0.5, "model_a", "model_b"),
        "evaluation_session_id": [f"s{c}" if with_id[c] else None for c in cluster],
    })
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
    return frame, categories


def test_compute_rankings_clusters_by_session_column(golden):
    frame, categories = session_votes()
    config = RankingConfig(methods=("bt", "spectral"), bootstrap_rounds=20,
                           primary_interval="cluster_sandwich", display_min_battles=0)
    out = compute_rankings(frame, categories, config)
    bt = out.leaderboard.filter(pl.col("method") == "bt")
    assert bt.get_column("ci_method").unique().to_list() == ["cluster_sandwich"]
    assert bt.get_column("ci_lower").equals(bt.get_column("cluster_sandwich_lower"), check_names=False)
    assert bt.select(pl.col("^cluster_.*$").null_count()).sum_horizontal().item() == 0
    # spectral has bootstraps only: its primary is the whole-session one
    spectral = out.leaderboard.filter(pl.col("method") == "spectral")
    assert spectral.get_column("ci_method").unique().to_list() == ["cluster_bootstrap"]
    assert spectral.get_column("ci_lower").equals(spectral.get_column("cluster_bootstrap_lower"), check_names=False)
    # sessions with a null id count one battle each
    ids = frame.get_column("evaluation_session_id")
    expected = ids.drop_nulls().n_unique() + ids.null_count()
    assert out.metadata["categories"]["overall"]["bt"]["clusters"] == expected
    status = out.board_status.filter(pl.col("category") == "overall").row(0, named=True)
    assert (status["sessions"], status["votes_without_session"]) == (ids.drop_nulls().n_unique(), ids.null_count())
    golden.check("boards", "clustering: a board's status", status["clustering"])
    assert f"{ids.count():,} votes in {status['sessions']:,} sessions; {ids.null_count():,} votes" in status["clustering"]
    without = compute_rankings(frame.drop("evaluation_session_id"), categories, config)
    wbt = without.leaderboard.filter(pl.col("method") == "bt")
    assert wbt.get_column("ci_method").unique().to_list() == ["sandwich"]
    assert wbt.get_column("cluster_sandwich_lower").null_count() == wbt.height
    golden.check("boards", "clustering: no session column", without.board_status.row(0, named=True)["clustering"])


def test_the_default_primary_interval_is_clustered_where_sessions_are_known():
    """Issue 36: with the default settings a board whose votes carry sessions shows the clustered
    interval (sandwich, or bootstrap with primary_interval='bootstrap'); cluster_primary=False
    gives LMArena's vote-level one; the other columns are the same either way."""
    frame, categories = session_votes()
    default = compute_rankings(frame, categories, RankingConfig(methods=("bt", "spectral"), bootstrap_rounds=20,
                                                               display_min_battles=0)).leaderboard
    vote_level = compute_rankings(frame, categories, RankingConfig(
        methods=("bt", "spectral"), bootstrap_rounds=20, display_min_battles=0, cluster_primary=False)).leaderboard
    boot = compute_rankings(frame, categories, RankingConfig(
        methods=("bt",), bootstrap_rounds=20, display_min_battles=0, primary_interval="bootstrap")).leaderboard
    bt = default.filter(pl.col("method") == "bt")
    assert bt.get_column("ci_method").unique().to_list() == ["cluster_sandwich"]
    assert bt.get_column("ci_upper").equals(bt.get_column("cluster_sandwich_upper"), check_names=False)
    assert boot.get_column("ci_method").unique().to_list() == ["cluster_bootstrap"]
    assert boot.get_column("ci_upper").equals(boot.get_column("cluster_bootstrap_upper"), check_names=False)
    assert vote_level.filter(pl.col("method") == "bt").get_column("ci_method").unique().to_list() == ["sandwich"]
    assert vote_level.filter(pl.col("method") == "spectral").get_column("ci_method").unique().to_list() == [
        "bootstrap"]
    pairwise_tests = ("rank_ub", "rank_lb", "rank_ub_simultaneous", "rank_lb_simultaneous", "significantly_above")
    same = [c for c in default.columns if c not in ("ci_lower", "ci_upper", "ci_method", *pairwise_tests)]
    assert default.select(same).equals(vote_level.select(same))


def test_votes_without_any_session_have_no_clustered_interval(golden):
    """A board none of whose votes has a session id (the 33k / 55k formats) gets null cluster_*
    columns and the vote-level primary interval, with the reason in board_status: never a
    per-vote interval labelled "cluster"."""
    frame, categories = session_votes(known=0.0)
    out = compute_rankings(frame, categories, RankingConfig(methods=("bt", "spectral"), bootstrap_rounds=20,
                                                           display_min_battles=0))
    board = out.leaderboard
    assert board.select(pl.col("^cluster_.*$").null_count()).sum_horizontal().item() == 4 * board.height
    assert board.filter(pl.col("method") == "bt").get_column("ci_method").unique().to_list() == ["sandwich"]
    assert board.filter(pl.col("method") == "spectral").get_column("ci_method").unique().to_list() == ["bootstrap"]
    status = out.board_status.row(0, named=True)
    assert (status["sessions"], status["votes_without_session"]) == (0, frame.height)
    golden.check("boards", "clustering: no known session, a board's status", status["clustering"])
    assert "clusters" not in out.metadata["categories"]["overall"]["bt"]
