"""What every method's board shares: model selection, the base Bradley-Terry fit, ratings and intervals as frames.

scipy is imported inside the functions that compute with it, not at the top: ``core.ranking``'s
labels, schemas and settings are read by the CLI and the report, which must start without loading
scipy (~0.5 s); the fits pay for it once, on first use.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from time import perf_counter
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from arena_pipeline.core.ranking.bradley_terry import (
    BOOTSTRAP_RIDGE,
    PairCounts,
    aggregate_pairs,
    battle_cells,
    bootstrap_counts,
    bt_cluster_sandwich_covariance,
    bt_sandwich_covariance,
    cluster_bootstrap_counts,
    fit_bt,
    mle_support,
)
from arena_pipeline.core.ranking.scale import (
    TIE_POINTS,
    anchor_matrix,
    percentile_interval,
    points_per_logit,
    ranks,
    to_ratings,
    z_value,
)
from arena_pipeline.core.ranking.simultaneous import DRAWS, SimultaneousTests, covariance_draws, step_down
from arena_pipeline.core.ranking.types import LEADERBOARD_SCHEMA, RankingSettings

Interval = tuple[np.ndarray, np.ndarray]


#: The interval columns of a board, in the order ``Board.frame`` falls back through them.
INTERVALS: tuple[str, ...] = ("sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap")


def primary_order(config: RankingSettings) -> tuple[str, ...]:
    """The interval methods ``ci_lower``/``ci_upper`` take, first available first.

    ``primary_interval`` names a family (sandwich or bootstrap); with ``cluster_primary`` (or a
    ``cluster_*`` value) its session-clustered form comes first, then the other family's clustered
    form (spectral has bootstraps only), then the vote-level ones. A board whose votes carry no
    session has no clustered interval, so it takes the vote-level one.
    """
    family = config.primary_interval.removeprefix("cluster_")
    other = "bootstrap" if family == "sandwich" else "sandwich"
    vote_level = (family, other)
    if config.cluster_primary or config.primary_interval.startswith("cluster_"):
        return (f"cluster_{family}", f"cluster_{other}", *vote_level)
    return vote_level


#: Columns and types of ``RankingOutput.pairwise_significance`` (``arena.pairwise_significance``).
PAIRWISE_SIGNIFICANCE_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "model_1": pl.String(),
    "model_2": pl.String(),
    "difference": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "ci_method": pl.String(),
    "significant": pl.Boolean(),
    # the same claim made for every pair of the board's shown models at once (family-wise error 5%:
    # max-t with step-down, core.ranking.simultaneous); what rank_ub_simultaneous / rank_lb_simultaneous read
    "significant_simultaneous": pl.Boolean(),
    "expected_score_1": pl.Float64(),
}

#: Pairs of models whose difference intervals are computed at once (bounds the memory of the
#: bootstrap's (rounds, pairs) differences: 2,000 rounds x 2,000 pairs = 32 MB).
PAIR_CHUNK = 2_000


@dataclass(frozen=True)
class Differences:
    """What gives the interval of the difference of two models' ratings: a covariance of the
    log-strengths (sandwich methods; ``unbounded`` models, :class:`bradley_terry.ClusterCovariance`,
    make every difference involving them unbounded) or log-strength replicates (bootstraps)."""

    cov: np.ndarray | None = None
    unbounded: np.ndarray | None = None
    replicates: np.ndarray | None = None

    def covariance(self) -> np.ndarray:
        """The covariance of the log-strengths: ``cov``, or the replicates' empirical covariance."""
        if self.cov is not None:
            return self.cov
        return np.cov(self.replicates, rowvar=False)


@dataclass(frozen=True)
class Bounds:
    """One interval method's bounds on a board, in rating points.

    Attributes
    ----------
    shown
        The interval of the displayed rating, for the statement the rating makes: on an
        anchored board, of ``rating - anchor_rating``, i.e. of the reference contrast
        ``theta_i - theta_ref`` (the reference's own bounds are NaN: its rating is
        ``anchor_rating`` by definition); on a centred board, of ``theta_i - mean(theta)``.
    differences
        What the same method says of the difference of two models' ratings (the pairwise
        tests ``rank_ub``, ``rank_lb`` and ``arena.pairwise_significance`` read): comparing
        two models does not involve the reference, so these do not carry its uncertainty.
    """

    shown: Interval
    differences: Differences


