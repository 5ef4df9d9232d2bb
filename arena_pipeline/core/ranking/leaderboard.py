"""Per-category leaderboards: configuration, the orchestrating `compute_rankings`, output frames."""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field
from time import perf_counter
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from scipy.stats import kendalltau

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core.ranking.bradley_terry import (
    BOOTSTRAP_RIDGE,
    OUTCOME_CODES,
    PairCounts,
    aggregate_pairs,
    bootstrap_counts,
    bt_sandwich_covariance,
    fit_bt,
    mle_support,
)
from arena_pipeline.core.ranking.pairwise import PAIRWISE_SCHEMA, pairwise_table
from arena_pipeline.core.ranking.scale import (
    anchor_matrix,
    percentile_interval,
    points_per_logit,
    rank_upper_bounds,
    ranks,
    to_ratings,
    z_value,
)
from arena_pipeline.core.ranking.spectral import BOOTSTRAP_SMOOTHING, rank_centrality
from arena_pipeline.core.ranking.style_control import (
    STYLE_FEATURES,
    StyleDesign,
    bootstrap_bt_style,
    bt_style_sandwich_covariance,
    fit_bt_style,
    standardize,
    style_columns,
    style_feature_exprs,
)

METHODS: tuple[str, ...] = ("bt", "bt_style", "spectral")

#: Columns and types of ``RankingOutput.leaderboard``.
LEADERBOARD_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "model": pl.String(),
    "rating": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "ci_method": pl.String(),
    "rank": pl.Int64(),
    "rank_ub": pl.Int64(),
    "n_battles": pl.Int64(),
    "wins": pl.Int64(),
    "losses": pl.Int64(),
    "ties": pl.Int64(),
    "win_rate": pl.Float64(),
    "sandwich_lower": pl.Float64(),
    "sandwich_upper": pl.Float64(),
}

#: Columns and types of ``RankingOutput.style_coefficients``.
STYLE_COEFFICIENTS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "feature": pl.String(),
    "coefficient": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "ci_method": pl.String(),
    "sandwich_lower": pl.Float64(),
    "sandwich_upper": pl.Float64(),
}


@dataclass(frozen=True)
class RankingConfig:
    """Settings of :func:`compute_rankings`.

    Attributes
    ----------
    ties
        ``"half"`` (default, LMArena's convention): ``tie`` and ``both_bad`` count as half
        a win for each side. ``"drop"``: those battles are left out of every fit and count.
    bootstrap_rounds
        Bootstrap replicates for ``ci_lower``/``ci_upper``; 0 uses the sandwich interval.
    seed
        Seed of the bootstrap; each (category, stream) gets its own generator derived
        from it, so a board does not depend on which other boards are computed.
    min_battles
        Models with fewer battles in a category (after ``ties`` handling, counting only
        battles against models kept on the board) are excluded from that board.
    anchor_model, anchor_rating
        With an anchor, that model's rating is ``anchor_rating`` on every board it is on
        (a board without it falls back to centring, noted in metadata). Without, ratings
        are centred: their mean on every board is ``anchor_rating``.
    style_l2
        Ridge penalty on the four style coefficients of ``bt_style``, added as
        ``style_l2 / 2 * |beta|^2`` to the summed (not averaged) negative log-likelihood;
        coefficients are in natural log-odds per standard deviation of the feature. The
        default 1.0 is a N(0, 1) prior: negligible against boards of thousands of battles
        (each battle adds about 0.2 to the information on a coefficient) and a mild
        stabiliser on small boards. arena-rank's ``reg`` penalises the mean
        log-likelihood instead: its ``reg=r`` equals ``style_l2 = r * n_battles``.
    scale, base
        ``P(a beats b) = 1 / (1 + base ** ((R_b - R_a) / scale))``.
    methods
        Boards to produce, a subset of ``("bt", "bt_style", "spectral")``.
    confidence
        Level of every interval.
    tol, max_iter
        Newton stops when the Euclidean norm of the gradient of the summed negative
        log-likelihood is below ``tol``; ``max_iter`` bounds the steps.
    """

    ties: Literal["half", "drop"] = "half"
    bootstrap_rounds: int = 100
    seed: int = 42
    min_battles: int = 50
    anchor_model: str | None = None
    anchor_rating: float = 1000.0
    style_l2: float = 1.0
    scale: float = 400.0
    base: float = 10.0
    methods: tuple[str, ...] = METHODS
    confidence: float = 0.95
    tol: float = 1e-8
    max_iter: int = 100

    def __post_init__(self) -> None:
        if self.ties not in ("half", "drop"):
            raise ValueError(f"ties must be 'half' or 'drop', got {self.ties!r}")
        unknown = set(self.methods) - set(METHODS)
        if unknown or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {METHODS}, got {self.methods}")
        if self.bootstrap_rounds < 0 or self.min_battles < 0 or self.style_l2 < 0:
            raise ValueError("bootstrap_rounds, min_battles and style_l2 must be >= 0")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError("confidence must be in (0, 1)")


