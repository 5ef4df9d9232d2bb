"""Nested dump structs -> flat battles, messages and context_messages tables (Polars, no row loops)."""

from __future__ import annotations

from functools import lru_cache

import polars as pl

from arena_pipeline.core.dataset.models import add_canonical_columns, load_aliases
from arena_pipeline.core.dataset.schema import (
    BATTLES_NESTED_PATHS,
    CONTEXT_MESSAGES_SCHEMA,
    FLAT_BATTLES_SCHEMA,
    MESSAGES_SCHEMA,
)

TEXT_SEPARATOR = "\n\n"


@lru_cache(maxsize=1)
def packaged_aliases() -> pl.DataFrame:
    """The packaged alias table, read once per process."""
    return load_aliases()


def _nested(path: tuple[str, ...]) -> pl.Expr:
    expr = pl.col(path[0])
    for name in path[1:]:
        expr = expr.struct.field(name)
    return expr


def _user_count(column: str) -> pl.Expr:
    return (
        pl.col(column)
        .list.eval((pl.element().struct.field("role") == "user").cast(pl.Int32))
        .list.sum()
        .fill_null(0)
        .cast(pl.Int32)
    )


def content_text(content: pl.Expr) -> pl.Expr:
    """A message's text: the text parts of its ``content`` list joined with a blank line (arena.messages.text)."""
    return content.list.eval(pl.element().struct.field("text")).list.join(TEXT_SEPARATOR, ignore_nulls=True)


def content_images(content: pl.Expr) -> pl.Expr:
    """A message's image references: the non-null image parts of its ``content`` (arena.messages.images)."""
    return content.list.eval(pl.element().struct.field("image")).list.drop_nulls()


def _content_columns(content: pl.Expr) -> list[pl.Expr]:
    """text / content_type / n_parts / images of a ``content`` list of parts."""
    return [
        content.list.eval(pl.element().struct.field("type")).list.join(",", ignore_nulls=True)
        .alias("content_type"),
        content_text(content).alias("text"),
        content.list.len().fill_null(0).cast(pl.Int32).alias("n_parts"),
        content_images(content).alias("images"),
    ]


def flatten_battles(frame: pl.DataFrame, source_file: str, row_offset: int = 0,
                    aliases: pl.DataFrame | None = None, dump: str | None = None) -> pl.DataFrame:
    """One row per vote with every scalar, conv_metadata and category_tag field as a column.

    Columns and types are ``schema.FLAT_BATTLES_SCHEMA``: ``BATTLES_SCHEMA`` except that the
    nested counts stored narrower (``schema.NARROWED_COLUMNS``) stay Int64 here, so an
    out-of-range value reaches the ``count_out_of_range`` quarantine rule instead of failing the
    cast; :func:`quarantine.split_quarantine` narrows the clean rows.

    ``model_a_canonical`` / ``model_b_canonical`` are the names normalized by
    :func:`arena_pipeline.core.dataset.models.add_canonical_columns` with ``aliases`` (default: the
    packaged alias table).

    Parameters
    ----------
    frame
        Rows with the dataset card's nested schema.
    source_file
        Recorded in ``source_file`` for provenance and quarantine.
    row_offset
        Position of the frame's first row inside ``source_file``.
    aliases
        The alias table (``models.load_aliases``); None for the packaged one.
    dump
        The dump (dataset id) recorded in ``dump``; ``also_in_dumps`` starts null (the loader
        fills it when another dump holds the same vote).
    """
    exprs = [
        pl.col("id", "model_a", "model_b", "winner", "evaluation_session_id", "language", "is_code"),
        pl.col("evaluation_order").cast(pl.Int32),
        pl.col("timestamp").cast(pl.Datetime("us")),
    ]
    exprs += [_nested(path).alias(name) for name, path in BATTLES_NESTED_PATHS.items()]
    exprs += [
        pl.col("conversation_a").list.len().fill_null(0).cast(pl.Int32).alias("n_messages_a"),
        pl.col("conversation_b").list.len().fill_null(0).cast(pl.Int32).alias("n_messages_b"),
        _user_count("conversation_a").alias("n_user_messages_a"),
        _user_count("conversation_b").alias("n_user_messages_b"),
        pl.col("full_conversation").list.len().fill_null(0).cast(pl.Int32).alias("full_conversation_turns"),
        pl.lit(source_file, dtype=pl.String).alias("source_file"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + row_offset).alias("source_row"),
        pl.lit(dump, dtype=pl.String).alias("dump"),
        pl.lit(None, dtype=pl.String).alias("also_in_dumps"),
    ]
    flat = add_canonical_columns(frame.select(exprs), aliases if aliases is not None else packaged_aliases())
    return flat.select([pl.col(name).cast(dtype) for name, dtype in FLAT_BATTLES_SCHEMA.items()])


