"""The real 135,634-vote table of shared/data/real/, with battles-table column names (for benchmarks)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from arena_pipeline.core.dataset.schema import CRITERIA

#: shared/ sits beside the repository checkout.
REAL_VOTES = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / \
    "arena_hp140k_votes_with_category_tag.parquet"

#: Dotted columns of the real vote table -> battles-table names (schema.BATTLES_SCHEMA).
REAL_COLUMNS = {
    "category_tag.creative_writing_v0.1.creative_writing": "creative_writing",
    "category_tag.creative_writing_v0.1.score": "creative_writing_score",
    **{f"category_tag.criteria_v0.1.{c}": f"criteria_{c}" for c in CRITERIA},
    "category_tag.if_v0.1.if": "instruction_following",
    "category_tag.if_v0.1.score": "instruction_following_score",
    "category_tag.math_v0.1.math": "math",
}


def load_real_votes(path: Path = REAL_VOTES) -> pl.DataFrame:
    """id, model_a, model_b, winner and the category_tag fields under their battles-table names."""
    if not Path(path).exists():
        raise SystemExit(f"{path} not found: the real vote table lives in shared/data/real/ beside the checkout")
    return (
        pl.read_parquet(path)
        .rename(REAL_COLUMNS)
        .with_columns(pl.col("instruction_following_score").cast(pl.Int32))
    )
