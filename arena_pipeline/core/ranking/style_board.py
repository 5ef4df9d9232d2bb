"""The style-controlled method's board (``bt_style``): the joint fit, its intervals and its coefficient rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from arena_pipeline.core.ranking.board import Board, Bounds, primary_order
from arena_pipeline.core.ranking.bradley_terry import BOOTSTRAP_RIDGE
from arena_pipeline.core.ranking.scale import percentile_interval, z_value
from arena_pipeline.core.ranking.style_control import (
    STYLE_FEATURES,
    StyleDesign,
    bootstrap_bt_style,
    bt_style_cluster_sandwich_covariance,
    bt_style_sandwich_covariance,
    fit_bt_style,
    pair_weights,
    standardize,
)
from arena_pipeline.core.ranking.types import STYLE_COEFFICIENTS_SCHEMA

#: The penalty of the unpenalised style fit, per battle (on the summed loss): vanishing against the data,
#: it only keeps a constant feature's coefficient at 0.
UNPENALISED = 1e-9


@dataclass(frozen=True)
class _StyleFit:
    """The penalised fit of one board and what its intervals need."""

    design: StyleDesign
    weights: np.ndarray
    l2: float
    x_hat: np.ndarray
    beta_free: np.ndarray
    info: dict[str, Any]


def _style_fit(board: Board, theta_bt: np.ndarray, without_style: int) -> _StyleFit:
    """The penalised fit from the ``bt`` log-strengths, and the same fit without the penalty."""
    c = board.config
    m, k = board.m, len(STYLE_FEATURES)
    feats, mean, std = standardize(board.raw_style)
    y = np.where(board.o == 0, 1.0, np.where(board.o == 1, 0.0, 0.5))
    design = StyleDesign.build(board.a, board.b, y, feats, m)
    if c.style_method == "lmarena":
        weights = pair_weights(design.pair, c.style_min_pair_count)
        l2 = c.style_reg * len(y)  # reg on the mean loss == reg * n on the summed loss
    else:
        weights, l2 = np.ones(len(y)), c.style_l2
    x0 = np.concatenate([theta_bt, np.zeros(k)])
    fit = fit_bt_style(design, l2, weights, x0=x0, tol=c.tol, max_iter=c.max_iter)
    x_hat = fit.x[0]
    # the same fit without the penalty (a vanishing one: a constant feature stays identified at 0), from
    # which the coefficient rows say how far the penalty shrinks each coefficient
    beta_free, free_iterations, free_grad = _unpenalised(design, UNPENALISED * len(y), weights, x_hat, c, m)
    info: dict[str, Any] = {
        "iterations": fit.iterations,
        "grad_norm": float(fit.grad_norm[0]),
        "feature_mean": dict(zip(STYLE_FEATURES, mean.tolist(), strict=True)),
        "feature_std": dict(zip(STYLE_FEATURES, std.tolist(), strict=True)),
        "style_method": c.style_method,
        "l2_on_summed_loss": l2,
        "battles_fitted": len(y),
        "battles_without_style": without_style,
        "unpenalised_iterations": free_iterations,
        "unpenalised_grad_norm": free_grad,
    }
    return _StyleFit(design, weights, l2, x_hat, beta_free, info)


def _unpenalised(design: StyleDesign, l2: float, weights: np.ndarray, x_hat: np.ndarray, c,
                 m: int) -> tuple[np.ndarray, int, float]:
    """The style coefficients without the penalty, its Newton steps and final gradient norm; NaN
    coefficients (null in the table) where that fit has no finite optimum on this board (a feature that
    separates the votes, a singular Hessian: a small board), which the penalised fit still has."""
    k = design.features.shape[1]
    try:
        free = fit_bt_style(design, l2, weights, x0=x_hat, tol=c.tol, max_iter=c.max_iter)
    except np.linalg.LinAlgError:
        return np.full(k, np.nan), 0, float("nan")
    grad = float(free.grad_norm[0])
    beta = free.x[0][m:]
    if not (np.isfinite(grad) and grad < c.tol and np.all(np.isfinite(beta))):
        beta = np.full(k, np.nan)
    return beta, free.iterations, grad


def fit_style_board(
    board: Board, theta_bt: np.ndarray, without_style: int = 0
) -> tuple[pl.DataFrame, pl.DataFrame, dict, pl.DataFrame]:
    """Style-controlled fit: the ``bt_style`` board, the coefficient rows, metadata and the
    pairwise significance rows.

    ``board`` holds only battles with style counts (``style_control.has_style_counts``);
    ``without_style`` is how many of the category's battles were left out for lacking them
    (recorded in the coefficient rows, ``battles_without_style``).

    Features are z-scored over the board's battles; the fit starts from the ``bt``
    log-strengths. ``style_method="lmarena"`` (default) weighs battles by
    :func:`style_control.pair_weights` and penalises ``style_reg/2 |beta|^2`` on the mean
    weighted loss (arena-rank's text-leaderboard fit); ``"unweighted"`` is the earlier
    variant (no weights, ``style_l2`` on the summed loss). Bootstrap
    (``style_bootstrap_rounds``): battles resampled with replacement, refitted from the
    point estimate with ``BOOTSTRAP_RIDGE`` on the ratings.

    With sessions (``board.cluster``), also the session-clustered (CR3) sandwich
    (:func:`style_control.bt_style_cluster_sandwich_covariance`), as ``bt``'s: with
    ``cluster_primary`` it is the primary interval, of the ratings, the pairwise rows and the
    coefficients. The same fit without the penalty gives ``coefficient_unpenalised`` and
    ``share_kept`` (coefficient / unpenalised coefficient): how much of each style coefficient the
    penalty leaves.
    """
    c, m = board.config, board.m
    fit = _style_fit(board, theta_bt, without_style)
    design, weights, l2, x_hat, info = fit.design, fit.weights, fit.l2, fit.x_hat, fit.info
    cov = bt_style_sandwich_covariance(design, x_hat, l2, weights)
    rating = board.rate(x_hat[:m])
    bounds: dict[str, Bounds | None] = {"sandwich": board.normal_bounds(x_hat[:m], cov[:m, :m])}
    beta_var = {"sandwich": np.diag(cov)[m:]}
    if board.cluster is not None:
        robust = bt_style_cluster_sandwich_covariance(design, x_hat, l2, board.cluster, weights)
        bounds["cluster_sandwich"] = board.normal_bounds(x_hat[:m], robust.cov[:m, :m], robust.unbounded)
        beta_var["cluster_sandwich"] = np.diag(robust.cov)[m:]
        info["clusters"] = int(board.cluster.max()) + 1 if len(board.cluster) else 0
        info["cluster_unbounded_models"] = [board.models[i] for i in np.flatnonzero(robust.unbounded)]
    beta_boot = None
    if c.style_bootstrap_rounds > 0:
        reps, steps, worst = bootstrap_bt_style(
            design,
            l2,
            x_hat,
            c.style_bootstrap_rounds,
            board.rng("bt_style"),
            BOOTSTRAP_RIDGE,
            c.tol,
            c.max_iter,
            weights,
        )
        bounds["bootstrap"] = board.percentile_bounds(x_hat[:m], reps[:, :m])
        beta_boot = percentile_interval(reps[:, m:], c.confidence)
        info.update(bootstrap_iterations=steps, bootstrap_max_grad_norm=worst)
    frame, significance = board.frame("bt_style", rating, bounds)
    coefficients = _coefficient_rows(board, fit, beta_var, beta_boot)
    return frame, coefficients, info, significance


def _coefficient_rows(board: Board, fit: _StyleFit, beta_var: dict[str, np.ndarray],
                      beta_boot: tuple[np.ndarray, np.ndarray] | None) -> pl.DataFrame:
    """The style coefficient rows (``STYLE_COEFFICIENTS_SCHEMA``): each coefficient with its primary
    interval (the first of ``primary_order`` it has), both intervals and the unpenalised coefficient."""
    c, k = board.config, len(STYLE_FEATURES)
    beta = fit.x_hat[board.m:]
    beta_method = next(name for name in (*primary_order(c), "sandwich") if name in beta_var)
    beta_half = z_value(c.confidence) * np.sqrt(np.clip(beta_var[beta_method], 0.0, None))
    vote_half = z_value(c.confidence) * np.sqrt(np.clip(beta_var["sandwich"], 0.0, None))
    use_boot = beta_boot is not None and c.primary_interval == "bootstrap"
    lower, upper = beta_boot if use_boot else (beta - beta_half, beta + beta_half)
    nulls = np.full(k, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = np.where(np.abs(fit.beta_free) > 0, beta / fit.beta_free, np.nan)
    n = fit.info["battles_fitted"]
    return pl.DataFrame(
        {
            "category": [board.category] * k,
            "feature": list(STYLE_FEATURES),
            "coefficient": beta,
            "ci_lower": lower,
            "ci_upper": upper,
            "ci_method": ["bootstrap" if use_boot else beta_method] * k,
            "sandwich_lower": beta - vote_half,
            "sandwich_upper": beta + vote_half,
            "bootstrap_lower": beta_boot[0] if beta_boot is not None else nulls,
            "bootstrap_upper": beta_boot[1] if beta_boot is not None else nulls,
            "battles_fitted": [n] * k,
            "battles_without_style": [fit.info["battles_without_style"]] * k,
            "coefficient_unpenalised": fit.beta_free,
            "share_kept": kept,
        },
        schema=STYLE_COEFFICIENTS_SCHEMA,
        nan_to_null=True,
    )
