"""Per-category leaderboards: `compute_rankings` runs every board and assembles the frames."""

from __future__ import annotations

from dataclasses import asdict
from time import perf_counter
from typing import Any

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.categories import category_order, ordered_categories
from arena_pipeline.core.ranking.board import (
    PAIRWISE_SIGNIFICANCE_SCHEMA,
    Board,
    fit_bt_board,
    fit_spectral_board,
    fit_style_board,
    select_models,
)
from arena_pipeline.core.ranking.bradley_terry import OUTCOME_CODES, aggregate_pairs, fit_bt
from arena_pipeline.core.ranking.pairwise import PAIRWISE_SCHEMA, pairwise_table
from arena_pipeline.core.ranking.sessions import (
    DISABLED,
    NO_COLUMN,
    session_clusters,
    unclustered,
)
from arena_pipeline.core.ranking.status import (
    UNRATED_MODELS_SCHEMA,
    board_status_frame,
    category_status,
    unrated_rows,
)
from arena_pipeline.core.ranking.style_control import (
    STYLE_FEATURES,
    has_style_counts,
    style_columns,
    style_feature_exprs,
)
from arena_pipeline.core.ranking.types import (
    LEADERBOARD_SCHEMA,
    METHODS,
    STYLE_COEFFICIENTS_SCHEMA,
    RankingConfig,
    RankingOutput,
)

__all__ = [
    "LEADERBOARD_SCHEMA",
    "METHODS",
    "PAIRWISE_SCHEMA",
    "STYLE_COEFFICIENTS_SCHEMA",
    "RankingConfig",
    "RankingOutput",
    "compute_rankings",
]


def _prepare(
    battles: pl.DataFrame, with_style: bool, cluster_column: str | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """Validate battles; add model indices, outcome codes, raw style features, session codes."""
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
        *([*style_feature_exprs(), has_style_counts()] if with_style else []),
        *(
            # sessions numbered in the order of their names, as sorting the names would (np.unique of
            # strings was 0.5 s at 1x); -1: no session known (sessions.session_clusters decides per board)
            [pl.col(cluster_column).cast(pl.String).rank("dense").cast(pl.Int64).fill_null(-1).alias("_cluster")]
            if cluster_column is not None and cluster_column in battles.columns
            else []
        ),
    )
    return frame, names


