"""Names shared across the pipeline: dataset id, DuckDB schema and tables, categories."""

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
#: written by the publication gate itself (the candidate boards against the live ones), published with the
#: rest; not an asset, so not in PUBLISHED_TABLES / DERIVED_FROM (which describe the asset graph)
PUBLICATION_CHANGES_TABLE = "publication_changes"
DEFAULT_REPORT_PATH = "data/report/index.html"
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

#: Tables published together for each dump revision (views in SCHEMA over VERSIONS_SCHEMA tables).
PUBLISHED_TABLES = (
    BATTLES_TABLE,
    MESSAGES_TABLE,
    CONTEXT_MESSAGES_TABLE,
    QUARANTINE_TABLE,
    BATTLE_CATEGORIES_TABLE,
    LEADERBOARD_TABLE,
    PAIRWISE_TABLE,
    PAIRWISE_SIGNIFICANCE_TABLE,
    STYLE_COEFFICIENTS_TABLE,
    MODELS_TABLE,
    POSITION_BIAS_TABLE,
    RATING_TREND_TABLE,
    PREFERENCE_PAIRS_TABLE,
    UNRATED_MODELS_TABLE,
    BOARD_STATUS_TABLE,
    DUMP_LEADERBOARD_TABLE,
    MODEL_FIT_TABLE,
    MODEL_FIT_CALIBRATION_TABLE,
    # the validation tables: this run's candidate leaderboard against a published board / benchmark scores
    EXTERNAL_COMPARISON_TABLE,
    EXTERNAL_COMPARISON_MODELS_TABLE,
    BENCHMARK_SCORES_TABLE,
    BENCHMARK_AGREEMENT_TABLE,
)
#: The only base tables of SCHEMA (everything else there is a view the gate re-points): records and logs,
#: appended to or updated in place (docs/tables.md).
RECORD_TABLES = (PUBLICATIONS_TABLE, DUMPS_TABLE, QUALITY_RESULTS_TABLE)
#: What each published table is computed from (a publication never shows a table next to a rebuilt input).
DERIVED_FROM: dict[str, tuple[str, ...]] = {
    BATTLE_CATEGORIES_TABLE: (BATTLES_TABLE,),
    LEADERBOARD_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    PAIRWISE_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    PAIRWISE_SIGNIFICANCE_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    STYLE_COEFFICIENTS_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    MODELS_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    POSITION_BIAS_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    RATING_TREND_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    UNRATED_MODELS_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    BOARD_STATUS_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    DUMP_LEADERBOARD_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE, QUARANTINE_TABLE),
    MODEL_FIT_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    MODEL_FIT_CALIBRATION_TABLE: (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE),
    **dict.fromkeys((EXTERNAL_COMPARISON_TABLE, EXTERNAL_COMPARISON_MODELS_TABLE, BENCHMARK_SCORES_TABLE,
                     BENCHMARK_AGREEMENT_TABLE), (BATTLES_TABLE, BATTLE_CATEGORIES_TABLE, LEADERBOARD_TABLE)),
}
#: Tables computed in one step (one load, one fit): a publication takes them from one run.
BUILT_TOGETHER: tuple[tuple[str, ...], ...] = (
    (BATTLES_TABLE, MESSAGES_TABLE, CONTEXT_MESSAGES_TABLE, QUARANTINE_TABLE, PREFERENCE_PAIRS_TABLE),
    (LEADERBOARD_TABLE, PAIRWISE_TABLE, PAIRWISE_SIGNIFICANCE_TABLE, STYLE_COEFFICIENTS_TABLE, UNRATED_MODELS_TABLE,
     BOARD_STATUS_TABLE,
     DUMP_LEADERBOARD_TABLE,
     MODEL_FIT_TABLE, MODEL_FIT_CALIBRATION_TABLE),
    (EXTERNAL_COMPARISON_TABLE, EXTERNAL_COMPARISON_MODELS_TABLE),
    (BENCHMARK_SCORES_TABLE, BENCHMARK_AGREEMENT_TABLE),
)
#: Tables whose blocking expectation suites must have passed on the exact version published.
CHECKED_TABLES: tuple[str, ...] = (BATTLES_TABLE, MESSAGES_TABLE)
#: PublicationView tables the readers' snapshot shows as views over Parquet files (written once per version,
#: never copied per publication: core/store/snapshot.py); the other published tables are copied into it.
SNAPSHOT_FILE_TABLES: tuple[str, ...] = (BATTLES_TABLE, MESSAGES_TABLE, CONTEXT_MESSAGES_TABLE, QUARANTINE_TABLE,
                                         BATTLE_CATEGORIES_TABLE, PREFERENCE_PAIRS_TABLE)
#: Tables whose earlier publications stay queryable through SCHEMA.<table>_history views.
HISTORY_TABLES: tuple[str, ...] = (LEADERBOARD_TABLE, STYLE_COEFFICIENTS_TABLE)

NIGHTLY_CRON = "0 3 * * *"  # 03:00 UTC
SENSOR_INTERVAL_SECONDS = 600
REVISION_TAG = "arena/revision"
PUBLISHED_TAG = "arena/published_revision"
