"""Public types of the ranking step: settings, the output container and its frame schemas."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, Self

import polars as pl
from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from arena_pipeline.core.labels import METHOD_LABELS, METHODS, method_label  # noqa: F401 - re-exported
from arena_pipeline.core.method_registry import RATING_METHODS, configured_methods

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
    # rank bounds from the pairwise tests of the primary method (arena.pairwise_significance): rank_ub = 1 +
    # the models significantly above, rank_lb = the models ranked - those significantly below
    "rank_lb": pl.Int64(),
    # the same bounds for every model at once (family-wise 95%): from the simultaneous tests of
    # arena.pairwise_significance (significant_simultaneous; max-t with step-down, core.ranking.simultaneous)
    "rank_ub_simultaneous": pl.Int64(),
    "rank_lb_simultaneous": pl.Int64(),
    "significantly_above": pl.Int64(),
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
    # the same fit without the penalty (style_reg / style_l2 set to a vanishing value), and coefficient /
    # coefficient_unpenalised: how much of the style coefficient the penalty keeps (1: not shrunk; the penalty
    # shrinks the four together, so a small coefficient of features correlated with another may grow)
    "coefficient_unpenalised": pl.Float64(),
    "share_kept": pl.Float64(),
}


#: Most bootstrap rounds a ranking may ask for (20 x the default; FastChat's notebooks use 1,000).
MAX_BOOTSTRAP_ROUNDS = 2_000
#: Most style bootstrap rounds (each one refits the per-battle style model of every board).
MAX_STYLE_BOOTSTRAP_ROUNDS = 500
#: What one bootstrap round costs at the 140k dump (135,634 votes, 12 boards), measured: memory held
#: while the rounds are fitted (the batch of every round's counts and Newton matrices of a board; it
#: grows with the square of a board's models) and time over all boards.
BOOTSTRAP_BYTES_PER_ROUND = 148_000
BOOTSTRAP_SECONDS_PER_ROUND = 0.0075
#: What one style bootstrap round costs at the 140k dump: a refit of the per-battle model, about
#: 0.35 s per 135k-battle board (measured on a synthetic board of 130 models), about 1 s over the 12
#: boards (estimated from their sizes); memory per round is small.
STYLE_BOOTSTRAP_SECONDS_PER_ROUND = 1.0


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e3:,.0f} KB"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} h"


def bootstrap_cost(rounds: int) -> str:
    """What ``rounds`` bootstrap rounds need at the 140k dump, in words (memory, then time)."""
    return (f"about {_size(rounds * BOOTSTRAP_BYTES_PER_ROUND)} of memory and "
            f"{_duration(rounds * BOOTSTRAP_SECONDS_PER_ROUND)}")


def style_bootstrap_cost(rounds: int) -> str:
    """What ``rounds`` style bootstrap rounds need at the 140k dump, in words."""
    return f"about {_duration(rounds * STYLE_BOOTSTRAP_SECONDS_PER_ROUND)}"


def _at_most(most: int, cost: Callable[[int], str], why: str) -> AfterValidator:
    """A validator refusing more than ``most`` rounds, with what they would cost (``cost``) and why."""
    def check(rounds: int) -> int:
        if rounds > most:
            raise ValueError(f"{rounds:,} rounds would need {cost(rounds)} at the 140k dump's size ({why}); "
                             f"at most {most:,} ({cost(most)})")
        return rounds
    return AfterValidator(check)


_BOOTSTRAP_LIMIT = _at_most(MAX_BOOTSTRAP_ROUNDS, bootstrap_cost, "every round of a board is held at once, about "
                            f"{_size(BOOTSTRAP_BYTES_PER_ROUND)} each, more with more models")
STYLE_BOOTSTRAP_LIMIT = _at_most(MAX_STYLE_BOOTSTRAP_ROUNDS, style_bootstrap_cost,
                                  "each round refits the per-battle style model of every board")


def _known_methods(methods: tuple[str, ...]) -> tuple[str, ...]:
    configured_methods(methods)  # raises for an unregistered name or none
    return methods


class Setting(NamedTuple):
    """One setting of a rating method, declared in its class (``RatingMethod.settings``): its type
    (validators in ``Annotated``), its ``pydantic.Field`` (default, bounds, description) and whether
    a pipeline run chooses it (``run``: in ``config.RUN_SETTINGS``, the launchpad's run config)."""

    annotation: Any
    field: Any
    run: bool = False


@pydantic_dataclass(frozen=True, config=ConfigDict(defer_build=True))
class RankingSettings:
    """The settings every board shares; ``config.RankingConfig`` adds each registered method's own
    (``RatingMethod.settings``). Each one is declared once, with its type, default, bounds and
    meaning (its ``description``, which the Dagster launchpad shows for the settings a run chooses,
    ``config.RUN_SETTINGS``). A value out of bounds raises ``pydantic.ValidationError`` (a
    ``ValueError``) naming the field; :meth:`from_settings` reads recorded settings back.

    Anchoring makes ratings comparable across boards and dumps: on every board the first of
    ``anchor_models`` that is on the board has rating ``anchor_rating``, so a rating ``R`` means
    odds of ``10 ** ((R - 1000) / 400)`` against the reference model: ``R - 1000`` estimates
    ``400 / ln(10) * (theta_i - theta_ref)``. Every interval is an interval of that difference (the
    sandwich of the contrast with the reference's unit vector; the bootstrap re-anchored in every
    round, as FastChat's), so it carries the reference's own uncertainty, and the reference has no
    interval (null bounds). Only the first reference on a board anchors it; the others are ordinary
    models. A board without any of them falls back to centring (mean rating ``anchor_rating``:
    ``R - 1000`` estimates ``400 / ln(10) * (theta_i - mean(theta))`` and intervals are of that),
    noted in ``metadata["categories"][c]["anchor"]`` (None) and, for an explicit ``anchor_model``,
    ``anchor_missing``.
    """

    ties: Literal["half", "drop"] = Field(
        default="half", description="'half' (LMArena's convention): tie and both_bad count as half a win for "
        "each side; 'drop': those battles are left out of every fit and of the leaderboard counts (the "
        "pairwise table still lists them).")
    bootstrap_rounds: Annotated[int, _BOOTSTRAP_LIMIT] = Field(
        default=100, ge=0, description="Bootstrap rounds of the second interval (bootstrap_lower/"
        "bootstrap_upper); 0 skips it. 100 rounds with the (B + 1) alpha rule cover as well as 1,000 with "
        f"NumPy's default quantiles (benchmarks/bench_coverage.py --variants). At most {MAX_BOOTSTRAP_ROUNDS:,} "
        f"(each round holds about {_size(BOOTSTRAP_BYTES_PER_ROUND)} at the 140k dump).")
    seed: int = Field(
        default=42, ge=0, description="Bootstrap seed: each (category, stream) gets its own generator derived "
        "from it, so a board does not depend on which other boards are computed; the same seed gives "
        "identical output.")
    min_battles: int = Field(
        default=1, ge=1, description="Pre-fit cut: models with fewer battles in a category (after ties "
        "handling, counting only battles against models kept on the board) are left out of its fit (1: fit "
        "every battle, as LMArena; other values for callers that need a pre-fit cut, e.g. monthly trends).")
    display_min_battles: int = Field(
        default=301, ge=0, description="Display threshold applied after the fit: models with fewer battles "
        "on a board are provisional (kept with a reason, ranked apart); 301 is LMArena's rule (a model is "
        "shown with more than 300 battles).")
    primary_interval: Literal["sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap"] = Field(
        default="sandwich", description="Interval in ci_lower/ci_upper: the calibrated sandwich "
        "(LMArena's, since mid-2025) or the percentile bootstrap (bootstrap_rounds rounds, ends at the "
        "(B + 1) alpha-th order statistics); with cluster_primary (default) each is the one clustered by "
        "evaluation session on a board whose votes carry sessions (bt, bt_style and spectral; 'cluster_sandwich' and "
        "'cluster_bootstrap' ask for that whatever cluster_primary says). A board without it falls back to "
        "the vote-level one, then the sandwich, then the bootstrap (spectral has only bootstraps, bt_style no "
        "cluster bootstrap); ci_method "
        "says which was used. ci_lower/ci_upper bound rating - 1000, the difference from the board's "
        "reference (which has none); the default covers it 94-96% of the time with and without sessions in "
        "benchmarks/bench_coverage.py.")
    cluster_primary: bool = Field(
        default=True, description="On a board whose votes carry sessions (some vote has a non-null "
        "cluster_column), the primary interval is the session-clustered form of primary_interval "
        "(cluster_sandwich or cluster_bootstrap): votes of one session are not independent, and vote-level "
        "intervals cover 81-91% under re-vote sessions. False: the vote-level interval, as LMArena publishes "
        "(its clustered form stays in the cluster_* columns).")
    cluster_column: str | None = Field(
        default="evaluation_session_id", description="Battles column of the evaluation session. When present, "
        "bt (and bt_style: its cluster sandwich) also gets intervals that treat the votes of one session as "
        "dependent: cluster_sandwich_* "
        "(cluster-robust sandwich with the CR3 small-sample correction) and cluster_bootstrap_* (whole "
        "sessions resampled, bootstrap_rounds rounds; spectral's too). A board none of whose votes has a "
        "session has none (null, board_status.clustering says why); on a board where some have one, a vote "
        "with a null session counts as a session of its own. A model whose battles all come from one "
        "session has unbounded clustered bounds. None disables them.")
    anchor_models: tuple[str, ...] = Field(
        default=REFERENCE_MODELS, description="Reference models in order of preference: the first on a board "
        "is pinned at anchor_rating (default: the packaged list, ranking.REFERENCE_MODELS; []: centre every "
        "board on its mean).")
    anchor_model: str | None = Field(
        default=None, description="Pin this one model instead of the reference list.")
    anchor_rating: float = Field(
        default=1000.0, ge=-1e5, le=1e5, allow_inf_nan=False,
        description="The reference model's rating (or the mean rating of a board without one).")
    scale: float = Field(default=400.0, description="a's expected score against b (a tie counting 1/2, not the "
                         "chance of an outright win) = 1 / (1 + base ** ((R_b - R_a) / scale)).")
    base: float = Field(default=10.0, description="See scale.")
    methods: Annotated[tuple[str, ...], AfterValidator(_known_methods)] = Field(
        default_factory=lambda: tuple(RATING_METHODS), description="Boards to produce: names of registered "
        f"rating methods (core.method_registry.RATING_METHODS; default: every registered one, built in: {METHODS}).")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="Level of every interval.")
    tol: float = Field(default=1e-8, description="Newton stops when the Euclidean norm of the gradient of the "
                       "summed negative log-likelihood is below tol.")
    max_iter: int = Field(default=100, description="Most Newton steps.")

    @model_validator(mode="after")
    def _bootstrap_interval_has_rounds(self) -> RankingSettings:
        if self.primary_interval.endswith("bootstrap") and self.bootstrap_rounds == 0:
            raise ValueError(f"primary_interval={self.primary_interval!r} needs bootstrap_rounds > 0")
        return self

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Self:
        """The settings of a dict: a run configuration, or settings recorded as ``dataclasses.asdict``
        (a publication's ``settings.tables.leaderboard.ranking``). Keys this version does not know
        are ignored and missing ones take their default, so earlier records read back.

        Raises
        ------
        pydantic.ValidationError
            A value out of bounds, named with the reason.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in settings.items() if k in known})


#: The shared settings a pipeline run chooses (the ``rankings`` op's run configuration, which a refresh
#: carries over from the live publication; ``config.RUN_SETTINGS`` adds the methods' own with ``run``); the
#: others keep their defaults.
SHARED_RUN_SETTINGS: tuple[str, ...] = (
    "ties", "bootstrap_rounds", "primary_interval", "cluster_primary", "seed", "min_battles",
    "display_min_battles", "anchor_models", "anchor_model", "anchor_rating",
)


@dataclass(frozen=True)
class RankingOutput:
    """Result of :func:`compute_rankings`.

    Attributes
    ----------
    leaderboard
        :data:`LEADERBOARD_SCHEMA`, one row per (category, method, model): ``rating`` on the
        configured scale; ``ci_lower``/``ci_upper`` the primary interval (``ci_method``:
        ``primary_interval``, default "sandwich"; spectral has only "bootstrap", or "none" without
        bootstrap); ``sandwich_lower``/``sandwich_upper`` and ``bootstrap_lower``/``bootstrap_upper``
        both intervals (null where not computed); ``provisional`` (and ``provisional_reason``) marks
        models under ``display_min_battles``; every interval is of the rating's difference from the
        board's reference model (null for the reference itself; from the mean on a centred board);
        ``rank`` is 1 + the number of non-provisional models with a higher rating; ``rank_ub`` is 1 + the
        number of non-provisional models significantly above this one and ``rank_lb`` the number of
        non-provisional models not significantly below it, each pair tested on its own (the 95% interval
        of the difference of the two ratings from the primary method's full covariance, clustered where
        sessions are known: ``pairwise_significance``), so each is a statement about this model, not
        about the whole board at once; ``significantly_above`` counts the non-provisional models this one
        is significantly above. A provisional model is ranked the same way among
        all models of the board, so it moves no shown model; ``n_battles``, ``wins``, ``losses``,
        ``ties`` (tie + both_bad) count the battles the fit used and
        ``win_rate = (wins + ties / 2) / n_battles``.
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
    pairwise_significance
        ``board.PAIRWISE_SIGNIFICANCE_SCHEMA``: one row per (category, method, pair of shown
        models): the rating difference and its interval from the primary method.
    """

    leaderboard: pl.DataFrame
    style_coefficients: pl.DataFrame
    pairwise: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    unrated_models: pl.DataFrame | None = None
    board_status: pl.DataFrame | None = None
    pairwise_significance: pl.DataFrame | None = None
