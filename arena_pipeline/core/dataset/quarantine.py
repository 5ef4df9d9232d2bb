"""Row-level rules that move broken votes out of ``arena.battles`` into ``arena.quarantine``.

The rules are data (:data:`RULES`, plus the ``duplicate_id`` rule that needs to know which rows
the others reject) and run as vectorised Polars expressions. Each rule names the error-severity
expectations of ``expectations/battles.json`` it enforces, so that after
:func:`split_quarantine` every row-level error expectation passes on the clean frame.

Decisions
---------
- **Several broken rules, one quarantine row.** ``rule`` lists every rule the row broke, in
  :data:`RULES` order, joined by ``','`` (``duplicate_id`` last); ``detail`` joins their
  details with ``'; '``. Query one rule with ``list_contains(string_split(rule, ','), 'x')``.
- **Duplicate ids.** Among the rows sharing a non-null id, the copy kept is the first by
  ``(source_file, source_row)`` (nulls last, then input order) *among the copies that break no
  other rule*; every other copy is quarantined with ``duplicate_id`` (plus its own rules). If
  every copy breaks some rule, none is kept.
- Null ids are never grouped as duplicates; they break ``null_id``.
- Conditions treat nulls as "not broken" except where the rule is about nulls, so each null is
  reported once, by the rule that names it.
- **Defects inside one conversation** (a message without a role, a reply before the first user
  message) would break the messages table's blocking expectations for the whole dump. They are
  :data:`MESSAGE_RULES`, checked on the nested rows by :func:`conversation_defects`; the loader
  quarantines such a vote (``detail`` names the conversation and the message position) before
  the battle rules run.
- Invariant: ``clean.height + quarantine.height == battles.height``; ``clean`` keeps the input
  order and schema, ``quarantine`` has :data:`~arena_pipeline.core.dataset.schema.QUARANTINE_SCHEMA`.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Collection
from dataclasses import dataclass

import polars as pl

from arena_pipeline.core.dataset.schema import (
    BATTLES_SCHEMA,
    CRITERIA,
    DUMP_COLUMNS,
    NARROWED_COLUMNS,
    QUARANTINE_SCHEMA,
    WINNERS,
)

SIDES = ("a", "b")

#: Token counts of conv_metadata (checked >= 0).
TOKEN_COLUMNS: tuple[str, ...] = (
    "sum_user_tokens",
    "sum_assistant_a_tokens",
    "sum_assistant_b_tokens",
    "context_a_tokens",
    "context_b_tokens",
)

#: Markdown counts of conv_metadata used by style control (checked >= 0).
MARKDOWN_COLUMNS: tuple[str, ...] = tuple(
    [f"header_count_{s}_h{i}" for s in SIDES for i in range(1, 7)]
    + [f"list_count_{s}_{k}" for s in SIDES for k in ("ordered", "unordered")]
    + [f"bold_count_{s}_{k}" for s in SIDES for k in ("asterisk", "underscore")]
)

#: Columns a ranking reads that must not be null, beyond those with their own rule
#: (id, model_a, model_b, winner, turns): style features, category flags, message counts.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "is_code",
    "sum_user_tokens",
    "sum_assistant_a_tokens",
    "sum_assistant_b_tokens",
    *MARKDOWN_COLUMNS,
    "creative_writing",
    *[f"criteria_{c}" for c in CRITERIA],
    "instruction_following",
    "math",
    "n_messages_a",
    "n_messages_b",
    "n_user_messages_a",
    "n_user_messages_b",
)


def _template(text: str) -> pl.Expr:
    """``"winner {winner} ..."`` -> a string expression with each ``{column}`` filled in.

    Values are cast to strings; nulls print as ``null``.
    """
    literal_parts: list[str] = []
    columns: list[str] = []
    for literal, name, _spec, _conv in string.Formatter().parse(text):
        literal_parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is not None:
            literal_parts.append("{}")
            columns.append(name)
    if not columns:
        return pl.lit(text)
    values = [pl.col(c).cast(pl.String).fill_null("null") for c in columns]
    return pl.format("".join(literal_parts), *values)


def _out_of_range(column: pl.Expr, name: str) -> pl.Expr:
    """True where ``column`` (an integer) does not fit ``BATTLES_SCHEMA[name]``."""
    dtype = BATTLES_SCHEMA[name]
    return (column < dtype.min()) | (column > dtype.max())


def _offending_columns(columns: tuple[str, ...], broken: Callable[[pl.Expr], pl.Expr]) -> pl.Expr:
    """``"col=value, col=value"`` for the columns where ``broken(col)`` holds."""
    return pl.concat_str(
        [
            pl.when(broken(pl.col(c))).then(pl.format(f"{c}={{}}", pl.col(c).cast(pl.String)))
            for c in columns
        ],
        separator=", ",
        ignore_nulls=True,
    )


@dataclass(frozen=True)
class QuarantineRule:
    """One row-level rule.

    Attributes
    ----------
    name
        Short machine name stored in ``quarantine.rule``.
    condition
        Boolean expression, True where the row breaks the rule (null counts as False).
    detail
        Human-readable reason naming the values: a template with ``{column}`` placeholders,
        or a string expression.
    expectations
        Ids of the error-severity expectations in ``expectations/battles.json`` this rule
        enforces (after quarantine they pass).
    """

    name: str
    condition: pl.Expr
    detail: str | pl.Expr
    expectations: tuple[str, ...] = ()

    def detail_expr(self) -> pl.Expr:
        return _template(self.detail) if isinstance(self.detail, str) else self.detail



def _null_required(columns: tuple[str, ...]) -> QuarantineRule:
    """``null_required`` over ``columns`` (all of :data:`REQUIRED_COLUMNS` but those a dump lacks)."""
    if not columns:
        return QuarantineRule("null_required", pl.lit(False), "null in required columns: none", ())
    return QuarantineRule(
        "null_required",
        pl.any_horizontal([pl.col(c).is_null() for c in columns]),
        pl.format(
            "null in required columns: {}",
            pl.concat_str(
                [pl.when(pl.col(c).is_null()).then(pl.lit(c)) for c in columns],
                separator=", ",
                ignore_nulls=True,
            ),
        ),
        tuple(f"{c}.not_null" for c in columns),
    )


#: The row-local rules, in reporting order.
RULES: tuple[QuarantineRule, ...] = (
    QuarantineRule(
        "null_id",
        pl.col("id").is_null(),
        "id is null",
        ("id.not_null",),
    ),
    QuarantineRule(
        "unknown_winner",
        pl.col("winner").is_null() | ~pl.col("winner").is_in(WINNERS),
        "winner={winner} is not one of " + ", ".join(WINNERS),
        ("winner.not_null", "winner.in_set"),
    ),
    QuarantineRule(
        "null_model",
        pl.col("model_a").is_null() | pl.col("model_b").is_null()
        | pl.col("model_a_canonical").is_null() | pl.col("model_b_canonical").is_null(),
        "a side has no model name: model_a={model_a}, model_b={model_b} "
        "(normalized: {model_a_canonical}, {model_b_canonical})",
        ("model_a.not_null", "model_b.not_null", "model_a_canonical.not_null", "model_b_canonical.not_null"),
    ),
    QuarantineRule(
        "same_model",
        pl.col("model_a") == pl.col("model_b"),
        "model_a and model_b are both {model_a}",
        ("models.differ",),
    ),
    QuarantineRule(
        "invalid_turns",
        pl.col("turns").is_null() | (pl.col("turns") < 1),
        "turns={turns} is not at least 1",
        ("turns.not_null", "turns.at_least_1"),
    ),
    QuarantineRule(
        "turns_mismatch",
        (pl.col("turns") != pl.col("n_user_messages_a"))
        | (pl.col("turns") != pl.col("n_user_messages_b")),
        "turns={turns} but conversation_a has {n_user_messages_a} user messages "
        "and conversation_b has {n_user_messages_b}",
        ("turns.equals_user_messages_a", "turns.equals_user_messages_b"),
    ),
    QuarantineRule(
        "empty_conversation",
        (pl.col("n_messages_a") < 1) | (pl.col("n_messages_b") < 1),
        "empty conversation: conversation_a has {n_messages_a} messages, "
        "conversation_b has {n_messages_b}",
        ("n_messages_a.at_least_1", "n_messages_b.at_least_1"),
    ),
    QuarantineRule(
        "count_out_of_range",
        pl.any_horizontal([_out_of_range(pl.col(c), c) for c in NARROWED_COLUMNS]),
        pl.format(
            "count out of range of its stored type: {}",
            pl.concat_str(
                [
                    pl.when(_out_of_range(pl.col(c), c)).then(
                        pl.format(f"{c}={{}} (stored as {BATTLES_SCHEMA[c]})", pl.col(c).cast(pl.String))
                    )
                    for c in NARROWED_COLUMNS
                ],
                separator=", ",
                ignore_nulls=True,
            ),
        ),
    ),
    QuarantineRule(
        "negative_tokens",
        pl.any_horizontal([pl.col(c) < 0 for c in TOKEN_COLUMNS]),
        pl.format("negative token count: {}", _offending_columns(TOKEN_COLUMNS, lambda c: c < 0)),
        tuple(f"{c}.non_negative" for c in TOKEN_COLUMNS),
    ),
    QuarantineRule(
        "negative_markdown_count",
        pl.any_horizontal([pl.col(c) < 0 for c in MARKDOWN_COLUMNS]),
        pl.format(
            "negative markdown count: {}", _offending_columns(MARKDOWN_COLUMNS, lambda c: c < 0)
        ),
        tuple(f"{c}.non_negative" for c in MARKDOWN_COLUMNS),
    ),
    _null_required(REQUIRED_COLUMNS),
)

_KEPT_FILE = "__q_kept_file"
_KEPT_ROW = "__q_kept_row"

#: Needs the other rules' outcome (see the module doc for which copy is kept); its condition is
#: computed in :func:`split_quarantine`, which also provides the kept copy's location.
DUPLICATE_RULE = QuarantineRule(
    "duplicate_id",
    pl.lit(False),
    pl.when(pl.col(_KEPT_ROW).is_not_null())
    .then(
        pl.format(
            "id {} is repeated; the copy kept is {} row {}",
            "id",
            pl.col(_KEPT_FILE).fill_null("null"),
            _KEPT_ROW,
        )
    )
    .otherwise(pl.format("id {} is repeated and every copy breaks another rule", "id")),
    ("id.unique",),
)

ALL_RULES: tuple[QuarantineRule, ...] = (*RULES, DUPLICATE_RULE)

_PREFIX = "__q_"


def _check_columns(battles: pl.DataFrame) -> None:
    missing = [c for c in BATTLES_SCHEMA if c not in battles.columns and c not in DUMP_COLUMNS]
    if missing:
        raise ValueError(f"battles frame lacks columns {missing}")


def _flag_duplicates(frame: pl.DataFrame, broken_other: pl.Expr) -> pl.DataFrame:
    """``frame`` with the ``duplicate_id`` flag and where each id's kept copy lives (for the detail).

    Rows are ranked by (source_file, source_row, input row); per id, the first rank among rows that
    break no other rule (``broken_other``) is kept, every other row of the id is a duplicate.
    """
    order = f"{_PREFIX}order"
    kept = f"{_PREFIX}kept_order"
    return (
        frame.sort(["source_file", "source_row", f"{_PREFIX}input_row"], nulls_last=True)
        .with_columns(pl.int_range(pl.len()).alias(order))
        .with_columns(pl.when(~broken_other).then(pl.col(order)).min().over("id").alias(kept))
        .with_columns(
            (
                pl.col("id").is_not_null()
                & (pl.len().over("id") > 1)
                & (pl.col(kept).is_null() | (pl.col(order) != pl.col(kept)))
            ).alias(f"{_PREFIX}duplicate_id"),
            # where the kept copy lives, for the duplicate's detail
            pl.col("source_file").filter(pl.col(order) == pl.col(kept)).first().over("id")
            .alias(_KEPT_FILE),
            pl.when(pl.col(kept).is_not_null())
            .then(pl.col("source_row").cast(pl.String).fill_null("null"))
            .filter(pl.col(order) == pl.col(kept)).first().over("id")
            .alias(_KEPT_ROW),
        )
        .sort(f"{_PREFIX}input_row")
    )


def split_quarantine(battles: pl.DataFrame, optional: Collection[str] = ()
                     ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split battles into clean rows and quarantine rows.

    Parameters
    ----------
    battles
        A frame with (at least) the columns of ``schema.BATTLES_SCHEMA`` (``dump`` optional).
    optional
        Columns the dump's format does not have (``adapters.Adapter.unavailable``): null there
        is expected, so ``null_required`` does not check them.

    Returns
    -------
    clean, quarantine
        ``clean``: the rows that break no rule, input columns and order unchanged, columns of
        ``BATTLES_SCHEMA`` cast to its types (counts narrowed once out-of-range rows are out).
        ``quarantine``: one row per rejected input row, in input order, with
        ``QUARANTINE_SCHEMA``: id, source_file, source_row, rule (the broken rules' names joined
        by ','), detail (their reasons joined by '; '), raw (the input row's values as JSON).
    """
    _check_columns(battles)
    columns = battles.columns
    rules = RULES
    if optional:
        required = tuple(c for c in REQUIRED_COLUMNS if c not in set(optional))
        rules = tuple(_null_required(required) if r.name == "null_required" else r for r in RULES)
    flags = [f"{_PREFIX}{r.name}" for r in rules]
    frame = battles.with_row_index(f"{_PREFIX}input_row").with_columns(
        [r.condition.fill_null(False).alias(f) for r, f in zip(rules, flags, strict=True)]
    )
    broken_other = pl.any_horizontal(flags)

    frame = _flag_duplicates(frame, broken_other)
    flags.append(f"{_PREFIX}duplicate_id")
    rejected = pl.any_horizontal(flags)
    fired = list(zip((*rules, DUPLICATE_RULE), flags, strict=True))

    clean = frame.filter(~rejected).select(columns).cast(
        {c: t for c, t in BATTLES_SCHEMA.items() if c in columns}
    )
    bad = frame.filter(rejected)
    quarantine = bad.select(
        pl.col("id").cast(pl.String),
        pl.col("source_file").cast(pl.String),
        pl.col("source_row").cast(pl.Int64),
        pl.concat_str(
            [pl.when(pl.col(f)).then(pl.lit(r.name)) for r, f in fired],
            separator=",",
            ignore_nulls=True,
        ).alias("rule"),
        pl.concat_str(
            [pl.when(pl.col(f)).then(r.detail_expr()) for r, f in fired],
            separator="; ",
            ignore_nulls=True,
        ).alias("detail"),
        pl.struct(columns).struct.json_encode().alias("raw"),
        _dump_of(columns),
    ).cast(QUARANTINE_SCHEMA)
    return clean, quarantine


