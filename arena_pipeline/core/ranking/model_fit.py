"""Goodness of fit of each Bradley-Terry board: k-fold held-out log-loss, Brier score and calibration.

Each board's battles (the ones its ``bt`` fit used) are split into ``folds`` folds by evaluation
session, so the votes of one session are never split between the data a model is fitted on and
the data it is judged on. For every fold, the exact Bradley-Terry MLE is fitted on the other folds
(:func:`bradley_terry.fit_bt`, restricted to the models with a finite estimate there,
:func:`bradley_terry.mle_support`) and predicts the fold's battles. Two predictions of side a's
expected score (a draw counting 1/2) are scored on the same held-out battles:

- ``bt``: ``sigmoid(theta_a - theta_b)`` of the training fit;
- the baseline ``win_rate``, a *calibrated* win-rate predictor: ``sigmoid(beta x)`` with ``x =
  logit(w_a) - logit(w_b)``, ``w`` each model's score rate ((wins + draws / 2) / battles) over its
  training battles, and the one slope ``beta`` the logistic regression of the training battles'
  outcomes on their ``x`` (no intercept: symmetric under a swap of sides), fitted on the same
  training folds. It knows how good each model is overall, not whom it met. The raw rates (the
  mean of ``w_a`` and ``1 - w_b``, used before) are pulled towards 1/2 (a strong model's rate is
  diluted by the weak opponents it met), so a gain over them mostly measured that miscalibration;
  the fitted slope removes it.

The gain (``log_loss_gain``: the baseline's log-loss minus Bradley-Terry's) is therefore what
Bradley-Terry's pairing structure adds: what knowing whom each model met (the strength of its
opponents) predicts beyond a calibrated reading of the win-rate column. Where every model meets
every other about equally often, win rates already order and space the models almost as
Bradley-Terry does, and a gain near 0 is expected, not a sign of a poor fit; the comparison of
``log_loss`` with ``log_loss_expected`` and the calibration table say how well the model fits.

A draw (``tie`` or ``both_bad``) is scored as an outcome of 1/2 for each side, exactly as the fit
counts it (``ties: half``): the log-loss of outcome ``y`` at probability ``p`` is ``-[y log p +
(1 - y) log(1 - p)]`` (the loss the fit minimises) and the Brier score ``(p - y)^2``, with ``y`` 1,
0 or 1/2. With ``ties: drop`` the boards have no draws and neither has this evaluation. Since the
log-loss is linear in ``y``, a model that gets the expected score ``p`` right has an expected
log-loss of the entropy ``H(p) = -p log p - (1 - p) log(1 - p)`` whatever the share of draws:
``log_loss_expected`` is the mean entropy of the held-out predictions, what the log-loss would
be if the fitted Bradley-Terry model were true; ``ln 2 = 0.693`` is that of a coin flip.

scipy is imported by the fits, not here (see ``bradley_terry``'s docstring).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.categories import ordered_categories
from arena_pipeline.core.ranking.bradley_terry import (
    OUTCOME_CODES,
    PairCounts,
    fit_bt,
    mle_support,
    pair_index,
)
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.logistic import sigmoid, softplus
from arena_pipeline.core.ranking.tags import category_rows

#: Folds of the cross-validation (by session).
FOLDS = 5
#: Quantile groups of the calibration table (deciles).
CALIBRATION_BINS = 10
#: The normal quantile of the 95% intervals.
Z95 = 1.959963984540054

#: Columns and types of ``arena.model_fit``: one row per board (category and method).
MODEL_FIT_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "ties": pl.String(),
    "folds": pl.Int64(),
    "battles": pl.Int64(),
    "sessions": pl.Int64(),
    "scored": pl.Int64(),
    "draw_share": pl.Float64(),
    "log_loss": pl.Float64(),
    "log_loss_baseline": pl.Float64(),
    "log_loss_expected": pl.Float64(),
    "log_loss_gain": pl.Float64(),
    "log_loss_gain_lower": pl.Float64(),
    "log_loss_gain_upper": pl.Float64(),
    "brier": pl.Float64(),
    "brier_baseline": pl.Float64(),
    "calibration_error": pl.Float64(),
    "calibration_error_baseline": pl.Float64(),
    "note": pl.String(),
}

#: Columns and types of ``arena.model_fit_calibration``: one row per board, predictor and decile.
MODEL_FIT_CALIBRATION_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "predictor": pl.String(),
    "decile": pl.Int64(),
    "battles": pl.Int64(),
    "predicted": pl.Float64(),
    "predicted_min": pl.Float64(),
    "predicted_max": pl.Float64(),
    "observed": pl.Float64(),
    "observed_lower": pl.Float64(),
    "observed_upper": pl.Float64(),
}

#: The note of a board whose Bradley-Terry predictions are not shown to beat the win rates.
NO_GAIN = ("Bradley-Terry does not predict held-out votes measurably better than the models' calibrated "
           "win rates (the gain's 95% interval reaches 0): whom each model met adds nothing measurable here")


@dataclass(frozen=True)
class HeldOut:
    """Held-out predictions of every battle of a board.

    Attributes
    ----------
    fold
        Fold of every battle, shape (n,).
    scored
        Battles whose two models have a finite rating in the other folds' fit (both predictions
        exist), shape (n,).
    log_odds
        Bradley-Terry log-odds of side a's expected score (a draw counting 1/2), from the fit without
        the battle's fold (NaN where not scored).
    baseline
        The calibrated win-rate baseline's expected score of side a (NaN where not scored).
    y
        Outcome for side a: 1 (won), 0 (lost), 0.5 (draw).
    slope
        The baseline's slope ``beta`` of every fold, shape (folds,).
    """

    fold: np.ndarray
    scored: np.ndarray
    log_odds: np.ndarray
    baseline: np.ndarray
    y: np.ndarray
    slope: np.ndarray


@dataclass(frozen=True)
class ModelFitOutput:
    """Result of :func:`compute_model_fit`: :data:`MODEL_FIT_SCHEMA` and
    :data:`MODEL_FIT_CALIBRATION_SCHEMA` frames, and per-board details (Newton steps, seconds)."""

    summary: pl.DataFrame
    calibration: pl.DataFrame
    metadata: dict[str, Any]


def session_folds(session: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold of every battle: sessions dealt to ``folds`` folds in a random order.

    Parameters
    ----------
    session
        Session index of every battle, ``0 .. K - 1``.
    folds
        Number of folds (at least 2).
    rng
        Random generator (seeded: the same folds every run).

    Returns
    -------
    np.ndarray
        Fold ``0 .. folds - 1`` of every battle; the sessions are split as evenly as possible
        (their sizes differ, so the folds' battles nearly so).
    """
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    k = int(session.max()) + 1 if len(session) else 0
    return (rng.permutation(k) % folds)[session]