@dataclass(frozen=True)
class RankingOutput:
    """Result of :func:`compute_rankings`.

    Attributes
    ----------
    leaderboard
        :data:`LEADERBOARD_SCHEMA`, one row per (category, method, model).
    style_coefficients
        :data:`STYLE_COEFFICIENTS_SCHEMA`, one row per (category, feature).
    pairwise
        ``pairwise.PAIRWISE_SCHEMA``, one row per (category, unordered model pair).
    metadata
        Plain dict: config, dropped rows, per-category excluded models, Kendall tau,
        Newton iterations and gradient norms, timings (seconds).
    """

    leaderboard: pl.DataFrame
    style_coefficients: pl.DataFrame
    pairwise: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)


def _rng(seed: int, category: str, stream: str) -> np.random.Generator:
    """Generator for one (category, stream): independent of the other boards computed."""
    return np.random.default_rng([seed, zlib.crc32(category.encode()), zlib.crc32(stream.encode())])


def _model_stats(a: np.ndarray, b: np.ndarray, o: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Battles, wins, losses, draws and score rate per model (all sides counted)."""

    def count(x: np.ndarray) -> np.ndarray:
        return np.bincount(x, minlength=n).astype(np.int64)

    battles = count(a) + count(b)
    wins = count(a[o == 0]) + count(b[o == 1])
    losses = count(a[o == 1]) + count(b[o == 0])
    draws = battles - wins - losses
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (wins + 0.5 * draws) / battles
    return {"n_battles": battles, "wins": wins, "losses": losses, "ties": draws, "win_rate": rate}


def _select_models(
    a: np.ndarray, b: np.ndarray, o: np.ndarray, names: list[str], min_battles: int
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Models kept on a board: at least ``min_battles`` battles and a finite MLE.

    Alternates the two filters until neither removes a model (removing a model removes
    its battles from the others' counts).
    """
    n = len(names)
    active = np.zeros(n, dtype=bool)
    active[a] = True
    active[b] = True
    excluded: list[dict[str, Any]] = []
    while True:
        keep = active[a] & active[b]
        stats = _model_stats(a[keep], b[keep], o[keep], n)
        low = active & (stats["n_battles"] < min_battles)
        if low.any():
            for i in np.flatnonzero(low):
                excluded.append(
                    {
                        "model": names[i],
                        "reason": f"fewer than min_battles={min_battles} battles",
                        "n_battles": int(stats["n_battles"][i]),
                    }
                )
            active &= ~low
            continue
        support = mle_support(aggregate_pairs(a[keep], b[keep], o[keep], n), present=active)
        outside = active & ~support
        if outside.any():
            for i in np.flatnonzero(outside):
                score = stats["wins"][i] + 0.5 * stats["ties"][i]
                if score == 0:
                    why = "no finite MLE: never won or drew"
                elif score == stats["n_battles"][i]:
                    why = "no finite MLE: never lost or drew"
                else:
                    why = "no finite MLE: outside the largest strongly connected group"
                excluded.append(
                    {"model": names[i], "reason": why, "n_battles": int(stats["n_battles"][i])}
                )
            active &= ~outside
            continue
        return active, excluded


def _board_rows(
    category: str,
    method: str,
    models: list[str],
    rating: np.ndarray,
    stats: dict[str, np.ndarray],
    boot: tuple[np.ndarray, np.ndarray] | None,
    sandwich: tuple[np.ndarray, np.ndarray] | None,
) -> pl.DataFrame:
    """One board as a leaderboard frame (primary CI = bootstrap if any, else sandwich)."""
    m = len(models)
    nulls = np.full(m, np.nan)
    if boot is not None:
        lower, upper, ci_method = boot[0], boot[1], "bootstrap"
    elif sandwich is not None:
        lower, upper, ci_method = sandwich[0], sandwich[1], "sandwich"
    else:
        lower, upper, ci_method = nulls, nulls, "none"
    has_ci = boot is not None or sandwich is not None
    frame = pl.DataFrame(
        {
            "category": [category] * m,
            "method": [method] * m,
            "model": models,
            "rating": rating,
            "ci_lower": lower,
            "ci_upper": upper,
            "ci_method": [ci_method] * m,
            "rank": ranks(rating),
            "rank_ub": rank_upper_bounds(lower, upper) if has_ci else np.zeros(m, np.int64),
            **stats,
            "sandwich_lower": sandwich[0] if sandwich is not None else nulls,
            "sandwich_upper": sandwich[1] if sandwich is not None else nulls,
        },
        nan_to_null=True,
    )
    if not has_ci:
        frame = frame.with_columns(rank_ub=pl.lit(None, pl.Int64))
    return frame.select([pl.col(c).cast(t) for c, t in LEADERBOARD_SCHEMA.items()])


def _prepare(battles: pl.DataFrame, with_style: bool) -> tuple[pl.DataFrame, list[str]]:
    """Validate battles and add model indices, outcome codes and raw style features."""
    needed = ["id", "model_a", "model_b", "winner"] + (style_columns() if with_style else [])
    missing = [c for c in needed if c not in battles.columns]
    if missing:
        hint = " (bt_style needs the conversation style columns)" if with_style else ""
        raise ValueError(f"battles lacks columns {missing}{hint}")
    bad = battles.filter(
        pl.col("model_a").is_null()
        | pl.col("model_b").is_null()
        | ~pl.col("winner").is_in(list(OUTCOME_CODES)).fill_null(False)
    )
    if bad.height:
        raise ValueError(
            f"{bad.height} battles have a null model or a winner outside {list(OUTCOME_CODES)}, "
            f"e.g. {bad.select('id', 'model_a', 'model_b', 'winner').head(3).to_dicts()}"
        )
    names = (
        pl.concat([battles.get_column("model_a"), battles.get_column("model_b")])
        .unique()
        .sort()
        .to_list()
    )
    index = pl.Enum(names)
    frame = battles.select(
        "id",
        "model_a",
        "model_b",
        "winner",
        pl.col("model_a").cast(index).to_physical().cast(pl.Int64).alias("_a"),
        pl.col("model_b").cast(index).to_physical().cast(pl.Int64).alias("_b"),
        pl.col("winner").replace_strict(OUTCOME_CODES, return_dtype=pl.Int8).alias("_o"),
        *(style_feature_exprs() if with_style else []),
    )
    return frame, names


def compute_rankings(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
) -> RankingOutput:
    """Per-category leaderboards by Bradley-Terry, style-controlled Bradley-Terry, Rank Centrality.

    For every category present in ``battle_categories`` (in ``constants.CATEGORIES``
    order, unknown names after, alphabetically):

    1. Battles are that category's rows of ``battles``; self-battles (``model_a ==
       model_b``) are dropped everywhere, ties are halved or dropped (``config.ties``).
    2. Models with fewer than ``min_battles`` battles, and models without a finite MLE
       (only losses, only wins, or outside the largest strongly connected part of the
       win graph, e.g. a disconnected group) are excluded from the board, repeatedly
       until stable, and listed in ``metadata["excluded_models"][category]``.
    3. ``bt``: exact MLE by Newton's method on per-pair counts (gradient norm below
       ``tol``). Intervals: percentile bootstrap over ``bootstrap_rounds`` multinomial
       resamples of the per-(pair, outcome) counts (= resampling battles), and the
       sandwich (HC0) normal interval.
    4. ``bt_style``: the same with four style covariates fitted jointly per battle
       (see :class:`RankingConfig.style_l2`); bootstrap by resampling battles.
    5. ``spectral``: Rank Centrality scores on the same rating scale, with a bootstrap
       interval from the same resamples as ``bt``; no sandwich interval. The Kendall tau
       between its ratings and ``bt``'s is in ``metadata["kendall_tau"]``.

    Parameters
    ----------
    battles
        Flat battles table: ``id``, ``model_a``, ``model_b``, ``winner`` and, for
        ``bt_style``, the ``schema.CONVERSATION_STYLE_COLUMNS`` of both sides (nulls as 0).
    battle_categories
        ``battle_id``, ``category`` (see ``categories.tag_categories``).
    config
        Settings; default ``RankingConfig()``.

    Returns
    -------
    RankingOutput
        ``leaderboard``: ``rating`` on the configured scale; ``ci_lower``/``ci_upper``
        the primary interval (``ci_method`` "bootstrap" when ``bootstrap_rounds > 0``,
        else "sandwich"; "none" for spectral without bootstrap); ``sandwich_lower``/
        ``sandwich_upper`` the sandwich interval (null for spectral); ``rank`` is 1 + the
        number of models with a higher rating; ``rank_ub`` 1 + the number of models whose
        ``ci_lower`` is above this model's ``ci_upper``; ``n_battles``, ``wins``,
        ``losses``, ``ties`` (tie + both_bad) count the battles the fit used and
        ``win_rate = (wins + ties / 2) / n_battles``.

    Raises
    ------
    ValueError
        Missing columns, a null model name or a winner outside ``OUTCOME_CODES``.
    """
    config = config or RankingConfig()
    started = perf_counter()
    methods = config.methods
    with_style = "bt_style" in methods
    level = config.confidence
    z = z_value(level)
    ppl = points_per_logit(config.scale, config.base)

    frame, names = _prepare(battles, with_style)
    is_self = (frame.get_column("_a") == frame.get_column("_b")).to_numpy()
    keep_cols = ["_a", "_b", "_o", *(STYLE_FEATURES if with_style else ())]
    categories = battle_categories.select("battle_id", "category").unique(maintain_order=True)
    tagged = categories.join(
        frame.with_columns(_self=pl.Series(is_self)),
        left_on="battle_id",
        right_on="id",
        how="inner",
    )
    unmatched = categories.height - tagged.height
    self_rows = int(tagged.get_column("_self").sum())
    tagged = tagged.filter(~pl.col("_self"))
    present = tagged.get_column("category").unique().to_list()
    order = [c for c in CATEGORIES if c in present] + sorted(set(present) - set(CATEGORIES))
    parts = {key[0]: part for key, part in tagged.partition_by("category", as_dict=True).items()}

    metadata: dict[str, Any] = {
        "config": asdict(config),
        "interval": (
            f"{level:.0%} intervals; ci_lower/ci_upper: percentile bootstrap "
            f"({config.bootstrap_rounds} rounds) if bootstrap_rounds > 0 else sandwich; "
            "sandwich_lower/sandwich_upper: robust sandwich (HC0) normal interval"
        ),
        "models": len(names),
        "dropped": {
            "self_battles": int(is_self.sum()),
            "self_battle_category_rows": self_rows,
            "category_rows_without_battle": unmatched,
        },
        "excluded_models": {},
        "kendall_tau": {},
        "categories": {},
        "timings_s": {"prepare": perf_counter() - started},
    }
    boards: list[pl.DataFrame] = []
    coefficient_rows: list[pl.DataFrame] = []
    bt_boards: list[pl.DataFrame] = []

    for category in order:
        t_cat = perf_counter()
        part = parts[category]
        if config.ties == "drop":
            part = part.filter(pl.col("_o") < 2)
        a_all = part.get_column("_a").to_numpy()
        b_all = part.get_column("_b").to_numpy()
        o_all = part.get_column("_o").to_numpy()
        active, excluded = _select_models(a_all, b_all, o_all, names, config.min_battles)
        metadata["excluded_models"][category] = excluded
        info: dict[str, Any] = {
            "battles": int(len(a_all)),
            "excluded_models": excluded,
            "timings_s": {},
        }
        metadata["categories"][category] = info
        keep = active[a_all] & active[b_all]
        models = [names[i] for i in np.flatnonzero(active)]
        m = len(models)
        info["battles_fitted"] = int(keep.sum())
        info["models"] = m
        if m < 2:
            info["note"] = "fewer than 2 models left: no board"
            continue
        local = np.cumsum(active) - 1
        a, b, o = local[a_all[keep]], local[b_all[keep]], o_all[keep]
        stats = _model_stats(a, b, o, m)
        anchor = models.index(config.anchor_model) if config.anchor_model in models else None
        if config.anchor_model is not None and anchor is None:
            info["anchor_missing"] = True
        contrast = anchor_matrix(m, anchor)

        def rate(theta: np.ndarray) -> np.ndarray:
            return to_ratings(theta, anchor, config.anchor_rating, config.scale, config.base)

        # --- bt (always fitted: spectral's tau and the pairwise predictions use it)
        t0 = perf_counter()
        pairs = aggregate_pairs(a, b, o, m)
        fit = fit_bt(pairs, tol=config.tol, max_iter=config.max_iter)
        theta_hat = fit.x[0]
        bt_rating = rate(theta_hat)
        cov = contrast @ bt_sandwich_covariance(pairs, theta_hat) @ contrast.T
        half = z * ppl * np.sqrt(np.clip(np.diag(cov), 0.0, None))
        bt_info: dict[str, Any] = {
            "iterations": fit.iterations,
            "grad_norm": float(fit.grad_norm[0]),
        }
        boot = None
        if config.bootstrap_rounds > 0:
            resampled = bootstrap_counts(pairs, config.bootstrap_rounds, _rng(config.seed, category, "pairs"))
        if config.bootstrap_rounds > 0 and "bt" in methods:
            bfit = fit_bt(
                pairs, resampled, BOOTSTRAP_RIDGE, theta_hat, config.tol, config.max_iter
            )
            boot = percentile_interval(rate(bfit.x), level)
            bt_info.update(
                bootstrap_iterations=bfit.iterations,
                bootstrap_max_grad_norm=float(bfit.grad_norm.max()),
                bootstrap_degenerate_rounds=_degenerate_rounds(pairs, resampled),
            )
        bt_frame = _board_rows(
            category, "bt", models, bt_rating, stats, boot, (bt_rating - half, bt_rating + half)
        )
        bt_boards.append(bt_frame)
        if "bt" in methods:
            boards.append(bt_frame)
        info["bt"] = bt_info
        info["timings_s"]["bt"] = perf_counter() - t0

        # --- bt_style
        if with_style:
            t0 = perf_counter()
            raw = part.select(STYLE_FEATURES).to_numpy()[keep]
            feats, mean, std = standardize(raw)
            y = np.where(o == 0, 1.0, np.where(o == 1, 0.0, 0.5))
            design = StyleDesign.build(a, b, y, feats, m)
            x0 = np.concatenate([theta_hat, np.zeros(len(STYLE_FEATURES))])
            sfit = fit_bt_style(design, config.style_l2, x0=x0, tol=config.tol, max_iter=config.max_iter)
            x_hat = sfit.x[0]
            scov = bt_style_sandwich_covariance(design, x_hat, config.style_l2)
            r_cov = contrast @ scov[:m, :m] @ contrast.T
            s_rating = rate(x_hat[:m])
            s_half = z * ppl * np.sqrt(np.clip(np.diag(r_cov), 0.0, None))
            beta = x_hat[m:]
            b_half = z * np.sqrt(np.clip(np.diag(scov)[m:], 0.0, None))
            s_info: dict[str, Any] = {
                "iterations": sfit.iterations,
                "grad_norm": float(sfit.grad_norm[0]),
                "feature_mean": dict(zip(STYLE_FEATURES, mean.tolist())),
                "feature_std": dict(zip(STYLE_FEATURES, std.tolist())),
            }
            s_boot = b_boot = None
            if config.bootstrap_rounds > 0:
                reps, steps, worst = bootstrap_bt_style(
                    design,
                    config.style_l2,
                    x_hat,
                    config.bootstrap_rounds,
                    _rng(config.seed, category, "bt_style"),
                    BOOTSTRAP_RIDGE,
                    config.tol,
                    config.max_iter,
                )
                s_boot = percentile_interval(rate(reps[:, :m]), level)
                b_boot = percentile_interval(reps[:, m:], level)
                s_info.update(bootstrap_iterations=steps, bootstrap_max_grad_norm=worst)
            boards.append(
                _board_rows(
                    category,
                    "bt_style",
                    models,
                    s_rating,
                    stats,
                    s_boot,
                    (s_rating - s_half, s_rating + s_half),
                )
            )
            lower, upper = b_boot if b_boot is not None else (beta - b_half, beta + b_half)
            coefficient_rows.append(
                pl.DataFrame(
                    {
                        "category": [category] * len(STYLE_FEATURES),
                        "feature": list(STYLE_FEATURES),
                        "coefficient": beta,
                        "ci_lower": lower,
                        "ci_upper": upper,
                        "ci_method": ["bootstrap" if b_boot is not None else "sandwich"]
                        * len(STYLE_FEATURES),
                        "sandwich_lower": beta - b_half,
                        "sandwich_upper": beta + b_half,
                    },
                    schema=STYLE_COEFFICIENTS_SCHEMA,
                )
            )
            info["bt_style"] = s_info
            info["timings_s"]["bt_style"] = perf_counter() - t0

        # --- spectral
        if "spectral" in methods:
            t0 = perf_counter()
            sp_rating = rate(
                rank_centrality(pairs.lo, pairs.hi, pairs.score_lo, pairs.score_hi, m)
            )
            sp_boot = None
            if config.bootstrap_rounds > 0:
                draws = resampled[:, :, 2] * 0.5
                log_pi = rank_centrality(
                    pairs.lo,
                    pairs.hi,
                    resampled[:, :, 0] + draws,
                    resampled[:, :, 1] + draws,
                    m,
                    smoothing=BOOTSTRAP_SMOOTHING,
                )
                sp_boot = percentile_interval(rate(log_pi), level)
            boards.append(
                _board_rows(category, "spectral", models, sp_rating, stats, sp_boot, None)
            )
            tau = float(kendalltau(bt_rating, sp_rating).statistic) if m > 1 else float("nan")
            metadata["kendall_tau"][category] = tau
            info["spectral"] = {"kendall_tau_vs_bt": tau}
            info["timings_s"]["spectral"] = perf_counter() - t0
        info["timings_s"]["total"] = perf_counter() - t_cat

    t0 = perf_counter()
    rank_order = {c: i for i, c in enumerate(order)}
    method_order = {mth: i for i, mth in enumerate(METHODS)}
    leaderboard = _concat(boards, LEADERBOARD_SCHEMA).sort(
        pl.col("category").replace_strict(rank_order, return_dtype=pl.Int32),
        pl.col("method").replace_strict(method_order, return_dtype=pl.Int32),
        "rank",
        "model",
    )
    style = _concat(coefficient_rows, STYLE_COEFFICIENTS_SCHEMA)
    pair_input = tagged.select("category", "model_a", "model_b", "winner")
    pairwise = pairwise_table(
        pair_input, _concat(bt_boards, LEADERBOARD_SCHEMA), config.ties, config.scale, config.base
    )
    if pairwise.height:
        pairwise = pairwise.sort(
            pl.col("category").replace_strict(rank_order, return_dtype=pl.Int32),
            "model_1",
            "model_2",
        )
    metadata["timings_s"]["pairwise"] = perf_counter() - t0
    metadata["timings_s"]["total"] = perf_counter() - started
    return RankingOutput(leaderboard, style, pairwise, metadata)


def _concat(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Concatenate frames of one schema; an empty frame of that schema when none."""
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


def _degenerate_rounds(pairs: PairCounts, resampled: np.ndarray) -> int:
    """Bootstrap rounds in which some model has no score or no loss (its MLE is infinite)."""
    rows, m = np.arange(len(pairs.lo)), pairs.n_models
    is_lo = csr_matrix((np.ones(len(rows)), (rows, pairs.lo)), shape=(len(rows), m))
    is_hi = csr_matrix((np.ones(len(rows)), (rows, pairs.hi)), shape=(len(rows), m))
    draws = 0.5 * resampled[:, :, 2]
    score = is_lo.T @ (resampled[:, :, 0] + draws).T + is_hi.T @ (resampled[:, :, 1] + draws).T
    battles = (is_lo + is_hi).T @ resampled.sum(axis=2).T
    return int(((score <= 0) | (score >= battles)).any(axis=0).sum())
