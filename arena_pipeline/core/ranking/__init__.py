"""Leaderboards from pairwise votes: Bradley-Terry, style control, Rank Centrality (a `RatingMethod` each)."""

from arena_pipeline.core.ranking.board import PAIRWISE_SIGNIFICANCE_SCHEMA, CategoryBoard
from arena_pipeline.core.ranking.config import RUN_SETTINGS, RankingConfig
from arena_pipeline.core.ranking.leaderboard import compute_rankings
from arena_pipeline.core.ranking.pairwise import PAIRWISE_SCHEMA
from arena_pipeline.core.ranking.per_dump import per_dump_leaderboards
from arena_pipeline.core.ranking.rating_method import RATING_METHODS, BoardResult, RatingMethod, register
from arena_pipeline.core.ranking.status import BOARD_STATUS_SCHEMA, UNRATED_MODELS_SCHEMA
from arena_pipeline.core.ranking.types import (
    LEADERBOARD_SCHEMA,
    METHOD_LABELS,
    METHODS,
    REFERENCE_MODELS,
    STYLE_COEFFICIENTS_SCHEMA,
    RankingOutput,
    method_label,
)

__all__ = [
    "BOARD_STATUS_SCHEMA",
    "RATING_METHODS",
    "BoardResult",
    "CategoryBoard",
    "RatingMethod",
    "register",
    "UNRATED_MODELS_SCHEMA",
    "LEADERBOARD_SCHEMA",
    "METHOD_LABELS",
    "METHODS",
    "PAIRWISE_SCHEMA",
    "PAIRWISE_SIGNIFICANCE_SCHEMA",
    "REFERENCE_MODELS",
    "RUN_SETTINGS",
    "STYLE_COEFFICIENTS_SCHEMA",
    "RankingConfig",
    "RankingOutput",
    "compute_rankings",
    "method_label",
    "per_dump_leaderboards",
]
