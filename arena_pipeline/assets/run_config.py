"""The ranking run configuration and its size limits, checked when a run starts (raw_dump) and by rankings."""

from __future__ import annotations

from typing import Any, Literal

import dagster as dg
from pydantic import Field, ValidationError, field_validator

from arena_pipeline.core.ranking import RankingConfig

#: The op whose run configuration this is (``{"ops": {"rankings": {"config": {...}}}}``).
RANKINGS_OP = "rankings"

#: Most bootstrap rounds a run may ask for (20 x the default; FastChat's notebooks use 1,000).
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


class RankingRunConfig(dg.Config):
    """Settings of the leaderboards (run configuration; the defaults are LMArena's conventions)."""

    ties: Literal["half", "drop"] = Field(
        default="half", description="'half': tie and both_bad count half a win for each side; 'drop': ignore them."
    )
    bootstrap_rounds: int = Field(default=100, ge=0, description="Bootstrap rounds of the second (bootstrap) interval; "
                                  f"0 skips it; at most {MAX_BOOTSTRAP_ROUNDS:,} (each round holds about "
                                  f"{_size(BOOTSTRAP_BYTES_PER_ROUND)} at the 140k dump).")
    style_bootstrap_rounds: int = Field(default=0, ge=0, description="Bootstrap rounds of bt_style's second interval "
                                        "(0: sandwich only; each round refits the per-battle model); at most "
                                        f"{MAX_STYLE_BOOTSTRAP_ROUNDS:,}.")
    primary_interval: Literal["sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap"] = Field(
        default="sandwich", description="Interval in ci_lower/ci_upper and rank_ub: the calibrated sandwich (LMArena's), the "
        "bootstrap, or one clustered by evaluation session (bt only; others fall back to the sandwich). ci_lower/ci_upper "
        "bound rating - 1000, the difference from the board's reference (which has none); rank_ub compares the same "
        "method's intervals of the models' own strengths.")
    seed: int = Field(default=42, ge=0, description="Bootstrap seed: the same seed gives identical output.")
    min_battles: int = Field(default=1, ge=1, description="Pre-fit cut: models with fewer battles in a category are left out of its fit (1: fit every battle, as LMArena).")
    display_min_battles: int = Field(default=301, ge=0, description="Models with fewer battles on a board are marked provisional and ranked apart (301: LMArena shows more than 300).")
    anchor_models: list[str] | None = Field(
        default=None, description="Reference models in order of preference: the first on a board is pinned at anchor_rating "
        "(None: the packaged list, ranking.REFERENCE_MODELS; []: centre every board on its mean).")
    anchor_model: str | None = Field(default=None, description="Pin this one model instead of the reference list.")
    anchor_rating: float = Field(default=1000.0, ge=-1e5, le=1e5, allow_inf_nan=False, description="The reference model's rating (or the mean rating of a board without one).")
    style_method: Literal["lmarena", "unweighted"] = Field(
        default="lmarena", description="'lmarena': arena-rank's style control (pair reweighting, reg=1 on the mean loss); 'unweighted': the earlier variant (style_l2 on the summed loss).")
    style_l2: float | None = Field(default=None, ge=0, allow_inf_nan=False, description="L2 penalty on style coefficients of the 'unweighted' variant (None: library default).")

    @field_validator("bootstrap_rounds")
    @classmethod
    def _bootstrap_limit(cls, rounds: int) -> int:
        if rounds > MAX_BOOTSTRAP_ROUNDS:
            raise ValueError(
                f"{rounds:,} rounds would need {bootstrap_cost(rounds)} at the 140k dump's size (every round of a "
                f"board is held at once, about {_size(BOOTSTRAP_BYTES_PER_ROUND)} each, more with more models); at "
                f"most {MAX_BOOTSTRAP_ROUNDS:,} ({bootstrap_cost(MAX_BOOTSTRAP_ROUNDS)})")
        return rounds

    @field_validator("style_bootstrap_rounds")
    @classmethod
    def _style_bootstrap_limit(cls, rounds: int) -> int:
        if rounds > MAX_STYLE_BOOTSTRAP_ROUNDS:
            raise ValueError(
                f"{rounds:,} rounds would take {style_bootstrap_cost(rounds)} at the 140k dump's size (each round "
                f"refits the per-battle style model of every board); at most {MAX_STYLE_BOOTSTRAP_ROUNDS:,} "
                f"({style_bootstrap_cost(MAX_STYLE_BOOTSTRAP_ROUNDS)})")
        return rounds

    def ranking_config(self) -> RankingConfig:
        extra = {} if self.style_l2 is None else {"style_l2": self.style_l2}
        if self.anchor_models is not None:
            extra["anchor_models"] = tuple(self.anchor_models)
        return RankingConfig(
            ties=self.ties, bootstrap_rounds=self.bootstrap_rounds, seed=self.seed,
            style_bootstrap_rounds=self.style_bootstrap_rounds,
            min_battles=self.min_battles, display_min_battles=self.display_min_battles,
            primary_interval=self.primary_interval, style_method=self.style_method,
            anchor_model=self.anchor_model,
            anchor_rating=self.anchor_rating, **extra,
        )


def config_problems(exc: ValidationError) -> str:
    """A pydantic validation error in one line: ``field: why`` per problem, ``; `` between them."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error.get("loc", ())) or "config"
        message = error.get("msg", "")
        parts.append(f"{field}: {message.removeprefix('Value error, ')}")
    return "; ".join(parts)


def check_ranking_run_config(run_config: dict[str, Any] | None) -> RankingRunConfig:
    """The run's ``rankings`` settings, validated now (a run with a setting out of range must fail at
    its first step, before the fetch and the load, not at the rankings step minutes later).

    Raises
    ------
    ValueError
        One line naming the op, each bad field and why (with the memory or time a size setting
        would need).
    """
    ops = (run_config or {}).get("ops") or {}
    settings = (ops.get(RANKINGS_OP) or {}).get("config") or {}
    try:
        config = RankingRunConfig(**settings)
        config.ranking_config()  # the cross-field rules (a bootstrap interval without rounds, ...)
    except ValidationError as exc:
        raise ValueError(f"run config of {RANKINGS_OP!r} refused before anything is fetched: "
                         f"{config_problems(exc)}") from None
    except ValueError as exc:
        raise ValueError(f"run config of {RANKINGS_OP!r} refused before anything is fetched: {exc}") from None
    return config
