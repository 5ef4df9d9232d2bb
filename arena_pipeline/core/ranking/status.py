"""What the boards leave out: models with battles but no rating, and each category's board status."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.categories import CATEGORY_RULES, category_order
from arena_pipeline.core.ranking.board import model_stats
from arena_pipeline.core.ranking.sessions import SessionClusters

#: Columns of ``RankingOutput.unrated_models``: one row per (category, model) with battles in the
#: category and no rating.
UNRATED_MODELS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "model": pl.String(),
    "battles": pl.Int64(),
    "wins": pl.Int64(),
    "losses": pl.Int64(),
    "ties": pl.Int64(),
    "reason": pl.String(),
}

#: Columns of ``RankingOutput.board_status``: one row per category rule (and per other category
#: tagged). ``status`` is ``board`` (at least one shown model), ``no_board`` or ``unavailable``
#: (the dump lacks a column the rule reads).
BOARD_STATUS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "status": pl.String(),
    "battles": pl.Int64(),
    "rated_models": pl.Int64(),
    "shown_models": pl.Int64(),
    "provisional_models": pl.Int64(),
    "unrated_models": pl.Int64(),
    "reason": pl.String(),
    # the bt board's fitted votes: distinct known sessions, votes without one, what the clustered
    # intervals (cluster_*, and the primary one with cluster_primary) clustered, or why there are none
    "sessions": pl.Int64(),
    "votes_without_session": pl.Int64(),
    "clustering": pl.String(),
}

ALONE = "the only model left with a finite rating: a board needs at least 2 models"
TIES_DROPPED = "every battle was a tie or both_bad, dropped with ties='drop'"


def unrated_rows(
    category: str,
    names: Sequence[str],
    battles: tuple[np.ndarray, np.ndarray, np.ndarray],
    rated: np.ndarray,
    reasons: Mapping[str, str],
) -> pl.DataFrame:
    """The category's models with battles but no rating, with their record and the reason.

    Parameters
    ----------
    category
        Category name.
    names
        Every model name (global index).
    battles
        Side-a, side-b model indices and outcome codes of the category's battles (ties included).
    rated
        Boolean mask over ``names``: models on the board.
    reasons
        Why a model was excluded (``select_models``); a model absent from it that has battles
        and no rating was the last one left (:data:`ALONE`) or had only dropped ties.
    """
    a, b, o = battles
    stats = model_stats(a, b, o, len(names))
    idx = np.flatnonzero((stats["n_battles"] > 0) & ~rated)
    out = pl.DataFrame(
        {
            "category": [category] * len(idx),
            "model": [names[i] for i in idx],
            "battles": stats["n_battles"][idx],
            "wins": stats["wins"][idx],
            "losses": stats["losses"][idx],
            "ties": stats["ties"][idx],
        },
        schema={k: v for k, v in UNRATED_MODELS_SCHEMA.items() if k != "reason"},
    )
    fallback = ALONE if any(rated) or not reasons else TIES_DROPPED
    return out.with_columns(
        reason=pl.col("model").replace_strict(dict(reasons), default=fallback, return_dtype=pl.String)
    )


def category_status(
    info: Mapping[str, Any], board: pl.DataFrame | None, unrated: int, config: Any,
    clusters: SessionClusters | None = None,
) -> dict[str, Any]:
    """One ``board_status`` row (without ``category``) from a fitted category's numbers.

    ``board`` is the category's ``bt`` board (None when fewer than 2 models were left);
    ``clusters`` the sessions of its fitted votes (None without a board).
    """
    rated = 0 if board is None else board.height
    provisional = 0 if board is None else int(board.get_column("provisional").sum())
    shown = rated - provisional
    if board is None:
        # a reason's head: "only wins", "not connected to the rest of the comparison graph", ...
        excluded = Counter(e["reason"].split(":")[0].split(" (")[0] for e in info["excluded_models"])
        cut = ("fewer than min_battles", "no battles left")
        if excluded and info["models"] == 0 and all(r.startswith(cut) for r in excluded):
            reason = f"no model passes min_battles={config.min_battles}"
        else:
            reason = "fewer than 2 models have a finite Bradley-Terry rating" + (
                " (left out: " + ", ".join(f"{n} {r}" for r, n in excluded.items()) + ")" if excluded else "")
    elif shown == 0:
        reason = (f"no model has display_min_battles={config.display_min_battles} battles or more; "
                  f"{provisional} provisional models")
    else:
        reason = None
    return {
        "status": "board" if shown else "no_board", "battles": info["battles"],
        "rated_models": rated, "shown_models": shown, "provisional_models": provisional,
        "unrated_models": unrated, "reason": reason,
        "sessions": clusters.sessions if clusters else None,
        "votes_without_session": clusters.votes_without_session if clusters else None,
        "clustering": clusters.note if clusters else None,
    }


def board_status_frame(columns: Sequence[str], fitted: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """Every category rule's status, in board order.

    Parameters
    ----------
    columns
        The battles table's columns (a rule reading a missing column is ``unavailable``).
    fitted
        :func:`category_status` rows of the categories that had battles, by category.
    """
    rows = []
    for name in [*(r.name for r in CATEGORY_RULES), *(c for c in fitted if c not in
                                                     {r.name for r in CATEGORY_RULES})]:
        rule = next((r for r in CATEGORY_RULES if r.name == name), None)
        missing = [c for c in (rule.source_columns if rule else ()) if c not in columns]
        if name in fitted:
            rows.append({"category": name, **fitted[name]})
        elif missing:
            rows.append({"category": name, "status": "unavailable",
                         "reason": f"unavailable: the dump has no {', '.join(missing)} "
                                                   f"field{'s' if len(missing) > 1 else ''}"})
        else:
            rows.append({"category": name, "status": "no_board", "battles": 0,
                         "reason": "no battles tagged"})
    frame = pl.DataFrame(rows, schema=BOARD_STATUS_SCHEMA)
    counts = ["battles", "rated_models", "shown_models", "provisional_models", "unrated_models"]
    return frame.with_columns(pl.col(counts).fill_null(0)).sort(category_order(), "category")
