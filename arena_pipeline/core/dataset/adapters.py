"""Schema adapters: every public text-arena dump format turned into the canonical (140k) Arrow schema.

Each adapter is data (the columns and type families its dataset card documents, the winner
mapping, the canonical fields it cannot fill) plus one small function that turns an Arrow table
of that format into :data:`~arena_pipeline.core.dataset.schema.DATASET_ARROW_SCHEMA`, so flattening,
quarantine and the quality suites apply unchanged. An adapter is chosen by a file's columns and
types (:func:`choose_adapter`), never by the dataset's name, so a mirror or a renamed copy loads;
a file no adapter accepts fails with the columns it has and the nearest adapter.

Decisions
---------
- **Missing fields are null, never false.** A canonical field a format does not have is null in
  every row of that dump; :attr:`Adapter.unavailable` lists the flat battles columns this leaves
  empty. The loader lets exactly those columns be null (``quarantine.split_quarantine``'s
  ``optional``) and the categories and quality checks read "a column entirely null within a dump"
  as "unavailable for that dump" (``core/dataset/dumps.py``).
- **Battle ids are the dump's own ids** (``id``, ``question_id``, or the Kaggle row id): unique
  within a dump; the same id in two dumps is the same vote (the loader keeps one copy) unless the
  copies disagree on the models or the winner (``quarantine.CONFLICT_RULE``).
- **Anonymous votes only.** The 33k and 100k dumps also hold votes cast with the model names
  shown (``anony`` false); LMArena's boards leave them out, so the loader moves them to
  quarantine (rule ``not_anonymous``) instead of dropping them silently.
- **Language names** of the 2023-2024 dumps (``English``) become the codes of the 140k dump
  (``en``) through :data:`LANGUAGE_CODES`; unknown names are kept as they are.
- **A bad value is one quarantined vote.** Values the canonical schema cannot hold (a ``tstamp`` of
  inf, NaN or 1e300, a timestamp outside the card's ``timestamp[ns]`` range, a ``turn`` or
  ``evaluation_order`` outside Int32) break a rule of :attr:`Adapter.row_rules`, checked on the
  file's own columns: the loader quarantines the row (``unparseable_field`` /
  ``count_out_of_range``, the detail naming the column and the value) and the conversion turns
  the value into null instead of failing the batch. Nested counts stay Int64 through the
  conversion, so ``quarantine.split_quarantine``'s ``count_out_of_range`` names them as for the
  140k dump.
- **A column of the wrong type family** (a null-typed ``conversation_a``, a string ``tstamp``)
  fails the file with one line naming the file, the column, its type and the expected one. An
  all-null *scalar* column is accepted (its nulls meet the row rules); an all-null list or struct
  column is not.
- **One-hot winners** are read as numbers: ``1``, ``1.0`` and `` 1 `` are the same flag.

Sources: the dataset cards, see ``docs/dump_formats.md``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from arena_pipeline.core.dataset.quarantine import QuarantineRule, screen_rows
from arena_pipeline.core.dataset.schema import (
    BATTLES_NESTED_PATHS,
    CATEGORY_TAG_TYPE,
    CONV_METADATA_TYPE,
    DATASET_ARROW_SCHEMA,
)


class UnknownFormatError(ValueError):
    """No adapter accepts a file's columns (the message names them and the nearest adapter)."""


#: Winner spellings of the 2023-2024 dumps -> the four canonical winners.
WINNER_MAP: dict[str, str] = {
    "model_a": "model_a",
    "model_b": "model_b",
    "tie": "tie",
    "tie (bothbad)": "both_bad",
    "both_bad": "both_bad",
}

#: Language names of the 2023-2024 dumps (``language`` holds names there) -> 140k's codes.
LANGUAGE_CODES: dict[str, str] = {
    "English": "en", "Chinese": "zh", "French": "fr", "German": "de", "Japanese": "ja",
    "Korean": "ko", "Russian": "ru", "Spanish": "es", "Portuguese": "pt", "Italian": "it",
    "Polish": "pl", "Vietnamese": "vi", "Arabic": "ar", "Indonesian": "id", "Dutch": "nl",
    "Turkish": "tr", "Persian": "fa", "Ukrainian": "uk", "Hungarian": "hu", "Swedish": "sv",
    "Czech": "cs", "Hebrew": "he", "Greek": "el", "Thai": "th", "Hindi": "hi", "Danish": "da",
    "Finnish": "fi", "Norwegian": "no", "Romanian": "ro", "Bulgarian": "bg", "Latin": "la",
}

