"""What changed between two publications' boards: new and gone models, rating moves with an interval, rank moves.

A rating change Δ = R_after − R_before compares two fits. How far Δ may move by chance depends on
how the two fits' votes relate (``data_relation``), and is modelled through the correlation ρ of
the two estimates: with s₀, s₁ the standard errors of the ratings (half the 95% interval / 1.96),

    Var(Δ) = s₀² + s₁² − 2 ρ s₀ s₁.

- **same votes** (a re-rank of the same battles with other settings): the votes' noise moves both
  fits alike, ρ = 1, Var(Δ) = (s₀ − s₁)²: the interval only allows for the difference of the two
  widths, and a move beyond it is caused by the settings, not by the votes.
- **votes added** (every earlier battle is in the new dump, unchanged): the earlier fit uses a
  subset of the new one's votes. For an efficient estimator the full-data estimate is the
  precision-weighted mean of the subset's and the added votes' estimates, so
  Cov(before, after) = Var(after) and Var(Δ) = max(s₀² − s₁², 0) (ρ = min(s₁ / s₀, 1)): the interval
  of how far the added votes alone could move the rating if the model's strength had not changed.
  The floor keeps the variance non-negative and continuous in s₁ (issue 36: before, s₁ ≥ s₀ fell
  back to independence while s₁ just under s₀ gave a near-zero variance). When the ranking settings
  changed too (another estimator), the assumption does not hold and ρ = 0 is used instead.
- **votes changed** (earlier battles are missing or differ: other aliases, a dump that dropped
  votes) and **unknown** (the earlier battles are no longer kept): ρ = 0, the fits taken as
  independent, Var(Δ) = s₀² + s₁², the widest of the three (conservative for overlapping votes).

The relation is decided per board (:func:`board_relations`): the votes of a board are the rows that
enter it, its category's battles (``battle_categories``) with their ids, canonical models and winners,
and for a style-controlled board (``bt_style``) their style counts too. The same battles regenerated
with other metadata (a language, a style count) are not "same votes" on the boards they move (a
language board, the ``bt_style`` boards), and still are on the others.

The interval of the change is Δ ± 1.96 √Var(Δ); ``beyond_interval`` says 0 is outside it, by more than
:data:`ROUNDING` (the move is larger than the intervals allow). Ratings are differences from the board's
reference model: when the two boards are pinned on different reference models (or one is centred), the
change has no interval.

**Which standard errors.** s₀ and s₁ are read from the sandwich of the board's primary interval (the
``cluster_sandwich_*`` columns when the primary interval is clustered, else ``sandwich_*``), whichever
the displayed interval is: a bootstrap's width is Monte-Carlo noise (100 rounds), and s₀² − s₁² of two
noisy widths is a noise-driven test. A board without a sandwich (``spectral``) uses its primary
interval. ``change_variance`` says which formula and which intervals each row used.

**Votes added on a clustered board.** The difference of two clustered (CR3) variances is itself noisy
where a model has few sessions (the grown-dump null simulation, ``benchmarks/bench_changes_null.py``,
flagged 8.9% of unchanged models under 1,000 battles, 1.5% of them with a zero-width interval from
s₁ ≥ s₀ by noise). There the variance is the vote-level sandwich's difference, whose units are votes,
scaled by the later board's design effect: Var(Δ) = max(v₀² − v₁², 0) · (s₁ / v₁)², with v₀, v₁ the
vote-level (``sandwich_*``) standard errors; it assumes the added votes' sessions are like the earlier
ones (the same design effect), and ρ is the correlation this variance implies.

**Alignment** (``ARENA_ALIGN_TO_PUBLISHED_BOARD``). An aligned board is moved by its shift; the shift
is re-estimated at every publication, so comparing aligned ratings would add the shift's change to
every model (and flag the reference, whose rating moves by it). ``rating_change`` and its interval are
therefore of the ratings without the shifts (our reference scale); ``shift_before``/``shift_after``
(0 on a board that is not aligned) and ``shift_change`` give the shift's own move, so the displayed
rating moved by ``rating_change + shift_change``. Turning alignment on or off, or aligning to another
published board, is a settings change (``settings_changed``); since the comparison is on the
unaligned scale, it does not change the estimator, so the variance still follows the ranking settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import duckdb
import polars as pl

from arena_pipeline.constants import (
    BATTLE_CATEGORIES_TABLE,
    BATTLES_TABLE,
    LEADERBOARD_TABLE,
    PUBLICATION_CHANGES_TABLE,
    PUBLICATIONS_TABLE,
    VERSIONS_SCHEMA,
)
from arena_pipeline.core.dataset.categories import category_order
from arena_pipeline.core.labels import STYLE_METHODS
from arena_pipeline.core.publication.gate import publication_settings
from arena_pipeline.core.publication.settings_source import alignment_settings, ranking_settings
from arena_pipeline.core.ranking import RankingConfig
from arena_pipeline.core.ranking.style_control import style_columns
from arena_pipeline.core.store.records import VERSIONS, publication
from arena_pipeline.core.store.versions import base_version, versioned
from arena_pipeline.core.store.warehouse import quoted, read_frame, relation_exists

#: z of a two-sided 95% interval (the boards' intervals are 95%).
Z95 = 1.959963984540054
#: Points a change must clear its interval by to be beyond it: an aligned board's float64 ratings moved
#: back by their shift, (R + shift) - shift, are R within ~1e-13 points, and the reference (s = 0 on
#: both boards) or a refit of the same votes (an interval of width 0) must not be flagged for that.
ROUNDING = 1e-9
SAME_VOTES = "same votes"
VOTES_ADDED = "votes added"
VOTES_CHANGED = "votes changed"
UNKNOWN = "unknown"
#: The battle columns that make two votes the same vote (the canonical names: aliases change them).
VOTE_COLUMNS = ("id", "model_a_canonical", "model_b_canonical", "winner")
#: :func:`board_relations`: per category, how the votes of its boards relate (``style_relation``: with
#: their style counts, for :data:`STYLE_METHODS`).
RELATIONS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(), "data_relation": pl.String(), "style_relation": pl.String()}

#: Columns of ``arena.publication_changes``: one row per category, method and model on either board.
CHANGES_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(), "method": pl.String(), "model": pl.String(),
    "status": pl.String(),  # 'new', 'gone' or 'kept'
    "since_publication": pl.Int64(), "since_revision": pl.String(), "since_published_at": pl.Datetime("us"),
    "data_relation": pl.String(), "settings_changed": pl.Boolean(), "same_reference": pl.Boolean(),
    "rating_before": pl.Float64(), "rating_after": pl.Float64(), "rating_change": pl.Float64(),
    "change_ci_lower": pl.Float64(), "change_ci_upper": pl.Float64(), "correlation": pl.Float64(),
    "beyond_interval": pl.Boolean(),
    # the variance of the change: formula and the intervals its standard errors come from (module doc)
    "change_variance": pl.String(),
    # the alignment shifts (0: not aligned); rating_change is without them (module doc)
    "shift_before": pl.Float64(), "shift_after": pl.Float64(), "shift_change": pl.Float64(),
    "rank_before": pl.Int64(), "rank_after": pl.Int64(), "rank_change": pl.Int64(),
    "rank_ub_before": pl.Int64(), "rank_ub_after": pl.Int64(), "rank_ub_change": pl.Int64(),
    "battles_before": pl.Int64(), "battles_after": pl.Int64(),
    "provisional_before": pl.Boolean(), "provisional_after": pl.Boolean(),
}
_BOARD_COLUMNS = ("rating", "ci_lower", "ci_upper", "ci_method", "rank", "rank_ub", "n_battles", "provisional",
                  "se_lower", "se_upper", "se_source", "vote_lower", "vote_upper", "shift")
_KEY = ["category", "method", "model"]


def board_relations(con: duckdb.DuckDBPyConnection, before: Mapping[str, str | None] | None,
                    after: Mapping[str, str | None] | None) -> pl.DataFrame:
    """How the votes entering each board of two publications relate, per category (:data:`RELATIONS_SCHEMA`).

    ``before``/``after`` map table names to the versions a publication shows (its ``tables``): the
    battles and battle_categories versions decide. The votes of a board are the rows of its category
    (``battle_categories``) with their :data:`VOTE_COLUMNS`; a style-controlled board
    (:data:`STYLE_METHODS`) reads their style counts as well (``style_relation``). Per category and for
    each of the two: :data:`SAME_VOTES` (the same rows), :data:`VOTES_ADDED` (every earlier row is
    still there, rows were added), :data:`VOTES_CHANGED` (an earlier row is missing or differs: another
    winner, another canonical model, other style counts, a vote that left the category), or
    :data:`UNKNOWN` for every category when a version is missing (dropped by retention) or predates a
    vote column. Same battles with other metadata (a language or a style count changed) are therefore
    not "same votes" on the boards they move, and still are on the others (issue 36).

    The comparison runs in DuckDB (each battle compared once, then counted per category), not in Python.
    """
    # a board's votes: the battles and their categories
    versions = [((side or {}).get(BATTLES_TABLE), (side or {}).get(BATTLE_CATEGORIES_TABLE)) for side in (before, after)]
    if any(v is None for side in versions for v in side):
        return pl.DataFrame(schema=RELATIONS_SCHEMA)
    (old_b, old_c), (new_b, new_c) = ([base_version(con, v) for v in side] for side in versions)
    if not all(relation_exists(con, VERSIONS_SCHEMA, n) for n in (old_b, old_c, new_b, new_c)):
        return pl.DataFrame(schema=RELATIONS_SCHEMA)
    if (old_b, old_c) == (new_b, new_c):  # the same tables: every board has the same votes
        return read_frame(con, f"SELECT DISTINCT category, '{SAME_VOTES}' AS data_relation, "
                               f"'{SAME_VOTES}' AS style_relation FROM {versioned(old_c)}").cast(RELATIONS_SCHEMA)
    columns = [[d[0] for d in con.execute(f"SELECT * FROM {versioned(n)} LIMIT 0").description] for n in (old_b, new_b)]
    if not all(set(VOTE_COLUMNS) <= set(c) for c in columns):  # a version from before a vote column
        return pl.DataFrame(schema=RELATIONS_SCHEMA)
    style = [c for c in style_columns() if c in columns[0] or c in columns[1]]

    def column(side: str, name: str, present: list[str]) -> str:
        return f'{side}."{name}"' if name in present else "NULL::BIGINT"

    def same(names: list[str]) -> str:
        return " AND ".join(f"{column('o', c, columns[0])} IS NOT DISTINCT FROM {column('n', c, columns[1])}"
                            for c in names)

    # each battle compared once (a full join on the id), then each (battle, category) row: a row is the
    # same on both sides when it is in both categories tables and its battle is the same vote; a row of
    # one side only (or of another vote) is gone from the earlier board or added to the later one
    frame = read_frame(con, f"""
        WITH votes AS (
            SELECT coalesce(o.id, n.id) AS id, o.id IS NOT NULL AS in_old, n.id IS NOT NULL AS in_new,
                   coalesce({same(list(VOTE_COLUMNS))}, false) AS same_vote,
                   coalesce({same([*VOTE_COLUMNS, *style])}, false) AS same_style
            FROM {versioned(old_b)} o FULL JOIN {versioned(new_b)} n ON o.id = n.id),
        tagged AS (
            SELECT coalesce(o.battle_id, n.battle_id) AS id, coalesce(o.category, n.category) AS category,
                   o.battle_id IS NOT NULL AS old_row, n.battle_id IS NOT NULL AS new_row
            FROM {versioned(old_c)} o FULL JOIN {versioned(new_c)} n
              ON o.battle_id = n.battle_id AND o.category = n.category),
        rows AS (
            SELECT t.category, t.old_row AND v.in_old AS before, t.new_row AND v.in_new AS after,
                   t.old_row AND t.new_row AND v.same_vote AS same_vote,
                   t.old_row AND t.new_row AND v.same_style AS same_style
            FROM tagged t JOIN votes v USING (id))
        SELECT category,
               count(*) FILTER (WHERE before AND NOT same_vote) AS gone,
               count(*) FILTER (WHERE after AND NOT same_vote) AS added,
               count(*) FILTER (WHERE before AND NOT same_style) AS style_gone,
               count(*) FILTER (WHERE after AND NOT same_style) AS style_added
        FROM rows WHERE before OR after GROUP BY category""")

    def relation(gone: str, added: str) -> pl.Expr:
        return (pl.when(pl.col(gone) > 0).then(pl.lit(VOTES_CHANGED)).when(pl.col(added) > 0)
                .then(pl.lit(VOTES_ADDED)).otherwise(pl.lit(SAME_VOTES)))

    return frame.select("category", data_relation=relation("gone", "added"),
                        style_relation=relation("style_gone", "style_added")).sort("category").cast(RELATIONS_SCHEMA)


def overall_relation(relations: pl.DataFrame) -> str:
    """One relation for a publication's boards (:func:`compose` of every board's): :data:`UNKNOWN`
    without any board relation."""
    if relations.is_empty():
        return UNKNOWN
    return compose(relations.get_column("data_relation").to_list() + relations.get_column("style_relation").to_list())


def _standard_error(prefix: str, interval: str = "se") -> pl.Expr:
    """The rating's standard error from the 95% interval the test reads (``se_lower``/``se_upper``,
    :func:`_test_interval`; ``interval="vote"``: the vote-level sandwich of a clustered board): 0 for the
    reference model (pinned: both bounds missing on a board with an interval method), null on a board
    without intervals."""
    lo, hi, method = (pl.col(f"{c}_{prefix}") for c in (f"{interval}_lower", f"{interval}_upper", "ci_method"))
    has_interval = method.is_not_null() & (method != "none")
    return (pl.when(lo.is_not_null() & hi.is_not_null()).then((hi - lo) / (2 * Z95))
            .when(has_interval & lo.is_null() & hi.is_null()).then(0.0))


def _test_interval(board: pl.DataFrame) -> pl.DataFrame:
    """``board`` with ``se_lower``/``se_upper``/``se_source``: the sandwich of its primary interval
    (``cluster_sandwich_*`` for a clustered primary, else ``sandwich_*``) where the board has it, else
    the primary interval itself (``spectral``, or a leaderboard from before those columns)."""
    clustered = pl.col("ci_method").fill_null("").str.starts_with("cluster_")
    exprs = []
    for side in ("lower", "upper"):
        expr = pl.col(f"ci_{side}")
        for name, when in (("sandwich", ~clustered), ("cluster_sandwich", clustered)):
            if f"{name}_{side}" in board.columns and f"{name}_lower" in board.columns:
                has = pl.col(f"{name}_lower").is_not_null().any().over("category", "method")
                expr = pl.when(when & has).then(pl.col(f"{name}_{side}")).otherwise(expr)
        exprs.append(expr.alias(f"se_{side}"))
    source = pl.col("ci_method")
    for name, when in (("sandwich", ~clustered), ("cluster_sandwich", clustered)):
        if f"{name}_lower" in board.columns:
            has = pl.col(f"{name}_lower").is_not_null().any().over("category", "method")
            source = pl.when(when & has).then(pl.lit(name)).otherwise(source)
    # a clustered board's vote-level sandwich: the votes-added variance of a clustered test (module doc)
    if "sandwich_lower" in board.columns and "sandwich_upper" in board.columns:
        vote = clustered & pl.col("sandwich_lower").is_not_null().any().over("category", "method")
        exprs += [pl.when(vote).then(pl.col(f"sandwich_{side}")).alias(f"vote_{side}") for side in ("lower", "upper")]
    else:
        exprs += [pl.lit(None, pl.Float64).alias(f"vote_{side}") for side in ("lower", "upper")]
    return board.with_columns(*exprs, se_source=source)


def _without_shift(board: pl.DataFrame, alignment: Mapping | None) -> pl.DataFrame:
    """``board`` moved back by each aligned board's shift (``alignment``: the leaderboard's recorded
    alignment, ``settings.tables.leaderboard.alignment``), with the shift in ``shift`` (0 if not aligned)."""
    entries = [e for e in ((alignment or {}).get("boards") or []) if e.get("aligned") and e.get("shift") is not None]
    if not entries:
        return board.with_columns(shift=pl.lit(0.0))
    # imported here: core.validation.external loads scipy, which `arena-pipeline changes` does not need
    from arena_pipeline.core.validation.external import rating_columns

    shifts = pl.DataFrame([{"category": e["category"], "method": e["method"], "shift": float(e["shift"])}
                           for e in entries], schema={"category": pl.String, "method": pl.String, "shift": pl.Float64})
    board = board.join(shifts, on=["category", "method"], how="left").with_columns(pl.col("shift").fill_null(0.0))
    return board.with_columns(pl.col(c) - pl.col("shift") for c in rating_columns(board.columns))


def alignment_key(alignment: Mapping | None) -> tuple | None:
    """What makes two alignments the same setting: asked for or not, and to which published board
    (its content's SHA-256) by which estimator; the shifts themselves are re-estimated every time."""
    if not alignment or not alignment.get("requested"):
        return None
    return (alignment.get("board_sha256"), alignment.get("estimator"), alignment.get("min_models"))


def _references(board: pl.DataFrame) -> pl.DataFrame:
    """The reference model of each (category, method) board: the model whose bounds are missing on a
    board with an interval method (null: a centred board, or no intervals)."""
    ref = (pl.col("ci_lower").is_null() & pl.col("ci_upper").is_null() & pl.col("ci_method").is_not_null()
           & (pl.col("ci_method") != "none"))
    return (board.group_by("category", "method")
            .agg(reference=pl.col("model").filter(ref).sort().first()))


def compare_boards(before: pl.DataFrame, after: pl.DataFrame, *, relation: str | pl.DataFrame,
                   settings_changed: bool | None = None, since: Mapping | None = None,
                   alignment_before: Mapping | None = None, alignment_after: Mapping | None = None,
                   estimator_changed: bool | None | str = "settings") -> pl.DataFrame:
    """One row per (category, method, model) on either leaderboard (:data:`CHANGES_SCHEMA`), in board
    order, each board's rows by the size of the move (largest first), then the new, then the gone.

    Parameters
    ----------
    before, after
        Leaderboards (``arena.leaderboard`` rows) of the earlier and the later publication.
    relation
        How their votes relate: one relation for every board, or per board (:func:`board_relations`'s
        frame: a category missing from it is :data:`UNKNOWN`); decides the correlation assumed (module doc).
    settings_changed
        Whether the two fits were made with other ranking settings (None: unknown). Votes added under
        other settings are not a subset fit of the same estimator: taken as independent (ρ = 0).
    since
        The earlier publication: ``publication_id``, ``revision``, ``published_at`` (copied to every row).
    alignment_before, alignment_after
        The boards' recorded alignments (None: not aligned); the changes are of the ratings without
        the shifts (module doc).
    estimator_changed
        Whether the ranking settings (the estimator) changed, which decides the variance; default:
        ``settings_changed`` (an alignment change alone is a settings change but not another estimator).
    """
    since = dict(since or {})
    if estimator_changed == "settings":
        estimator_changed = settings_changed
    sides = []
    for frame, suffix, alignment in ((before, "before", alignment_before), (after, "after", alignment_after)):
        if "provisional" not in frame.columns:
            frame = frame.with_columns(provisional=pl.lit(False))
        frame = _without_shift(_test_interval(frame), alignment)
        refs = _references(frame).rename({"reference": f"reference_{suffix}"})
        sides.append(frame.select(*_KEY, *(pl.col(c).alias(f"{c}_{suffix}") for c in _BOARD_COLUMNS))
                     .join(refs, on=["category", "method"], how="left"))
    both = sides[0].join(sides[1], on=_KEY, how="full", coalesce=True)
    s0, s1 = _standard_error("before"), _standard_error("after")
    unbounded = s0.is_infinite() | s1.is_infinite()
    sources = pl.concat_str(pl.col("se_source_before").fill_null("none"), pl.lit(" / "),
                            pl.col("se_source_after").fill_null("none"))
    source = pl.when(pl.col("se_source_before").eq_missing(pl.col("se_source_after"))).then(
        pl.col("se_source_before")).otherwise(sources)
    if isinstance(relation, str):
        both = both.with_columns(_relation=pl.lit(relation, pl.String))
    else:  # per board: the style-controlled boards read the style counts' relation
        both = both.join(relation.select("category", "data_relation", "style_relation"), on="category", how="left")
        both = both.with_columns(_relation=pl.when(pl.col("method").is_in(STYLE_METHODS)).then(
            pl.col("style_relation")).otherwise(pl.col("data_relation")).fill_null(UNKNOWN))
    same = pl.col("_relation") == SAME_VOTES
    # votes added under other ranking settings are not a subset fit of the same estimator: rho = 0
    nested = (pl.col("_relation") == VOTES_ADDED) & pl.lit(estimator_changed is False)
    # votes added: continuous and never negative (s1 >= s0 gives 0, not a switch to independence); on
    # clustered boards the vote-level difference scaled by the later board's design effect (module doc)
    v0, v1 = _standard_error("before", "vote"), _standard_error("after", "vote")
    scaled = v0.is_not_null() & v1.is_not_null() & (v1 > 0) & v1.is_finite() & v0.is_finite()
    added = pl.when(scaled).then(pl.max_horizontal(v0 ** 2 - v1 ** 2, pl.lit(0.0)) * (s1 / v1) ** 2).otherwise(
        pl.max_horizontal(s0 ** 2 - s1 ** 2, pl.lit(0.0)))
    variance = pl.when(same).then((s0 - s1) ** 2).when(nested).then(added).otherwise(s0 ** 2 + s1 ** 2)
    # the correlation the variance implies, Var = s0^2 + s1^2 - 2 rho s0 s1 (min(s1 / s0, 1) unscaled)
    implied = pl.when((s0 > 0) & (s1 > 0)).then(
        ((s0 ** 2 + s1 ** 2 - added) / (2 * s0 * s1)).clip(-1.0, 1.0)).otherwise(1.0)
    rho = pl.when(same).then(1.0).when(nested).then(implied).otherwise(0.0)
    formula = (pl.when(same).then(pl.lit("(s0 - s1)^2")).when(nested & scaled).then(
        pl.lit("max(v0^2 - v1^2, 0) (s1/v1)^2")).when(nested).then(pl.lit("max(s0^2 - s1^2, 0)"))
               .otherwise(pl.lit("s0^2 + s1^2")))
    variance = pl.when(unbounded).then(float("inf")).otherwise(variance)
    status = (pl.when(pl.col("rating_before").is_null()).then(pl.lit("new"))
              .when(pl.col("rating_after").is_null()).then(pl.lit("gone")).otherwise(pl.lit("kept")))
    same_ref = (pl.col("reference_before").eq_missing(pl.col("reference_after"))
                & pl.col("rating_before").is_not_null() & pl.col("rating_after").is_not_null())
    change = pl.col("rating_after") - pl.col("rating_before")
    half = pl.when(same_ref).then(Z95 * variance.sqrt())
    out = both.with_columns(
        status=status, same_reference=same_ref, rating_change=change,
        # the ratings as published (aligned boards with their shift); the change is without the shifts
        rating_before=pl.col("rating_before") + pl.col("shift_before"),
        rating_after=pl.col("rating_after") + pl.col("shift_after"),
        correlation=pl.when(same_ref & variance.is_not_null() & ~unbounded).then(rho),
        change_ci_lower=change - half, change_ci_upper=change + half,
        since_publication=pl.lit(since.get("publication_id"), pl.Int64),
        since_revision=pl.lit(since.get("revision"), pl.String),
        since_published_at=pl.lit(since.get("published_at"), pl.Datetime("us")),
        data_relation=pl.col("_relation"), settings_changed=pl.lit(settings_changed, pl.Boolean),
        change_variance=pl.when(same_ref & variance.is_not_null()).then(
            pl.concat_str(formula, pl.lit(", "), source, pl.lit(" intervals"))),
        shift_before=pl.col("shift_before"), shift_after=pl.col("shift_after"),
        shift_change=pl.col("shift_after") - pl.col("shift_before"),
        rank_change=pl.col("rank_before") - pl.col("rank_after"),
        rank_ub_change=pl.col("rank_ub_before") - pl.col("rank_ub_after"),
        battles_before=pl.col("n_battles_before"), battles_after=pl.col("n_battles_after"),
    ).with_columns(beyond_interval=(pl.col("change_ci_lower") > ROUNDING) | (pl.col("change_ci_upper") < -ROUNDING))
    order = pl.col("status").replace_strict({"kept": 0, "new": 1, "gone": 2}, return_dtype=pl.Int8)
    return (out.sort(category_order(), "category", "method", order, pl.col("rating_change").abs(), "model",
                     descending=[False, False, False, False, True, False], nulls_last=True)
            .select([pl.col(c).cast(t) for c, t in CHANGES_SCHEMA.items()]))


def _changed(before: RankingConfig | None, after: RankingConfig | None) -> bool | None:
    return None if before is None or after is None else before != after


def _or_aligned(estimator: bool | None, before: Mapping | None, after: Mapping | None) -> bool | None:
    """Settings changed: the ranking settings, or the alignment (turned on or off, another published board)."""
    if alignment_key(before) != alignment_key(after):
        return True
    return estimator


def earlier_publications(con: duckdb.DuckDBPyConnection, schema: str) -> list[int]:
    """The publications whose boards ``schema.leaderboard_history`` still keeps, newest first."""
    if not relation_exists(con, schema, f"{LEADERBOARD_TABLE}_history"):
        return []
    return [r[0] for r in con.execute(
        f"SELECT DISTINCT publication_id FROM {quoted(schema, LEADERBOARD_TABLE + '_history')} ORDER BY 1 DESC"
    ).fetchall()]


def changes_between(con: duckdb.DuckDBPyConnection, schema: str, since_id: int,
                    until_id: int) -> pl.DataFrame:
    """:func:`compare_boards` of two kept publications (their boards from ``schema.leaderboard_history``).

    Raises
    ------
    LookupError
        A publication's boards are no longer kept (the message lists the kept ones).
    """
    kept = earlier_publications(con, schema)
    for pid in (since_id, until_id):
        if pid not in kept:
            raise LookupError(f"publication {pid} is not kept in {schema}.{LEADERBOARD_TABLE}_history "
                              f"(kept: {', '.join(map(str, kept)) or 'none'})")
    history = quoted(schema, LEADERBOARD_TABLE + "_history")
    before, after = (read_frame(con, f"SELECT * FROM {history} WHERE publication_id = ?", [pid])
                     for pid in (since_id, until_id))
    rows = [publication(con, schema, pid) for pid in (since_id, until_id)]
    relation: str | pl.DataFrame = board_relations(con, *(r["tables"] if r else None for r in rows))
    if relation.is_empty():  # an earlier publication's battles are dropped: what the publications recorded
        relation = recorded_relation(con, schema, since_id, until_id)
    estimator = _changed(*(ranking_settings(r) for r in rows))
    alignments = [alignment_settings(r) for r in rows]
    return compare_boards(before, after, relation=relation, settings_changed=_or_aligned(estimator, *alignments),
                          since=rows[0], alignment_before=alignments[0], alignment_after=alignments[1],
                          estimator_changed=estimator)


def compose(relations: list[str]) -> str:
    """The relation across a chain of publications, from each one's relation to the one before it:
    unknown if any is, else changed if any is, else added if any is, else the same votes."""
    for relation in (UNKNOWN, VOTES_CHANGED, VOTES_ADDED):
        if relation in relations:
            return relation
    return SAME_VOTES


def recorded_relation(con: duckdb.DuckDBPyConnection, schema: str, since_id: int,
                      until_id: int) -> str | pl.DataFrame:
    """The relation of publication ``until_id``'s votes to ``since_id``'s, composed along the chain of
    what each publication between them recorded against the one before it
    (``settings.tables.publication_changes`` of ``schema.publications``: an earlier publication's
    battles are not kept): per board (:data:`RELATIONS_SCHEMA`, each category composed on its own)
    where the links recorded their boards' relations, else one relation (a link recorded before the
    per-board relations counts with its one relation for every board); :data:`UNKNOWN` when the chain
    is broken."""
    if since_id == until_id:
        return SAME_VOTES
    frame = read_frame(con, f"SELECT publication_id, settings FROM {quoted(schema, PUBLICATIONS_TABLE)} "
                            "WHERE publication_id > ? AND publication_id <= ?", [since_id, until_id])
    recorded = {}
    for pid, settings in frame.iter_rows():
        own = json.loads(settings or "{}").get("tables", {}).get(PUBLICATION_CHANGES_TABLE, {})
        boards = {b["category"]: b for b in own.get("boards") or []}
        recorded[pid] = (own.get("since_publication"), own.get("data_relation", UNKNOWN), boards)
    chain, pid = [], until_id
    while pid != since_id:
        if pid not in recorded or recorded[pid][0] is None:
            return UNKNOWN
        chain.append(recorded[pid][1:])
        pid = recorded[pid][0]
    categories = sorted({c for _, boards in chain for c in boards})
    if not categories:
        return compose([relation for relation, _ in chain])
    # a few categories and links: the recorded relations are settings, not vote rows
    rows = [{"category": c, **{column: compose([boards[c][column] if c in boards else (UNKNOWN if boards else one)
                                                for one, boards in chain])
                               for column in ("data_relation", "style_relation")}} for c in categories]
    return pl.DataFrame(rows, schema=RELATIONS_SCHEMA)


def changes_against_live(con: duckdb.DuckDBPyConnection, live: Mapping | None,
                         chosen: Mapping[str, str]) -> tuple[pl.DataFrame, dict]:
    """``arena.publication_changes`` of a publication showing ``chosen`` (table -> version): its leaderboard
    against the live publication's (``live``; no rows before the first publication), and the settings
    recorded with the version.

    ``chosen`` needs the candidate leaderboard, and the battles and battle_categories that decide each
    board's data relation (:func:`board_relations`). The settings record the relation of every board and
    their :func:`overall_relation` (what ``--since`` composes once the battles are dropped), and the live
    publication they were computed against (``since_publication``): :func:`stale_changes` tells the gate
    whether they still describe the publication it makes."""
    relation = relations = None
    current = (read_frame(con, f"SELECT * FROM {versioned(live['tables'][LEADERBOARD_TABLE])}")
               if live and LEADERBOARD_TABLE in live["tables"] else None)
    if live is None or current is None:
        frame = pl.DataFrame(schema=CHANGES_SCHEMA)
    else:
        candidate = read_frame(con, f"SELECT * FROM {versioned(chosen[LEADERBOARD_TABLE])}")
        relations = board_relations(con, live["tables"], chosen)
        relation = overall_relation(relations)
        new = {"settings": {"tables": publication_settings(con, {LEADERBOARD_TABLE: chosen[LEADERBOARD_TABLE]})}}
        estimator = _changed(ranking_settings(live), ranking_settings(new))
        alignments = [alignment_settings(live), alignment_settings(new)]
        frame = compare_boards(current, candidate, relation=relation if relations.is_empty() else relations,
                               settings_changed=_or_aligned(estimator, *alignments), since=live,
                               alignment_before=alignments[0], alignment_after=alignments[1],
                               estimator_changed=estimator)
    settings = {"since_publication": live["publication_id"] if live else None,
                "data_relation": relation,
                "boards": relations.to_dicts() if relations is not None else None}
    return frame, settings


def stale_changes(con: duckdb.DuckDBPyConnection, version: str | None, live: Mapping | None) -> str | None:
    """Why the ``arena.publication_changes`` version ``version`` does not describe a publication replacing
    ``live``, or None when it does (publication rule 18): it must have been computed against ``live``.

    It is not when there is no version (the run did not compute it) or when another run published
    between the changes' step and the gate's. The publication id is enough: the other versions the changes read (the leaderboard, battles and
    battle_categories) are the run's own, built before them, or the live publication's of the same dump,
    which only another publication changes."""
    if version is None:
        return "this run did not compute them"
    row = con.execute(f"SELECT settings FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
    since = (json.loads(row[0]) if row and row[0] else {}).get("since_publication")
    live_id = live["publication_id"] if live else None
    if since != live_id:
        return f"they were computed against publication {since}, and {live_id} is live now"
    return None


def board_shift(changes: pl.DataFrame) -> dict[str, float] | None:
    """The alignment shift of one board's change rows: ``before``, ``after`` and ``change`` (the shift's
    own move, which ``rating_change`` leaves out), or None when neither publication aligned the board
    (both shifts 0, or a table from before the shift columns)."""
    if "shift_before" not in changes.columns:
        return None
    rows = changes.filter(pl.col("shift_before").is_not_null() & pl.col("shift_after").is_not_null())
    if rows.is_empty():
        return None
    before, after = rows.row(0, named=True)["shift_before"], rows.row(0, named=True)["shift_after"]
    if before == 0 and after == 0:
        return None
    return {"before": before, "after": after, "change": after - before}


def summary(changes: pl.DataFrame) -> dict[str, int]:
    """Counts of a set of change rows: ``new``, ``gone``, ``kept``, ``beyond`` (moves beyond their interval)."""
    counts = dict(changes.group_by("status").len().iter_rows())
    return {"new": counts.get("new", 0), "gone": counts.get("gone", 0), "kept": counts.get("kept", 0),
            "beyond": int(changes.get_column("beyond_interval").fill_null(False).sum())}

