"""Per-category leaderboards: `compute_rankings` runs every configured rating method on every board."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from time import perf_counter
from typing import Any

import numpy as np
import polars as pl

import arena_pipeline.core.ranking.methods  # noqa: F401 - registers the built-in rating methods
from arena_pipeline.core.dataset.categories import category_order, ordered_categories
from arena_pipeline.core.ranking.board import (
    PAIRWISE_SIGNIFICANCE_SCHEMA,
    Board,
    CategoryBoard,
    select_models,
)
from arena_pipeline.core.ranking.bradley_terry import OUTCOME_CODES
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.pairwise import PAIRWISE_SCHEMA, pairwise_table
from arena_pipeline.core.ranking.rating_method import (
    RATING_METHODS,
    BoardResult,
    RatingMethod,
    configured_methods,
)
from arena_pipeline.core.ranking.sessions import (
    DISABLED,
    NO_COLUMN,
    SessionClusters,
    session_clusters,
    unclustered,
)
from arena_pipeline.core.ranking.status import (
    UNRATED_MODELS_SCHEMA,
    board_status_frame,
    category_status,
    unrated_rows,
)
from arena_pipeline.core.ranking.tags import category_rows
from arena_pipeline.core.ranking.types import (
    LEADERBOARD_SCHEMA,
    METHODS,
    STYLE_COEFFICIENTS_SCHEMA,
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


def compute_rankings(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
) -> RankingOutput:
    """Per-category leaderboards, one board per configured rating method.

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
    3. Every method of ``config.methods`` (registered ``rating_method.RatingMethod``\ s, in
       registration order; built in: ``bt``, ``bt_style``, ``spectral``, see ``core.ranking.methods``)
       fits the board. The Bradley-Terry fit is made on every board (``board.CategoryBoard.bt``):
       the pairwise table's predictions and the board status use it.

    Parameters
    ----------
    battles
        Flat battles table: ``id``, ``model_a``, ``model_b``, ``winner`` and the columns the
        configured methods need (``bt_style``: the ``schema.CONVERSATION_STYLE_COLUMNS`` of both sides).
    battle_categories
        The category tags as rows of ``battles``: ``category``, ``_row`` (``tags.tag_rows`` turns
        ``battle_id``, ``category`` tags, e.g. ``categories.tag_categories``', into them).
    config
        Settings; default ``RankingConfig()``.

    Returns
    -------
    RankingOutput
        Its attributes say what each frame holds (the leaderboard's columns: ``RankingOutput``).

    Raises
    ------
    ValueError
        Missing columns, a null model name, a winner outside ``OUTCOME_CODES``, an unregistered method.
    """
    config = config or RankingConfig()
    started = perf_counter()
    methods = configured_methods(config.methods)
    frame, names = _prepare(battles, methods, config.cluster_column)
    rows, dropped = _category_rows(frame, battle_categories)
    metadata = _metadata(config, len(names), dropped)
    metadata["timings_s"]["prepare"] = perf_counter() - started
    parts = _Parts()
    for category in ordered_categories(rows):
        _rank_category(category, frame[rows[category]], names, config, methods, metadata, parts)
    return parts.output(battles.columns, metadata, started)


def _prepare(
    battles: pl.DataFrame, methods: list[RatingMethod], cluster_column: str | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """Validate battles; add model indices, outcome codes, the methods' battle features, session codes."""
    needed = ["id", "model_a", "model_b", "winner"] + [c for m in methods for c in m.battle_columns()]
    missing = [c for c in needed if c not in battles.columns]
    if missing:
        hint = "".join(f" ({m.name} needs {m.needs})" for m in methods if set(m.battle_columns()) & set(missing))
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
        "model_a",
        "model_b",
        "winner",
        pl.col("model_a").cast(index).to_physical().cast(pl.Int64).alias("_a"),
        pl.col("model_b").cast(index).to_physical().cast(pl.Int64).alias("_b"),
        pl.col("winner").replace_strict(OUTCOME_CODES, return_dtype=pl.Int8).alias("_o"),
        *[expr for m in methods for expr in m.battle_features()],
        *(
            # sessions numbered in the order of their names, as sorting the names would (np.unique of
            # strings was 0.5 s at 1x); -1: no session known (sessions.session_clusters decides per board)
            [pl.col(cluster_column).cast(pl.String).rank("dense").cast(pl.Int64).fill_null(-1).alias("_cluster")]
            if cluster_column is not None and cluster_column in battles.columns
            else []
        ),
    )
    return frame, names


def _category_rows(frame: pl.DataFrame, battle_categories: pl.DataFrame) -> tuple[dict[str, np.ndarray], dict]:
    """Each category's rows of ``frame`` (self-battles left out), and what was dropped.

    A battle is in ~5 categories: the (category, battle) pairs point at the battle's row of ``frame``
    (:func:`~arena_pipeline.core.ranking.tags.category_rows`) and each category's battles are gathered
    when its board is fitted, one category at a time (joined whole, the style features of every battle
    were held ~5 times: the fit's peak on 4x the votes was +1,085 MiB, +784 MiB this way).
    """
    is_self = (frame.get_column("_a") == frame.get_column("_b")).to_numpy()
    rows, without = category_rows(battle_categories)
    dropped = {
        "self_battles": int(is_self.sum()),
        "self_battle_category_rows": sum(int(is_self[row].sum()) for row in rows.values()),
        "category_rows_without_battle": without,
    }
    return {category: row[~is_self[row]] for category, row in rows.items()}, dropped


def _metadata(config: RankingConfig, models: int, dropped: dict[str, int]) -> dict[str, Any]:
    """The run's metadata before any board: settings, the interval statement, what was dropped."""
    return {
        "config": asdict(config),
        "interval": (
            f"{config.confidence:.0%} intervals of the rating's difference from the board's reference "
            "model (metadata anchors; the reference has none), or from the board's mean where "
            f"there is no reference; ci_lower/ci_upper: {config.primary_interval} "
            "(spectral: bootstrap); sandwich_lower/sandwich_upper: robust sandwich (HC0) "
            f"normal interval; bootstrap_lower/bootstrap_upper: percentile bootstrap "
            f"({config.bootstrap_rounds} rounds, re-anchored in each); cluster_*: the same with "
            f"the votes of one {config.cluster_column} summed together (CR3 sandwich; bt and bt_style) / "
            "resampled together (bt; spectral's bootstrap), on boards whose votes carry sessions (else null: "
            "board_status.clustering says why); with cluster_primary the primary interval is the "
            "clustered one where it exists (ci_method says which); rank_ub/rank_lb read the primary method's "
            "tests of each pair's difference, which do not involve the reference, one pair at a time (for this "
            "model); rank_ub_simultaneous/rank_lb_simultaneous read the same tests made for every pair of shown "
            "models at once (family-wise, max-t with step-down: for every model at once)"
        ),
        "models": models,
        "dropped": dropped,
        "excluded_models": {},
        **{m.summary: {} for m in RATING_METHODS.values() if m.summary},
        "anchors": {},
        "categories": {},
        "timings_s": {"prepare": 0.0, "pairwise": 0.0},
    }


@dataclass
class _Parts:
    """The frames of every board, gathered category by category."""

    boards: list[pl.DataFrame] = field(default_factory=list)
    significance: list[pl.DataFrame] = field(default_factory=list)
    coefficients: list[pl.DataFrame] = field(default_factory=list)
    pairwise: list[pl.DataFrame] = field(default_factory=list)
    unrated: list[pl.DataFrame] = field(default_factory=list)
    status: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, result: BoardResult) -> None:
        """Keep one method's frames of one board."""
        for frames, frame in ((self.boards, result.leaderboard), (self.significance, result.significance),
                              (self.coefficients, result.coefficients)):
            if frame is not None:
                frames.append(frame)

    def output(self, columns: list[str], metadata: dict[str, Any], started: float) -> RankingOutput:
        """The frames concatenated and sorted: categories in board order, methods in registration order."""
        t0 = perf_counter()
        category_rank = [category_order(), "category"]
        method_rank = pl.col("method").replace_strict(
            {m: i for i, m in enumerate(RATING_METHODS)}, return_dtype=pl.Int32
        )
        leaderboard = _concat(self.boards, LEADERBOARD_SCHEMA)
        leaderboard = leaderboard.sort(*category_rank, method_rank, "provisional", "rank", "model")
        pairwise = _concat(self.pairwise, PAIRWISE_SCHEMA).sort(*category_rank, "model_1", "model_2")
        tests = _concat(self.significance, PAIRWISE_SIGNIFICANCE_SCHEMA).sort(
            *category_rank, method_rank, "model_1", "model_2")
        metadata["timings_s"]["pairwise"] += perf_counter() - t0
        metadata["timings_s"]["total"] = perf_counter() - started
        return RankingOutput(
            leaderboard, _concat(self.coefficients, STYLE_COEFFICIENTS_SCHEMA), pairwise, metadata,
            unrated_models=_concat(self.unrated, UNRATED_MODELS_SCHEMA),
            board_status=board_status_frame(columns, self.status),
            pairwise_significance=tests,
        )