def _dump_of(columns: list[str]) -> pl.Expr:
    return (pl.col("dump") if "dump" in columns else pl.lit(None)).cast(pl.String).alias("dump")


def count_by_rule(quarantine: pl.DataFrame) -> pl.DataFrame:
    """Quarantined rows per rule (a row breaking two rules counts for both), by rule order."""
    order = {r.name: i for i, r in enumerate(ALL_RULES)}
    counts = (
        quarantine.select(pl.col("rule").str.split(",").alias("rule"))
        .explode("rule")
        .group_by("rule")
        .agg(pl.len().alias("rows"))
    )
    return counts.sort(pl.col("rule").replace_strict(order, default=len(order)), "rule")


# ---------------------------------------------------------------------------
# Defects inside a vote's conversation (checked on the nested rows, before flattening)
# ---------------------------------------------------------------------------

#: The nested conversation columns whose messages become ``arena.messages`` rows.
CONVERSATION_COLUMNS: tuple[str, ...] = ("conversation_a", "conversation_b")


@dataclass(frozen=True)
class MessageRule:
    """One rule on a single message of ``conversation_a``/``conversation_b``.

    ``condition`` is evaluated on one row per message with columns ``role`` and ``turn`` (user
    messages up to and including this one, as ``flatten`` computes it); ``detail`` is a template
    with ``{conversation}``, ``{position}`` (0-based) and ``{role}``. ``expectations`` are the
    ids of ``expectations/messages.json`` it protects.
    """

    name: str
    condition: pl.Expr
    detail: str
    expectations: tuple[str, ...] = ()