def _side_messages(frame: pl.DataFrame, side: str, dump: str | None = None) -> pl.DataFrame:
    column = f"conversation_{side}"
    msgs = (
        frame.select(
            pl.col("id").alias("battle_id"),
            pl.col(column).alias("msg"),
            pl.int_ranges(0, pl.col(column).list.len().fill_null(0), dtype=pl.Int32).alias("position"),
        )
        .filter(pl.col("msg").list.len() > 0)
        .explode("msg", "position")
    )
    has_tokens = "num_tokens" in {f.name for f in msgs.schema["msg"].fields}
    role = pl.col("msg").struct.field("role")
    return msgs.select(
        "battle_id",
        pl.lit(side).alias("side"),
        (role == "user").cast(pl.Int32).cum_sum().over("battle_id").alias("turn"),
        "position",
        role.alias("role"),
        *_content_columns(pl.col("msg").struct.field("content")),
        (pl.col("msg").struct.field("num_tokens") if has_tokens else pl.lit(None, dtype=pl.Int32))
        .cast(pl.Int32).alias("num_tokens"),
        pl.lit(dump, dtype=pl.String).alias("dump"),
    )


def flatten_messages(frame: pl.DataFrame, dump: str | None = None) -> pl.DataFrame:
    """One row per message of ``conversation_a`` and ``conversation_b``.

    ``turn`` counts user messages up to and including this one (1-based), so a user message and
    the assistant replies after it share a turn. Text parts are joined with a blank line; image
    references are kept in ``images``.
    """
    parts = [
        _side_messages(frame, side, dump).select(
            [pl.col(name).cast(dtype) for name, dtype in MESSAGES_SCHEMA.items()]
        )
        for side in ("a", "b")
    ]
    return pl.concat(parts)


def all_user_texts(column: str) -> pl.Expr:
    """Every user text of a conversation, joined in order (to compare with full_conversation's tail)."""
    return (
        pl.col(column)
        .list.eval(
            pl.element()
            .filter(pl.element().struct.field("role") == "user")
            .struct.field("content")
            .list.eval(pl.element().struct.field("text"))
            .list.join(TEXT_SEPARATOR, ignore_nulls=True)
        )
        .list.join("\u241e", ignore_nulls=True)
    )


def flatten_context_messages(frame: pl.DataFrame, dump: str | None = None) -> pl.DataFrame:
    """The entries of ``full_conversation`` that precede the vote's own turns, one row per slot.

    ``full_conversation`` repeats the vote's own turns at its end (already in arena.messages) after
    the turns of earlier evaluation orders of the session. Only those earlier turns are stored, so
    no text is stored twice. When the tail's user texts do not match ``conversation_a``'s, nothing
    is assumed: every entry of that battle is stored, with ``is_current`` true for the tail.
    """
    entries = frame.select(
        pl.col("id").alias("battle_id"),
        pl.col("full_conversation").alias("entry"),
        pl.int_ranges(0, pl.col("full_conversation").list.len().fill_null(0), dtype=pl.Int32)
        .alias("context_turn"),
        pl.col("conv_metadata").struct.field("turns").fill_null(0).alias("own_turns"),
        all_user_texts("conversation_a").alias("own_user_text"),
        pl.col("full_conversation").list.len().fill_null(0).alias("n_entries"),
    )
    tail_text = (
        pl.col("entry")
        .list.slice(pl.col("n_entries") - pl.col("own_turns"))
        .list.eval(
            pl.element().struct.field("user").struct.field("content")
            .list.eval(pl.element().struct.field("text"))
            .list.join(TEXT_SEPARATOR, ignore_nulls=True)
        )
        .list.join("\u241e", ignore_nulls=True)
    )
    entries = entries.with_columns(
        tail_matches=(pl.col("own_turns") <= pl.col("n_entries")) & (tail_text == pl.col("own_user_text"))
    ).filter(pl.col("n_entries") > 0)
    exploded = entries.explode("entry", "context_turn").with_columns(
        is_current=pl.col("context_turn") >= pl.col("n_entries") - pl.col("own_turns")
    )
    kept = exploded.filter(~pl.col("is_current") | ~pl.col("tail_matches"))
    slots = []
    for slot in ("user", "model_side_a", "model_side_b"):
        turn = pl.col("entry").struct.field(slot)
        slots.append(
            kept.filter(turn.is_not_null()).select(
                "battle_id",
                "context_turn",
                pl.lit(slot).alias("slot"),
                turn.struct.field("role").alias("role"),
                *_content_columns(turn.struct.field("content")),
                "is_current",
                pl.lit(dump, dtype=pl.String).alias("dump"),
            )
        )
    return (
        pl.concat(slots)
        .sort("battle_id", "context_turn", "slot", maintain_order=True)
        .select([pl.col(name).cast(dtype) for name, dtype in CONTEXT_MESSAGES_SCHEMA.items()])
    )
