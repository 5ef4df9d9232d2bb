"""Pairwise tests and rank sets that hold for every model of a board at once (max-t, Romano-Wolf step-down).

The per-pair tests of :meth:`board.Board.pair_tests` hold one pair at a time: on a board of 40 models
a third of the boards call some tied pair significant, and the rank bounds read from them cover the
true ranks of all models at once on only about three boards in four (issue 44). The tests here are
those of Mogstad, Romano, Shaikh and Wilhelm (2024, "Inference for ranks with applications to
mobility across neighbourhoods and academic achievement across countries", Review of Economic
Studies), for the family of all pairs of a board's models: the studentised differences
``T_ij = (R_i - R_j) / se_ij`` are compared with the ``1 - alpha`` quantile of ``max |T*_ij|`` over
the pairs still in play, where ``T*`` is the statistic under the estimator's own sampling law
``N(0, C)`` (``C``: the primary method's covariance of the log-strengths, the one the published
``pairwise_significance`` intervals come from); rejected pairs leave the family and the quantile
is taken again over the rest until nothing more is rejected (the step-down of Romano and Wolf 2005,
which rejects at least what the single step does and keeps the family-wise error at ``alpha``).
Every claim "i is above j" made this way is true for all pairs at once with probability at least
``1 - alpha`` (asymptotically), so the rank sets read from them, ``1 + the models significantly
above`` to ``the models ranked - those significantly below``, contain every model's true rank at
once with that probability.

The quantile is simulated, not bounded: Bonferroni (``z`` at ``alpha / P``) ignores that the
differences of one board share their models' errors and is wider than needed, while the maximum of
a correlated Gaussian vector has no closed form. :data:`DRAWS` Gaussian draws from a seeded generator
(``Board.rng``: the same board gives the same sets), generated from the eigen-decomposition of ``C``
(which is singular: strengths are identified up to a constant, and differences do not see it), and
the maximum taken over pairs in chunks of at most :data:`CHUNK_ELEMENTS` (draws x pairs), so memory is
bounded by that setting and ``DRAWS x models``, not by the board's pairs (a 250-model board has
31,125). A bootstrap primary interval gives its covariance from its replicates (their empirical
covariance: a hundred rounds are too few for a 95% quantile of a maximum over thousands of pairs, but
plenty for a covariance). Pairs with an unbounded member (:class:`bradley_terry.ClusterCovariance`)
are never significant and stay out of the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arena_pipeline.core.ranking.scale import z_value

#: Gaussian draws of the maximum statistic: the Monte Carlo s.e. of its 95% quantile is about 1% of its
#: value for a family of two pairs and 0.5% for a board's (a binomial s.e. of 0.0031 in probability divided
#: by the density of the maximum there: about 0.12 for two pairs, 0.18 for 1,400; a family of one pair takes
#: the exact per-pair value).
DRAWS = 5_000
#: Pairs a run of one model against consecutive others must have on average for :func:`maxima` to take
#: the family run by run (slices of the draws) rather than gathered chunk by chunk.
RUN_LENGTH = 8
#: Most draws x pairs held at once while the maximum is taken (4 bytes each, single precision: 16 MB).
CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class SimultaneousTests:
    """The family-wise tests of every pair ``i < j`` of one set of models.

    Attributes
    ----------
    i, j
        Model indices (local, into the covariance), shape (P,).
    significant
        Step-down rejections: the difference ``R_i - R_j`` is significantly non-zero for the
        whole family at once, shape (P,). Its sign says which model is above.
    critical
        The single-step critical value (the ``1 - alpha`` quantile of the maximum over every
        bounded pair): ``difference +- critical * se`` are simultaneous intervals.
    final_critical
        The critical value of the last step (at most ``critical``).
    steps
        Steps the step-down took (1: the single step rejected everything it would).

    Both critical values are at least the per-pair one (``z``: a family of one pair has exactly it),
    so a pair significant for the family is significant alone.
    """

    i: np.ndarray
    j: np.ndarray
    significant: np.ndarray
    critical: float
    final_critical: float
    steps: int

    def above(self, m: int, difference: np.ndarray) -> np.ndarray:
        """``above[x, y]``: x significantly above y for the whole family; shape (m, m)."""
        out = np.zeros((m, m), dtype=bool)
        out[self.i, self.j] = self.significant & (difference > 0)
        out[self.j, self.i] = self.significant & (difference < 0)
        return out


def covariance_draws(cov: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` rows whose pairwise differences ``z_i - z_j`` have the law of ``N(0, cov)``'s, shape
    (draws, m), single precision (7 significant digits: plenty for a quantile).

    ``cov`` is singular (strengths are identified up to a constant), so the draws are of the differences
    from the first model, whose covariance ``A cov A^T`` is positive definite on a connected board:
    its Cholesky factor (about 3x cheaper than an eigen-decomposition); where it is not (a clustered
    covariance with unbounded models), the eigen-decomposition with rounding's negative eigenvalues
    taken as 0. The first column is 0.
    """
    m = cov.shape[0]
    base = cov[1:, 1:] - cov[1:, :1] - cov[:1, 1:] + cov[0, 0]
    try:
        root = np.linalg.cholesky((base + base.T) / 2.0)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh((base + base.T) / 2.0)
        root = vectors * np.sqrt(np.clip(values, 0.0, None))
    z = np.zeros((draws, m), dtype=np.float32)
    z[:, 1:] = rng.standard_normal((draws, m - 1)) @ root.T
    return z


