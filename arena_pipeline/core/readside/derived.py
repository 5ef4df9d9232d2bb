"""Tables derived from the published ones (no presentation): input outcomes, style per model, both
sides of each pair, raw against style-controlled ranks, the live publication's checks and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl

from arena_pipeline.constants import (
    BATTLES_TABLE,
    BENCHMARK_AGREEMENT_TABLE,
    BENCHMARK_SCORES_TABLE,
    QUARANTINE_TABLE,
    SCHEMA,
)
from arena_pipeline.core.dataset.categories import category_order
from arena_pipeline.core.dataset.schema import CONVERSATION_STYLE_COLUMNS
from arena_pipeline.core.labels import PRIMARY_METHOD, STYLE_METHODS
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.core.store.warehouse import quoted, read_frame, relation_exists
from arena_pipeline.core.validation.benchmarks import BENCHMARK_AGREEMENT_SCHEMA, BENCHMARK_SCORES_SCHEMA

#: Columns of :func:`style_profile`: mean per answer of each style feature, per model.
STYLE_PROFILE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(), "answers": pl.Int64(),
    **{feature: pl.Float64() for feature in CONVERSATION_STYLE_COLUMNS},
}
QUALITY_SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String(), "checks": pl.Int64(), "passed": pl.Int64(),
    "failed_errors": pl.Int64(), "failed_warnings": pl.Int64(),
}
#: Columns of :func:`loaded_rows`: per input outcome (``battles``, or a quarantine rule), its rows.
LOADED_ROWS_SCHEMA: dict[str, pl.DataType] = {"outcome": pl.String(), "rows": pl.Int64()}
RANK_CHANGES_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(), "model": pl.String(), "rank_bt": pl.Int64(), "rank_bt_style": pl.Int64(),
    "rank_change": pl.Int64(), "rating_bt": pl.Float64(), "rating_bt_style": pl.Float64(),
    "provisional": pl.Boolean(),
}
#: A check failed: its outcome is false or missing.
FAILED = ~pl.col("success").fill_null(False)


def table_frame(con: duckdb.DuckDBPyConnection, schema: str, table: str, empty: dict | None) -> pl.DataFrame | None:
    """``schema.table`` as a frame; when it does not exist, an empty frame of ``empty`` (None: None)."""
    if not relation_exists(con, schema, table):
        return None if empty is None else pl.DataFrame(schema=empty)
    return read_frame(con, f"SELECT * FROM {quoted(schema, table)}")


def of_category(frame: pl.DataFrame, category: str | None) -> pl.DataFrame:
    """The rows of one category (all rows for None)."""
    return frame if category is None else frame.filter(pl.col("category") == category)


def style_profile(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA) -> pl.DataFrame:
    """Per model (canonical name), answers and the mean per answer of each style feature over
    every battle of ``schema.battles`` (:data:`STYLE_PROFILE_SCHEMA`; empty without the table)."""
    if not relation_exists(con, schema, BATTLES_TABLE):
        return pl.DataFrame(schema=STYLE_PROFILE_SCHEMA)
    columns = {r[0] for r in con.execute(f"DESCRIBE {quoted(schema, BATTLES_TABLE)}").fetchall()}

    def side(s: str) -> str:
        name = f"model_{s}_canonical" if f"model_{s}_canonical" in columns else f"model_{s}"
        sums = [" + ".join(f'coalesce(CAST("{t.format(side=s)}" AS DOUBLE), 0)' for t in templates
                           if t.format(side=s) in columns) or "NULL"
                for templates in CONVERSATION_STYLE_COLUMNS.values()]
        feats = ", ".join(f"{expr} AS {f}" for expr, f in zip(sums, CONVERSATION_STYLE_COLUMNS, strict=True))
        return f'SELECT "{name}" AS model, {feats} FROM {quoted(schema, BATTLES_TABLE)}'

    means = ", ".join(f"avg({f}) AS {f}" for f in CONVERSATION_STYLE_COLUMNS)
    frame = con.execute(f"SELECT model, count(*) AS answers, {means} FROM ({side('a')} UNION ALL "
                        f"{side('b')}) GROUP BY model ORDER BY model").pl()
    return frame.select([pl.col(c).cast(t) for c, t in STYLE_PROFILE_SCHEMA.items()])


def loaded_rows(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA) -> pl.DataFrame:
    """The published dump's input rows by outcome: ``battles``, then each quarantine rule by rows
    (:data:`LOADED_ROWS_SCHEMA`; input rows = their sum; empty without the tables)."""
    if not (relation_exists(con, schema, BATTLES_TABLE) and relation_exists(con, schema, QUARANTINE_TABLE)):
        return pl.DataFrame(schema=LOADED_ROWS_SCHEMA)
    return con.execute(
        f"SELECT 'battles' AS outcome, count(*) AS rows FROM {quoted(schema, BATTLES_TABLE)} UNION ALL "
        f"(SELECT rule, count(*) FROM {quoted(schema, QUARANTINE_TABLE)} GROUP BY rule ORDER BY 2 DESC, 1)"
    ).pl().cast(LOADED_ROWS_SCHEMA)


def latest_quality_results(quality_results: pl.DataFrame, revision: str | None,
                           versions: dict[str, str] | None = None) -> pl.DataFrame:
    """The check results of the published tables, of each table only its latest check run:
    ``arena.quality_results`` accumulates every run of every dump, published or refused.

    With ``versions`` (table -> the live publication's version of it), the rows checking those exact
    versions: a later run of the same revision that the gate refused does not replace them. Else (a
    warehouse whose results name no version) the rows of ``revision``, when given."""
    out = quality_results if revision is None else quality_results.filter(pl.col("dump_revision") == revision)
    if versions and "table_version" in out.columns:
        published = pl.col("table_version") == pl.col("table_name").replace_strict(versions, default=None)
        out = out.filter(published) if out.select(published.any()).item() else out
    return out.filter(pl.col("checked_at") == pl.col("checked_at").max().over("table_name"))


def quality_summary(quality_results: pl.DataFrame | None) -> pl.DataFrame:
    """Checks per table: how many ran, passed, failed by severity (:data:`QUALITY_SUMMARY_SCHEMA`)."""
    if quality_results is None or quality_results.is_empty():
        return pl.DataFrame(schema=QUALITY_SUMMARY_SCHEMA)
    warning = (pl.col("severity") == "warning").fill_null(False)
    return (quality_results.group_by(table="table_name").agg(
        checks=pl.len(), passed=(~FAILED).sum(), failed_errors=(FAILED & ~warning).sum(),
        failed_warnings=(FAILED & warning).sum())
        .sort("table").select([pl.col(c).cast(t) for c, t in QUALITY_SUMMARY_SCHEMA.items()]))


def rank_changes(leaderboard: pl.DataFrame, category: str | None = None) -> pl.DataFrame:
    """The primary method's (``bt``) against the style-controlled one's (``bt_style``) rank per (category, model) on both boards (positive: moves up once
    style is controlled for); :data:`RANK_CHANGES_SCHEMA`, in board order, the shown models first.

    A model provisional on either board is ``provisional``: its ranks are among every model of the
    board, the shown models' among the shown ones, so the two are kept apart as on the boards."""
    lb = of_category(leaderboard, category)
    if "provisional" not in lb.columns:
        lb = lb.with_columns(provisional=pl.lit(False))
    bt, style = (lb.filter(pl.col("method") == m).select("category", "model", pl.col("rank").alias(f"rank_{m}"),
                                                         pl.col("rating").alias(f"rating_{m}"),
                                                         pl.col("provisional").fill_null(False).alias(f"provisional_{m}"))
                 for m in (PRIMARY_METHOD, STYLE_METHODS[0]))
    out = bt.join(style, on=["category", "model"]).with_columns(
        rank_change=pl.col("rank_bt") - pl.col("rank_bt_style"),
        provisional=pl.col("provisional_bt") | pl.col("provisional_bt_style"))
    return out.sort(category_order(), "category", "provisional", "rank_bt_style", "model").select(
        [pl.col(c).cast(t) for c, t in RANK_CHANGES_SCHEMA.items()])


def opponents(pairwise: pl.DataFrame) -> pl.DataFrame:
    """Every pair from both sides (``category``, ``model``, ``opponent``, ``battles``, ``wins``,
    ``losses``, ``ties`` (ties and both-bad), ``win_rate``, ``predicted``), by battles."""
    rate, predicted = pl.col("win_rate_1"), pl.col("predicted_win_rate_1")
    sides = [pairwise.select("category", pl.col(m).alias("model"), pl.col(o).alias("opponent"), "battles",
                             pl.col(w).alias("wins"), pl.col(lo).alias("losses"),
                             (pl.col("ties") + pl.col("both_bad")).alias("ties"), r.alias("win_rate"),
                             p.alias("predicted"))
             for m, o, w, lo, r, p in (("model_1", "model_2", "wins_1", "wins_2", rate, predicted),
                                       ("model_2", "model_1", "wins_2", "wins_1", 1 - rate, 1 - predicted))]
    return pl.concat(sides).sort("battles", "opponent", descending=[True, False])


@dataclass(frozen=True)
class Benchmarks:
    """The benchmark comparison of the live publication (``arena.benchmark_scores`` and
    ``arena.benchmark_agreement``, versions of that publication), or why there is none to show
    (``problem``: the benchmark file failed its check when the publication's tables were built)."""

    scores: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BENCHMARK_SCORES_SCHEMA))
    agreement: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BENCHMARK_AGREEMENT_SCHEMA))
    publication_id: int | None = None
    problem: str | None = None

    def names(self) -> list[str]:
        """The benchmarks compared, in the order read."""
        return self.agreement.get_column("benchmark").unique(maintain_order=True).to_list()

    def sources(self) -> list[str]:
        """The files (or Hub paths) the scores were read from."""
        return self.scores.get_column("source").drop_nulls().unique(maintain_order=True).to_list()

    def matched_models(self) -> int:
        return self.scores.filter(pl.col("matched")).get_column("canonical").n_unique()

    def reasons(self) -> pl.DataFrame:
        """Rows read per matching outcome (``reason``, ``rows``), most frequent first."""
        return (self.scores.group_by("reason").agg(rows=pl.len())
                .sort("rows", "reason", descending=[True, False]))