_FAMILIES = {
    "string": pa.types.is_string, "large_string": pa.types.is_large_string,
    "integer": pa.types.is_integer, "float": pa.types.is_floating, "bool": pa.types.is_boolean,
    "struct": pa.types.is_struct, "list": lambda t: pa.types.is_list(t) or pa.types.is_large_list(t),
    "timestamp": pa.types.is_timestamp,
}


def type_family(dtype: pa.DataType) -> str:
    """The coarse family of an Arrow type (string kinds, integer widths and units are one family; a
    dictionary-encoded column is of its values' family: the loader decodes it)."""
    if pa.types.is_dictionary(dtype):
        return type_family(dtype.value_type)
    for name, test in _FAMILIES.items():
        if test(dtype):
            return "string" if name == "large_string" else name
    return "null" if pa.types.is_null(dtype) else str(dtype)


@dataclass(frozen=True)
class Adapter:
    """One dump format: what its files look like and how they become the canonical schema.

    Parameters
    ----------
    name
        Short format name (``arena-140k``), recorded in load reports.
    card
        The dataset card the signature follows.
    columns
        Required columns -> accepted type families (a tuple: any of them); ``"any"`` accepts
        every type (a CSV's cells are strings before parsing).
    optional
        Documented columns the adapter does not need (kept out of the "new fields" warning).
    unavailable
        Flat battles columns (``schema.BATTLES_SCHEMA``) this format cannot fill: null in every row.
    convert
        Arrow table with (at least) ``columns`` -> table with ``DATASET_ARROW_SCHEMA``.
    row_rules
        Rules checked on the file's own columns before conversion (``quarantine.screen_rows``;
        timestamp columns read as epoch seconds): values the canonical schema cannot hold, rows
        that are not leaderboard votes. The loader moves the rows breaking one to quarantine.
    """

    name: str
    card: str
    columns: dict[str, tuple[str, ...]]
    convert: Callable[[pa.Table], pa.Table]
    optional: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    notes: str = ""
    row_rules: tuple[QuarantineRule, ...] = ()

    def mismatches(self, schema: pa.Schema) -> list[str]:
        """What keeps ``schema`` from this format: missing columns and wrong type families.

        A null-typed column (all values null) passes for a scalar column, not for a list or struct.
        """
        present = {f.name: f.type for f in schema}
        problems = []
        for column, families in self.columns.items():
            if column not in present:
                problems.append(f"missing {column}")
                continue
            nested = bool(set(families) & {"list", "struct"})
            if "any" not in families and type_family(present[column]) not in families + (() if nested else ("null",)):
                problems.append(f"{column} is {present[column]}, expected {' or '.join(families)}")
        return problems

    def screen(self, table: pa.Table) -> pl.DataFrame:
        """Per row of ``table`` (the file's own columns), the :attr:`row_rules` it breaks.

        Returns
        -------
        pl.DataFrame
            ``rule`` (null for a row that breaks none) and ``detail``, row-aligned with ``table``.
        """
        return screen_rows(_rule_frame(table, self.row_rules), self.row_rules)

    def read_columns(self, schema: pa.Schema) -> list[str]:
        """The columns of ``schema`` this adapter reads."""
        wanted = set(self.columns) | set(self.optional)
        return [f.name for f in schema if f.name in wanted]


# --------------------------------------------------------------------------- helpers

def _null(dtype: pa.DataType) -> pl.Expr:
    return pl.lit(None, dtype=pl.from_arrow(pa.array([], type=dtype)).dtype)


