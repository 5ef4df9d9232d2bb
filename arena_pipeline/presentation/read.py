"""One read API over the published views: Polars frames for the CLI, the report and the UI previews.

Category order and labels come from ``core.labels`` (``ordered_categories``, ``category_label``), as do
method order and labels (``ordered_methods``, ``method_label``); nothing else decides them. The CLI's
``leaderboard`` reads its one board with ``presentation.read_board`` (rows, no Polars), which chooses and
checks a board with the same :func:`~arena_pipeline.presentation.read_board.check_board`. The derived
tables (rank changes, opponents, style per model, quality summary) are computed by
``core.readside.derived``; this module reads a consistent snapshot and hands out its frames.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import duckdb
import polars as pl

from arena_pipeline.constants import (
    BOARD_STATUS_TABLE,
    DUMP_LEADERBOARD_TABLE,
    LEADERBOARD_TABLE,
    MODEL_FIT_CALIBRATION_TABLE,
    MODEL_FIT_TABLE,
    PAIRWISE_TABLE,
    PUBLICATION_CHANGES_TABLE,
    QUALITY_RESULTS_TABLE,
    SCHEMA,
    STYLE_COEFFICIENTS_TABLE,
    UNRATED_MODELS_TABLE,
)
from arena_pipeline.core.changes.changes import CHANGES_SCHEMA
from arena_pipeline.core.dataset.categories import category_order
from arena_pipeline.core.dataset.schema import CONVERSATION_STYLE_COLUMNS
from arena_pipeline.core.freshness.freshness import Pending, unpublished_revisions
from arena_pipeline.core.labels import PRIMARY_METHOD, ordered_categories, ordered_methods
from arena_pipeline.core.ranking import (
    BOARD_STATUS_SCHEMA,
    PAIRWISE_SCHEMA,
    STYLE_COEFFICIENTS_SCHEMA,
    UNRATED_MODELS_SCHEMA,
    RankingOutput,
)
from arena_pipeline.core.ranking.model_fit import MODEL_FIT_CALIBRATION_SCHEMA, MODEL_FIT_SCHEMA
from arena_pipeline.core.readside.derived import (
    FAILED,
    LOADED_ROWS_SCHEMA,
    STYLE_PROFILE_SCHEMA,
    Benchmarks,
    latest_quality_results,
    live_benchmarks,
    loaded_rows,
    of_category,
    opponents,
    quality_summary,
    rank_changes,
    style_profile,
    table_frame,
)
from arena_pipeline.core.store.records import live_publication, published_dump_row
from arena_pipeline.core.store.warehouse import quoted, read_frame, read_snapshot, relation_exists
from arena_pipeline.core.validation.benchmarks import BENCHMARK_AGREEMENT_SCHEMA, PANEL_POINTS_SCHEMA, matched_points
from arena_pipeline.presentation.read_board import NoBoard, check_board  # noqa: F401 - NoBoard: re-exported


@dataclass(frozen=True)
class PublicationView:
    """The read model of one publication: its frames, read from one warehouse snapshot (or built from a
    ranking run). Not to be confused with lmarena.ai's published board, the external reference board."""

    leaderboard: pl.DataFrame
    pairwise: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PAIRWISE_SCHEMA))
    style_coefficients: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=STYLE_COEFFICIENTS_SCHEMA))
    quality_results: pl.DataFrame | None = None
    dump: dict[str, Any] | None = None
    unrated_models: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=UNRATED_MODELS_SCHEMA))
    board_status: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BOARD_STATUS_SCHEMA))
    style_profile: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STYLE_PROFILE_SCHEMA))
    #: The live publication's benchmark comparison (its own versions); None: no panel (none configured, or a
    #: publication from before the benchmark tables were published by the gate).
    benchmarks: Benchmarks | None = None
    #: Where the input rows went (``core.readside.derived.loaded_rows``): the battles, then each quarantine rule.
    loaded: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=LOADED_ROWS_SCHEMA))
    #: The live leaderboard's alignment to a published board (``core.validation.external.alignment_record``, kept in
    #: arena.publications' settings); None: not asked for.
    alignment: dict[str, Any] | None = None
    #: Held-out goodness of fit of each board and its calibration deciles (``core.ranking.model_fit``).
    model_fit: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MODEL_FIT_SCHEMA))
    model_fit_calibration: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=MODEL_FIT_CALIBRATION_SCHEMA))
    #: ``arena.publication_changes``: the boards against the previous publication's (``core.changes.changes``).
    changes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CHANGES_SCHEMA))
    #: Dump revisions fetched after the live one and not published, with why (``core.freshness.freshness``), as of
    #: reading: the page says the board is not the newest dump's.
    pending: tuple[Pending, ...] = ()
    #: The live publication's id (``arena.publications``): the report page carries it, so that a page behind the
    #: live publication is told (``presentation.report.page_publication``); None: not read from a publication.
    publication_id: int | None = None

    @classmethod
    def from_output(cls, output: RankingOutput, **extra: Any) -> PublicationView:
        """The frames of a ``compute_rankings`` result (tests, benchmarks), plus ``extra`` fields."""
        frames = {k: getattr(output, k) for k in ("unrated_models", "board_status")
                  if getattr(output, k) is not None}
        return cls(output.leaderboard, output.pairwise, output.style_coefficients, **frames, **extra)

    @cached_property
    def revision(self) -> str | None:
        """The boards' dump revision: the leaderboard's when it names exactly one, else the published
        dumps row's."""
        lb = self.leaderboard
        named = lb.get_column("dump_revision").drop_nulls().unique().to_list() if "dump_revision" in lb.columns else []
        return named[0] if len(named) == 1 else (self.dump or {}).get("revision")

    def categories(self) -> list[str]:
        """Categories with a board, in board order."""
        return ordered_categories(self.leaderboard.get_column("category").to_list())

    def shown_categories(self) -> list[str]:
        """Categories whose primary board shows a model (not all provisional), in board order."""
        return [c for c in self.categories()
                if not self.board(c, self.primary_method(c)).get_column("provisional").all()]

    @cached_property
    def _boards(self) -> dict[tuple[str, str], pl.DataFrame]:
        lb = self.leaderboard
        if "provisional" not in lb.columns:
            lb = lb.with_columns(provisional=pl.lit(False), provisional_reason=pl.lit(None, pl.String))
        return lb.sort("provisional", "rank", "model").partition_by("category", "method", as_dict=True)

    def methods(self, category: str) -> list[str]:
        """Methods on the category's boards, in ``METHODS`` order (unknown after)."""
        return ordered_methods(m for c, m in self._boards if c == category)

    def board(self, category: str, method: str) -> pl.DataFrame:
        """One board: shown models by rank, then the provisional ones (flag ``provisional``)."""
        empty = next(iter(self._boards.values())).clear() if self._boards else self.leaderboard
        return self._boards.get((category, method), empty)

    def check_board(self, category: str, method: str) -> None:
        """Raise :class:`NoBoard` for a known category without a board (why, from ``board_status``),
        ValueError for an unknown category or method; both name the valid choices (:func:`check_board`)."""
        reasons = of_category(self.board_status, category).get_column("reason").to_list()
        check_board(category, method, self.categories(), reasons, self.methods(category))

    def primary_method(self, category: str) -> str:
        methods = self.methods(category)
        return PRIMARY_METHOD if PRIMARY_METHOD in methods else methods[0]

    def no_board(self) -> pl.DataFrame:
        """``board_status`` rows of the categories without a shown board (why), in board order."""
        return self.board_status.filter(pl.col("status") != "board")

    def unrated(self, category: str | None = None) -> pl.DataFrame:
        """Models with battles but no rating (all, or one category's), in board order."""
        return of_category(self.unrated_models, category).sort(category_order(), "category", "model")

    def style(self, category: str) -> pl.DataFrame:
        """The category's style coefficients."""
        return of_category(self.style_coefficients, category)

    def rank_changes(self, category: str | None = None) -> pl.DataFrame:
        """:func:`~arena_pipeline.core.readside.derived.rank_changes` of the leaderboard."""
        return rank_changes(self.leaderboard, category)

    def models(self) -> list[str]:
        """Every model on a board, by best overall (then any) rank, then name."""
        lb = self.leaderboard.filter(pl.col("method") == PRIMARY_METHOD) if PRIMARY_METHOD in self.leaderboard.get_column(
            "method") else self.leaderboard
        return (lb.with_columns(_o=pl.col("category") != "overall").sort("_o", "rank", "model")
                .get_column("model").unique(maintain_order=True).to_list())

    @cached_property
    def _opponents(self) -> dict[tuple[str, str], pl.DataFrame]:
        """Every pair from both sides: (category, model) -> its opponents, by battles."""
        return opponents(self.pairwise).partition_by("category", "model", as_dict=True, include_key=False)

    def profile(self, model: str) -> dict[str, Any]:
        """A model's panel: ``ratings`` (its primary rating per category, board order),
        ``category`` (its first category) and ``opponents`` there (record and win rate against each
        opponent, by battles), ``style`` (its mean style per answer beside the field's mean; empty
        without battles)."""
        ratings = self._primary_rows.get((model,), self.leaderboard.clear())
        first = ratings.get_column("category")[0] if ratings.height else None
        against = self._opponents.get((first, model), pl.DataFrame(schema={"opponent": pl.String}))
        own = self._style_rows.get(model)
        style = pl.DataFrame({"feature": list(CONVERSATION_STYLE_COLUMNS), "model": own, "field": self._field_style}
                             if own else None, schema={"feature": pl.String, "model": pl.Float64, "field": pl.Float64})
        return {"ratings": ratings, "category": first, "opponents": against, "style": style}

    @cached_property
    def _style_rows(self) -> dict[str, tuple[float, ...]]:
        return {r[0]: r[1:] for r in self.style_profile.select("model", *CONVERSATION_STYLE_COLUMNS).iter_rows()}

    @cached_property
    def _primary_rows(self) -> dict[tuple[str], pl.DataFrame]:
        """Every category's primary-board rows (board order) by model."""
        boards = [self.board(c, self.primary_method(c)) for c in self.categories()]
        frame = pl.concat(boards, how="vertical_relaxed") if boards else self.leaderboard
        return frame.partition_by("model", as_dict=True)

    @cached_property
    def _field_style(self) -> tuple[float, ...]:
        """The mean per answer of each style feature over every answer."""
        sp = self.style_profile
        return sp.select((pl.col(f) * pl.col("answers")).sum() / pl.col("answers").sum()
                         for f in CONVERSATION_STYLE_COLUMNS).row(0)

    @cached_property
    def _benchmark_points(self) -> dict[tuple[str, str, str], pl.DataFrame]:
        if self.benchmarks is None:
            return {}
        points = matched_points(self.leaderboard, self.benchmarks.scores)
        return points.partition_by("category", "method", "benchmark", as_dict=True)

    def benchmark_points(self, category: str, method: str, benchmark: str) -> pl.DataFrame:
        """Each matched model's rating (with its interval) beside its benchmark score, by our rank
        (:data:`~arena_pipeline.core.validation.benchmarks.PANEL_POINTS_SCHEMA`; empty without a match)."""
        return self._benchmark_points.get((category, method, benchmark), pl.DataFrame(schema=PANEL_POINTS_SCHEMA))

    def benchmark_agreement(self, category: str | None = None, method: str | None = None) -> pl.DataFrame:
        """``arena.benchmark_agreement`` rows (of one category and/or method), in table order."""
        agreement = self.benchmarks.agreement if self.benchmarks else pl.DataFrame(schema=BENCHMARK_AGREEMENT_SCHEMA)
        out = of_category(agreement, category)
        return out if method is None else out.filter(pl.col("method") == method)

    def alignment_of(self, category: str, method: str) -> dict[str, Any] | None:
        """One board's alignment entry (``core.validation.external.ALIGNMENT_SCHEMA`` plus the board's name and date),
        ``{"problem": ...}`` when alignment was asked for and not made, None when it was not asked for."""
        record = self.alignment
        if not record:
            return None
        if record.get("problem"):
            return {"problem": record["problem"], "board_name": record.get("board_name")}
        entry = next((b for b in record.get("boards", []) if b.get("category") == category
                      and b.get("method") == method), None)
        if entry is None:
            return None
        anchor = record.get("anchor_rating")
        return {**entry, "board_name": record.get("board_name"), "board_date": record.get("board_date"),
                "reference_at": anchor + entry["shift"] if entry.get("aligned") and anchor is not None else None}

    def fit_summary(self) -> pl.DataFrame:
        """``arena.model_fit`` in board order."""
        return self.model_fit.sort(category_order(), "category", "method")

    def calibration(self, category: str) -> pl.DataFrame:
        """One board's ``arena.model_fit_calibration`` rows (the primary method), by predictor and decile."""
        rows = of_category(self.model_fit_calibration, category).filter(pl.col("method") == PRIMARY_METHOD)
        return rows.sort("predictor", "decile")

    def changes_of(self, category: str, method: str) -> pl.DataFrame:
        """One board's rows of ``arena.publication_changes``: the kept models by the size of their
        move (largest first), then the new, then the gone."""
        return self.changes.filter((pl.col("category") == category) & (pl.col("method") == method))

    def quality_summary(self) -> pl.DataFrame:
        """Checks per table (:func:`~arena_pipeline.core.readside.derived.quality_summary`)."""
        return quality_summary(self.quality_results)

    def failed_checks(self) -> pl.DataFrame:
        """The ``quality_results`` rows of the checks that failed (a null outcome counts as failed)."""
        q = self.quality_results
        return q.filter(FAILED) if q is not None else pl.DataFrame()