MESSAGE_RULES: tuple[MessageRule, ...] = (
    MessageRule(
        "null_role",
        pl.col("role").is_null(),
        "{conversation} message at position {position} has no role",
        ("turn.not_null",),
    ),
    MessageRule(
        "reply_before_user",
        pl.col("role").is_not_null() & (pl.col("turn") < 1),
        "{conversation} message at position {position} ({role}) comes before any user message",
        ("turn.at_least_1",),
    ),
)


def conversation_defects(nested: pl.DataFrame) -> pl.DataFrame:
    """Rows of a nested batch that break a :data:`MESSAGE_RULES` rule.

    Parameters
    ----------
    nested
        Rows with the dataset card's ``conversation_a`` and ``conversation_b`` columns.

    Returns
    -------
    pl.DataFrame
        ``row`` (UInt32, index into ``nested``), ``rule`` (every broken rule, in rule order,
        joined by ``','``), ``detail`` (the first offending message per rule and conversation,
        joined by ``'; '``); one row per defective input row, sorted by ``row``. Empty when the
        batch is sound.
    """
    parts = []
    for column in CONVERSATION_COLUMNS:
        messages = (
            nested.select(  # the roles alone are exploded (not the messages' texts)
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
                pl.col(column).list.eval(pl.element().struct.field("role")).alias("role"),
                pl.int_ranges(0, pl.col(column).list.len().fill_null(0), dtype=pl.Int32).alias("position"),
            )
            .filter(pl.col("role").list.len() > 0)
            .explode("role", "position")
            .select("row", "position", "role")
            .with_columns(
                (pl.col("role") == "user").cast(pl.Int32).cum_sum().over("row").alias("turn")
            )
        )
        for order, rule in enumerate(MESSAGE_RULES):
            parts.append(
                messages.filter(rule.condition.fill_null(False))
                .group_by("row")
                .agg(pl.col("position").min(), pl.col("role").sort_by("position").first())
                .with_columns(pl.lit(column).alias("conversation"))
                .select(
                    "row",
                    pl.lit(order).alias("order"),
                    pl.lit(rule.name).alias("rule"),
                    _template(rule.detail).alias("detail"),
                )
            )
    schema = {"row": pl.UInt32, "rule": pl.String, "detail": pl.String}
    found = pl.concat(parts) if parts else pl.DataFrame()
    if found.is_empty():
        return pl.DataFrame(schema=schema)
    return (
        found.sort("row", "order", maintain_order=True)
        .group_by("row", maintain_order=True)
        .agg(
            pl.col("rule").unique(maintain_order=True).str.join(","),
            pl.col("detail").str.join("; "),
        )
        .cast(schema)
    )