def _conform(expr: pl.Expr, source: pa.DataType | None, target: pa.DataType) -> pl.Expr:
    """``expr`` (of Arrow type ``source``) reshaped to ``target``: struct fields by name, missing ones null.

    Integer fields stay Int64 (see :data:`CONVERTED_SCHEMA`): a count too large for the card's
    type reaches the ``count_out_of_range`` rule with its value instead of turning into null.
    """
    if source is None:
        return _null(target)
    if pa.types.is_struct(target) and pa.types.is_struct(source):
        names = {source.field(i).name: source.field(i).type for i in range(source.num_fields)}
        fields = [
            _conform(expr.struct.field(target.field(i).name), names.get(target.field(i).name),
                     target.field(i).type).alias(target.field(i).name)
            for i in range(target.num_fields)
        ]
        return pl.when(expr.is_null()).then(None).otherwise(pl.struct(fields))
    if pa.types.is_integer(target):
        return expr.cast(pl.Int64, strict=False)
    return expr.cast(pl.from_arrow(pa.array([], type=target)).dtype, strict=False)


def _text_part(text: pl.Expr) -> pl.Expr:
    """A one-part ``content`` list holding ``text`` (the 140k message shape)."""
    return pl.concat_list(pl.struct(
        type=pl.lit("text"), text=text, image=pl.lit(None, pl.String), mimeType=pl.lit(None, pl.String)))


def _openai_messages(column: str, with_tokens: bool) -> pl.Expr:
    """``[{role, content: str}]`` (OpenAI API format) -> 140k's ``[{role, content: [parts]}]``."""
    message = {"role": pl.element().struct.field("role"),
               "content": _text_part(pl.element().struct.field("content"))}
    if with_tokens:
        message["num_tokens"] = pl.lit(None, pl.Int32)
    return pl.col(column).list.eval(pl.struct(**message))


def _winner(column: str = "winner") -> pl.Expr:
    """Documented spellings mapped; anything else kept so ``unknown_winner`` quarantines it by name."""
    return pl.col(column).cast(pl.String).replace(WINNER_MAP)


#: Epoch seconds the dataset card's ``timestamp[ns]`` holds (the int64 nanosecond range, in whole days).
EPOCH_RANGE = (dt.datetime(1677, 9, 22, tzinfo=dt.UTC).timestamp(), dt.datetime(2262, 4, 11, tzinfo=dt.UTC).timestamp())


def _epoch_ok(value: pl.Expr) -> pl.Expr:
    """True where ``value`` (epoch seconds) is finite and in :data:`EPOCH_RANGE` (null stays null)."""
    seconds = value.cast(pl.Float64)
    return seconds.is_finite() & seconds.is_between(*EPOCH_RANGE, closed="left")


def _epoch_seconds(column: str) -> pl.Expr:
    """Epoch seconds -> Datetime(us); a value :func:`_epoch_ok` rejects becomes null (its row is quarantined)."""
    seconds = pl.when(_epoch_ok(pl.col(column))).then(pl.col(column).cast(pl.Float64))
    return (seconds * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us"))


_INT32 = (-(2**31), 2**31 - 1)


def _int32_ok(value: pl.Expr) -> pl.Expr:
    return value.is_between(*_INT32)


def _bad_time(column: str) -> QuarantineRule:
    """``unparseable_field``: ``column`` (epoch seconds) is not a time the canonical schema holds."""
    lo, hi = (dt.datetime.fromtimestamp(t, dt.UTC).date().isoformat() for t in EPOCH_RANGE)
    return QuarantineRule(
        "unparseable_field", pl.col(column).is_not_null() & ~_epoch_ok(pl.col(column)),
        f"{column}={{{column}}} (seconds since 1970) is not a time the dataset card's timestamp[ns] "
        f"holds (finite, from {lo} to before {hi})")


def _bad_count(column: str, what: str | None = None, value: pl.Expr | None = None) -> QuarantineRule:
    """``count_out_of_range``: ``value`` (default the column) does not fit Int32, as the flat rule says it."""
    value = pl.col(column) if value is None else value
    return QuarantineRule(
        "count_out_of_range", value.is_not_null() & ~_int32_ok(value),
        pl.format(f"count out of range of its stored type: {what or column}={{}} (stored as Int32)",
                  value.cast(pl.String)))


def _rule_frame(table: pa.Table, rules: tuple[QuarantineRule, ...]) -> pl.DataFrame:
    """The columns of ``table`` that ``rules`` read, timestamps as epoch seconds (Float64), as Polars."""
    names = set()
    for rule in rules:
        names |= set(rule.condition.meta.root_names()) | set(rule.detail_expr().meta.root_names())
    columns = {}
    for name in (n for n in table.column_names if n in names):
        column = table.column(name)
        if pa.types.is_timestamp(column.type):  # as numbers: Polars cannot hold every timestamp[ms]
            per_second = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[column.type.unit]
            column = pc.divide(pc.cast(pc.cast(column, pa.int64()), pa.float64(), safe=False), per_second)
        elif pa.types.is_list(column.type) and pa.types.is_struct(column.type.value_type):
            # messages: only their integer fields (num_tokens), not the texts
            counts = [f for f in column.type.value_type if pa.types.is_integer(f.type)]
            column = column.cast(pa.list_(pa.struct(counts)))
        columns[name] = column
    if not columns:
        return pl.DataFrame({"_": [None] * table.num_rows}, schema={"_": pl.Null})
    return pl.from_arrow(pa.table(columns))


def _language(column: str = "language") -> pl.Expr:
    return pl.col(column).cast(pl.String).replace(LANGUAGE_CODES)


def _widen(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _widen(f.type)) for f in dtype])
    return pa.int64() if pa.types.is_integer(dtype) else dtype


