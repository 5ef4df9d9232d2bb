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
from arena_pipeline.core.ranking.scale import to_ratings
from arena_pipeline.core.ranking.types import RankingConfig as Config

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
    clustered = bt_cluster_sandwich_covariance(pairs, theta, a, b, o, np.arange(400))
    assert np.allclose(plain, clustered, atol=1e-12)
    # battle_cells indexes the aggregated counts
    assert np.array_equal(np.bincount(battle_cells(a, b, o, 5), minlength=pairs.counts.size),
                          pairs.counts.ravel())


def test_duplicated_sessions_double_the_variance():
    # every vote copied within its session: the clustered variance is twice the vote-level one
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, 300)
    b = (a + rng.integers(1, 4, 300)) % 4
    o = rng.integers(0, 2, 300)
    a2, b2, o2 = np.repeat(a, 2), np.repeat(b, 2), np.repeat(o, 2)
    pairs = aggregate_pairs(a2, b2, o2, 4)
    theta = fit_bt(pairs).x[0]
    plain = bt_sandwich_covariance(pairs, theta)
    clustered = bt_cluster_sandwich_covariance(pairs, theta, a2, b2, o2, np.repeat(np.arange(300), 2))
    assert np.allclose(clustered, 2.0 * plain, rtol=1e-9, atol=1e-14)


def sessions(rng: np.random.Generator, n_sessions: int):
    """A session: one model pair, 1 + Geometric(0.4) votes (mean 2.5, like multi-vote sessions)."""
    lo, hi = np.triu_indices(MODELS, k=1)
    pick = rng.integers(0, lo.size, n_sessions)
    size = rng.geometric(0.4, n_sessions)
    cluster = np.repeat(np.arange(n_sessions), size)
    return np.repeat(lo[pick], size), np.repeat(hi[pick], size), cluster, size


@pytest.fixture(scope="module")
def simulated():
    """Votes within a session repeat the previous vote with probability 0.6, else are drawn afresh.

    Each vote's marginal outcome is exactly Bradley-Terry (the chain's stationary law), so the
    true ratings are known; only the independence of votes fails.
    """
    rng = np.random.default_rng(20251123)
    theta = rng.normal(0.0, 0.5, MODELS)
    a, b, cluster, size = sessions(rng, 4000)
    first = np.r_[True, cluster[1:] != cluster[:-1]]
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    config = Config(methods=("bt",), bootstrap_rounds=100, display_min_battles=0)
    truth = to_ratings(theta, None, config.anchor_rating)
    hits = {k: [] for k in ("sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap")}
    widths = {k: [] for k in hits}
    for _ in range(REPLICATES):
        fresh = (rng.random(a.size) < p).astype(int)
        repeat = rng.random(a.size) < 0.6
        # a repeated vote copies the session's latest fresh draw: forward-fill of fresh positions
        source = np.maximum.accumulate(np.where(first | ~repeat, np.arange(a.size), 0))
        o = np.where(fresh[source] == 1, 0, 1)
        board = Board("sim", config, [f"m{i}" for i in range(MODELS)], a, b, o, None, None, cluster)
        frame = fit_bt_board(board).frame
        for k in hits:
            lower = frame.get_column(f"{k}_lower").to_numpy()
            upper = frame.get_column(f"{k}_upper").to_numpy()
            hits[k].append((lower <= truth) & (truth <= upper))
            widths[k].append(upper - lower)
    return {k: np.mean(v) for k, v in hits.items()}, {k: np.mean(v) for k, v in widths.items()}


def test_vote_level_intervals_under_cover_with_session_effects(simulated):
    coverage, _ = simulated
    assert coverage["sandwich"] < 0.90, coverage
    assert coverage["bootstrap"] < 0.90, coverage


def test_clustered_intervals_hold_95_percent(simulated):
    coverage, widths = simulated
    assert 0.935 <= coverage["cluster_sandwich"] <= 0.965, coverage
    assert 0.92 <= coverage["cluster_bootstrap"] <= 0.965, coverage  # 100 percentile rounds
    assert widths["cluster_sandwich"] > 1.2 * widths["sandwich"]


def test_compute_rankings_clusters_by_session_column():
    rng = np.random.default_rng(5)
    a, b, cluster, _ = sessions(rng, 600)
    names = np.array([f"m{i:02d}" for i in range(MODELS)])
    frame = pl.DataFrame({
        "id": [f"v{i}" for i in range(a.size)],
        "model_a": names[a], "model_b": names[b],
        "winner": np.where(rng.random(a.size) < 0.5, "model_a", "model_b"),
        "evaluation_session_id": [f"s{c}" if c % 7 else None for c in cluster],
    })
    categories = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    config = RankingConfig(methods=("bt", "spectral"), bootstrap_rounds=20,
                           primary_interval="cluster_sandwich", display_min_battles=0)
    out = compute_rankings(frame, categories, config)
    bt = out.leaderboard.filter(pl.col("method") == "bt")
    assert bt.get_column("ci_method").unique().to_list() == ["cluster_sandwich"]
    assert bt.get_column("ci_lower").equals(bt.get_column("cluster_sandwich_lower"), check_names=False)
    assert bt.select(pl.col("^cluster_.*$").null_count()).sum_horizontal().item() == 0
    spectral = out.leaderboard.filter(pl.col("method") == "spectral")
    assert spectral.get_column("ci_method").unique().to_list() == ["bootstrap"]
    # sessions with a null id count one battle each
    expected = len(set(cluster[cluster % 7 != 0])) + int((cluster % 7 == 0).sum())
    assert out.metadata["categories"]["overall"]["bt"]["clusters"] == expected
    without = compute_rankings(frame.drop("evaluation_session_id"), categories, config)
    wbt = without.leaderboard.filter(pl.col("method") == "bt")
    assert wbt.get_column("ci_method").unique().to_list() == ["sandwich"]
    assert wbt.get_column("cluster_sandwich_lower").null_count() == wbt.height