def held_out_predictions(
    a: np.ndarray, b: np.ndarray, o: np.ndarray, n_models: int, fold: np.ndarray, folds: int,
    tol: float = 1e-8, max_iter: int = 100,
) -> tuple[HeldOut, int]:
    """Predict every battle from the Bradley-Terry fit (and calibrated win rates) of the other folds.

    The training counts of a fold are the board's per-(pair, outcome) counts minus the fold's;
    the fit is the exact MLE on the models of :func:`bradley_terry.mle_support` of those counts
    (a model that only wins or only loses there has no finite rating, and its held-out battles
    are not scored by either predictor). Folds whose training data rate the same models (usually
    all of them) are fitted together, as one batch of Newton's method.

    Parameters
    ----------
    a, b, o
        Side-a model, side-b model (``0 .. n_models - 1``, ``a != b``) and ``OUTCOME_CODES`` of
        every battle.
    n_models
        Number of models.
    fold
        Fold of every battle (:func:`session_folds`).
    folds
        Number of folds.
    tol, max_iter
        Newton's settings (:func:`bradley_terry.fit_bt`).

    Returns
    -------
    tuple[HeldOut, int]
        The predictions and the largest number of Newton steps of a fit.
    """
    lo, hi, pair, sign = pair_index(a, b, n_models)
    a_won = o == 0
    cells = 3 * pair + np.where(a_won | (o == 1), np.where(a_won == (sign > 0), 0, 1), 2)
    size = 3 * len(lo)
    held = np.bincount(fold * size + cells, minlength=folds * size).reshape(folds, len(lo), 3)
    train = (held.sum(axis=0) - held).astype(float)  # (folds, P, 3): every fold's training counts
    supports = np.array([mle_support(PairCounts(n_models, lo, hi, counts)) for counts in train])
    theta = np.full((folds, n_models), np.nan)
    steps = 0
    distinct, group = np.unique(supports, axis=0, return_inverse=True)
    for g, support in enumerate(distinct):
        if support.sum() < 2:
            continue
        members = np.flatnonzero(group.reshape(-1) == g)
        keep = support[lo] & support[hi]
        local = np.cumsum(support) - 1
        pairs = PairCounts(int(support.sum()), local[lo[keep]], local[hi[keep]], train[members[0]][keep])
        fit = fit_bt(pairs, train[members][:, keep], tol=tol, max_iter=max_iter)
        theta[np.ix_(members, np.flatnonzero(support))] = fit.x
        steps = max(steps, fit.iterations)
    # each model's score rate over its training battles: (wins + draws / 2) / battles
    played = train.sum(axis=2)
    score_lo, score_hi = train[:, :, 0] + 0.5 * train[:, :, 2], train[:, :, 1] + 0.5 * train[:, :, 2]
    rate = np.empty((folds, n_models))
    for f in range(folds):
        battles = np.bincount(lo, played[f], n_models) + np.bincount(hi, played[f], n_models)
        score = np.bincount(lo, score_lo[f], n_models) + np.bincount(hi, score_hi[f], n_models)
        rate[f] = score / np.maximum(battles, 1.0)
    rate = np.clip(rate, 1e-9, 1.0 - 1e-9)
    logit = np.log(rate) - np.log1p(-rate)
    # the baseline's slope per fold, from the training pairs of two rated models (x = 0 elsewhere)
    rated = ~np.isnan(theta)
    x_pair = np.where(rated[:, lo] & rated[:, hi], logit[:, lo] - logit[:, hi], 0.0)  # (folds, P)
    slope = win_rate_slope(x_pair, score_lo, played, tol=tol, max_iter=max_iter)
    log_odds = theta[fold, a] - theta[fold, b]  # NaN unless both models are rated without the fold
    scored = ~np.isnan(log_odds)
    baseline = np.where(scored, sigmoid(slope[fold] * (logit[fold, a] - logit[fold, b])), np.nan)
    y = np.where(o == 0, 1.0, np.where(o == 1, 0.0, 0.5))
    return HeldOut(fold, scored, log_odds, baseline, y, slope), steps