def compute_rankings(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
) -> RankingOutput:
    """Per-category leaderboards by Bradley-Terry, style-controlled Bradley-Terry, Rank Centrality.

    For every category present in ``battle_categories`` (in board order,
    ``categories.ordered_categories``):

    1. Battles are that category's rows of ``battles``; self-battles (``model_a ==
       model_b``) are dropped everywhere, ties are halved or dropped (``config.ties``).
    2. Models without a finite MLE (only losses, only wins, or outside the largest
       strongly connected part of the win graph, e.g. a disconnected group) are excluded
       from the board, repeatedly until stable, and listed in
       ``metadata["excluded_models"][category]``; so are models under ``min_battles``
       (default 1: every battle is fitted, as LMArena does). After the fit, models with
       fewer than ``display_min_battles`` battles (default 301: LMArena shows models with
       more than 300) stay on the board flagged ``provisional``.
    3. ``bt``: exact MLE by Newton's method on per-pair counts (gradient norm below
       ``tol``). Intervals: percentile bootstrap over ``bootstrap_rounds`` resamples of
       the battles (drawn with replacement and aggregated per (pair, outcome) cell: the
       counts are multinomial, exactly as when resampling rows; each replicate re-anchored
       on the reference), and the sandwich (HC0) normal interval of the difference from the
       reference.
    4. ``bt_style``: the same with four style covariates fitted jointly per battle
       (see :class:`RankingConfig.style_method`); bootstrap (``style_bootstrap_rounds``,
       default 0) by resampling battles. Only battles with style counts
       (``style_control.has_style_counts``) enter it: a dump whose format has no style counts
       leaves them null, and such votes are left out (models selected and the reference chosen
       again among the rest, so the board equals the one fitted on those battles alone), never
       entered with a style difference of 0. How many were left out is in the coefficient rows
       (``battles_without_style``) and ``metadata["style_left_out"]``; a category with fewer
       than 2 models among its styled votes has no ``bt_style`` board.
    5. ``spectral``: Rank Centrality (Negahban et al.: a walk on per-pair win fractions,
       normalised by the maximum degree), expressed in rating points but not Bradley-Terry's
       estimate: a pair met once weighs like a pair met often, so it is a differently targeted,
       less efficient cross-check (``core.labels.METHOD_NOTES``), with a bootstrap
       interval from the same resamples as ``bt``; no sandwich interval. The Kendall tau
       between its ratings and ``bt``'s is in ``metadata["kendall_tau"]``.

    Parameters
    ----------
    battles
        Flat battles table: ``id``, ``model_a``, ``model_b``, ``winner`` and, for
        ``bt_style``, the ``schema.CONVERSATION_STYLE_COLUMNS`` of both sides (a battle with
        all of them null, as in a dump without style counts, is left out of ``bt_style``;
        a lone null among them counts as 0).
    battle_categories
        ``battle_id``, ``category`` (see ``categories.tag_categories``).
    config
        Settings; default ``RankingConfig()``.

    Returns
    -------
    RankingOutput
        ``leaderboard``: ``rating`` on the configured scale; ``ci_lower``/``ci_upper``
        the primary interval (``ci_method``: ``config.primary_interval``, default
        "sandwich"; spectral has only "bootstrap", or "none" without bootstrap);
        ``sandwich_lower``/``sandwich_upper`` and ``bootstrap_lower``/``bootstrap_upper``
        both intervals (null where not computed); ``provisional`` (and
        ``provisional_reason``) marks models under ``display_min_battles``; every interval
        is of the rating's difference from the board's reference model (null for the
        reference itself; from the mean on a centred board); ``rank`` is 1 + the number of
        non-provisional models with a higher rating; ``rank_ub`` 1 + the number of
        non-provisional models whose lower bound is above this model's upper bound, both of
        the primary method's interval of each model's own (centred) strength, moved with the
        board (``board.Bounds.ranking``: comparing two models does not involve the
        reference; on a centred board these are ``ci_lower``/``ci_upper``). A provisional
        model is ranked the same way among all models of the board, so it moves no shown
        model; ``n_battles``, ``wins``,
        ``losses``, ``ties`` (tie + both_bad) count the battles the fit used and
        ``win_rate = (wins + ties / 2) / n_battles``.

    Raises
    ------
    ValueError
        Missing columns, a null model name or a winner outside ``OUTCOME_CODES``.
    """
    config = config or RankingConfig()
    started = perf_counter()
    with_style = "bt_style" in config.methods
    frame, names = _prepare(battles, with_style, config.cluster_column)
    with_clusters = "_cluster" in frame.columns
    is_self = (frame.get_column("_a") == frame.get_column("_b")).to_numpy()
    categories = battle_categories.select("battle_id", "category").unique(maintain_order=True)
    # a battle is in ~5 categories: the (category, battle) rows point at the battle's row of ``frame``
    # and each category's battles are gathered when its board is fitted, one category at a time
    # (joined whole, the style features of every battle were held ~5 times: the fit's peak on 4x the
    # votes was +1,085 MiB, +784 MiB this way)
    tagged = categories.join(
        frame.select("id", pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), _self=pl.Series(is_self)),
        left_on="battle_id", right_on="id",
    )
    self_rows = int(tagged.get_column("_self").sum())
    unmatched = categories.height - tagged.height
    tagged = tagged.filter(~pl.col("_self")).select("category", "_row")
    order = ordered_categories(tagged.get_column("category").unique().to_list())
    rows = {key[0]: part.get_column("_row") for key, part in tagged.partition_by("category", as_dict=True).items()}

    metadata: dict[str, Any] = {
        "config": asdict(config),
        "interval": (
            f"{config.confidence:.0%} intervals of the rating's difference from the board's reference "
            "model (metadata anchors; the reference has none), or from the board's mean where "
            f"there is no reference; ci_lower/ci_upper: {config.primary_interval} "
            "(spectral: bootstrap); sandwich_lower/sandwich_upper: robust sandwich (HC0) "
            f"normal interval; bootstrap_lower/bootstrap_upper: percentile bootstrap "
            f"({config.bootstrap_rounds} rounds, re-anchored in each); cluster_*: the same with "
            f"the votes of one {config.cluster_column} summed together (CR3 sandwich) / resampled "
            "together (bt; spectral's bootstrap), on boards whose votes carry sessions (else null: "
            "board_status.clustering says why); with cluster_primary the primary interval is the "
            "clustered one where it exists (ci_method says which); rank_ub compares the primary method's "
            "intervals of the models' own strengths, which do not involve the reference"
        ),
        "models": len(names),
        "dropped": {
            "self_battles": int(is_self.sum()),
            "self_battle_category_rows": self_rows,
            "category_rows_without_battle": unmatched,
        },
        "excluded_models": {},
        "style_left_out": {},
        "anchors": {},
        "kendall_tau": {},
        "categories": {},
        "timings_s": {"prepare": perf_counter() - started, "pairwise": 0.0},
    }
    boards: list[pl.DataFrame] = []
    significance: list[pl.DataFrame] = []
    coefficients: list[pl.DataFrame] = []
    pairwise_parts: list[pl.DataFrame] = []
    unrated: list[pl.DataFrame] = []
    status: dict[str, dict[str, Any]] = {}
    for category in order:
        t_category = perf_counter()
        part = frame[rows[category]]
        every = tuple(part.get_column(c).to_numpy() for c in ("_a", "_b", "_o"))
        # the head-to-head counts take every battle, ties included whatever config.ties is
        observed = part.select(pl.lit(category).alias("category"), "model_a", "model_b", "winner")
        if config.ties == "drop":
            part = part.filter(pl.col("_o") < 2)
        a, b, o = (part.get_column(c).to_numpy() for c in ("_a", "_b", "_o"))
        active, excluded = select_models(a, b, o, names, config.min_battles)
        keep = active[a] & active[b]
        models = [names[i] for i in np.flatnonzero(active)]
        info: dict[str, Any] = {
            "battles": len(a),
            "battles_fitted": int(keep.sum()),
            "models": len(models),
            "excluded_models": excluded,
            "timings_s": {},
        }
        metadata["excluded_models"][category] = excluded
        metadata["categories"][category] = info
        reasons = {e["model"]: e["reason"] for e in excluded}
        if len(models) < 2:
            info["note"] = "fewer than 2 models left: no board"
            unrated.append(unrated_rows(category, names, every, np.zeros(len(names), bool), reasons))
            status[category] = category_status(info, None, unrated[-1].height, config)
            pairwise_parts.append(_pairwise(observed, None, config, metadata))
            continue
        unrated.append(unrated_rows(category, names, every, active, reasons))
        candidates = config.anchor_models if config.anchor_model is None else (config.anchor_model,)
        on_board = set(models)
        anchor_name = next((name for name in candidates if name in on_board), None)
        anchor = models.index(anchor_name) if anchor_name is not None else None
        info["anchor"] = anchor_name  # None: centred on the mean
        metadata["anchors"][category] = anchor_name
        if config.anchor_model is not None and anchor is None:
            info["anchor_missing"] = True
        local = np.cumsum(active) - 1
        if with_clusters:
            clusters = session_clusters(part.get_column("_cluster").to_numpy()[keep], config.cluster_column)
        else:
            clusters = unclustered(DISABLED if config.cluster_column is None
                                   else NO_COLUMN.format(column=config.cluster_column), int(keep.sum()))
        info["clustering"] = clusters.note
        cluster = clusters.cluster
        board = Board(
            category=category,
            config=config,
            models=models,
            a=local[a[keep]],
            b=local[b[keep]],
            o=o[keep],
            raw_style=part.select(STYLE_FEATURES).to_numpy()[keep] if with_style else None,
            anchor=anchor,
            cluster=cluster,
        )
        # bt is always fitted: spectral's tau and the pairwise predictions use it
        t0 = perf_counter()
        bt = fit_bt_board(board)
        pairwise_parts.append(_pairwise(observed, bt.frame, config, metadata))
        status[category] = category_status(info, bt.frame, unrated[-1].height, config, clusters)
        if "bt" in config.methods:
            boards.append(bt.frame)
            significance.append(bt.significance)
        info["bt"] = bt.info
        info["timings_s"]["bt"] = perf_counter() - t0
        if with_style:
            t0 = perf_counter()
            styled = part.get_column("_styled").to_numpy()
            metadata["style_left_out"][category] = int((~styled).sum())
            if styled.all():
                style_board, theta0, info["bt_style"] = board, bt.theta, {}
            else:
                style_board, theta0, info["bt_style"] = _styled_board(board, part, styled, names, candidates)
            if style_board is not None:
                style_frame, style_coefficients, fitted, style_significance = fit_style_board(
                    style_board, theta0, int((~styled).sum())
                )
                info["bt_style"].update(fitted)
                boards.append(style_frame)
                significance.append(style_significance)
                coefficients.append(style_coefficients)
            info["timings_s"]["bt_style"] = perf_counter() - t0
        if "spectral" in config.methods:
            t0 = perf_counter()
            spectral_frame, info["spectral"], spectral_significance = fit_spectral_board(board, bt)
            boards.append(spectral_frame)
            significance.append(spectral_significance)
            metadata["kendall_tau"][category] = info["spectral"]["kendall_tau_vs_bt"]
            info["timings_s"]["spectral"] = perf_counter() - t0
        info["timings_s"]["total"] = perf_counter() - t_category

    t0 = perf_counter()
    category_rank = [category_order(), "category"]
    method_rank = pl.col("method").replace_strict(
        {m: i for i, m in enumerate(METHODS)}, return_dtype=pl.Int32
    )
    leaderboard = _concat(boards, LEADERBOARD_SCHEMA)
    leaderboard = leaderboard.sort(*category_rank, method_rank, "provisional", "rank", "model")
    pairwise = _concat(pairwise_parts, PAIRWISE_SCHEMA).sort(*category_rank, "model_1", "model_2")
    tests = _concat(significance, PAIRWISE_SIGNIFICANCE_SCHEMA).sort(
        *category_rank, method_rank, "model_1", "model_2")
    metadata["timings_s"]["pairwise"] += perf_counter() - t0
    metadata["timings_s"]["total"] = perf_counter() - started
    return RankingOutput(
        leaderboard, _concat(coefficients, STYLE_COEFFICIENTS_SCHEMA), pairwise, metadata,
        unrated_models=_concat(unrated, UNRATED_MODELS_SCHEMA),
        board_status=board_status_frame(battles.columns, status),
        pairwise_significance=tests,
    )