def _rank_category(
    category: str,
    part: pl.DataFrame,
    names: list[str],
    config: RankingConfig,
    methods: list[RatingMethod],
    metadata: dict[str, Any],
    parts: _Parts,
) -> None:
    """One category: select its models, then fit every method on its board (none with < 2 models)."""
    t_category = perf_counter()
    every = tuple(part.get_column(c).to_numpy() for c in ("_a", "_b", "_o"))
    # the head-to-head counts take every battle, ties included whatever config.ties is
    observed = part.select(pl.lit(category).alias("category"), "model_a", "model_b", "winner")
    if config.ties == "drop":
        part = part.filter(pl.col("_o") < 2)
    a, b, o = (part.get_column(c).to_numpy() for c in ("_a", "_b", "_o"))
    active, excluded = select_models(a, b, o, names, config.min_battles)
    keep = active[a] & active[b]
    models = [names[i] for i in np.flatnonzero(active)]
    info: dict[str, Any] = {"battles": len(a), "battles_fitted": int(keep.sum()), "models": len(models),
                            "excluded_models": excluded, "timings_s": {}}
    metadata["excluded_models"][category] = excluded
    metadata["categories"][category] = info
    reasons = {e["model"]: e["reason"] for e in excluded}
    if len(models) < 2:
        info["note"] = "fewer than 2 models left: no board"
        parts.unrated.append(unrated_rows(category, names, every, np.zeros(len(names), bool), reasons))
        parts.status[category] = category_status(info, None, parts.unrated[-1].height, config)
        parts.pairwise.append(_pairwise(observed, None, config, metadata))
        return
    parts.unrated.append(unrated_rows(category, names, every, active, reasons))
    candidates = config.anchor_models if config.anchor_model is None else (config.anchor_model,)
    board, clusters = _board(category, part, active, keep, models, candidates, config, info)
    metadata["anchors"][category] = info["anchor"]
    fitted = CategoryBoard(board, part, keep, names, candidates, info)
    parts.pairwise.append(_pairwise(observed, fitted.bt.frame, config, metadata))
    parts.status[category] = category_status(info, fitted.bt.frame, parts.unrated[-1].height, config, clusters)
    for method in methods:
        t0 = perf_counter()
        result = method.fit(fitted)
        info[method.name] = result.info
        if method.summary is not None:
            metadata[method.summary][category] = result.summary
        parts.add(result)
        info["timings_s"][method.name] = info["timings_s"].get(method.name, 0.0) + perf_counter() - t0
    info["timings_s"]["total"] = perf_counter() - t_category


