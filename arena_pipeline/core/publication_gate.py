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


def _rated(board: pl.DataFrame) -> pl.DataFrame:
    """The rated models of the gate's method, provisional ones included."""
    return board.filter(pl.col("method") == GATE_METHOD)


def _shown(board: pl.DataFrame) -> pl.DataFrame:
    """The rated models of the gate's method that a board shows: not provisional (a board from
    before the display threshold has no ``provisional`` column: all of them)."""
    rated = _rated(board)
    return rated.filter(~pl.col("provisional").fill_null(False)) if "provisional" in rated.columns else rated


def _overall(board: pl.DataFrame) -> set[str]:
    return set(board.filter(pl.col("category") == "overall").get_column("model").to_list())


def _names(values: list[str], limit: int = 8) -> str:
    shown = ", ".join(sorted(values)[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _dropped(lost: list[str], whole: set[str], now_provisional: set[str], what: str, setting: str,
             limit: float) -> str | None:
    """The problem when more than ``limit`` of ``whole`` is ``lost`` (``what`` says of what), else None."""
    if not whole or len(lost) / len(whole) <= limit:
        return None
    provisional = len(now_provisional.intersection(lost))
    hint = (f", {provisional} of them only provisional now: was the live board ranked with a lower "
            "display_min_battles?" if provisional else "")
    return f"{len(lost)} of the {len(whole)} {what} ({len(lost) / len(whole):.0%} > {setting} {limit:.0%}{hint}): " \
        f"{_names(lost)}"


def board_problems(candidate: pl.DataFrame, live: pl.DataFrame | None, policy: GatePolicy) -> list[str]:
    """Why ``candidate`` (a leaderboard frame) must not replace ``live``; empty when it may.

    Rules: the overall board must rate at least one model (provisional ones count: a small dump's
    first board may be all provisional). Against the live board, what users see must not shrink
    too far: of the models *shown* on its overall board (not provisional), the share the new one no
    longer shows (unrated, or now provisional) must not exceed ``max_model_drop``; of its categories
    showing a model, the share showing none in the new one must not exceed ``max_category_drop``.
    So a re-run that forgets the live run's ``display_min_battles`` cannot hide the boards.
    ``allow_degenerate`` lifts every rule.
    """
    if policy.allow_degenerate:
        return []
    rated = _rated(candidate)
    rated_overall = _overall(rated)
    problems = []
    if not rated_overall:
        problems.append("the new overall leaderboard is empty (no model has a rating; lower the rankings "
                        "config min_battles if the dump is small)")
    if live is None or live.is_empty():
        return problems
    new, old = _shown(candidate), _shown(live)
    old_overall = _overall(old)
    if rated_overall:  # an empty board is refused above already
        problems.append(_dropped(sorted(old_overall - _overall(new)), old_overall, rated_overall,
                                 "models shown on the live overall board would no longer be shown",
                                 "max_model_drop", policy.max_model_drop))
    old_categories = set(old.get_column("category").to_list())
    problems.append(_dropped(sorted(old_categories - set(new.get_column("category").to_list())), old_categories,
                             set(rated.get_column("category").to_list()),
                             "live categories would lose their board or show only provisional models",
                             "max_category_drop", policy.max_category_drop))
    return [p for p in problems if p]


RELAX_HINT = ("to publish it anyway, set the published_dump run config allow_degenerate=true, or raise "
              "max_model_drop / max_category_drop")


def refusal_message(problems: list[str], sources: tuple[str | None, str | None] | None = None) -> str:
    """The gate's one-paragraph refusal: what changed, then which setting relaxes it.

    ``sources`` (live, this run's), when they differ, adds that the run is of another source (a
    different dump, not a new revision of the live one): its board is judged against the live one
    all the same, so moving to another dump is a deliberate act with the settings named.
    """
    text = "publication refused, nothing changed: " + "; ".join(problems)
    if sources is not None and sources[0] != sources[1]:
        text += (f". The live boards are of source {sources[0]!r} and this run's of {sources[1]!r}: another dump, "
                 "not a new revision of the live one. Replacing the live boards by another dump's is a deliberate "
                 "act; if it is meant")
    return text + f" ({RELAX_HINT})"