def live_benchmarks(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA,
                    live: dict[str, Any] | None = None) -> Benchmarks | None:
    """The live publication's benchmark comparison: ``schema.benchmark_scores`` and
    ``schema.benchmark_agreement`` when the publication (the newest of ``schema.publications``;
    ``live``: its row when the caller has read it) published both and they hold rows; a
    :class:`Benchmarks` with only ``problem`` when the benchmark file failed its check as its
    versions were built (recorded in their settings, ``benchmarks.problem``); else None (no file
    configured, or a publication from before the tables were published by the gate). Call inside a
    transaction for a consistent snapshot."""
    live = live or live_publication(con, schema)
    if live is None or BENCHMARK_SCORES_TABLE not in live["tables"] or BENCHMARK_AGREEMENT_TABLE not in live["tables"]:
        return None
    recorded = ((live.get("settings") or {}).get("tables") or {}).get(BENCHMARK_SCORES_TABLE) or {}
    problem = (recorded.get("benchmarks") or {}).get("problem")
    if problem:
        return Benchmarks(problem=problem, publication_id=live["publication_id"])
    frames = [table_frame(con, schema, BENCHMARK_SCORES_TABLE, None), table_frame(con, schema, BENCHMARK_AGREEMENT_TABLE, None)]
    if any(f is None or f.is_empty() for f in frames):
        return None
    return Benchmarks(*frames, publication_id=live["publication_id"])
