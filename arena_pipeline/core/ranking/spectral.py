"""Rank Centrality (Negahban, Oh and Shah 2017): a random walk on per-pair win fractions, and the spectral board."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl

    from arena_pipeline.core.ranking.board import Board, Bounds, BTResult

#: Added to every off-diagonal transition fraction in bootstrap replicates only, so that a
#: replicate whose walk is reducible (a model with no resampled wins) still has a unique
#: stationary distribution. It moves a well-determined score by ~1e-6 log units.
BOOTSTRAP_SMOOTHING = 1e-6


def rank_centrality(
    lo: np.ndarray,
    hi: np.ndarray,
    score_lo: np.ndarray,
    score_hi: np.ndarray,
    n_models: int,
    smoothing: float = 0.0,
) -> np.ndarray:
    """Rank Centrality log-scores from pairwise scores (Negahban, Oh and Shah, 2017).

    For every compared pair, ``A_ij`` is the fraction of the pair's battles that ``j``
    won against ``i`` (draws count half), whatever the number of battles. The walk moves
    from ``i`` to ``j`` with probability ``P_ij = A_ij / d_max``, ``d_max`` the largest
    number of distinct opponents of any model, and stays with the rest. Its stationary
    distribution ``pi`` drifts towards winners; under Bradley-Terry ``pi`` is proportional
    to the strengths (detailed balance ``pi_i A_ij = pi_j A_ji``), so ``log pi`` is on
    the log-strength scale. Unlike a walk on raw win counts (one step of choix's LSR),
    a pair met often weighs no more than a pair met once.

    Parameters
    ----------
    lo, hi
        Distinct pairs, shape (P,).
    score_lo, score_hi
        Scores of ``lo`` and ``hi`` per pair (wins plus half the draws), shape (P,) or
        (B, P) for a batch. A pair with no battles (in a replicate) is not an edge.
    n_models
        Number of models; the walk must be irreducible (use ``smoothing`` otherwise).
    smoothing
        Fraction added between every two models before normalising.

    Returns
    -------
    np.ndarray
        ``log pi`` (natural log), shape (n_models,) or (B, n_models).
    """
    s_lo = np.atleast_2d(np.asarray(score_lo, dtype=float))
    s_hi = np.atleast_2d(np.asarray(score_hi, dtype=float))
    batch = s_lo.shape[0]
    total = s_lo + s_hi
    met = total > 0
    frac_hi = np.divide(s_hi, total, out=np.zeros_like(total), where=met)  # hi beat lo
    frac_lo = np.divide(s_lo, total, out=np.zeros_like(total), where=met)
    idx = np.arange(n_models)
    # distinct opponents per model and replicate; d_max normalises the walk
    degree = np.zeros((batch, n_models))
    np.add.at(degree.T, lo, met.T.astype(float))
    np.add.at(degree.T, hi, met.T.astype(float))
    d_max = np.maximum(degree.max(axis=1), 1.0)
    if smoothing > 0:
        d_max = d_max + smoothing * (n_models - 1)
    moves = np.full((batch, n_models, n_models), smoothing)
    moves[:, lo, hi] += frac_hi
    moves[:, hi, lo] += frac_lo
    moves[:, idx, idx] = 0.0
    moves /= d_max[:, None, None]
    # stationary: pi^T (P - I) = 0 with P - I = moves - diag(moves 1); replace one
    # equation by sum(pi) = 1
    system = np.swapaxes(moves, 1, 2).copy()
    system[:, idx, idx] = -moves.sum(axis=2)
    system[:, -1, :] = 1.0
    rhs = np.zeros((batch, n_models, 1))
    rhs[:, -1, 0] = 1.0
    pi = np.linalg.solve(system, rhs)[..., 0]
    log_pi = np.log(np.clip(pi, np.finfo(float).tiny, None))
    return log_pi if np.ndim(score_lo) == 2 else log_pi[0]


def fit_spectral_board(board: Board, bt: BTResult) -> tuple[pl.DataFrame, dict, pl.DataFrame]:
    """Rank Centrality ratings with a bootstrap interval from ``bt``'s replicates (and a cluster
    bootstrap from its whole-session replicates, on a board whose votes carry sessions).

    Also reports the Kendall tau (tau-b) between the spectral and ``bt`` ratings; returns the
    board, that metadata and the pairwise significance rows.
    """
    from scipy.stats import kendalltau  # only the fits load scipy (see the module's docstring)

    pairs = bt.pairs
    log_pi = rank_centrality(pairs.lo, pairs.hi, pairs.score_lo, pairs.score_hi, board.m)
    rating = board.rate(log_pi)
    bounds: dict[str, Bounds | None] = {}
    for name, resampled in (("bootstrap", bt.resampled), ("cluster_bootstrap", bt.cluster_resampled)):
        if resampled is None:
            continue
        draws = 0.5 * resampled[:, :, 2]
        log_pi_boot = rank_centrality(
            pairs.lo,
            pairs.hi,
            resampled[:, :, 0] + draws,
            resampled[:, :, 1] + draws,
            board.m,
            smoothing=BOOTSTRAP_SMOOTHING,
        )
        bounds[name] = board.percentile_bounds(log_pi, log_pi_boot)
    tau = float(kendalltau(bt.rating, rating).statistic)
    frame, significance = board.frame("spectral", rating, bounds)
    return frame, {"kendall_tau_vs_bt": tau}, significance
