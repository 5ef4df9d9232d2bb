"""From log-strengths to the rating scale: points, centring or anchoring, intervals, ranks.

scipy is imported inside the functions that compute with it, not at the top: ``core.ranking``'s
labels, schemas and settings are read by the CLI and the report, which must start without loading
scipy (~0.5 s); the fits pay for it once, on first use.
"""

from __future__ import annotations

import math

import numpy as np


def points_per_logit(scale: float = 400.0, base: float = 10.0) -> float:
    """Rating points per unit of natural log-odds: ``scale / ln(base)`` (173.7 for 400, 10).

    Parameters
    ----------
    scale, base
        a's expected score against b (a tie counting 1/2, not the chance of an outright win) is
        ``1 / (1 + base ** ((R_b - R_a) / scale))``.

    Returns
    -------
    float
    """
    return scale / math.log(base)


def anchor_matrix(n_models: int, anchor_index: int | None) -> np.ndarray:
    """Linear map from log-strengths to offsets from the reference point.

    Parameters
    ----------
    n_models
        Number of models on the board.
    anchor_index
        Position of the anchor model, or None to centre on the mean.

    Returns
    -------
    np.ndarray
        ``A = I - 1 a^T`` of shape (n_models, n_models), where ``a`` is ``1/n`` everywhere
        (centring) or the anchor's unit vector. ``A @ theta`` is invariant to adding a
        constant to ``theta``, which is why any generalised inverse of a Bradley-Terry
        Hessian gives the same ``A C A^T`` covariance.
    """
    weights = np.full(n_models, 1.0 / n_models)
    if anchor_index is not None:
        weights = np.zeros(n_models)
        weights[anchor_index] = 1.0
    return np.eye(n_models) - np.outer(np.ones(n_models), weights)


def to_ratings(
    theta: np.ndarray,
    anchor_index: int | None,
    reference_rating: float,
    scale: float = 400.0,
    base: float = 10.0,
) -> np.ndarray:
    """Map log-strengths (last axis = models) to ratings.

    Parameters
    ----------
    theta
        Natural-log strengths, shape (..., n_models).
    anchor_index
        Model whose rating is pinned to ``reference_rating``; None pins the mean instead.
    reference_rating
        Rating of the anchor, or mean rating when there is no anchor.
    scale, base
        Rating scale, see :func:`points_per_logit`.

    Returns
    -------
    np.ndarray
        Ratings with the same shape as ``theta``.
    """
    theta = np.asarray(theta, dtype=float)
    ref = theta.mean(axis=-1, keepdims=True) if anchor_index is None else theta[..., [anchor_index]]
    return reference_rating + points_per_logit(scale, base) * (theta - ref)


def z_value(level: float) -> float:
    """Two-sided normal quantile for a confidence level (1.959964 for 0.95)."""
    from scipy.special import ndtri  # only the fits load scipy (see the module's docstring)

    return float(ndtri(0.5 + level / 2.0))


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval over axis 0, ends at the ``(B + 1) alpha``-th order statistics.

    Of ``B`` replicates, the ``k``-th smallest lies below a fresh draw from the same
    distribution with probability ``k / (B + 1)``; so the ``(B + 1) alpha``-th and
    ``(B + 1)(1 - alpha)``-th order statistics (interpolated: NumPy's ``weibull`` rule,
    Hyndman and Fan's type 6), ``alpha = (1 - level) / 2``, hold a fresh draw with probability
    ``level`` (Davison and Hinkley 1997, section 5.2). NumPy's default rule takes the
    ``1 + (B - 1) alpha``-th, which holds it with probability ``level (B - 1) / (B + 1)``: 93.1%
    for a 95% interval from 100 replicates, before any error of the bootstrap itself
    (``benchmarks/bench_coverage.py --variants``: 1.6 points less coverage than this rule at 100
    rounds on the same tournaments, 94.4% against 96.0%; 1,000 rounds, 10x the time, 95.8%).

    Parameters
    ----------
    samples
        Bootstrap replicates, shape (rounds, ...).
    level
        Confidence level, e.g. 0.95 for the 2.5% and 97.5% points.

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        Lower and upper bounds.
    """
    tail = (1.0 - level) / 2.0
    lower, upper = np.quantile(samples, [tail, 1.0 - tail], axis=0, method="weibull")
    return lower, upper


#: Ratings (and interval ends) closer than this many points are equal for ranking: models with the
#: same record against the same opponents get ratings equal up to the solver's rounding (1e-13 apart
#: on the 100-vote sample, which had ranked three such models 3, 3, 5).
TIE_POINTS = 1e-6


def ranks(rating: np.ndarray, shown: np.ndarray | None = None) -> np.ndarray:
    """``1 + number of shown models with a higher rating`` (ties, to :data:`TIE_POINTS`, share a rank).

    Parameters
    ----------
    rating
        Ratings, shape (n_models,).
    shown
        Boolean mask of the models that are ranked (default all). A model outside it
        gets the rank it would take among the shown ones, and moves no one else.

    Returns
    -------
    np.ndarray
        int64 ranks.
    """
    rating = np.asarray(rating, dtype=float)
    above = rating[None, :] > rating[:, None] + TIE_POINTS
    if shown is not None:
        above &= np.asarray(shown, dtype=bool)[None, :]
    return 1 + above.sum(axis=1).astype(np.int64)


def rank_upper_bounds(
    ci_lower: np.ndarray, ci_upper: np.ndarray, shown: np.ndarray | None = None
) -> np.ndarray:
    """``1 + number of shown models whose ci_lower is above this model's ci_upper`` (by more than
    :data:`TIE_POINTS`).

    LMArena's "rank (UB)", FastChat's ``recompute_final_ranking`` (interval non-overlap: 1 + the
    models whose lower end lies above this model's upper end), computed among the models shown, as
    LMArena does after hiding low-count models. The boards' ``rank_ub`` reads the pairwise tests
    instead (``board.rank_bounds``).

    Parameters
    ----------
    ci_lower, ci_upper
        Interval bounds, shape (n_models,).
    shown
        Boolean mask of the ranked models (default all); see :func:`ranks`.

    Returns
    -------
    np.ndarray
        int64 rank upper bounds.
    """
    ci_lower = np.asarray(ci_lower, dtype=float)
    ci_upper = np.asarray(ci_upper, dtype=float)
    above = ci_lower[None, :] > ci_upper[:, None] + TIE_POINTS
    if shown is not None:
        above &= np.asarray(shown, dtype=bool)[None, :]
    return 1 + above.sum(axis=1).astype(np.int64)