#: What the older formats convert to: :data:`~arena_pipeline.core.dataset.schema.DATASET_ARROW_SCHEMA` with
#: the integers of conv_metadata and category_tag as int64 (any integer width passes the card check;
#: flattening keeps them Int64 until the ``count_out_of_range`` rule has seen them).
CONVERTED_SCHEMA = pa.schema([pa.field(f.name, _widen(f.type)) if f.name in ("conv_metadata", "category_tag")
                              else f for f in DATASET_ARROW_SCHEMA])


def _finish(frame: pl.DataFrame) -> pa.Table:
    """Columns in canonical order, cast to :data:`CONVERTED_SCHEMA`."""
    table = frame.select(CONVERTED_SCHEMA.names).to_arrow()
    return table.cast(CONVERTED_SCHEMA)


def _source_type(table: pa.Table, column: str) -> pa.DataType | None:
    return table.schema.field(column).type if column in table.schema.names else None


def _conv_metadata(table: pa.Table, turns: pl.Expr) -> pl.Expr:
    """conv_metadata conformed to the 140k struct, ``turns`` filled from ``turns`` where missing."""
    source = _source_type(table, "conv_metadata")
    conformed = _conform(pl.col("conv_metadata"), source, CONV_METADATA_TYPE) if source is not None else None
    fields = []
    for i in range(CONV_METADATA_TYPE.num_fields):
        f = CONV_METADATA_TYPE.field(i)
        value = conformed.struct.field(f.name) if conformed is not None else _null(f.type)
        if f.name == "turns":
            value = pl.coalesce(value, pl.when(_int32_ok(turns)).then(turns).cast(pl.Int64))
        fields.append(value.alias(f.name))
    return pl.struct(fields)


# --------------------------------------------------------------------------- conversions

def _nulled(column: pa.ChunkedArray, ok: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.if_else(ok, column, pa.scalar(None, column.type))


def _from_140k(table: pa.Table) -> pa.Table:
    """The card's columns as they are, but for values no flat column holds (null: the row breaks a
    :data:`ARENA_140K` row rule and is quarantined): a timestamp out of ``timestamp[ns]``, an
    ``evaluation_order`` out of Int32."""
    table = table.select(DATASET_ARROW_SCHEMA.names)
    frame = _rule_frame(table, (_bad_time("timestamp"), _bad_count("evaluation_order")))
    checks = {"timestamp": _epoch_ok(pl.col("timestamp")), "evaluation_order": _int32_ok(pl.col("evaluation_order"))}
    for name, ok in checks.items():
        if name in frame.columns and not frame.select(ok.fill_null(True).all()).item():
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, _nulled(table.column(name),
                                                          frame.select(ok.fill_null(True)).to_series().to_arrow()))
    return table