def win_rate_slope(
    x: np.ndarray, score: np.ndarray, played: np.ndarray, tol: float = 1e-8, max_iter: int = 100,
) -> np.ndarray:
    """Slope of the logistic regression without intercept of pair outcomes on ``x``, per row.

    Maximises ``sum_p [s_p beta x_p - n_p softplus(beta x_p)]`` over ``beta`` for each row (fold)
    by Newton's method with step halving (the loss is convex in ``beta``): the binomial
    likelihood of ``s_p`` points in ``n_p`` battles of pair ``p`` (a draw counting 1/2, as in
    the Bradley-Terry fit), the same as the per-battle regression.

    Parameters
    ----------
    x
        Regressor of every row and pair, shape (rows, P); a pair with ``x = 0`` adds nothing.
    score, played
        Points of the pair's first model and battles, shape (rows, P).
    tol, max_iter
        Stop when every step is below ``tol``, or after ``max_iter`` steps.

    Returns
    -------
    np.ndarray
        ``beta`` of every row, shape (rows,); 0 for a row whose ``x`` is 0 on every played pair.
    """
    def loss(beta: np.ndarray) -> np.ndarray:
        z = beta[:, None] * x
        return np.sum(played * softplus(z) - score * z, axis=1)

    beta = np.zeros(x.shape[0])
    current = loss(beta)
    for _ in range(max_iter):
        p = sigmoid(beta[:, None] * x)
        grad = np.sum((played * p - score) * x, axis=1)
        hess = np.sum(played * p * (1.0 - p) * x**2, axis=1)
        step = np.where(hess > 0, grad / np.where(hess > 0, hess, 1.0), 0.0)
        for _ in range(30):  # halve where the full step would not lower the loss
            trial = loss(beta - step)
            worse = trial > current + 1e-12 * np.abs(current)
            if not worse.any():
                break
            step = np.where(worse, step / 2, step)
        beta, current = beta - step, loss(beta - step)
        if np.all(np.abs(step) < tol):
            break
    return beta


