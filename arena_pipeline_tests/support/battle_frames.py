"""Small valid battles / messages frames with exactly the flat schemas, for quality tests.

``make_battles(n)`` gives ``n`` rows that pass every expectation of ``expectations/battles.json``
and break no quarantine rule; tests then change one value to make a golden bad case.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl

from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, CRITERIA, MESSAGES_SCHEMA

MODELS = ("gemini-2.5-pro", "claude-opus-4-20250514", "gpt-4.1-2025-04-14", "deepseek-v3-0324")
WINNER_CYCLE = ("model_a", "model_b", "tie", "both_bad")


def battle_row(i: int, **overrides: Any) -> dict[str, Any]:
    """The i-th valid battle as a dict of BATTLES_SCHEMA columns (2 turns when i % 3 == 2)."""
    turns = 2 if i % 3 == 2 else 1
    row: dict[str, Any] = {
        "id": f"id-{i:04d}",
        "model_a": MODELS[i % len(MODELS)],
        "model_b": MODELS[(i + 1) % len(MODELS)],
        "winner": WINNER_CYCLE[i % len(WINNER_CYCLE)],
        "evaluation_session_id": f"session-{i // 2:04d}",
        "evaluation_order": 1 + i % 2,
        "language": ("en", "pl", "de", "ja")[i % 4],
        "is_code": i % 5 == 0,
        "timestamp": dt.datetime(2025, 5, 1, 12, 0) + dt.timedelta(minutes=i),
        "sum_user_tokens": 10 + i,
        "turns": turns,
        "creative_writing": i % 7 == 0,
        "creative_writing_score": "yes" if i % 7 == 0 else "no",
        "instruction_following": i % 3 == 0,
        "instruction_following_score": i % 6,
        "math": i % 4 == 1,
        "n_messages_a": 2 * turns,
        "n_messages_b": 2 * turns,
        "n_user_messages_a": turns,
        "n_user_messages_b": turns,
        "full_conversation_turns": turns + (i % 2),
        "source_file": "data/train-00000-of-00001.parquet",
        "source_row": i,
        "dump": "lmarena-ai/arena-human-preference-140k",
    }
    for side, offset in (("a", 0), ("b", 1)):
        row[f"sum_assistant_{side}_tokens"] = 100 + 10 * i + offset
        for h in range(1, 7):
            row[f"header_count_{side}_h{h}"] = (i + h + offset) % 3
        row[f"list_count_{side}_ordered"] = i % 4
        row[f"list_count_{side}_unordered"] = (i + offset) % 5
        row[f"bold_count_{side}_asterisk"] = (2 * i + offset) % 7
        row[f"bold_count_{side}_underscore"] = 0
        row[f"context_{side}_tokens"] = 5 * (i % 2)
    for c in CRITERIA:
        row[f"criteria_{c}"] = (i + len(c)) % 2 == 0
    unknown = set(overrides) - set(BATTLES_SCHEMA)
    if unknown:
        raise KeyError(f"not battles columns: {sorted(unknown)}")
    row.update(overrides)
    for side in ("model_a", "model_b"):  # the names are already normalized: canonical = raw
        row.setdefault(f"{side}_canonical", row[side])
    return row


def make_battles(n: int = 8, overrides: dict[int, dict[str, Any]] | None = None) -> pl.DataFrame:
    """``n`` valid battles with BATTLES_SCHEMA; ``overrides[i]`` replaces values of row i."""
    overrides = overrides or {}
    rows = [battle_row(i, **overrides.get(i, {})) for i in range(n)]
    return pl.DataFrame(rows, schema=BATTLES_SCHEMA)


def with_values(battles: pl.DataFrame, row: int, **values: Any) -> pl.DataFrame:
    """A copy of ``battles`` with some values of one row replaced (types kept)."""
    exprs = []
    for name, value in values.items():
        dtype = battles.schema[name]
        is_row = pl.int_range(pl.len()) == row
        exprs.append(
            pl.when(is_row).then(pl.lit(value, dtype=dtype)).otherwise(pl.col(name)).alias(name)
        )
    return battles.with_columns(exprs)


def make_messages(battles: pl.DataFrame) -> pl.DataFrame:
    """Messages consistent with ``battles``: per side, (user, assistant) x turns."""
    base = battles.select(
        pl.col("id").alias("battle_id"),
        pl.col("turns"),
        pl.col("dump"),
        pl.lit(["a", "b"]).alias("side"),
    ).explode("side")
    frame = (
        base.with_columns(pl.int_ranges(0, 2 * pl.col("turns")).alias("position"))
        .explode("position")
        .with_columns(
            (pl.col("position") // 2 + 1).alias("turn"),
            pl.when(pl.col("position") % 2 == 0)
            .then(pl.lit("user"))
            .otherwise(pl.lit("assistant"))
            .alias("role"),
            pl.lit("text").alias("content_type"),
            pl.format("message {} of {} side {}", "position", "battle_id", "side").alias("text"),
            pl.lit(1).alias("n_parts"),
            pl.lit([], dtype=pl.List(pl.String)).alias("images"),
            pl.when(pl.col("side") == "b").then(pl.col("position") * 3 + 4).alias("num_tokens"),
        )
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in MESSAGES_SCHEMA.items()])