def _from_conversations(table: pa.Table) -> pa.Table:
    """lmsys/chatbot_arena_conversations (33k) and arena-human-preference-100k: question_id,
    OpenAI-format conversations, ``turn``, ``tstamp`` (epoch seconds), language names."""
    frame = pl.from_arrow(table)
    tags = _source_type(table, "category_tag")
    return _finish(frame.select(
        id=pl.col("question_id").cast(pl.String),
        model_a=pl.col("model_a"),
        model_b=pl.col("model_b"),
        winner=_winner(),
        evaluation_session_id=pl.lit(None, pl.String),
        evaluation_order=pl.lit(None, pl.Int32),
        conversation_a=_openai_messages("conversation_a", with_tokens=False),
        conversation_b=_openai_messages("conversation_b", with_tokens=True),
        full_conversation=_null(DATASET_ARROW_SCHEMA.field("full_conversation").type),
        conv_metadata=_conv_metadata(table, pl.col("turn")),
        category_tag=_conform(pl.col("category_tag"), tags, CATEGORY_TAG_TYPE),
        language=_language(),
        is_code=pl.col("is_code").cast(pl.Boolean) if "is_code" in table.schema.names else pl.lit(None, pl.Boolean),
        timestamp=_epoch_seconds("tstamp"),
    ))


def _json_list(column: str) -> pl.Expr:
    return pl.col(column).str.json_decode(pl.List(pl.String))


def _decode_lists(frame: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """Decode JSON-string lists; a cell that is not a JSON list of strings becomes null."""
    try:
        return frame.with_columns([_json_list(c) for c in columns])
    except pl.exceptions.PolarsError:
        pass  # one bad cell fails the vectorised decode: decode cell by cell (slow path, broken files only)
    import json

    def decode(cell: str | None) -> list | None:
        try:
            value = json.loads(cell) if cell is not None else None
        except ValueError:
            return None
        ok = isinstance(value, list) and all(v is None or isinstance(v, str) for v in value)
        return value if ok else None

    return frame.with_columns(
        [pl.col(c).map_elements(decode, return_dtype=pl.List(pl.String)) for c in columns])


def _one_hot_winner() -> pl.Expr:
    """The one-hot flags as numbers (``1``, ``1.0``, `` 1 `` alike); a row that is not one-hot keeps
    its cells, spelled out, so ``unknown_winner`` quarantines it by name."""
    cells = {c: pl.col(c).cast(pl.String).str.strip_chars() for c in ("winner_model_a", "winner_model_b", "winner_tie")}
    flags = {c: v.cast(pl.Float64, strict=False) for c, v in cells.items()}

    def exactly(name: str) -> pl.Expr:
        return pl.all_horizontal([(v == 1) if c == name else (v == 0) for c, v in flags.items()])

    spelled = pl.format("winner_model_a={}, winner_model_b={}, winner_tie={}",
                        *[v.fill_null("null") for v in cells.values()])
    return (pl.when(exactly("winner_model_a")).then(pl.lit("model_a"))
            .when(exactly("winner_model_b")).then(pl.lit("model_b"))
            .when(exactly("winner_tie")).then(pl.lit("tie"))
            .otherwise(spelled))


def _interleave(frame: pl.DataFrame, response: str) -> pl.Series:
    """user prompt i, then response i, for every turn; null when the two lists differ in length."""
    rows = frame.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), "prompt", pl.col(response).alias("_resp"))
    turns = (
        rows.filter(pl.col("prompt").list.len() == pl.col("_resp").list.len())
        .with_columns(_i=pl.int_ranges(0, pl.col("prompt").list.len()))
        .explode("prompt", "_i")
        .filter(pl.col("_i").is_not_null())
        .select("_row", pair=pl.concat_list(
            pl.struct(role=pl.lit("user"), content=_text_part(pl.col("prompt"))),
            pl.struct(role=pl.lit("assistant"), content=_text_part(pl.col("_resp").list.get(pl.col("_i")))),
        ))
        .group_by("_row", maintain_order=True)
        .agg(pl.col("pair").explode())
    )
    return rows.select("_row").join(turns, on="_row", how="left").sort("_row").get_column("pair")