@dataclass(frozen=True)
class PairTests:
    """Every unordered pair of a board's models, ``i < j`` (local indices), with the interval of
    ``R_i - R_j`` from one interval method.

    Attributes
    ----------
    i, j
        Model indices, shape (P,).
    difference
        ``R_i - R_j``, rating points.
    lower, upper
        The interval of the difference (infinite where a model is unbounded).
    """

    i: np.ndarray
    j: np.ndarray
    difference: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def above(self, m: int) -> np.ndarray:
        """``above[x, y]``: x is significantly above y (the interval of ``R_x - R_y`` lies above 0,
        by more than :data:`scale.TIE_POINTS`); shape (m, m)."""
        out = np.zeros((m, m), dtype=bool)
        out[self.i, self.j] = self.lower > TIE_POINTS
        out[self.j, self.i] = self.upper < -TIE_POINTS
        return out


def rank_bounds(above: np.ndarray, ranked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank bounds from pairwise tests, among the ``ranked`` models: a model's best rank is 1 + the
    number of models significantly better, each pair tested on its own (a bound for this model, not
    for every model at once; LMArena's own rank reads interval non-overlap instead, see
    :func:`scale.rank_upper_bounds`).

    Parameters
    ----------
    above
        ``above[x, y]``: x significantly above y (:meth:`PairTests.above`), shape (m, m).
    ranked
        Boolean mask of the models ranked (the shown ones); every model is ranked among them.

    Returns
    -------
    tuple of np.ndarray
        ``rank_ub`` = 1 + the ranked models significantly above the model; ``rank_lb`` = the
        number of ranked models (the model itself counted once) - the ranked models significantly
        below it; ``significantly_above`` = the ranked models significantly below it. int64.
    """
    ranked = np.asarray(ranked, dtype=bool)
    better = above[ranked, :].sum(axis=0)
    worse = above[:, ranked].sum(axis=1)
    field = ranked.sum() + ~ranked  # a model outside ``ranked`` is ranked among them plus itself
    return (1 + better).astype(np.int64), (field - worse).astype(np.int64), worse.astype(np.int64)


#: Why a model with battles has no rating (``select_models``); shown as is in the report and CLI.
ONLY_LOSSES = "only losses: never won or drew, so its Bradley-Terry rating has no finite estimate"
ONLY_WINS = "only wins: never lost or drew, so its Bradley-Terry rating has no finite estimate"
NOT_CONNECTED = ("not connected to the rest of the comparison graph (outside the largest group of "
                 "models linked both ways by wins or draws), so its rating has no finite estimate")


def model_stats(a: np.ndarray, b: np.ndarray, o: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Battles, wins, losses, draws (tie + both_bad) and score rate per model.

    Parameters
    ----------
    a, b, o
        Side-a model, side-b model and outcome code of each battle.
    n
        Number of models.

    Returns
    -------
    dict[str, np.ndarray]
        ``n_battles``, ``wins``, ``losses``, ``ties`` (int64) and
        ``win_rate = (wins + ties / 2) / n_battles`` (NaN without battles).
    """

    def count(x: np.ndarray) -> np.ndarray:
        return np.bincount(x, minlength=n).astype(np.int64)

    battles = count(a) + count(b)
    wins = count(a[o == 0]) + count(b[o == 1])
    losses = count(a[o == 1]) + count(b[o == 0])
    draws = battles - wins - losses
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (wins + 0.5 * draws) / battles
    return {"n_battles": battles, "wins": wins, "losses": losses, "ties": draws, "win_rate": rate}


def select_models(
    a: np.ndarray, b: np.ndarray, o: np.ndarray, names: list[str], min_battles: int
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Models kept on a board: at least ``min_battles`` battles and a finite MLE.

    Alternates the two filters until neither removes a model (removing a model removes
    its battles from the others' counts).

    Parameters
    ----------
    a, b, o
        Side-a model, side-b model (indices into ``names``) and outcome code per battle.
    names
        Model names.
    min_battles
        Threshold on battles against models still on the board.

    Returns
    -------
    tuple[np.ndarray, list[dict]]
        Boolean mask over ``names`` and the excluded models, each
        ``{"model", "reason", "n_battles"}`` (battles when it was excluded).
    """
    n = len(names)
    active = np.zeros(n, dtype=bool)
    active[a] = True
    active[b] = True
    excluded: list[dict[str, Any]] = []
    while True:
        keep = active[a] & active[b]
        stats = model_stats(a[keep], b[keep], o[keep], n)
        low = active & (stats["n_battles"] < min_battles)
        if low.any():
            excluded += [
                {
                    "model": names[i],
                    # with min_battles=1 the cut only removes a model whose every opponent was removed
                    "reason": (f"fewer than min_battles={min_battles} battles against the models kept"
                               if min_battles > 1 else "no battles left against rated models"),
                    "n_battles": int(stats["n_battles"][i]),
                }
                for i in np.flatnonzero(low)
            ]
            active &= ~low
            continue
        support = mle_support(aggregate_pairs(a[keep], b[keep], o[keep], n), present=active)
        outside = active & ~support
        if not outside.any():
            return active, excluded
        for i in np.flatnonzero(outside):
            score = stats["wins"][i] + 0.5 * stats["ties"][i]
            if score == 0:
                why = ONLY_LOSSES
            elif score == stats["n_battles"][i]:
                why = ONLY_WINS
            else:
                why = NOT_CONNECTED
            excluded.append(
                {"model": names[i], "reason": why, "n_battles": int(stats["n_battles"][i])}
            )
        active &= ~outside


@dataclass(frozen=True)
class Board:
    """The battles of one category restricted to the models kept, with shared settings.

    Attributes
    ----------
    category
        Category name.
    config
        Settings of the run.
    models
        Model names on the board; local index = position.
    a, b, o
        Local side-a and side-b model indices and outcome codes of the fitted battles.
    raw_style
        Raw style features of those battles, shape (n, 4), or None.
    anchor
        Local index of the anchor model, or None (centring).
    cluster
        Cluster (evaluation session) index ``0 .. K - 1`` of every fitted battle, or None.
    """

    category: str
    config: RankingSettings
    models: list[str]
    a: np.ndarray
    b: np.ndarray
    o: np.ndarray
    raw_style: np.ndarray | None
    anchor: int | None
    cluster: np.ndarray | None = None

    @property
    def m(self) -> int:
        """Number of models."""
        return len(self.models)

    def rate(self, theta: np.ndarray, anchored: bool = True) -> np.ndarray:
        """Log-strengths (..., m) -> ratings.

        Anchored (default, on a board with a reference): the reference is at ``anchor_rating``
        in every row, so rating replicates (bootstrap) are re-anchored each, as FastChat's are.
        ``anchored=False``, or a board without a reference: centred (mean ``anchor_rating``).
        """
        c = self.config
        return to_ratings(theta, self.anchor if anchored else None, c.anchor_rating, c.scale, c.base)

    def shift(self, theta: np.ndarray) -> float:
        """Points from the centred ratings of ``theta`` (m,) to the anchored ones (0 without a reference)."""
        if self.anchor is None:
            return 0.0
        return self.config.anchor_rating - float(self.rate(theta, anchored=False)[self.anchor])

    def half_width(self, cov_theta: np.ndarray, anchored: bool = True) -> np.ndarray:
        """Normal half-width in rating points of ``theta_i - theta_ref`` (anchored, default)
        or of the centred strengths ``theta_i - mean(theta)``.

        The variance of the contrast ``A theta`` is ``diag(A C A^T)`` with ``A`` from
        :func:`scale.anchor_matrix`: for the reference contrast, ``C_ii + C_rr - 2 C_ir``.
        """
        contrast = anchor_matrix(self.m, self.anchor if anchored else None)
        var = np.einsum("ij,jk,ik->i", contrast, cov_theta, contrast)
        ppl = points_per_logit(self.config.scale, self.config.base)
        return z_value(self.config.confidence) * ppl * np.sqrt(np.clip(var, 0.0, None))

    def normal_bounds(
        self, theta: np.ndarray, cov_theta: np.ndarray, unbounded: np.ndarray | None = None
    ) -> Bounds:
        """Normal (sandwich) bounds of the ratings of ``theta`` from its covariance.

        ``unbounded``: models whose strength the covariance cannot bound
        (:class:`bradley_terry.ClusterCovariance`): their bounds are infinite, and all shown
        bounds are when the reference is one of them.
        """
        rating = self.rate(theta)
        shown = self.half_width(cov_theta)
        if unbounded is not None and unbounded.any():
            cut = unbounded | (self.anchor is not None and bool(unbounded[self.anchor]))
            shown = np.where(cut, np.inf, shown)
        bounds = Bounds((rating - shown, rating + shown), Differences(cov=cov_theta, unbounded=unbounded))
        return self._without_reference(bounds)

    def percentile_bounds(self, theta: np.ndarray, replicates: np.ndarray) -> Bounds:
        """Percentile bounds from log-strength replicates (rounds, m) around the estimate ``theta``.

        Shown: each replicate re-anchored (the reference at ``anchor_rating`` in every round),
        so the interval is that of ``theta_i - theta_ref``. Differences: the percentile interval
        of each pair's replicate differences (:meth:`pair_tests`).
        """
        shown = percentile_interval(self.rate(replicates), self.config.confidence)
        return self._without_reference(Bounds(shown, Differences(replicates=replicates)))

    def pair_tests(self, rating: np.ndarray, differences: Differences) -> PairTests:
        """The interval of ``R_i - R_j`` for every pair ``i < j`` of the board's models.

        From a covariance ``C`` of the log-strengths: ``R_i - R_j +- z * points * sqrt(C_ii + C_jj -
        2 C_ij)`` (the Wald interval of the contrast, from the full covariance: not the two
        models' own intervals, which ignore their covariance and, on an anchored board, carry
        the reference's error); infinite when either model is ``unbounded``. From replicates: the
        percentile interval (the ``(B + 1) alpha`` rule of :func:`scale.percentile_interval`) of
        the replicates' differences.
        """
        i, j = np.triu_indices(self.m, k=1)
        difference = rating[i] - rating[j]
        ppl = points_per_logit(self.config.scale, self.config.base)
        if differences.replicates is not None:
            lower, upper = np.empty_like(difference), np.empty_like(difference)
            for start in range(0, len(i), PAIR_CHUNK):
                part = slice(start, start + PAIR_CHUNK)
                reps = ppl * (differences.replicates[:, i[part]] - differences.replicates[:, j[part]])
                lower[part], upper[part] = percentile_interval(reps, self.config.confidence)
            return PairTests(i, j, difference, lower, upper)
        cov = differences.cov
        var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
        half = z_value(self.config.confidence) * ppl * np.sqrt(np.clip(var, 0.0, None))
        if differences.unbounded is not None:
            half = np.where(differences.unbounded[i] | differences.unbounded[j], np.inf, half)
        return PairTests(i, j, difference, difference - half, difference + half)

    def _without_reference(self, bounds: Bounds) -> Bounds:
        """NaN shown bounds for the reference model (its rating is exact by definition)."""
        if self.anchor is None:
            return bounds
        lower, upper = (np.array(x, dtype=float) for x in bounds.shown)
        lower[self.anchor] = upper[self.anchor] = np.nan
        return Bounds((lower, upper), bounds.differences)

    def rng(self, stream: str) -> np.random.Generator:
        """Generator for one (category, stream): independent of the other boards computed."""
        keys = [self.config.seed, zlib.crc32(self.category.encode()), zlib.crc32(stream.encode())]
        return np.random.default_rng(keys)

    def frame(self, method: str, rating: np.ndarray, bounds: dict[str, Bounds | None]) -> BoardFrames:
        """The board as leaderboard rows, and its pairwise tests.

        ``bounds`` maps the interval methods computed (:data:`INTERVALS`) to their bounds;
        each ``<method>_lower/_upper`` column holds the shown bounds. The primary interval
        (``ci_lower``/``ci_upper``) is the first of :func:`primary_order` the method has;
        the same method's interval of every difference ``R_i - R_j`` (:meth:`pair_tests`) gives
        the pairwise tests: ``rank_ub``, ``rank_lb`` and ``significantly_above``
        (:func:`rank_bounds`) and the significance rows of the shown models' pairs
        (:data:`PAIRWISE_SIGNIFICANCE_SCHEMA`).
        ``rank``, ``rank_ub`` and ``rank_lb`` of a shown model count only shown (non-provisional)
        models, as LMArena ranks after hiding low-count models; a provisional model is
        ranked among all models of the board (so it moves no shown model, and a board with
        no shown model still has meaningful ranks).
        """
        m = self.m
        nulls = np.full(m, np.nan)
        order = primary_order(self.config)
        ci_method = next((k for k in order if bounds.get(k) is not None), "none")
        primary = bounds.get(ci_method)
        lower, upper = primary.shown if primary is not None else (nulls, nulls)
        stats = model_stats(self.a, self.b, self.o, m)
        threshold = self.config.display_min_battles
        provisional = stats["n_battles"] < threshold
        reason = f"fewer than display_min_battles={threshold} battles"
        shown = ~provisional
        # shown models are ranked among themselves (LMArena); provisional ones among all
        rank = np.where(provisional, ranks(rating), ranks(rating, shown))
        rank_ub = rank_lb = above_n = rank_ub_sim = rank_lb_sim = nulls
        significance = pl.DataFrame(schema=PAIRWISE_SIGNIFICANCE_SCHEMA)
        if primary is not None:
            tests = self.pair_tests(rating, primary.differences)
            above = tests.above(m)
            among_shown = rank_bounds(above, shown)
            among_all = rank_bounds(above, np.ones(m, dtype=bool))
            rank_ub, rank_lb, above_n = (np.where(provisional, b, a).astype(float)
                                         for a, b in zip(among_shown, among_all, strict=True))
            # the same statements for every model at once: shown models among the shown (the family of
            # their pairs), provisional ones among all (the family of every pair), as the per-model bounds
            draws = covariance_draws(primary.differences.covariance(), DRAWS, self.rng(f"simultaneous:{method}"))
            joint = self.simultaneous(tests, primary.differences, shown, draws)
            sim_shown = rank_bounds(joint.above(m, tests.difference), shown)
            sim_all = sim_shown
            if provisional.any():
                every = self.simultaneous(tests, primary.differences, np.ones(m, dtype=bool), draws)
                sim_all = rank_bounds(every.above(m, tests.difference), np.ones(m, dtype=bool))
            rank_ub_sim, rank_lb_sim = (np.where(provisional, b, a).astype(float)
                                        for a, b in zip(sim_shown[:2], sim_all[:2], strict=True))
            significance = self._significance(method, tests, shown, ci_method, joint.significant)
        columns = {
            f"{name}_{side}": bounds[name].shown[i] if bounds.get(name) is not None else nulls
            for name in INTERVALS
            for i, side in enumerate(("lower", "upper"))
        }
        data = {
            "category": [self.category] * m,
            "method": [method] * m,
            "model": self.models,
            "rating": rating,
            "ci_lower": lower,
            "ci_upper": upper,
            "ci_method": [ci_method] * m,
            "rank": rank,
            "rank_ub": rank_ub,
            "rank_lb": rank_lb,
            "rank_ub_simultaneous": rank_ub_sim,
            "rank_lb_simultaneous": rank_lb_sim,
            "significantly_above": above_n,
            **stats,
            **columns,
            "provisional": provisional,
            "provisional_reason": [reason if p else None for p in provisional],
        }
        frame = pl.DataFrame(data, nan_to_null=True)
        return BoardFrames(frame.select([pl.col(c).cast(t) for c, t in LEADERBOARD_SCHEMA.items()]), significance)

    def simultaneous(self, tests: PairTests, differences: Differences, members: np.ndarray,
                     draws: np.ndarray) -> SimultaneousTests:
        """Family-wise tests of the pairs of ``members`` (:func:`simultaneous.step_down`), indexed like
        ``tests``: a pair with a model outside ``members`` is never significant.

        The covariance is the primary method's (:meth:`Differences.covariance`), ``draws`` its
        Gaussian draws (:func:`simultaneous.covariance_draws`, from the board's own stream for the
        method: the shown models' family and every model's share them), the margin is
        :data:`scale.TIE_POINTS`; a pair is significant for the family only where its own test
        (``tests``) says so too.
        """
        ppl = points_per_logit(self.config.scale, self.config.base)
        inside = np.flatnonzero(members[tests.i] & members[tests.j])
        found = step_down(tests.difference[inside] / ppl, differences.covariance(), tests.i[inside],
                          tests.j[inside], self.config.confidence, draws, differences.unbounded, TIE_POINTS / ppl)
        significant = np.zeros(len(tests.i), dtype=bool)
        # with a bootstrap primary the pair's own test reads percentile intervals: a claim for the whole
        # board is made only where the pair's own test makes it too
        alone = (tests.lower > TIE_POINTS) | (tests.upper < -TIE_POINTS)
        significant[inside] = found.significant & alone[inside]
        return replace(found, i=tests.i, j=tests.j, significant=significant)

    def _significance(self, method: str, tests: PairTests, shown: np.ndarray, ci_method: str,
                      simultaneous: np.ndarray) -> pl.DataFrame:
        """The pairwise significance rows of the pairs of shown models, ``model_1 < model_2`` by name."""
        keep = shown[tests.i] & shown[tests.j]
        names = np.asarray(self.models, dtype=object)
        i, j = tests.i[keep], tests.j[keep]
        flip = names[i] > names[j]  # model_1 is the first name, as in arena.pairwise
        sign = np.where(flip, -1.0, 1.0)
        difference = sign * tests.difference[keep]
        lower = np.where(flip, -tests.upper[keep], tests.lower[keep])
        upper = np.where(flip, -tests.lower[keep], tests.upper[keep])
        scale, base = self.config.scale, self.config.base
        frame = pl.DataFrame({
            "category": [self.category] * len(i),
            "method": [method] * len(i),
            "model_1": np.where(flip, names[j], names[i]).tolist(),
            "model_2": np.where(flip, names[i], names[j]).tolist(),
            "difference": difference,
            "ci_lower": lower,
            "ci_upper": upper,
            "ci_method": [ci_method] * len(i),
            "significant": (lower > TIE_POINTS) | (upper < -TIE_POINTS),
            "significant_simultaneous": simultaneous[keep],
            "expected_score_1": 1.0 / (1.0 + base ** (-difference / scale)),
        }, schema=PAIRWISE_SIGNIFICANCE_SCHEMA)
        return frame.sort("model_1", "model_2")


class BoardFrames(NamedTuple):
    """A board's leaderboard rows and the significance rows of its shown models' pairs."""

    leaderboard: pl.DataFrame
    significance: pl.DataFrame


@dataclass(frozen=True)
class BTResult:
    """The ``bt`` board and what the other methods reuse from it."""

    frame: pl.DataFrame
    significance: pl.DataFrame
    info: dict[str, Any]
    pairs: PairCounts
    theta: np.ndarray
    rating: np.ndarray
    resampled: np.ndarray | None
    cluster_resampled: np.ndarray | None = None


def fit_bt_board(board: Board) -> BTResult:
    """Exact Bradley-Terry MLE, sandwich interval and (if configured) bootstrap interval.

    With clusters (evaluation sessions), also the cluster-robust sandwich (CR3, see
    :func:`bradley_terry.bt_cluster_sandwich_covariance`) and (with ``bootstrap_rounds > 0``)
    the cluster bootstrap, which resamples whole sessions.

    The bootstrap replicates are resampled battles aggregated per (pair, outcome) cell
    (``bradley_terry.bootstrap_counts``), refitted from the point estimate with
    ``BOOTSTRAP_RIDGE``; the same replicates serve the spectral board. Every interval is
    that of the displayed rating (:class:`Bounds`).
    """
    c = board.config
    pairs = aggregate_pairs(board.a, board.b, board.o, board.m)
    fit = fit_bt(pairs, tol=c.tol, max_iter=c.max_iter)
    theta = fit.x[0]
    rating = board.rate(theta)
    bounds: dict[str, Bounds | None] = {
        "sandwich": board.normal_bounds(theta, bt_sandwich_covariance(pairs, theta))
    }
    info: dict[str, Any] = {"iterations": fit.iterations, "grad_norm": float(fit.grad_norm[0])}
    resampled = counts = None
    if c.bootstrap_rounds > 0:
        resampled = bootstrap_counts(pairs, c.bootstrap_rounds, board.rng("pairs"))
        refit = fit_bt(pairs, resampled, BOOTSTRAP_RIDGE, theta, c.tol, c.max_iter)
        bounds["bootstrap"] = board.percentile_bounds(theta, refit.x)
        info.update(
            bootstrap_iterations=refit.iterations,
            bootstrap_max_grad_norm=float(refit.grad_norm.max()),
            bootstrap_degenerate_rounds=degenerate_rounds(pairs, resampled),
        )
    if board.cluster is not None:
        robust = bt_cluster_sandwich_covariance(
            pairs, theta, board.a, board.b, board.o, board.cluster
        )
        bounds["cluster_sandwich"] = board.normal_bounds(theta, robust.cov, robust.unbounded)
        info["clusters"] = int(board.cluster.max()) + 1 if len(board.cluster) else 0
        info["cluster_unbounded_models"] = [board.models[i] for i in np.flatnonzero(robust.unbounded)]
        if c.bootstrap_rounds > 0:
            cells = battle_cells(board.a, board.b, board.o, board.m)
            counts = cluster_bootstrap_counts(
                pairs, cells, board.cluster, c.bootstrap_rounds, board.rng("clusters")
            )
            refit = fit_bt(pairs, counts, BOOTSTRAP_RIDGE, theta, c.tol, c.max_iter)
            bounds["cluster_bootstrap"] = board.percentile_bounds(theta, refit.x)
            info["cluster_bootstrap_max_grad_norm"] = float(refit.grad_norm.max())
    frames = board.frame("bt", rating, bounds)
    return BTResult(frames.leaderboard, frames.significance, info, pairs, theta, rating, resampled, counts)


@dataclass
class CategoryBoard:
    """One category's board as every rating method receives it (``RatingMethod.fit``).

    Attributes
    ----------
    board
        The fitted battles (models kept, ties handled) and the run's settings.
    part
        The category's prepared battle rows after ties handling (``_a``, ``_b``, ``_o``, and the
        methods' ``battle_features``); ``keep`` marks those on ``board``.
    keep
        Which rows of ``part`` are the board's battles (both models kept).
    names
        Every model name of the run (``_a``/``_b`` index it).
    candidates
        The reference models in order of preference (a method that selects its own models chooses
        its reference among them).
    info
        The category's metadata (``metadata["categories"][category]``).
    """

    board: Board
    part: pl.DataFrame
    keep: np.ndarray
    names: list[str]
    candidates: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=lambda: {"timings_s": {}})

    @cached_property
    def bt(self) -> BTResult:
        """The Bradley-Terry board (:func:`fit_bt_board`), fitted once on first use: every category
        with a board has it (the pairwise predictions, the board status and other methods read it);
        its info and time go in ``info["bt"]`` and ``info["timings_s"]["bt"]``."""
        t0 = perf_counter()
        result = fit_bt_board(self.board)
        self.info["bt"] = result.info
        self.info["timings_s"]["bt"] = perf_counter() - t0
        return result


def degenerate_rounds(pairs: PairCounts, resampled: np.ndarray) -> int:
    """Bootstrap rounds in which some model has no score or no loss (its MLE is infinite).

    Parameters
    ----------
    pairs
        The observed pairs.
    resampled
        Replicate counts, shape (rounds, P, 3).

    Returns
    -------
    int
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see the module's docstring)

    rows, m = np.arange(len(pairs.lo)), pairs.n_models
    is_lo = csr_matrix((np.ones(len(rows)), (rows, pairs.lo)), shape=(len(rows), m))
    is_hi = csr_matrix((np.ones(len(rows)), (rows, pairs.hi)), shape=(len(rows), m))
    draws = 0.5 * resampled[:, :, 2]
    score = is_lo.T @ (resampled[:, :, 0] + draws).T + is_hi.T @ (resampled[:, :, 1] + draws).T
    battles = (is_lo + is_hi).T @ resampled.sum(axis=2).T
    return int(((score <= 0) | (score >= battles)).any(axis=0).sum())
