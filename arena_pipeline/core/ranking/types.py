"""Public types of the ranking step: settings, the output container and its frame schemas."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

METHODS: tuple[str, ...] = ("bt", "bt_style", "spectral")
#: People-facing names of the ranking methods (:func:`method_label`).
METHOD_LABELS: dict[str, str] = {
    "bt": "Bradley-Terry",
    "bt_style": "Bradley-Terry, style-controlled",
    "spectral": "Rank Centrality (spectral)",
}


def method_label(method: str) -> str:
    """People-facing name of a ranking method (an unknown one as it is)."""
    return METHOD_LABELS.get(method, method)

#: Reference models, in order of preference: on every board, the first of them that is on
#: the board is pinned at ``anchor_rating`` (a board with none of them is centred instead).
#: Open-weights models, so the reference cannot change under its name, with many battles in
#: every category of the 140k dump (llama-3.3-70b-instruct: 4,905 battles; gemma-3-27b-it:
#: 7,326; deepseek-v3-0324: 6,117), rated mid-table, where intervals are narrowest.
REFERENCE_MODELS: tuple[str, ...] = (
    "llama-3.3-70b-instruct",
    "gemma-3-27b-it",
    "deepseek-v3-0324",
)

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
    "bootstrap_lower": pl.Float64(),
    "bootstrap_upper": pl.Float64(),
    "cluster_sandwich_lower": pl.Float64(),
    "cluster_sandwich_upper": pl.Float64(),
    "cluster_bootstrap_lower": pl.Float64(),
    "cluster_bootstrap_upper": pl.Float64(),
    "provisional": pl.Boolean(),
    "provisional_reason": pl.String(),
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
    "bootstrap_lower": pl.Float64(),
    "bootstrap_upper": pl.Float64(),
    # votes of the category the style fit used, and those left out because their dump has no
    # style counts (style_control.has_style_counts): never entered with a style difference of 0
    "battles_fitted": pl.Int64(),
    "battles_without_style": pl.Int64(),
}


@dataclass(frozen=True)
class RankingConfig:
    """Settings of :func:`compute_rankings`.

    Attributes
    ----------
    ties
        ``"half"`` (default, LMArena's convention): ``tie`` and ``both_bad`` count as half
        a win for each side. ``"drop"``: those battles are left out of every fit and of the
        leaderboard counts (the pairwise table still lists them).
    bootstrap_rounds
        Bootstrap replicates of the second interval (``bootstrap_lower``/``bootstrap_upper``);
        0 skips the bootstrap. 100 rounds with the ``(B + 1) alpha`` rule cover as well as
        1,000 with NumPy's default quantiles (``benchmarks/bench_coverage.py --variants``).
    style_bootstrap_rounds
        Bootstrap replicates of ``bt_style``'s second interval (default 0: none). Each
        round refits the per-battle style model (about 0.05-0.5 s per board on the full
        dump), so it is off by default; ``bt_style``'s primary interval is the sandwich,
        as LMArena publishes for style control.
    primary_interval
        Which interval fills ``ci_lower``/``ci_upper`` and feeds ``rank_ub``: ``"sandwich"``
        (default, as LMArena publishes since mid-2025) or ``"bootstrap"`` (percentile,
        ``bootstrap_rounds`` rounds, ends at the ``(B + 1) alpha``-th order statistics), or the
        clustered ``"cluster_sandwich"`` / ``"cluster_bootstrap"`` (``bt`` only, when
        ``cluster_column`` is present). A board without the named interval falls back to the
        sandwich, then the bootstrap (``spectral`` has only its bootstrap); ``ci_method`` says
        which was used. Every interval is of the displayed statement (see ``anchor_models``)
        and covers it 94-96% of the time in ``benchmarks/bench_coverage.py`` (sandwich and
        100-round bootstrap on independent votes; the clustered ones when sessions re-vote).
        ``rank_ub`` compares the same method's intervals of each model's own (centred)
        strength, moved with the board, which do not carry the reference's uncertainty:
        comparing two models does not involve the reference.
    cluster_column
        Battles column of the evaluation session (default ``evaluation_session_id``).
        When present, ``bt`` also gets intervals that treat the votes of one session as
        dependent: ``cluster_sandwich_*`` (cluster-robust sandwich with the CR3 small-sample
        correction, ``bradley_terry.bt_cluster_sandwich_covariance``) and
        ``cluster_bootstrap_*`` (whole sessions resampled, ``bootstrap_rounds`` rounds). A
        null session counts as a session of its own. A model whose battles all come from one
        session has unbounded clustered bounds (-inf, inf). None disables them.
    seed
        Seed of the bootstrap; each (category, stream) gets its own generator derived
        from it, so a board does not depend on which other boards are computed.
    min_battles
        Models with fewer battles in a category (after ``ties`` handling, counting only
        battles against models kept on the board) are excluded from that board's fit. The
        default 1 fits every battle, as LMArena does; other values exist for callers that
        need a pre-fit cut (e.g. monthly trends).
    display_min_battles
        Display threshold applied after the fit: models on the board with fewer battles
        are ``provisional`` (kept in the leaderboard with a reason, ranked apart). The
        default 301 is LMArena's rule (a model is shown with more than 300 battles).
    anchor_models, anchor_model, anchor_rating
        Anchoring, which makes ratings comparable across boards and dumps: on every board
        the first of ``anchor_models`` (default :data:`REFERENCE_MODELS`) that is on the
        board has rating ``anchor_rating`` (1000), so a rating ``R`` means odds of
        ``10 ** ((R - 1000) / 400)`` against the reference model: ``R - 1000`` estimates
        ``400 / ln(10) * (theta_i - theta_ref)``. Every interval is an interval of that
        difference (the sandwich of the contrast with the reference's unit vector; the
        bootstrap re-anchored in every round, as FastChat's), so it carries the reference's
        own uncertainty, and the reference has no interval (null bounds). Only the first
        reference on a board anchors it; the others are ordinary models. ``anchor_model``,
        when set, replaces the list by that one model. A board without any of them falls back
        to centring (mean rating ``anchor_rating``: ``R - 1000`` estimates
        ``400 / ln(10) * (theta_i - mean(theta))`` and intervals are of that), noted in
        ``metadata["categories"][c]["anchor"]`` (None) and, for an explicit
        ``anchor_model``, ``anchor_missing``. ``anchor_models=()`` centres every board.
    style_method
        ``"lmarena"`` (default): LMArena's current style control, as arena-rank's
        ``ContextualBradleyTerry`` on a ``ContextualPairDataset(reweighted=True)``: the
        same four z-scored features, battles weighted ``1 / max(n_pair,
        style_min_pair_count)`` (mean 1) and ``style_reg / 2 * |beta|^2`` added to the
        *mean* weighted negative log-likelihood. ``"unweighted"``: the earlier variant,
        no weights and ``style_l2`` on the summed loss.
    style_reg, style_min_pair_count
        arena-rank's ``reg`` (1.0) and ``min_pair_count`` (50), for ``"lmarena"``.
    style_l2
        For ``style_method="unweighted"``: ridge penalty on the four style coefficients, added as
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
    style_bootstrap_rounds: int = 0
    min_battles: int = 1
    display_min_battles: int = 301
    primary_interval: Literal[
        "sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap"
    ] = "sandwich"
    cluster_column: str | None = "evaluation_session_id"
    anchor_models: tuple[str, ...] = REFERENCE_MODELS
    anchor_model: str | None = None
    anchor_rating: float = 1000.0
    style_method: Literal["lmarena", "unweighted"] = "lmarena"
    style_reg: float = 1.0
    style_min_pair_count: int = 50
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
        if self.style_method not in ("lmarena", "unweighted"):
            raise ValueError(
                f"style_method must be 'lmarena' or 'unweighted', got {self.style_method!r}"
            )
        if self.style_reg < 0 or self.style_min_pair_count < 1:
            raise ValueError("style_reg must be >= 0 and style_min_pair_count >= 1")
        if not math.isfinite(self.anchor_rating):
            raise ValueError("anchor_rating must be finite")
        if self.style_bootstrap_rounds < 0:
            raise ValueError("style_bootstrap_rounds must be >= 0")
        if self.display_min_battles < 0:
            raise ValueError("display_min_battles must be >= 0")
        intervals = ("sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap")
        if self.primary_interval not in intervals:
            raise ValueError(
                f"primary_interval must be one of {intervals}, got {self.primary_interval!r}"
            )
        if self.primary_interval.endswith("bootstrap") and self.bootstrap_rounds == 0:
            raise ValueError(
                f"primary_interval={self.primary_interval!r} needs bootstrap_rounds > 0"
            )
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
    unrated_models
        ``status.UNRATED_MODELS_SCHEMA``: models with battles in a category and no rating, with
        the reason.
    board_status
        ``status.BOARD_STATUS_SCHEMA``: one row per category rule: board, no board (why) or
        unavailable.
    """

    leaderboard: pl.DataFrame
    style_coefficients: pl.DataFrame
    pairwise: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    unrated_models: pl.DataFrame | None = None
    board_status: pl.DataFrame | None = None