def quarantine_rows(battles: pl.DataFrame, rule: pl.Series | str, detail: pl.Series | str) -> pl.DataFrame:
    """``battles`` rows as quarantine rows (:data:`QUARANTINE_SCHEMA`) with the given rule/detail."""
    columns = battles.columns
    return battles.select(
        pl.col("id").cast(pl.String),
        pl.col("source_file").cast(pl.String),
        pl.col("source_row").cast(pl.Int64),
        pl.lit(rule).alias("rule"),
        pl.lit(detail).alias("detail"),
        pl.struct(columns).struct.json_encode().alias("raw"),
        _dump_of(columns),
    ).cast(QUARANTINE_SCHEMA)


def screen_rows(frame: pl.DataFrame, rules: tuple[QuarantineRule, ...]) -> pl.DataFrame:
    """Per row of ``frame``, the ``rules`` it breaks: ``rule`` and ``detail`` as in ``split_quarantine``.

    Used on a file's own columns before conversion (``adapters.Adapter.row_rules``): values the
    canonical schema cannot hold, rows that are not leaderboard votes.

    Returns
    -------
    pl.DataFrame
        ``rule`` (the broken rules' names joined by ``','``, null for a row that breaks none) and
        ``detail`` (their details joined by ``'; '``), row-aligned with ``frame``.
    """
    if not rules:
        return pl.DataFrame({"rule": [None] * frame.height, "detail": [None] * frame.height},
                            schema={"rule": pl.String, "detail": pl.String})
    flags = [r.condition.fill_null(False) for r in rules]
    broken = pl.any_horizontal(flags)
    return frame.select(
        pl.when(broken).then(pl.concat_str(
            [pl.when(f).then(pl.lit(r.name)) for r, f in zip(rules, flags, strict=True)],
            separator=",", ignore_nulls=True)).alias("rule"),
        pl.when(broken).then(pl.concat_str(
            [pl.when(f).then(r.detail_expr()) for r, f in zip(rules, flags, strict=True)],
            separator="; ", ignore_nulls=True)).alias("detail"),
    ).cast({"rule": pl.String, "detail": pl.String})


