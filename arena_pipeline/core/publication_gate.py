"""The publication gate's board rules: refuse an empty overall board or a large loss of models or categories."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

#: the method whose boards the gate compares (every method is fitted on the same battles)
GATE_METHOD = "bt"


@dataclass(frozen=True)
class GatePolicy:
    """How much a new leaderboard may shrink against the live one before the gate refuses it."""

    allow_degenerate: bool = False
    max_model_drop: float = 0.5
    max_category_drop: float = 0.5

    def __post_init__(self) -> None:
        for name in ("max_model_drop", "max_category_drop"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a share between 0 and 1, got {value!r}")


def _shown(board: pl.DataFrame) -> pl.DataFrame:
    """The rated models of the gate's method; provisional ones count (they are on the board, apart)."""
    return board.filter(pl.col("method") == GATE_METHOD)


def _names(values: list[str], limit: int = 8) -> str:
    shown = ", ".join(sorted(values)[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def board_problems(candidate: pl.DataFrame, live: pl.DataFrame | None, policy: GatePolicy) -> list[str]:
    """Why ``candidate`` (a leaderboard frame) must not replace ``live``; empty when it may.

    Rules: the overall board must not be empty; against the live board, the share of its overall
    models missing from the new one must not exceed ``max_model_drop``, nor the share of its
    categories ``max_category_drop``. ``allow_degenerate`` lifts every rule.
    """
    if policy.allow_degenerate:
        return []
    problems = []
    new = _shown(candidate)
    new_overall = set(new.filter(pl.col("category") == "overall").get_column("model").to_list())
    if not new_overall:
        problems.append("the new overall leaderboard is empty (no model has a rating; lower the rankings "
                        "config min_battles if the dump is small)")
    if live is not None and not live.is_empty():
        old = _shown(live)
        old_overall = set(old.filter(pl.col("category") == "overall").get_column("model").to_list())
        lost = sorted(old_overall - new_overall)
        if old_overall and new_overall and len(lost) / len(old_overall) > policy.max_model_drop:
            problems.append(f"{len(lost)} of the {len(old_overall)} models on the live overall board would "
                            f"disappear ({len(lost) / len(old_overall):.0%} > max_model_drop "
                            f"{policy.max_model_drop:.0%}): {_names(lost)}")
        old_categories = set(old.get_column("category").to_list())
        lost_categories = sorted(old_categories - set(new.get_column("category").to_list()))
        if old_categories and len(lost_categories) / len(old_categories) > policy.max_category_drop:
            problems.append(f"{len(lost_categories)} of the {len(old_categories)} live categories would lose "
                            f"their board ({len(lost_categories) / len(old_categories):.0%} > max_category_drop "
                            f"{policy.max_category_drop:.0%}): {_names(lost_categories)}")
    return problems


RELAX_HINT = ("to publish it anyway, set the published_dump run config allow_degenerate=true, or raise "
              "max_model_drop / max_category_drop")


def refusal_message(problems: list[str]) -> str:
    """The gate's one-paragraph refusal: what changed, then which setting relaxes it."""
    return "publication refused, nothing changed: " + "; ".join(problems) + f" ({RELAX_HINT})"