def _board(
    category: str,
    part: pl.DataFrame,
    active: np.ndarray,
    keep: np.ndarray,
    models: list[str],
    candidates: tuple[str, ...],
    config: RankingConfig,
    info: dict[str, Any],
) -> tuple[Board, SessionClusters]:
    """The category's board of the models kept: its reference model (noted in ``info``) and sessions."""
    anchor_name = next((name for name in candidates if name in set(models)), None)
    info["anchor"] = anchor_name  # None: centred on the mean
    if config.anchor_model is not None and anchor_name is None:
        info["anchor_missing"] = True
    if "_cluster" in part.columns:
        clusters = session_clusters(part.get_column("_cluster").to_numpy()[keep], config.cluster_column)
    else:
        clusters = unclustered(DISABLED if config.cluster_column is None
                               else NO_COLUMN.format(column=config.cluster_column), int(keep.sum()))
    info["clustering"] = clusters.note
    a, b, o = (part.get_column(c).to_numpy() for c in ("_a", "_b", "_o"))
    local = np.cumsum(active) - 1
    board = Board(
        category=category,
        config=config,
        models=models,
        a=local[a[keep]],
        b=local[b[keep]],
        o=o[keep],
        raw_style=None,
        anchor=models.index(anchor_name) if anchor_name is not None else None,
        cluster=clusters.cluster,
    )
    return board, clusters


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