#: Rule name of a vote with a text value that is not UTF-8 (any column, nested ones included): found on
#: the file's own Arrow batch before any string operation (``core/dataset/raw_values.py``), the value made
#: null; the detail names the column and the first bytes. pyarrow's reader does not validate UTF-8, and a
#: Polars string operation on such a value crashed the process.
INVALID_UTF8_RULE = "invalid_utf8"

#: Rule name of a vote another loaded dump holds too (same id, or same models, winner and
#: prompt text): the copy of the dump loaded first is kept, this one is counted here
#: (``core/ingest/load.py``); the kept row lists this dump in ``also_in_dumps``.
CROSS_DUMP_RULE = "duplicate_across_dumps"

#: Rule name of a vote id another loaded dump holds with other content (other models or another
#: winner): the combined tables keep the copy of the dump listed first; this copy is quarantined,
#: its detail names both dumps and both outcomes, and it counts on its own dump's board
#: (``dumps.conflicting_copies``). A copy that also breaks a row rule has that rule too.
CONFLICT_RULE = "conflicting_duplicate"


def _outcome(prefix: str = "") -> list[pl.Expr]:
    """(model, model, winner) of a vote with its sides in name order, so a copy that only swaps the
    sides (and the winner with them) reads as the same outcome."""
    a, b, w = (pl.col(f"{prefix}{c}") for c in ("model_a_canonical", "model_b_canonical", "winner"))
    swap = a > b
    flipped = w.replace({"model_a": "model_b", "model_b": "model_a"})
    return [pl.when(swap).then(b).otherwise(a), pl.when(swap).then(a).otherwise(b),
            pl.when(swap).then(flipped).otherwise(w)]