def _from_kaggle(table: pa.Table) -> pa.Table:
    """lmarena-ai/arena-human-preference-55k (Kaggle train.csv): JSON-string prompt and response
    lists, one-hot winner columns; no timestamps, language, tags or style counts."""
    frame = _decode_lists(pl.from_arrow(table), ("prompt", "response_a", "response_b"))
    conv_a = _interleave(frame, "response_a")
    conv_b = _interleave(frame, "response_b")
    msg_b = pl.List(pl.Struct({"role": pl.String, "content": conv_b.dtype.inner.fields[1].dtype,
                               "num_tokens": pl.Int32}))
    frame = frame.with_columns(conversation_a=conv_a, conversation_b=conv_b)
    return _finish(frame.select(
        id=pl.col("id").cast(pl.String).str.strip_chars(),
        model_a=pl.col("model_a"),
        model_b=pl.col("model_b"),
        winner=_one_hot_winner(),
        evaluation_session_id=pl.lit(None, pl.String),
        evaluation_order=pl.lit(None, pl.Int32),
        conversation_a=pl.col("conversation_a"),
        conversation_b=pl.col("conversation_b").list.eval(
            pl.struct(role=pl.element().struct.field("role"), content=pl.element().struct.field("content"),
                      num_tokens=pl.lit(None, pl.Int32))).cast(msg_b),
        full_conversation=_null(DATASET_ARROW_SCHEMA.field("full_conversation").type),
        conv_metadata=_conv_metadata(table, pl.col("prompt").list.len()),
        category_tag=_null(CATEGORY_TAG_TYPE),
        language=pl.lit(None, pl.String),
        is_code=pl.lit(None, pl.Boolean),
        timestamp=pl.lit(None, pl.Datetime("us")),
    ))


# --------------------------------------------------------------------------- the adapters

#: LMArena's leaderboards use anonymous votes only (``battles[battles.anony]`` in their notebooks):
#: a vote cast with the model names shown (``anony`` false; null counts as anonymous) is quarantined.
NOT_ANONYMOUS = QuarantineRule(
    "not_anonymous", pl.col("anony").cast(pl.Boolean).not_(),
    "anony is false: the voter saw the model names (LMArena's boards count anonymous votes only)")

#: The row rules of the conversations formats (33k, 100k): ``tstamp`` and ``turn`` must fit the
#: canonical timestamp and Int32 turns; anonymous votes only.
_CONVERSATIONS_RULES = (_bad_time("tstamp"), _bad_count("turn"), NOT_ANONYMOUS)

def _canonical_families() -> dict[str, tuple[str, ...]]:
    return {f.name: (type_family(f.type),) for f in DATASET_ARROW_SCHEMA}


#: Flat battles columns that come from conv_metadata / category_tag (nested paths).
_METADATA_COLUMNS = tuple(n for n, p in BATTLES_NESTED_PATHS.items() if p[0] == "conv_metadata" and n != "turns")
_TAG_COLUMNS = tuple(n for n, p in BATTLES_NESTED_PATHS.items() if p[0] == "category_tag")
_SESSION = ("evaluation_session_id", "evaluation_order", "full_conversation_turns")

ARENA_140K = Adapter(
    name="arena-140k",
    card="lmarena-ai/arena-human-preference-140k",
    columns=_canonical_families(),
    convert=_from_140k,
    row_rules=(
        _bad_time("timestamp"), _bad_count("evaluation_order"),
        _bad_count("conversation_b", "conversation_b num_tokens", pl.col("conversation_b").list.eval(
            pl.element().struct.field("num_tokens")).list.eval(
            pl.element().filter(~_int32_ok(pl.element()))).list.first()),
    ),
    notes="the canonical schema (core/dataset/schema.py); read as is",
)