def read_published(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA, *, style: bool = True) -> PublicationView:
    """Every published frame in one transaction (a consistent snapshot); ``style``: also the per-model
    ``core.readside.derived.style_profile`` (an aggregate over ``schema.battles``; the report's panels).

    Missing optional tables give empty frames of their schema (``quality_results`` and the dumps
    row: None; ``benchmarks``: None unless they describe the live publication, see
    :func:`~arena_pipeline.core.readside.derived.live_benchmarks`); ``quality_results`` keeps the checks of
    the live publication's table versions (:func:`~arena_pipeline.core.readside.derived.latest_quality_results`).

    Raises
    ------
    LookupError
        ``schema.leaderboard`` does not exist.
    """
    with read_snapshot(con):
        leaderboard = table_frame(con, schema, LEADERBOARD_TABLE, None)
        if leaderboard is None:
            raise LookupError(f"{schema}.leaderboard does not exist")
        live = live_publication(con, schema)
        published = PublicationView(
            leaderboard,
            table_frame(con, schema, PAIRWISE_TABLE, PAIRWISE_SCHEMA),
            table_frame(con, schema, STYLE_COEFFICIENTS_TABLE, STYLE_COEFFICIENTS_SCHEMA),
            table_frame(con, schema, QUALITY_RESULTS_TABLE, None),
            published_dump_row(con, schema),
            table_frame(con, schema, UNRATED_MODELS_TABLE, UNRATED_MODELS_SCHEMA),
            table_frame(con, schema, BOARD_STATUS_TABLE, BOARD_STATUS_SCHEMA),
            style_profile(con, schema) if style else pl.DataFrame(schema=STYLE_PROFILE_SCHEMA),
            live_benchmarks(con, schema, live),
            loaded_rows(con, schema),
            alignment=_alignment(live),
            model_fit=table_frame(con, schema, MODEL_FIT_TABLE, MODEL_FIT_SCHEMA),
            model_fit_calibration=table_frame(con, schema, MODEL_FIT_CALIBRATION_TABLE,
                                              MODEL_FIT_CALIBRATION_SCHEMA),
            changes=table_frame(con, schema, PUBLICATION_CHANGES_TABLE, CHANGES_SCHEMA),
            pending=tuple(unpublished_revisions(con, schema)),
            publication_id=None if live is None else int(live["publication_id"]),
        )
    if published.quality_results is not None:
        published = replace(published, quality_results=latest_quality_results(
            published.quality_results, published.revision, (live or {}).get("tables")))
    return published


