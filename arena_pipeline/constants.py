"""Names shared across the pipeline: dataset id, DuckDB schema and tables, categories."""

DATASET_ID = "lmarena-ai/arena-human-preference-140k"
DEFAULT_REVISION = "main"
DEFAULT_WAREHOUSE = "data/warehouse.duckdb"
DEFAULT_CACHE_DIR = "data/cache"

SCHEMA = "arena"
BATTLES_TABLE = "battles"
MESSAGES_TABLE = "messages"
CONTEXT_MESSAGES_TABLE = "context_messages"

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