ARENA_100K = Adapter(
    name="arena-100k",
    card="lmarena-ai/arena-human-preference-100k",
    columns={
        "question_id": ("string",), "model_a": ("string",), "model_b": ("string",), "winner": ("string",),
        "conversation_a": ("list",), "conversation_b": ("list",), "turn": ("integer",),
        "anony": ("bool",), "language": ("string",), "tstamp": ("float", "integer"),
        "conv_metadata": ("struct",), "is_code": ("bool",), "category_tag": ("struct",),
    },
    optional=("judge_hash", "is_refusal", "dedup_tag"),
    convert=_from_conversations,
    row_rules=_CONVERSATIONS_RULES,
    # category_tag of the 100k card has criteria_v0.1, if_v0.1 and math_v0.1 only
    unavailable=_SESSION + ("creative_writing", "creative_writing_score"),
    notes="no sessions or full_conversation; creative_writing_v0.1 is not tagged",
)

CHATBOT_ARENA_33K = Adapter(
    name="chatbot-arena-33k",
    card="lmsys/chatbot_arena_conversations",
    columns={
        "question_id": ("string",), "model_a": ("string",), "model_b": ("string",), "winner": ("string",),
        "judge": ("string",), "conversation_a": ("list",), "conversation_b": ("list",),
        "turn": ("integer",), "anony": ("bool",), "language": ("string",), "tstamp": ("float", "integer"),
    },
    optional=("openai_moderation", "toxic_chat_tag"),
    convert=_from_conversations,
    row_rules=_CONVERSATIONS_RULES,
    unavailable=_SESSION + ("is_code",) + _METADATA_COLUMNS + _TAG_COLUMNS,
    notes="no conv_metadata (style control, token counts), no category tags, no is_code",
)

KAGGLE_55K = Adapter(
    name="arena-55k",
    card="lmarena-ai/arena-human-preference-55k",
    columns={
        "id": ("integer", "string"), "model_a": ("string",), "model_b": ("string",),
        "prompt": ("string",), "response_a": ("string",), "response_b": ("string",),
        "winner_model_a": ("integer", "float", "string"), "winner_model_b": ("integer", "float", "string"),
        "winner_tie": ("integer", "float", "string"),
    },
    convert=_from_kaggle,
    unavailable=_SESSION + ("is_code", "language", "timestamp") + _METADATA_COLUMNS + _TAG_COLUMNS,
    notes="one-hot winners: a tie there includes 'both bad' (no both_bad); no timestamps",
)

#: Every known format, most specific first.
ADAPTERS: tuple[Adapter, ...] = (ARENA_140K, ARENA_100K, CHATBOT_ARENA_33K, KAGGLE_55K)

#: Flat battles columns some format leaves null (what "unavailable for a dump" can mean).
ADAPTABLE_COLUMNS: frozenset[str] = frozenset(c for a in ADAPTERS for c in a.unavailable)


def choose_adapter(schema: pa.Schema, where: str = "file") -> Adapter:
    """The adapter whose documented columns ``schema`` has (the first of :data:`ADAPTERS`).

    Raises
    ------
    UnknownFormatError
        No adapter accepts the columns; the message lists them and the nearest adapter with
        what it lacks.
    """
    for adapter in ADAPTERS:
        if not adapter.mismatches(schema):
            return adapter
    nearest = nearest_adapter(schema)
    problems = nearest.mismatches(schema)
    if not [p for p in problems if p.startswith("missing ")]:  # the format's columns, a type wrong
        raise UnknownFormatError(f"{where}: wrong column type for the {nearest.name} format ({nearest.card}): "
                                 + "; ".join(problems))
    raise UnknownFormatError(
        f"{where}: no known dump format has these columns: {', '.join(schema.names) or '(none)'}; "
        f"nearest: {nearest.name} ({nearest.card}), which needs: {'; '.join(problems)}"
    )


def nearest_adapter(schema: pa.Schema) -> Adapter:
    """The adapter sharing the largest part of its documented columns with ``schema``."""
    present = set(schema.names)
    return max(ADAPTERS, key=lambda a: (len(present & set(a.columns)) / len(a.columns), -len(a.columns)))


def csv_schema(columns: list[str]) -> pa.Schema:
    """A CSV header as an all-string Arrow schema (what :func:`choose_adapter` reads)."""
    return pa.schema([(c, pa.string()) for c in columns])