def _styled_board(
    board: Board,
    part: pl.DataFrame,
    styled: np.ndarray,
    names: list[str],
    candidates: tuple[str, ...],
) -> tuple[Board | None, np.ndarray | None, dict[str, Any]]:
    """The category's board over its battles with style counts only, for ``bt_style``.

    Models are selected again on those battles (``select_models``: a model may have no finite
    estimate without the others), the reference chosen again among them, and the start of the
    style fit is the plain Bradley-Terry fit of the same battles: exactly what
    ``compute_rankings`` does when given only these battles. None (and why, in the returned
    info) when fewer than 2 models are left.
    """
    c = board.config
    a, b, o = (part.get_column(col).to_numpy()[styled] for col in ("_a", "_b", "_o"))
    active, excluded = select_models(a, b, o, names, c.min_battles)
    info: dict[str, Any] = {
        "battles_with_style": len(a),
        "models_without_style_board": sorted(set(board.models) - {names[i] for i in np.flatnonzero(active)}),
    }
    models = [names[i] for i in np.flatnonzero(active)]
    if len(models) < 2:
        info["note"] = (f"{len(models)} model(s) left among the {len(a)} battles with style counts: "
                        "no bt_style board (the other battles' dumps have no style counts)")
        return None, None, info
    keep = active[a] & active[b]
    local = np.cumsum(active) - 1
    anchor_name = next((name for name in candidates if name in set(models)), None)
    info["anchor"] = anchor_name
    style_board = Board(
        category=board.category,
        config=c,
        models=models,
        a=local[a[keep]],
        b=local[b[keep]],
        o=o[keep],
        raw_style=part.select(STYLE_FEATURES).to_numpy()[styled][keep],
        anchor=models.index(anchor_name) if anchor_name is not None else None,
    )
    pairs = aggregate_pairs(style_board.a, style_board.b, style_board.o, style_board.m)
    theta0 = fit_bt(pairs, tol=c.tol, max_iter=c.max_iter).x[0]
    return style_board, theta0, info


def _pairwise(observed: pl.DataFrame, bt_board: pl.DataFrame | None, config: RankingConfig,
              metadata: dict[str, Any]) -> pl.DataFrame:
    """One category's rows of the pairwise table (predictions from its bt board; none without one)."""
    t0 = perf_counter()
    ratings = bt_board if bt_board is not None else pl.DataFrame(schema=LEADERBOARD_SCHEMA)
    table = pairwise_table(observed, ratings, config.ties, config.scale, config.base)
    metadata["timings_s"]["pairwise"] += perf_counter() - t0
    return table


def _concat(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Concatenate frames of one schema; an empty frame of that schema when none."""
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)