def split_cross_dump(battles: pl.DataFrame, kept: pl.DataFrame | None, optional: Collection[str] = ()
                     ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Split off the rows whose id another dump's kept rows have.

    Parameters
    ----------
    battles
        One batch of flat battles of one dump (``dump`` column set).
    kept
        The rows other dumps, loaded earlier, kept (None or empty: nothing is split off).
    optional
        The columns the batch's format lacks (as for :func:`split_quarantine`).

    Returns
    -------
    rest, quarantine, pairs
        ``rest``: the rows no other dump holds. ``quarantine``: a copy with the kept copy's
        canonical models and winner (sides in either order) as :data:`CROSS_DUMP_RULE`; any other
        copy as :data:`CONFLICT_RULE` (plus the row rules it breaks), its detail naming both dumps
        and both outcomes. ``pairs``: (id, dump) of the agreeing copies, for ``also_in_dumps``.
    """
    pairs_schema = {"id": pl.String, "dump": pl.String}
    if kept is None or kept.is_empty():
        return battles, pl.DataFrame(schema=QUARANTINE_SCHEMA), pl.DataFrame(schema=pairs_schema)
    other = kept.select("id", *[pl.col(c).alias(f"kept_{c}") for c in (
        "dump", "source_file", "source_row", "model_a_canonical", "model_b_canonical", "winner")])
    hit = battles.join(other, on="id", how="inner")
    if hit.is_empty():
        return battles, pl.DataFrame(schema=QUARANTINE_SCHEMA), pl.DataFrame(schema=pairs_schema)
    same = pl.all_horizontal([x.eq_missing(y) for x, y in zip(_outcome(), _outcome("kept_"), strict=True)])
    hit = hit.with_columns(same.alias("_same"))
    agreeing, conflicting = hit.filter("_same"), hit.filter(~pl.col("_same"))
    moved = [quarantine_rows(agreeing.select(battles.columns), CROSS_DUMP_RULE, agreeing.select(pl.format(
        "the same vote (id {}) is kept from dump {} ({} row {})",
        "id", "kept_dump", "kept_source_file", "kept_source_row")).to_series())] if agreeing.height else []
    if conflicting.height:
        note = conflicting.select(pl.format(
            "id {} is also in dump {} with other content: there {} vs {}, winner {}; here (dump {}) {} vs {}, "
            "winner {}. The combined tables keep the copy of the dump listed first ({} row {}); this copy "
            "counts on its own dump's board only",
            "id", "kept_dump", *[pl.col(f"kept_{c}").fill_null("null") for c in
                                 ("model_a_canonical", "model_b_canonical", "winner")],
            "dump", *[pl.col(c).fill_null("null") for c in ("model_a_canonical", "model_b_canonical", "winner")],
            "kept_source_file", "kept_source_row")).to_series()
        clean, broken = split_quarantine(conflicting.select(battles.columns), optional)
        rows = pl.concat([quarantine_rows(clean, "", ""), broken])
        notes = conflicting.select("source_file", "source_row", note=note)
        rows = rows.join(notes, on=["source_file", "source_row"], how="left").with_columns(
            rule=pl.concat_str([pl.col("rule").replace("", None), pl.lit(CONFLICT_RULE)],
                               separator=",", ignore_nulls=True),
            detail=pl.concat_str([pl.col("detail").replace("", None), "note"], separator="; ", ignore_nulls=True),
        ).select(list(QUARANTINE_SCHEMA))
        moved.append(rows)
    rest = battles.join(hit.select("source_file", "source_row"), on=["source_file", "source_row"], how="anti")
    pairs = agreeing.select("id", pl.col("dump").cast(pl.String))
    return rest, pl.concat(moved), pairs
