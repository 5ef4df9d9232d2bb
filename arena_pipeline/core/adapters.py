"""Schema adapters: every public text-arena dump format turned into the canonical (140k) Arrow schema.

Each adapter is data (the columns and type families its dataset card documents, the winner
mapping, the canonical fields it cannot fill) plus one small function that turns an Arrow table
of that format into :data:`~arena_pipeline.core.schema.DATASET_ARROW_SCHEMA`, so flattening,
quarantine and the quality suites apply unchanged. An adapter is chosen by a file's columns and
types (:func:`choose_adapter`), never by the dataset's name, so a mirror or a renamed copy loads;
a file no adapter accepts fails with the columns it has and the nearest adapter.

Decisions
---------
- **Missing fields are null, never false.** A canonical field a format does not have is null in
  every row of that dump; :attr:`Adapter.unavailable` lists the flat battles columns this leaves
  empty. The loader lets exactly those columns be null (``quarantine.split_quarantine``'s
  ``optional``) and the categories and quality checks read "a column entirely null within a dump"
  as "unavailable for that dump" (``core/dumps.py``).
- **Battle ids are the dump's own ids** (``id``, ``question_id``, or the Kaggle row id): unique
  within a dump; the same id in two dumps is the same vote (the loader keeps one copy).
- **Anonymous votes only.** The 33k and 100k dumps also hold votes cast with the model names
  shown (``anony`` false); LMArena's boards leave them out, so the loader moves them to
  quarantine (rule ``not_anonymous``) instead of dropping them silently.
- **Language names** of the 2023-2024 dumps (``English``) become the codes of the 140k dump
  (``en``) through :data:`LANGUAGE_CODES`; unknown names are kept as they are.

Sources: the dataset cards, see ``docs/dump_formats.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from arena_pipeline.core.schema import (
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
    """The coarse family of an Arrow type (string kinds, integer widths and units are one family)."""
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
    exclude
        Optional: the rows (of the file's own table, a boolean Series) that are not leaderboard
        votes; the loader moves them to quarantine with rule ``exclude_rule``.
    """

    name: str
    card: str
    columns: dict[str, tuple[str, ...]]
    convert: Callable[[pa.Table], pa.Table]
    optional: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    notes: str = ""
    exclude: Callable[[pa.Table], pl.Series] | None = None
    exclude_rule: str = ""
    exclude_detail: str = ""

    def mismatches(self, schema: pa.Schema) -> list[str]:
        """What keeps ``schema`` from this format: missing columns and wrong type families."""
        present = {f.name: f.type for f in schema}
        problems = []
        for column, families in self.columns.items():
            if column not in present:
                problems.append(f"missing {column}")
            elif "any" not in families and type_family(present[column]) not in families + ("null",):
                problems.append(f"{column} is {present[column]}, expected {' or '.join(families)}")
        return problems

    def read_columns(self, schema: pa.Schema) -> list[str]:
        """The columns of ``schema`` this adapter reads."""
        wanted = set(self.columns) | set(self.optional)
        return [f.name for f in schema if f.name in wanted]


# --------------------------------------------------------------------------- helpers

def _null(dtype: pa.DataType) -> pl.Expr:
    return pl.lit(None, dtype=pl.from_arrow(pa.array([], type=dtype)).dtype)


def _conform(expr: pl.Expr, source: pa.DataType | None, target: pa.DataType) -> pl.Expr:
    """``expr`` (of Arrow type ``source``) reshaped to ``target``: struct fields by name, missing ones null."""
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
    return pl.col(column).replace(WINNER_MAP)


def _epoch_seconds(column: str) -> pl.Expr:
    return (pl.col(column).cast(pl.Float64) * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us"))


def _language(column: str = "language") -> pl.Expr:
    return pl.col(column).replace(LANGUAGE_CODES)


def _finish(frame: pl.DataFrame) -> pa.Table:
    """Columns in canonical order, cast to the canonical Arrow schema."""
    table = frame.select(DATASET_ARROW_SCHEMA.names).to_arrow()
    return table.cast(DATASET_ARROW_SCHEMA)


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
            value = pl.coalesce(value, turns.cast(pl.Int32))
        fields.append(value.alias(f.name))
    return pl.struct(fields)


# --------------------------------------------------------------------------- conversions

def _from_140k(table: pa.Table) -> pa.Table:
    return table.select(DATASET_ARROW_SCHEMA.names)


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
    flags = {c: pl.col(c).cast(pl.String).str.strip_chars().cast(pl.Int64, strict=False)
             for c in ("winner_model_a", "winner_model_b", "winner_tie")}

    def exactly(name: str) -> pl.Expr:
        return pl.all_horizontal([(v == 1) if c == name else (v == 0) for c, v in flags.items()])

    spelled = pl.format("winner_model_a={}, winner_model_b={}, winner_tie={}",
                        *[v.cast(pl.String).fill_null("null") for v in flags.values()])
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

def _not_anonymous(table: pa.Table) -> pl.Series:
    """Votes cast with the model names shown (``anony`` false); null counts as anonymous."""
    return (pl.from_arrow(table.column("anony")).cast(pl.Boolean) == False).fill_null(False)  # noqa: E712


#: LMArena's leaderboards use anonymous votes only (``battles[battles.anony]`` in their notebooks).
_ANONYMOUS_ONLY = {
    "exclude": _not_anonymous,
    "exclude_rule": "not_anonymous",
    "exclude_detail": "anony is false: the voter saw the model names (LMArena's boards count anonymous votes only)",
}

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
    notes="the canonical schema (core/schema.py); read as is",
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
    **_ANONYMOUS_ONLY,
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
    **_ANONYMOUS_ONLY,
    unavailable=_SESSION + ("is_code",) + _METADATA_COLUMNS + _TAG_COLUMNS,
    notes="no conv_metadata (style control, token counts), no category tags, no is_code",
)

KAGGLE_55K = Adapter(
    name="arena-55k",
    card="lmarena-ai/arena-human-preference-55k",
    columns={
        "id": ("integer", "string"), "model_a": ("string",), "model_b": ("string",),
        "prompt": ("string",), "response_a": ("string",), "response_b": ("string",),
        "winner_model_a": ("integer", "string"), "winner_model_b": ("integer", "string"),
        "winner_tie": ("integer", "string"),
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
    raise UnknownFormatError(
        f"{where}: no known dump format has these columns: {', '.join(schema.names) or '(none)'}; "
        f"nearest: {nearest.name} ({nearest.card}), which needs: {'; '.join(nearest.mismatches(schema))}"
    )


def nearest_adapter(schema: pa.Schema) -> Adapter:
    """The adapter sharing the largest part of its documented columns with ``schema``."""
    present = set(schema.names)
    return max(ADAPTERS, key=lambda a: (len(present & set(a.columns)) / len(a.columns), -len(a.columns)))


def csv_schema(columns: list[str]) -> pa.Schema:
    """A CSV header as an all-string Arrow schema (what :func:`choose_adapter` reads)."""
    return pa.schema([(c, pa.string()) for c in columns])
