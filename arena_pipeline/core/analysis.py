"""Analysis tables built from the flat tables: position bias, monthly rating trends, preference pairs.

Pure Polars (plus SciPy's exact binomial test); no Dagster imports. Every function takes
the published frames (``arena.battles``, ``arena.messages``, ``arena.battle_categories``) and
returns one frame whose columns and types are pinned by a ``*_SCHEMA`` dict of this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import duckdb
import numpy as np
import polars as pl
from scipy.stats import binomtest

from arena_pipeline.core.dataset.categories import CATEGORY_NAMES, category_order
from arena_pipeline.core.ingest.pairs import MESSAGE_SEPARATOR, PAIR_COLUMNS, ROLE_MARKERS
from arena_pipeline.core.ranking import RankingConfig, compute_rankings

#: Columns and types of :func:`position_bias`.
POSITION_BIAS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "battles": pl.Int64(),
    "a_wins": pl.Int64(),
    "b_wins": pl.Int64(),
    "ties": pl.Int64(),
    "both_bad": pl.Int64(),
    "decisive": pl.Int64(),
    "a_win_rate": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "p_value": pl.Float64(),
}

#: Columns and types of :func:`rating_trend`.
RATING_TREND_SCHEMA: dict[str, pl.DataType] = {
    "month": pl.Date(),
    "category": pl.String(),
    "model": pl.String(),
    "rating": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "rank": pl.Int64(),
    "n_battles": pl.Int64(),
    # models shared with the category's previous month that linked this month's scale to it
    # (null: the first month; 0: nothing shared, the month is centred on its own field)
    "linked_models": pl.Int64(),
}

_MESSAGE = pl.Struct({"role": pl.String(), "content": pl.String()})

#: Columns and types of :func:`preference_pairs_sql` ``with_messages``: the pair's columns, then the
#: unrendered message lists.
PREFERENCE_PAIRS_SCHEMA: dict[str, pl.DataType] = {
    **PAIR_COLUMNS,
    "prompt_messages": pl.List(_MESSAGE),
    "chosen_messages": pl.List(_MESSAGE),
    "rejected_messages": pl.List(_MESSAGE),
}


def position_bias(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Win rate of the model shown on the left (side A) against the right (side B), per category.

    If voters had no position preference, side A would win half of the decisive votes (the
    sides are assigned at random). ``a_win_rate`` is ``a_wins / decisive``; the interval is
    the exact Clopper-Pearson interval of that proportion and ``p_value`` the exact two-sided
    binomial test of ``a_win_rate = 0.5``, both from ``scipy.stats.binomtest`` (one call per
    category).

    Parameters
    ----------
    battles
        ``id`` and ``winner`` (``model_a`` / ``model_b`` / ``tie`` / ``both_bad``). Rows with
        another or a null winner are ignored. Self-battles (the same model on both sides) are
        kept: they measure position bias with no model difference at all.
    battle_categories
        ``battle_id``, ``category``; one row per battle and category (see
        ``categories.tag_categories``); duplicates are counted once.
    confidence
        Level of ``ci_lower``/``ci_upper``.

    Returns
    -------
    pl.DataFrame
        :data:`POSITION_BIAS_SCHEMA`, one row per category present (board order, ``categories.ordered_categories``
        order, unknown names after). ``battles`` counts all four outcomes, ``decisive =
        a_wins + b_wins``; ``a_win_rate``, ``ci_lower``, ``ci_upper`` and ``p_value`` are null
        when ``decisive`` is 0.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    winner = pl.col("winner")
    counts = (
        battle_categories.select(pl.col("battle_id", "category").cast(pl.String))
        .unique()
        .join(
            battles.select(pl.col("id").cast(pl.String).alias("battle_id"), "winner").filter(
                winner.is_in(["model_a", "model_b", "tie", "both_bad"]).fill_null(False)
            ),
            on="battle_id",
            how="inner",
        )
        .group_by("category")
        .agg(
            battles=pl.len().cast(pl.Int64),
            a_wins=(winner == "model_a").sum().cast(pl.Int64),
            b_wins=(winner == "model_b").sum().cast(pl.Int64),
            ties=(winner == "tie").sum().cast(pl.Int64),
            both_bad=(winner == "both_bad").sum().cast(pl.Int64),
        )
        .with_columns(decisive=pl.col("a_wins") + pl.col("b_wins"))
        .sort(category_order(), "category")
    )
    exact = [_exact_binomial(k, n, confidence)
             for k, n in counts.select("a_wins", "decisive").iter_rows()]  # one row per category
    lower, upper, p_value = np.array(exact, dtype=np.float64).reshape(-1, 3).T
    return counts.with_columns(
        (pl.col("a_wins") / pl.col("decisive")).alias("a_win_rate"),
        pl.Series("ci_lower", lower, dtype=pl.Float64),
        pl.Series("ci_upper", upper, dtype=pl.Float64),
        pl.Series("p_value", p_value, dtype=pl.Float64),
    ).select([pl.col(c).fill_nan(None).cast(t) if t == pl.Float64() else pl.col(c).cast(t)
              for c, t in POSITION_BIAS_SCHEMA.items()])


def _exact_binomial(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    """Clopper-Pearson interval and two-sided p-value of ``k`` successes in ``n`` against p = 0.5."""
    if n == 0:
        return (np.nan, np.nan, np.nan)
    test = binomtest(k, n, 0.5)
    interval = test.proportion_ci(confidence_level=confidence, method="exact")
    return (interval.low, interval.high, test.pvalue)


#: Defaults of :func:`rating_trend`: Bradley-Terry only, sandwich intervals, 50 battles/month.
#: (Every model kept is shown and ranked, and months are centred, as documented below.)
TREND_CONFIG = RankingConfig(
    methods=("bt",), bootstrap_rounds=0, min_battles=50, display_min_battles=0, anchor_models=()
)

_KEY_SEPARATOR = "\x1f"  # joins category and month into one board name for compute_rankings


def rating_trend(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
    categories: Sequence[str] | None = ("overall",),
    chain: bool = True,
) -> pl.DataFrame:
    """Bradley-Terry ratings per calendar month (UTC) and category.

    Every (category, month) is an independent board fitted by
    :func:`arena_pipeline.core.ranking.compute_rankings` on that month's battles alone, in
    one call (each board's name is the category and the month). A model is on a month's board
    when it has at least ``config.min_battles`` battles that month against the other models
    kept (and a finite maximum-likelihood rating); otherwise it has no row that month.

    Parameters
    ----------
    battles
        ``id``, ``model_a``, ``model_b``, ``winner``, ``timestamp``. Battles with a null
        timestamp are left out.
    battle_categories
        ``battle_id``, ``category``.
    config
        Ranking settings; default :data:`TREND_CONFIG` (``min_battles=50``, no bootstrap:
        sandwich 95% intervals). ``methods`` is always replaced by ``("bt",)``; use
        ``bootstrap_rounds > 0`` for bootstrap intervals (slower). Set ``anchor_model`` to a
        model present in every month for an absolute reference (no chaining then).
    categories
        Categories to compute; None for every category in ``battle_categories``.
    chain
        Anchoring across months (see Notes); False: every month centred on its own field.

    Returns
    -------
    pl.DataFrame
        :data:`RATING_TREND_SCHEMA`: ``month`` is the first day of the month; ``ci_lower``/
        ``ci_upper`` the board's primary interval; ``rank`` within the month's board;
        ``n_battles`` the model's battles used by that month's fit; ``linked_models`` how many
        models linked the month to the one before. Sorted by category
        (board order, ``categories.ordered_categories`` order), month, rank, model.

    Notes
    -----
    Bradley-Terry ratings are identified only up to a constant, and each month is fitted on its
    own, so each month comes out on its own scale (centred on ``anchor_rating`` over that month's
    field). Across several dumps (2023 to 2025) the field changes completely, and centred months
    would show every model drifting down as stronger models arrive. With ``chain`` (and no
    ``anchor_model``), months are linked in order: the first month of a category stays centred;
    each later month is shifted by one constant, the median over the models it shares with the
    previous month of (previous, already linked, rating - this month's rating). A model's
    month-to-month change is then measured against the models that stayed, not against the
    month's field; the median (not the mean) keeps a minority of shared models that really
    changed from moving the scale (with the mean, one drifter among six shared models loses a
    sixth of its drift: tested on synthetic months in test_analysis.py). The
    shift moves the interval bounds too (the offset's own uncertainty is not added). A month
    sharing no model with the previous one restarts the chain (centred, ``linked_models`` 0).
    """
    config = dataclasses.replace(config or TREND_CONFIG, methods=("bt",))
    tags = battle_categories.select("battle_id", "category")
    if categories is not None:
        tags = tags.filter(pl.col("category").is_in(list(categories)))
    months = battles.select(
        "id", month=pl.col("timestamp").dt.truncate("1mo").cast(pl.Date)
    ).filter(pl.col("month").is_not_null())
    keyed = tags.join(months, left_on="battle_id", right_on="id", how="inner").select(
        "battle_id",
        category=pl.col("category") + _KEY_SEPARATOR + pl.col("month").cast(pl.String),
    )
    if keyed.height == 0:
        return pl.DataFrame(schema=RATING_TREND_SCHEMA)
    fitted = compute_rankings(
        battles.select("id", "model_a", "model_b", "winner"), keyed, config
    ).leaderboard
    if fitted.height == 0:
        return pl.DataFrame(schema=RATING_TREND_SCHEMA)
    parts = pl.col("category").str.split_exact(_KEY_SEPARATOR, 1)
    fitted = fitted.with_columns(
        month=parts.struct.field("field_1").str.to_date("%Y-%m-%d"),
        category=parts.struct.field("field_0"),
    )
    fitted = chain_months(fitted) if chain and config.anchor_model is None else \
        fitted.with_columns(linked_models=pl.lit(None, pl.Int64))
    return (
        fitted.sort(category_order(), "category", "month", "rank", "model")
        .select([pl.col(c).cast(t) for c, t in RATING_TREND_SCHEMA.items()])
    )


def chain_months(boards: pl.DataFrame) -> pl.DataFrame:
    """Link monthly boards (``month``, ``category``, ``model``, ``rating``, ``ci_lower``,
    ``ci_upper``): each month shifted by the median rating change of the models it shares with
    the month before.

    See :func:`rating_trend`'s Notes. Adds ``linked_models``. The loop runs over months (a few
    dozen), each step a vectorised join.
    """
    out = []
    for (_category,), frame in boards.partition_by("category", as_dict=True, maintain_order=True).items():
        previous: pl.DataFrame | None = None
        for month in sorted(frame.get_column("month").unique().to_list()):
            board = frame.filter(pl.col("month") == month)
            if previous is None:
                offset, linked = 0.0, None
            else:
                shared = board.join(previous.select("model", prev="rating"), on="model", how="inner")
                linked = shared.height
                offset = float((shared["prev"] - shared["rating"]).median()) if linked else 0.0
            board = board.with_columns(
                [(pl.col(c) + offset).alias(c) for c in ("rating", "ci_lower", "ci_upper")],
                linked_models=pl.lit(linked, pl.Int64),
            )
            out.append(board)
            previous = board
    return pl.concat(out) if out else boards.with_columns(linked_models=pl.lit(None, pl.Int64))


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal (quotes doubled; newlines are allowed inside DuckDB literals)."""
    return "'" + text.replace("'", "''") + "'"


def _render_sql(role: str, text: str) -> str:
    """``"<Marker>: <text>"`` for one message in SQL (unknown roles title-cased word by word, a null
    role as ``Unknown``; null text as empty)."""
    known = " ".join(f"WHEN {sql_literal(r)} THEN {sql_literal(m)}" for r, m in ROLE_MARKERS.items())
    titled = (f"array_to_string(list_transform(string_split({role}, ' '), "
              "w -> upper(w[1]) || lower(w[2:])), ' ')")
    return (f"concat(coalesce(CASE {role} {known} ELSE {titled} END, 'Unknown'), ': ', "
            f"coalesce({text}, ''))")


def preference_pairs_sql(
    battles: str,
    messages: str,
    battle_categories: str,
    *,
    model_columns: tuple[str, str] = ("model_a", "model_b"),
    with_messages: bool = False,
    ordered: bool = True,
) -> str:
    """The DuckDB query of chosen/rejected pairs for reward-model training, one row per decisive vote.

    A vote judges the two whole conversations, so a battle is never split into turns. Both
    sides start from the same first user message but, from the second turn on, each side has
    its own earlier replies, so only the first user message is a prompt shared by both; the
    rest of each side's conversation is its response:

    - ``prompt``: the first user message (and anything before it), rendered as text;
    - ``chosen`` / ``rejected``: every later message of the winning / losing side: for a
      one-turn battle the reply alone; for a multi-turn battle the first reply, then the
      next user message, the next reply, and so on.

    Text rendering: each message as ``"User: <text>"`` / ``"Assistant: <text>"`` (other roles
    title-cased), messages joined by a blank line, so ``prompt + "\\n\\n" + chosen`` is the
    full transcript of the chosen side. With ``with_messages`` the same split is also given
    unrendered, in the conversational "prompt / chosen / rejected" format of preference-training
    libraries (e.g. TRL): ``prompt_messages``, ``chosen_messages``, ``rejected_messages`` are lists
    of ``{"role", "content"}`` with the raw texts (the published table leaves them out: they would
    store every text twice). A message whose only parts are images has an empty text;
    ``has_images`` flags such battles.

    The query runs inside DuckDB over the flat tables, so the texts never enter Python and its
    memory is DuckDB's (bounded by its ``memory_limit``, spilling to its temporary directory).

    Parameters
    ----------
    battles
        A relation (quoted name or subquery) with ``id``, ``winner``, ``turns``, ``language``,
        ``timestamp`` and the two model columns. Ties and ``both_bad`` votes are left out.
        Self-battles (the same model on both sides) are kept (two different samples of one model).
    messages
        ``arena.messages``: ``battle_id``, ``side``, ``position``, ``role``, ``text``, ``images``.
    battle_categories
        ``battle_id``, ``category``.
    model_columns
        The columns of ``battles`` naming the models of side A and B (the pipeline passes the
        canonical names).
    with_messages
        Also return the unrendered message lists.
    ordered
        Order the rows by ``battle_id`` (False: no order, for rows that go into a table).

    Returns
    -------
    str
        A SELECT giving :data:`PREFERENCE_PAIRS_SCHEMA`'s columns (without the ``*_messages`` lists
        unless ``with_messages``), ordered by ``battle_id`` when ``ordered``. ``categories`` lists the battle's
        categories in board order (``categories.ordered_categories``; empty when it has none).
        Battles lacking a user message or a reply on either side are left out. The prompt is
        taken from the chosen side.
    """
    model_a, model_b = (f'"{c}"' for c in model_columns)
    render = _render_sql("m.role", "m.text")
    sep = sql_literal(MESSAGE_SEPARATOR)
    names = ("prompt", "chosen", "rejected")
    # DuckDB's string aggregation is the cost of this query (~8x a max() over the same strings), so
    # the parts are first assigned on the narrow columns (no text), a part of one message (most of
    # them: one-turn votes) takes its text as it is, and only longer parts are aggregated
    lists = (",\n           list({'role': role, 'content': coalesce(text, '')} ORDER BY position) AS messages"
             if with_messages else "")
    single_list = ",\n           [{'role': role, 'content': coalesce(text, '')}] AS messages" if with_messages else ""
    pivot = ",\n".join(f"           max(text) FILTER (WHERE part = '{name}') AS {name}" for name in names)
    pivot += "".join(f",\n           max(messages) FILTER (WHERE part = '{name}') AS {name}_messages"
                     for name in names) if with_messages else ""
    message_columns = "".join(f", s.{name}_messages" for name in names) if with_messages else ""
    return f"""
WITH decided AS (
    SELECT id AS battle_id,
           CASE WHEN winner = 'model_a' THEN 'a' ELSE 'b' END AS chosen_side,
           CASE WHEN winner = 'model_a' THEN {model_a} ELSE {model_b} END AS chosen_model,
           CASE WHEN winner = 'model_a' THEN {model_b} ELSE {model_a} END AS rejected_model,
           turns, language, "timestamp"
    FROM {battles} WHERE winner IN ('model_a', 'model_b')
), keys AS (
    SELECT m.battle_id, m.side, m.position, m.role,
           CASE WHEN m.side = d.chosen_side THEN 'chosen' ELSE 'rejected' END AS label,
           coalesce(len(m.images), 0) > 0 AS has_image
    FROM (SELECT battle_id, side, position, role, images FROM {messages}) m
    JOIN decided d ON m.battle_id = d.battle_id
), labelled AS (
    -- the prompt is the chosen side's first user message and what precedes it; the rejected side's
    -- copy only counts for has_images; a side without a user message has no part
    SELECT k.*, CASE WHEN k.position > f.prompt_end THEN k.label
                     WHEN k.label = 'chosen' THEN 'prompt' ELSE 'rejected_prompt' END AS part
    FROM keys k JOIN (SELECT battle_id, label, min(position) AS prompt_end FROM keys WHERE role = 'user'
                      GROUP BY ALL) f ON k.battle_id = f.battle_id AND k.label = f.label
), sized AS (
    SELECT battle_id, side, position, part, count(*) OVER (PARTITION BY battle_id, part) AS n
    FROM labelled WHERE part <> 'rejected_prompt'
), texts AS (
    SELECT s.battle_id, s.part, s.position, s.n, m.role, m.text, {render} AS rendered
    FROM sized s JOIN (SELECT battle_id, side, position, role, text FROM {messages}) m
      ON m.battle_id = s.battle_id AND m.side = s.side AND m.position = s.position
), part_texts AS (
    SELECT battle_id, part, rendered AS text{single_list} FROM texts WHERE n = 1
    UNION ALL
    SELECT battle_id, part, string_agg(rendered, {sep} ORDER BY position) AS text{lists}
    FROM texts WHERE n > 1 GROUP BY battle_id, part
), sides AS (
    SELECT battle_id,
{pivot}
    FROM part_texts GROUP BY battle_id
), images AS (
    SELECT battle_id, bool_or(has_image) AS has_images FROM labelled GROUP BY battle_id
), tags AS (
    {_categories_sql(battle_categories)}
)
SELECT d.battle_id, s.prompt, s.chosen, s.rejected, d.chosen_model, d.rejected_model, d.chosen_side,
       CAST(d.turns AS INTEGER) AS turns, d.language, CAST(d."timestamp" AS TIMESTAMP) AS "timestamp",
       coalesce(t.categories, CAST([] AS VARCHAR[])) AS categories, i.has_images{message_columns}
FROM decided d
JOIN sides s ON s.battle_id = d.battle_id
JOIN images i ON i.battle_id = d.battle_id
LEFT JOIN tags t ON t.battle_id = d.battle_id
WHERE s.prompt IS NOT NULL AND s.chosen IS NOT NULL AND s.rejected IS NOT NULL
{"ORDER BY d.battle_id" if ordered else ""}
"""


#: Messages per batch of :func:`write_preference_pairs` (about 1.3 KB of text each in the real dump,
#: so ~130 MB of text in DuckDB's aggregation at a time).
PAIRS_BATCH_MESSAGES = 100_000


def write_preference_pairs(
    con: duckdb.DuckDBPyConnection,
    target: str,
    battles: str,
    messages_table: str,
    battle_categories: str,
    *,
    model_columns: tuple[str, str] = ("model_a", "model_b"),
    extra_columns: str = "",
    batch_messages: int = PAIRS_BATCH_MESSAGES,
) -> int:
    """Fill the (new) table ``target`` with :func:`preference_pairs_sql`, batch by batch; return its rows.

    DuckDB cannot spill the text aggregation of the pairs, so one query over the whole messages
    table needs memory in proportion to the dump (6.8 GB for the 135k dump). Here the battles are
    batched by where their messages lie in ``messages_table`` (a base table: its ``rowid`` order is
    the order the loader appended messages in, batch by batch): a battle belongs to the batch of
    its first message's row, and each batch reads only its range of rows, extended by the widest
    spread of one battle's messages (``span``), which DuckDB prunes by row group. So each batch
    holds about ``batch_messages`` messages and the whole costs one pass over the messages, time
    linear in the dump. The result does not depend on the layout (a battle's messages are also
    matched by id); only the speed does: a table whose battles are spread over it (``span`` near
    its size) is read once per batch.

    Parameters
    ----------
    con
        A connection to the database holding the relations (``target`` is created in it).
    target
        Quoted, schema-qualified name of the table to create (it must not exist).
    battles, battle_categories
        Relations as for :func:`preference_pairs_sql`.
    messages_table
        Quoted name of the messages *base table* (``rowid`` is read from it).
    model_columns
        As for :func:`preference_pairs_sql`.
    extra_columns
        SQL select items appended to each row (e.g. ``'abc' AS dump_revision``), or empty.
    batch_messages
        Messages per batch (the memory setting of this step).
    """
    if batch_messages < 1:
        raise ValueError("batch_messages must be positive")
    # once: each battle's batch (by its first message's row) and the widest spread of one battle's
    # messages; the decisive battles and their categories sorted by batch, so that a batch reads its
    # own rows of them (time linear in the dump, not batches x dump)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pair_bounds AS
        SELECT battle_id, min(rowid) // {batch_messages} AS batch, max(rowid) - min(rowid) AS spread
        FROM {messages_table} GROUP BY battle_id""")
    try:
        batches, span = con.execute(
            "SELECT coalesce(max(batch) + 1, 0), coalesce(max(spread), 0) FROM _pair_bounds").fetchone()
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _pair_battles AS
            SELECT p.batch, b.* FROM {battles} b JOIN _pair_bounds p ON p.battle_id = b.id
            WHERE b.winner IN ('model_a', 'model_b') ORDER BY p.batch""")
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _pair_tags AS
            SELECT b.batch, t.* FROM {battle_categories} t JOIN _pair_battles b ON b.id = t.battle_id
            ORDER BY b.batch""")
        extra = f", {extra_columns}" if extra_columns else ""
        con.execute(f"CREATE TABLE {target} AS SELECT *{extra} FROM ("
                    + preference_pairs_sql(
                        "(SELECT * EXCLUDE (batch) FROM _pair_battles LIMIT 0)",
                        f"(SELECT * FROM {messages_table} LIMIT 0)",
                        "(SELECT * EXCLUDE (batch) FROM _pair_tags LIMIT 0)", model_columns=model_columns,
                        ordered=False)
                    + ")")
        for i in range(batches):
            low, high = i * batch_messages, (i + 1) * batch_messages
            query = preference_pairs_sql(
                f"(SELECT * EXCLUDE (batch) FROM _pair_battles WHERE batch = {i})",
                f"(SELECT * FROM {messages_table} WHERE rowid >= {low} AND rowid < {high + span} "
                f"AND battle_id IN (SELECT id FROM _pair_battles WHERE batch = {i}))",
                f"(SELECT * EXCLUDE (batch) FROM _pair_tags WHERE batch = {i})",
                model_columns=model_columns, ordered=False,
            )
            con.execute(f"INSERT INTO {target} SELECT *{extra} FROM ({query})")
    finally:
        for temp in ("_pair_bounds", "_pair_battles", "_pair_tags"):
            con.execute(f"DROP TABLE IF EXISTS {temp}")
    return con.execute(f"SELECT count(*) FROM {target}").fetchone()[0]


def _categories_sql(battle_categories: str) -> str:
    """battle_id -> its categories in board order (``categories.ordered_categories``), in SQL."""
    order = " ".join(f"WHEN {sql_literal(c)} THEN {i}" for i, c in enumerate(CATEGORY_NAMES))
    # an unordered list of (board position, name) sorted inside each row: the same lists as an
    # ordered aggregate (``list(category ORDER BY ...)``) in 0.15 s instead of 0.4 s on the 1x dump
    return (f"SELECT battle_id, list_transform(list_sort(list({{'o': CASE category {order} "
            f"ELSE {len(CATEGORY_NAMES)} END, 'c': category}})), x -> x.c) AS categories "
            f"FROM (SELECT DISTINCT battle_id, category FROM {battle_categories}) GROUP BY battle_id")


def adopt_loaded_pairs(con: duckdb.DuckDBPyConnection, loaded: str, target: str, battle_categories: str
                       ) -> tuple[int, int]:
    """Make the loader's pairs table (``core.ingest.pairs.pair_rows``, batch by batch) the table ``target``.

    The texts are kept as written (the table is renamed, not copied); each row's ``categories``
    is set from ``battle_categories``, the published tagging, wherever the loader's per-batch
    tagging gave another list (normally none). Returns (rows, rows whose categories were set).

    Parameters
    ----------
    con
        A connection to the database holding both.
    loaded
        Quoted, schema-qualified name of the loader's table.
    target
        Unquoted new name of that table, in the same schema (it must not exist).
    battle_categories
        A relation with ``battle_id``, ``category``.
    """
    fixed = con.execute(f"""UPDATE {loaded} AS p SET categories = t.categories
        FROM (SELECT l.battle_id, coalesce(c.categories, CAST([] AS VARCHAR[])) AS categories
              FROM (SELECT battle_id, categories FROM {loaded}) l
              LEFT JOIN ({_categories_sql(battle_categories)}) c ON c.battle_id = l.battle_id
              WHERE l.categories IS DISTINCT FROM coalesce(c.categories, CAST([] AS VARCHAR[]))) t
        WHERE p.battle_id = t.battle_id""").fetchone()[0]
    con.execute(f'ALTER TABLE {loaded} RENAME TO "{target}"')
    schema = loaded.rsplit(".", 1)[0]
    return con.execute(f'SELECT count(*) FROM {schema}."{target}"').fetchone()[0], fixed