def maxima(z: np.ndarray, i: np.ndarray, j: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``z``, ``max_p |z_i[p] - z_j[p]| / se[p]`` and the pair ``p`` where it is reached.

    A family whose pairs come in runs of one ``i`` against consecutive ``j`` (a board's pairs, sorted by
    ``i`` then ``j``, before any is rejected) is taken run by run, each a slice of ``z`` against one
    column (about 2x faster than gathering both columns); a scattered one (fewer than
    :data:`RUN_LENGTH` pairs a run: a later step) is gathered; either in chunks of at most
    :data:`CHUNK_ELEMENTS` draws x pairs, in the precision of ``z``.
    Rows of -inf and pair -1 for an empty family.
    """
    best = np.full(z.shape[0], -np.inf, dtype=z.dtype)
    where = np.full(z.shape[0], -1, dtype=np.int64)
    inverse = (1.0 / se).astype(z.dtype)
    rows = np.arange(z.shape[0])
    step = max(1, CHUNK_ELEMENTS // max(z.shape[0], 1))
    cuts = np.flatnonzero((np.diff(i) != 0) | (np.diff(j) != 1)) + 1  # runs of one i and consecutive j
    runs = len(cuts) + 1 <= len(i) // RUN_LENGTH  # else scattered pairs (a later step): gathered
    bounds = np.r_[0, cuts, len(i)] if runs else np.r_[0:len(i):step, len(i)]
    for first, last in zip(bounds[:-1], bounds[1:], strict=True):
        for start in range(first, last, step):
            stop = min(start + step, last)
            if runs:  # one model's column against a slice of consecutive ones
                t = z[:, j[start]:j[stop - 1] + 1] - z[:, i[start], None]
            else:
                t = z[:, i[start:stop]]
                t -= z[:, j[start:stop]]
            np.abs(t, out=t)
            t *= inverse[start:stop]
            arg = t.argmax(axis=1)
            top = t[rows, arg]
            better = top > best
            best[better], where[better] = top[better], start + arg[better]
    return best, where


def max_quantile(z: np.ndarray, i: np.ndarray, j: np.ndarray, se: np.ndarray, level: float) -> float:
    """The ``level`` quantile over the rows of ``z`` of ``max_p |z_i[p] - z_j[p]| / se[p]`` (:func:`maxima`);
    0 for an empty family."""
    if len(i) == 0:
        return 0.0
    return float(np.quantile(maxima(z, i, j, se)[0].astype(float), level))


def step_down(
    difference: np.ndarray,
    cov: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    level: float,
    z: np.ndarray,
    unbounded: np.ndarray | None = None,
    margin: float = 0.0,
) -> SimultaneousTests:
    """Max-t tests of the pairs ``(i, j)`` with the Romano-Wolf step-down.

    Parameters
    ----------
    difference
        The estimated differences ``theta_i - theta_j`` of the pairs (log-strength units), shape (P,).
    cov
        Covariance of the log-strengths, shape (m, m).
    i, j
        The pairs of the family (model indices), shape (P,).
    level
        Confidence level (0.95: family-wise error 5%).
    z
        Draws of the strengths' errors (:func:`covariance_draws` of ``cov``), shape (draws, m): one set
        serves every family of a board.
    unbounded
        Models whose strength the covariance cannot bound (their pairs are never significant).
    margin
        A rejection needs ``|difference| - critical * se > margin`` (``scale.TIE_POINTS``, in these units).

    Returns
    -------
    SimultaneousTests
    """
    se = np.sqrt(np.clip(cov[i, i] + cov[j, j] - 2.0 * cov[i, j], 0.0, None))
    bounded = se > 0
    if unbounded is not None:
        bounded &= ~(unbounded[i] | unbounded[j])
    floor = z_value(level)  # a family of one pair has exactly the per-pair critical value; more pairs, more
    draws = z.shape[0]
    live = bounded.copy()
    significant = np.zeros(len(i), dtype=bool)
    critical, first, steps = 0.0, None, 0
    best, where = np.zeros(draws, dtype=np.float32), np.full(draws, -1, dtype=np.int64)
    while live.any():
        steps += 1
        # a draw's maximum over the pairs still in play changes only where its maximising pair has left
        # (been rejected): only those draws are taken again, over the pairs left
        stale = (where < 0) | ~live[np.maximum(where, 0)]
        family = np.flatnonzero(live)
        top, arg = maxima(z[stale], i[family], j[family], se[family])
        best[stale], where[stale] = top, family[arg]
        # one pair left: its critical value is exactly the per-pair one
        quantile = float(np.quantile(best.astype(float), level))
        critical = floor if len(family) == 1 else max(quantile, floor)
        first = critical if first is None else first
        new = live & (np.abs(difference) - critical * np.where(bounded, se, 0.0) > margin)
        if not new.any():
            break
        significant |= new
        live &= ~new
    first = critical if first is None else first
    return SimultaneousTests(i, j, significant, first, critical, steps)
