"""Rank Centrality: log stationary probabilities of a random walk on the win-count matrix."""

from __future__ import annotations

import numpy as np

#: Added to every off-diagonal transition rate (in battles) in bootstrap replicates only,
#: so that a replicate whose walk is reducible (a model with no resampled wins) still has
#: a unique stationary distribution. It moves a well-determined score by ~1e-8 log units.
BOOTSTRAP_SMOOTHING = 1e-6


def rank_centrality(
    lo: np.ndarray,
    hi: np.ndarray,
    score_lo: np.ndarray,
    score_hi: np.ndarray,
    n_models: int,
    smoothing: float = 0.0,
) -> np.ndarray:
    """Spectral log-strengths from pairwise scores (Rank Centrality, Negahban et al. 2017).

    A continuous-time random walk moves from model ``i`` to model ``j`` at a rate equal to
    the score of ``j`` against ``i`` (its wins plus half the draws): it drifts towards
    winners. Its stationary distribution ``pi`` satisfies detailed balance
    ``pi_i W_ji = pi_j W_ij`` when the scores follow Bradley-Terry exactly, so
    ``log pi`` estimates the Bradley-Terry log-strengths up to a constant without
    maximising a likelihood. With uniform starting strengths this is one step of choix's
    LSR (``choix.lsr_pairwise``), not its iterated form (ILSR converges to the MLE).

    Parameters
    ----------
    lo, hi
        Distinct pairs, shape (P,).
    score_lo, score_hi
        Scores of ``lo`` and ``hi`` per pair, shape (P,) or (B, P) for a batch.
    n_models
        Number of models; the walk must be irreducible (use ``smoothing`` otherwise).
    smoothing
        Rate added between every two models.

    Returns
    -------
    np.ndarray
        ``log pi`` (natural log), shape (n_models,) or (B, n_models).
    """
    s_lo = np.atleast_2d(score_lo)
    s_hi = np.atleast_2d(score_hi)
    batch = s_lo.shape[0]
    rates = np.full((batch, n_models, n_models), smoothing)
    rates[:, lo, hi] += s_hi
    rates[:, hi, lo] += s_lo
    idx = np.arange(n_models)
    rates[:, idx, idx] = 0.0
    # stationary: pi^T (R - diag(R 1)) = 0, sum(pi) = 1; replace one equation by the sum
    system = np.swapaxes(rates, 1, 2).copy()
    system[:, idx, idx] = -rates.sum(axis=2)
    system[:, -1, :] = 1.0
    rhs = np.zeros((batch, n_models, 1))
    rhs[:, -1, 0] = 1.0
    pi = np.linalg.solve(system, rhs)[..., 0]
    log_pi = np.log(np.clip(pi, np.finfo(float).tiny, None))
    return log_pi if np.ndim(score_lo) == 2 else log_pi[0]