def logistic_log_loss(log_odds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``-[y log p + (1 - y) log(1 - p)]`` at ``p = sigmoid(log_odds)``, without overflow.

    Parameters
    ----------
    log_odds, y
        Log-odds of the event and its outcome (1, 0, or 1/2 for a draw).

    Returns
    -------
    np.ndarray
    """
    return softplus(log_odds) - y * log_odds


def probability_log_loss(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``-[y log p + (1 - y) log(1 - p)]`` of probabilities (clipped to [1e-15, 1 - 1e-15]).

    Parameters
    ----------
    p, y
        Probability of the event and its outcome (1, 0, or 1/2 for a draw).

    Returns
    -------
    np.ndarray
    """
    p = np.clip(p, 1e-15, 1.0 - 1e-15)
    return -(y * np.log(p) + (1.0 - y) * np.log1p(-p))


def clustered_mean_interval(values: np.ndarray, cluster: np.ndarray) -> tuple[float, float, float]:
    """Mean of per-battle values and its 95% normal interval, sessions as independent units.

    The variance of the mean is ``G / (G - 1) * sum_c (S_c - n_c mean)^2 / n^2`` over the ``G``
    sessions present (``S_c``, ``n_c``: the session's sum and count), the cluster-robust (CR1)
    variance: a session's votes may be dependent.

    Parameters
    ----------
    values
        One value per battle.
    cluster
        Session index of every battle (non-negative integers).

    Returns
    -------
    tuple[float, float, float]
        Mean, lower and upper bound (NaN without values; the mean itself with one session).
    """
    n = len(values)
    if n == 0:
        return np.nan, np.nan, np.nan
    mean = float(values.mean())
    resid = np.bincount(cluster, values - mean)
    g = np.count_nonzero(np.bincount(cluster))
    half = float(Z95 * np.sqrt(g / (g - 1) * np.sum(resid**2)) / n) if g > 1 else 0.0
    return mean, mean - half, mean + half


def calibration_table(p: np.ndarray, y: np.ndarray, bins: int = CALIBRATION_BINS) -> dict[str, np.ndarray]:
    """Predicted against observed expected score of the predicted favourite (a draw counting 1/2), by quantile group.

    Each battle is turned to its favourite's side (``q = max(p, 1 - p)``; at ``p = 1/2``, side
    a), and cut at the ``bins``-quantiles of ``q`` (order statistics ``n i // bins``; deciles by
    default): group ``g`` holds the battles with ``cut_(g-1) <= q < cut_g``, so each holds about
    ``n / bins`` battles and equal predictions stay together (a group that repeated predictions
    leave empty is left out). A draw counts 1/2.

    Parameters
    ----------
    p
        Predicted expected score of side a.
    y
        Outcome for side a (1, 0, 1/2).
    bins
        Number of groups.

    Returns
    -------
    dict[str, np.ndarray]
        Per non-empty group: ``decile`` (1-based), ``battles``, ``predicted`` (mean ``q``),
        ``predicted_min``, ``predicted_max``, ``observed`` (the favourites' mean score) and its
        95% normal interval ``observed_lower`` / ``observed_upper`` (from the scores' variance
        in the group; battles taken as independent).
    """
    n = len(p)
    favourite = p >= 0.5
    q = np.where(favourite, p, 1.0 - p)
    s = np.where(favourite, y, 1.0 - y)
    at = [n * i // bins for i in range(1, bins)]
    group = np.searchsorted(np.partition(q, at)[at], q, side="right") if n else np.zeros(0, dtype=np.int64)
    count = np.bincount(group, minlength=bins)
    c = np.maximum(count, 1)
    predicted = np.bincount(group, q, bins) / c
    observed = np.bincount(group, s, bins) / c
    var = np.bincount(group, (s - observed[group]) ** 2, bins) / np.maximum(count - 1, 1)
    half = Z95 * np.sqrt(var / c)
    lowest, highest = np.full(bins, np.inf), np.full(bins, -np.inf)
    np.minimum.at(lowest, group, q)
    np.maximum.at(highest, group, q)
    out = {
        "decile": np.arange(1, bins + 1), "battles": count, "predicted": predicted,
        "predicted_min": lowest, "predicted_max": highest, "observed": observed,
        "observed_lower": np.clip(observed - half, 0.0, 1.0), "observed_upper": np.clip(observed + half, 0.0, 1.0),
    }
    return {k: v[count > 0] for k, v in out.items()}


def calibration_error(table: dict[str, np.ndarray]) -> float:
    """Expected calibration error: the battle-weighted mean of ``|predicted - observed|`` over the groups
    of :func:`calibration_table` (NaN without battles)."""
    n = table["battles"].sum()
    if n == 0:
        return float("nan")
    return float(np.sum(table["battles"] * np.abs(table["predicted"] - table["observed"])) / n)


def board_model_fit(
    category: str, a: np.ndarray, b: np.ndarray, o: np.ndarray, session: np.ndarray, n_models: int,
    config: RankingConfig, folds: int = FOLDS, bins: int = CALIBRATION_BINS,
) -> tuple[dict[str, Any], pl.DataFrame, dict[str, Any]]:
    """One board's ``arena.model_fit`` row, its calibration rows and details.

    Parameters
    ----------
    category
        The board's category.
    a, b, o
        The battles the board's ``bt`` fit used: local model indices and outcome codes.
    session
        Session index of every battle, ``0 .. K - 1``.
    n_models
        Models on the board.
    config
        The ranking settings (``seed`` seeds the folds with the category's name; ``ties``,
        ``tol``, ``max_iter``).
    folds, bins
        Number of folds and of calibration groups.

    Returns
    -------
    tuple
        The row (:data:`MODEL_FIT_SCHEMA`), the calibration frame
        (:data:`MODEL_FIT_CALIBRATION_SCHEMA`) and details (``newton_steps``, ``unscored``, and
        ``baseline_slope``: the calibrated baseline's slope per fold).
    """
    rng = np.random.default_rng([config.seed, zlib.crc32(category.encode()), zlib.crc32(b"model_fit")])
    fold = session_folds(session, folds, rng)
    held, steps = held_out_predictions(a, b, o, n_models, fold, folds, config.tol, config.max_iter)
    ok = held.scored
    y, d, base = held.y[ok], held.log_odds[ok], held.baseline[ok]
    p = sigmoid(d)
    loss = logistic_log_loss(d, y)
    loss_base = probability_log_loss(base, y)
    gain, gain_lower, gain_upper = clustered_mean_interval(loss_base - loss, session[ok])
    tables = {"bt": calibration_table(p, y, bins), "win_rate": calibration_table(base, y, bins)}
    scored = int(ok.sum())

    def mean(x: np.ndarray) -> float:
        return float(x.mean()) if len(x) else float("nan")

    notes = []
    if scored and not gain_lower > 0:
        notes.append(NO_GAIN)
    draws = mean(y == 0.5)
    if draws > 0.5:
        notes.append(f"draws (tie, both_bad) are {draws:.0%} of the votes: on a draw every prediction "
                     "loses at least ln 2, so the log-loss stays near it whatever the ratings")
    row = {
        "category": category, "method": "bt", "ties": config.ties, "folds": folds, "battles": len(a),
        "sessions": int(np.count_nonzero(np.bincount(session))), "scored": scored, "draw_share": draws,
        "log_loss": mean(loss), "log_loss_baseline": mean(loss_base),
        # the entropy of p, H(p) = softplus(d) - p d: the expected loss if the model were true
        "log_loss_expected": mean(softplus(d) - p * d),
        "log_loss_gain": gain, "log_loss_gain_lower": gain_lower, "log_loss_gain_upper": gain_upper,
        "brier": mean((p - y) ** 2), "brier_baseline": mean((base - y) ** 2),
        "calibration_error": calibration_error(tables["bt"]),
        "calibration_error_baseline": calibration_error(tables["win_rate"]),
        "note": "; ".join(notes) or None,
    }
    frames = [
        pl.DataFrame({"category": category, "method": "bt", "predictor": name, **table},
                     schema=MODEL_FIT_CALIBRATION_SCHEMA)
        for name, table in tables.items() if len(table["decile"])
    ]
    calibration = pl.concat(frames) if frames else pl.DataFrame(schema=MODEL_FIT_CALIBRATION_SCHEMA)
    return row, calibration, {"newton_steps": steps, "unscored": len(a) - scored,
                              "baseline_slope": [float(v) for v in held.slope]}


def board_battles(
    battles: pl.DataFrame, battle_categories: pl.DataFrame, config: RankingConfig,
) -> tuple[pl.DataFrame, dict[str, np.ndarray], list[str]]:
    """Every battle as integer codes, and each category's battles that a board could fit.

    Self-battles are left out of the categories, and draws with ``ties: drop``, as ``compute_rankings``
    does; the models on each board are chosen afterwards (:func:`compute_model_fit`).

    Parameters
    ----------
    battles
        ``id``, ``model_a``, ``model_b``, ``winner`` and, when present, ``config.cluster_column``
        (a null session is a session of its own).
    battle_categories
        The category tags as rows of ``battles`` (``tags.tag_rows``: ``category``, ``_row``).
    config
        The ranking settings.

    Returns
    -------
    tuple[pl.DataFrame, dict[str, np.ndarray], list[str]]
        ``_a``, ``_b`` (indices into the sorted model names), ``_o`` (outcome code) and ``_s`` (session
        index) of every battle, in the order of ``battles``; each category's rows of it, in the order of
        ``battle_categories`` (a battle tagged twice with one category once); and the model names.
    """
    column = config.cluster_column
    session = (pl.coalesce(pl.col(column).cast(pl.String), pl.col("id")) if column in battles.columns
               else pl.col("id"))
    names = pl.concat([battles.get_column("model_a"), battles.get_column("model_b")]).unique().sort().to_list()
    index = pl.Enum(names)
    coded = battles.select(
        pl.col("model_a").cast(index).to_physical().cast(pl.Int64).alias("_a"),
        pl.col("model_b").cast(index).to_physical().cast(pl.Int64).alias("_b"),
        pl.col("winner").replace_strict(OUTCOME_CODES, return_dtype=pl.Int64).alias("_o"),
        (session.rank("dense").cast(pl.Int64) - 1).alias("_s"),
    )
    fitted = coded.get_column("_a") != coded.get_column("_b")
    if config.ties == "drop":
        fitted &= coded.get_column("_o") < 2
    rows, _ = category_rows(battle_categories)
    fitted = fitted.to_numpy()
    return coded, {category: row[fitted[row]] for category, row in rows.items()}, names


def compute_model_fit(
    battles: pl.DataFrame, battle_categories: pl.DataFrame, leaderboard: pl.DataFrame,
    config: RankingConfig | None = None, folds: int = FOLDS, bins: int = CALIBRATION_BINS,
) -> ModelFitOutput:
    """Held-out goodness of fit of every board of ``leaderboard`` (see the module's docstring).

    A board's battles are the ones its fit used: its category's battles between two of its
    models (the leaderboard's), without self-battles, without draws under ``ties: drop``.

    Parameters
    ----------
    battles, battle_categories
        As given to ``compute_rankings`` (the same frames and settings give the same boards).
    leaderboard
        ``compute_rankings``'s leaderboard: ``category``, ``model`` (its boards' models, any method).
    config
        The settings the leaderboard was computed with; default ``RankingConfig()``.
    folds, bins
        Folds of the cross-validation and groups of the calibration table.

    Returns
    -------
    ModelFitOutput
        ``summary``: one row per board, in board order; ``calibration``: per board, predictor
        (``bt``, ``win_rate``) and decile; ``metadata``: per category the Newton steps, the
        unscored battles and seconds.
    """
    config = config or RankingConfig()
    started = perf_counter()
    coded, rows, names = board_battles(battles, battle_categories, config)
    code = {name: i for i, name in enumerate(names)}
    boards = leaderboard.select("category", "model").unique().partition_by("category", as_dict=True)
    summaries, calibration, details = [], [], {}
    for category in ordered_categories(key[0] for key in boards):
        t0 = perf_counter()
        row = rows.get(category)
        on_board = np.zeros(len(names), dtype=bool)
        on_board[[code[m] for m in boards[(category,)].get_column("model") if m in code]] = True
        if row is None or on_board.sum() < 2:
            continue
        a, b, o, s = (coded.get_column(c).to_numpy()[row] for c in ("_a", "_b", "_o", "_s"))
        keep = on_board[a] & on_board[b]
        local = np.cumsum(on_board) - 1
        present = np.bincount(s[keep], minlength=s.max() + 1) > 0
        session = (np.cumsum(present) - 1)[s[keep]]  # the board's sessions, 0 .. K - 1
        summary, table, info = board_model_fit(category, local[a[keep]], local[b[keep]], o[keep], session,
                                               int(on_board.sum()), config, folds, bins)
        summaries.append(summary)
        calibration.append(table)
        details[category] = {**info, "seconds": perf_counter() - t0}
    summary = pl.DataFrame(summaries, schema=MODEL_FIT_SCHEMA).fill_nan(None)
    table = pl.concat(calibration) if calibration else pl.DataFrame(schema=MODEL_FIT_CALIBRATION_SCHEMA)
    return ModelFitOutput(summary, table, {"categories": details, "seconds": perf_counter() - started,
                                           "folds": folds})