def _alignment(live: dict[str, Any] | None) -> dict[str, Any] | None:
    """The alignment record kept with the live publication's leaderboard version (None: none)."""
    tables = ((live or {}).get("settings") or {}).get("tables") or {}
    return (tables.get(LEADERBOARD_TABLE) or {}).get("alignment")


def read_dump_boards(con: duckdb.DuckDBPyConnection, dump: str, schema: str = SCHEMA) -> PublicationView:
    """One loaded dump's own boards (its rows of ``schema.dump_leaderboard``, without the ``dump`` column) as
    the leaderboard of a :class:`PublicationView` (the other frames empty: they describe the combined boards).

    Raises
    ------
    LookupError
        No per-dump boards are published (one dump loaded, or a warehouse from before them).
    ValueError
        ``dump`` has no boards; the message lists the dumps that have.
    """
    if not relation_exists(con, schema, DUMP_LEADERBOARD_TABLE):
        raise LookupError(f"{schema}.{DUMP_LEADERBOARD_TABLE} does not exist: no per-dump boards are published")
    table = quoted(schema, DUMP_LEADERBOARD_TABLE)
    with read_snapshot(con):  # the board and the dumps row of one publication
        board = read_frame(con, f"SELECT * EXCLUDE (dump) FROM {table} WHERE dump = ?", [dump])
        dumps = [] if board.height else [
            r[0] for r in con.execute(f"SELECT DISTINCT dump FROM {table} ORDER BY dump").fetchall()]
        row = published_dump_row(con, schema)
    if board.is_empty():
        raise ValueError(f"no boards for dump {dump!r}; dumps with boards: {', '.join(dumps) or 'none'}")
    return PublicationView(board, dump=row)


def when(value: Any) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM UTC`` (other values as text, None as '')."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return "" if value is None else str(value)
