"""Names shared across the pipeline: dataset id, DuckDB schema and table names, categories.

What each table is (published, exported, heavy, checked, with history) and what it is computed from
are declared on its asset and derived from the asset graph (assets/catalog.py), never listed here."""

from __future__ import annotations

import os
from pathlib import Path

DATASET_ID = "lmarena-ai/arena-human-preference-140k"
DEFAULT_REVISION = "main"
DEFAULT_WAREHOUSE = "data/warehouse.duckdb"
#: DuckDB's memory cap per warehouse connection (``Warehouse.memory_limit``; docs/scaling.md)
DEFAULT_MEMORY_LIMIT = "1GB"
DEFAULT_CACHE_DIR = "data/cache"

SCHEMA = "arena"
BATTLES_TABLE = "battles"
MESSAGES_TABLE = "messages"
CONTEXT_MESSAGES_TABLE = "context_messages"
QUARANTINE_TABLE = "quarantine"
DUMPS_TABLE = "dumps"
PUBLICATIONS_TABLE = "publications"
BATTLE_CATEGORIES_TABLE = "battle_categories"
LEADERBOARD_TABLE = "leaderboard"
PAIRWISE_TABLE = "pairwise"
PAIRWISE_SIGNIFICANCE_TABLE = "pairwise_significance"
STYLE_COEFFICIENTS_TABLE = "style_coefficients"
QUALITY_RESULTS_TABLE = "quality_results"
MODELS_TABLE = "models"
EXTERNAL_COMPARISON_TABLE = "external_comparison"
EXTERNAL_COMPARISON_MODELS_TABLE = "external_comparison_models"
BENCHMARK_SCORES_TABLE = "benchmark_scores"
BENCHMARK_AGREEMENT_TABLE = "benchmark_agreement"
POSITION_BIAS_TABLE = "position_bias"
RATING_TREND_TABLE = "rating_trend"
PREFERENCE_PAIRS_TABLE = "preference_pairs"
UNRATED_MODELS_TABLE = "unrated_models"
BOARD_STATUS_TABLE = "board_status"
DUMP_LEADERBOARD_TABLE = "dump_leaderboard"
MODEL_FIT_TABLE = "model_fit"
MODEL_FIT_CALIBRATION_TABLE = "model_fit_calibration"
#: the candidate boards against the live ones (assets/publication_changes.py; the gate recomputes it when stale)
PUBLICATION_CHANGES_TABLE = "publication_changes"
DEFAULT_REPORT_PATH = "data/report/index.html"


def report_beside(warehouse: str | os.PathLike[str]) -> Path:
    """The report's default file, in the warehouse's folder so that a report follows its warehouse (ARENA_REPORT
    set aside): ``report/index.html`` for a warehouse named ``warehouse.duckdb`` (``DEFAULT_REPORT_PATH`` for
    the default one), ``report/<name>.html`` for another name, so two warehouses of one folder
    (``data/own.duckdb`` beside ``data/warehouse.duckdb``) never share a page."""
    path = Path(warehouse)
    return path.parent / "report" / ("index.html" if path.stem == "warehouse" else f"{path.stem}.html")


VERSIONS_SCHEMA = "arena_versions"

CATEGORIES = (
    "overall",
    "creative_writing",
    "math",
    "instruction_following",
    "coding",
    "hard_prompt",
    "longer_query",
    "multi_turn",
)

NIGHTLY_CRON = "0 3 * * *"  # 03:00 UTC
SENSOR_INTERVAL_SECONDS = 600
REVISION_TAG = "arena/revision"
PUBLISHED_TAG = "arena/published_revision"
#: The tag naming the publication whose ranking settings a run was given (the sensor's, the CLI's): its gate
#: refuses to publish over a publication with other ranking settings (core/publication/settings_source.py).
SETTINGS_TAG = "arena/ranking_settings_of"
