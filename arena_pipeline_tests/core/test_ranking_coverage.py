"""Calibration of the primary interval: coverage of known strengths and rank_ub on simulated tournaments."""

from __future__ import annotations

import numpy as np
import pytest

from arena_pipeline.core.ranking.board import Board, fit_bt_board
from arena_pipeline.core.ranking.scale import ranks, to_ratings
from arena_pipeline.core.ranking.types import RankingConfig

#: 300 tournaments of 30 models: 9,000 (model, replicate) indicators. Their correlation within a
#: replicate makes the standard error of the coverage about 0.3 points, so 94-96% is a +-3 sigma band.
REPLICATES = 300
MODELS = 30


def schedule(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A realistic pair schedule: every pair met, battles per pair lognormal (a 20x spread).

    Returns the pairs ``lo``, ``hi`` and the battles of each pair (about 26,000 in all).
    """
    lo, hi = np.triu_indices(MODELS, k=1)
    per_pair = np.maximum(1, rng.poisson(40.0 * rng.lognormal(0.0, 0.9, size=lo.size)))
    return lo, hi, per_pair


@pytest.fixture(scope="module")
def simulated():
    rng = np.random.default_rng(20251123)
    theta = rng.normal(0.0, 0.7, size=MODELS)  # log-strengths: about a 500-point spread
    lo, hi, per_pair = schedule(rng)
    a = np.repeat(lo, per_pair)
    b = np.repeat(hi, per_pair)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    config = RankingConfig(methods=("bt",), bootstrap_rounds=0, display_min_battles=0)
    truth = to_ratings(theta, None, config.anchor_rating)
    covered, rank_ok = [], []
    for _ in range(REPLICATES):
        o = np.where(rng.random(a.size) < p, 0, 1)
        board = Board("sim", config, [f"m{i}" for i in range(MODELS)], a, b, o, None, None)
        frame = fit_bt_board(board).frame
        lower, upper = frame.get_column("ci_lower").to_numpy(), frame.get_column("ci_upper").to_numpy()
        covered.append((lower <= truth) & (truth <= upper))
        rank_ok.append(frame.get_column("rank_ub").to_numpy() <= ranks(truth))
    return np.array(covered), np.array(rank_ok)


def test_primary_interval_covers_95_percent(simulated):
    covered, _ = simulated
    coverage = covered.mean()
    assert 0.94 <= coverage <= 0.96, coverage


def test_rank_upper_bound_rarely_claims_too_much(simulated):
    _, rank_ok = simulated
    assert rank_ok.mean() >= 0.975, rank_ok.mean()
