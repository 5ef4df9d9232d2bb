"""One published board read as DuckDB's own rows (no Polars, no Arrow): what ``arena-pipeline leaderboard`` prints.

The same board, order and messages as :class:`~arena_pipeline.presentation.read.PublicationView` (both choose and
check a board with :func:`check_board`), read with a handful of small queries instead of every published frame,
so that the command starts and answers fast. No query binds a Python value (DuckDB would import pandas).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from arena_pipeline.constants import (
    BOARD_STATUS_TABLE,
    DUMP_LEADERBOARD_TABLE,
    LEADERBOARD_TABLE,
    SCHEMA,
    UNRATED_MODELS_TABLE,
)
from arena_pipeline.core.labels import CATEGORY_NAMES, ordered_categories, ordered_methods
from arena_pipeline.core.store.records import published_dump_row
from arena_pipeline.core.store.warehouse import quoted, read_snapshot, relation_exists, sql_string


class NoBoard(ValueError):
    """A known category has no board in the published dump; ``categories``: those with a board."""

    def __init__(self, message: str, categories: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.categories = tuple(categories)


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """``"did you mean 'math'? "`` for ``maths`` among ``choices`` (difflib's closest), else ``""``."""
    close = difflib.get_close_matches(name, list(dict.fromkeys(choices)), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def check_board(category: str, method: str, categories: Sequence[str], reasons: Sequence[str | None],
                methods: Sequence[str]) -> None:
    """Raise :class:`NoBoard` for a known category without a board (why: the first of ``reasons``, the
    category's ``board_status`` reasons), ValueError for an unknown category or method; both name the valid
    choices. ``categories``: the categories with a board, in board order; ``methods``: the category's."""
    listed = ", ".join(categories) or "none"
    if category not in categories:
        if category not in CATEGORY_NAMES and not reasons:
            raise ValueError(f"unknown category {category!r}; {did_you_mean(category, [*categories, *CATEGORY_NAMES])}"
                             f"valid categories: {listed}")
        raise NoBoard(f"category {category!r} has no leaderboard in the published dump "
                      f"({(reasons[0] if reasons else None) or 'too few battles?'}); categories with a leaderboard: "
                      f"{listed}", categories)
    if method not in methods:
        raise ValueError(f"unknown method {method!r} for category {category!r}; {did_you_mean(method, methods)}"
                         f"valid methods: {', '.join(methods)}")


@dataclass(frozen=True)
class BoardRows:
    """One board as rows (dicts by column name), shown models by rank then name, then the provisional ones.

    ``columns``: the leaderboard's columns; ``categories``: those with a board, in board order; ``revision``:
    the boards' dump revision (the leaderboard's when it names exactly one, else the published dumps row's);
    ``unrated``: the category's models with battles but no rating (model, battles, wins, losses, ties, reason)
    by name; ``no_board``: the categories without a shown board (category, status, reason), in table order.
    """

    columns: tuple[str, ...]
    ranked: list[dict[str, Any]]
    provisional: list[dict[str, Any]]
    categories: list[str]
    revision: str | None
    unrated: list[tuple[Any, ...]]
    no_board: list[tuple[Any, ...]]


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    cursor = con.execute(sql)
    return tuple(d[0] for d in cursor.description), cursor.fetchall()


def read_board(con: duckdb.DuckDBPyConnection, category: str, method: str, schema: str = SCHEMA,
               dump: str | None = None) -> BoardRows:
    """The published board of ``category`` and ``method`` (``dump``: that dump's own board, from
    ``schema.dump_leaderboard``, without unrated models or categories without a board), from one snapshot.

    Raises
    ------
    LookupError
        ``schema.leaderboard`` does not exist; with ``dump``: no per-dump boards are published.
    ValueError
        ``dump`` has no boards (the message lists the dumps that have); an unknown category or method;
        :class:`NoBoard` for a known category without a board.
    """
    if dump is None:
        table, where = quoted(schema, LEADERBOARD_TABLE), "TRUE"
    else:
        table, where = quoted(schema, DUMP_LEADERBOARD_TABLE), f"dump = {sql_string(dump)}"
    with read_snapshot(con):
        if dump is None and not relation_exists(con, schema, LEADERBOARD_TABLE):
            raise LookupError(f"{schema}.leaderboard does not exist")
        if dump is not None and not relation_exists(con, schema, DUMP_LEADERBOARD_TABLE):
            raise LookupError(f"{schema}.{DUMP_LEADERBOARD_TABLE} does not exist: no per-dump boards are published")
        categories = ordered_categories(r[0] for r in con.execute(f"SELECT DISTINCT category FROM {table} WHERE {where}")
                                        .fetchall())
        if dump is not None and not categories:
            dumps = [r[0] for r in con.execute(f"SELECT DISTINCT dump FROM {table} ORDER BY dump").fetchall()]
            raise ValueError(f"no boards for dump {dump!r}; dumps with boards: {', '.join(dumps) or 'none'}")
        status = dump is None and relation_exists(con, schema, BOARD_STATUS_TABLE)
        reasons = [r[0] for r in con.execute(f"SELECT reason FROM {quoted(schema, BOARD_STATUS_TABLE)} "
                                             f"WHERE category = {sql_string(category)}").fetchall()] if status else []
        methods = ordered_methods(r[0] for r in con.execute(
            f"SELECT DISTINCT method FROM {table} WHERE {where} AND category = {sql_string(category)}").fetchall())
        check_board(category, method, categories, reasons, methods)
        flagged = "provisional" in {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        columns, rows = _rows(con, f"SELECT * {'' if dump is None else 'EXCLUDE (dump) '}FROM {table} WHERE {where} AND category = {sql_string(category)} AND "
                                 f"method = {sql_string(method)} ORDER BY {'provisional NULLS FIRST, ' if flagged else ''}"
                                 "rank NULLS FIRST, model NULLS FIRST")
        board = [dict(zip(columns, row, strict=True)) for row in rows]
        revision = _revision(con, schema, table, where, columns)
        unrated = _rows(con, f"SELECT model, battles, wins, losses, ties, reason FROM "
                             f"{quoted(schema, UNRATED_MODELS_TABLE)} WHERE category = {sql_string(category)} "
                             "ORDER BY model NULLS FIRST")[1] \
            if dump is None and relation_exists(con, schema, UNRATED_MODELS_TABLE) else []
        no_board = _rows(con, f"SELECT category, status, coalesce(reason, '') FROM {quoted(schema, BOARD_STATUS_TABLE)} "
                              "WHERE status <> 'board'")[1] if status else []
    if not flagged:
        board = [{**r, "provisional": False, "provisional_reason": None} for r in board]
    return BoardRows(
        columns=(*columns, *(() if flagged else ("provisional", "provisional_reason"))),
        ranked=[r for r in board if r["provisional"] is False],
        provisional=[r for r in board if r["provisional"] is True],
        categories=categories, revision=revision, unrated=unrated, no_board=no_board)


def _revision(con: duckdb.DuckDBPyConnection, schema: str, table: str, where: str,
              columns: Sequence[str]) -> str | None:
    """The boards' dump revision: the one ``dump_revision`` they name, else the published dumps row's."""
    named = con.execute(f"SELECT DISTINCT dump_revision FROM {table} WHERE {where} AND dump_revision IS NOT NULL "
                        "LIMIT 2").fetchall() if "dump_revision" in columns else []
    if len(named) == 1:
        return named[0][0]
    row = published_dump_row(con, schema)
    return row["revision"] if row else None
