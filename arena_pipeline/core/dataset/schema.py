"""The dataset card's Arrow schema and the flat table schemas the pipeline writes."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

# ---------------------------------------------------------------------------
# The dump as published (dataset card of lmarena-ai/arena-human-preference-140k)
# ---------------------------------------------------------------------------
_CONTENT = pa.list_(
    pa.struct(
        [
            ("type", pa.string()),
            ("text", pa.string()),
            ("image", pa.string()),
            ("mimeType", pa.string()),
        ]
    )
)
_TURN = pa.struct([("role", pa.string()), ("content", _CONTENT)])
_TURN_WITH_TOKENS = pa.struct(
    [("role", pa.string()), ("content", _CONTENT), ("num_tokens", pa.int32())]
)
_HEADERS = pa.struct([(f"h{i}", pa.int64()) for i in range(1, 7)])
_LISTS = pa.struct([("ordered", pa.int64()), ("unordered", pa.int64())])
_BOLD = pa.struct([("**", pa.int64()), ("__", pa.int64())])


def _side_metadata(side: str) -> list[tuple[str, pa.DataType]]:
    return [
        (f"sum_assistant_{side}_tokens", pa.int32()),
        (f"header_count_{side}", _HEADERS),
        (f"list_count_{side}", _LISTS),
        (f"bold_count_{side}", _BOLD),
        (f"context_{side}_tokens", pa.int32()),
    ]


CONV_METADATA_TYPE = pa.struct(
    _side_metadata("a")
    + _side_metadata("b")
    + [("sum_user_tokens", pa.int32()), ("turns", pa.int32())]
)

CRITERIA = (
    "complexity",
    "creativity",
    "domain_knowledge",
    "problem_solving",
    "real_world",
    "specificity",
    "technical_accuracy",
)

CATEGORY_TAG_TYPE = pa.struct(
    [
        (
            "creative_writing_v0.1",
            pa.struct([("creative_writing", pa.bool_()), ("score", pa.string())]),
        ),
        ("criteria_v0.1", pa.struct([(c, pa.bool_()) for c in CRITERIA])),
        ("if_v0.1", pa.struct([("if", pa.bool_()), ("score", pa.int32())])),
        ("math_v0.1", pa.struct([("math", pa.bool_())])),
    ]
)

DATASET_ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("model_a", pa.string()),
        ("model_b", pa.string()),
        ("winner", pa.string()),
        ("evaluation_session_id", pa.string()),
        ("evaluation_order", pa.int32()),
        ("conversation_a", pa.list_(_TURN)),
        ("conversation_b", pa.list_(_TURN_WITH_TOKENS)),
        (
            "full_conversation",
            pa.list_(
                pa.struct(
                    [("user", _TURN), ("model_side_a", _TURN), ("model_side_b", _TURN)]
                )
            ),
        ),
        ("conv_metadata", CONV_METADATA_TYPE),
        ("category_tag", CATEGORY_TAG_TYPE),
        ("language", pa.string()),
        ("is_code", pa.bool_()),
        ("timestamp", pa.timestamp("ns")),
    ]
)

NESTED_COLUMNS: tuple[str, ...] = (
    "conversation_a",
    "conversation_b",
    "full_conversation",
    "conv_metadata",
    "category_tag",
)
WINNERS: tuple[str, ...] = ("model_a", "model_b", "tie", "both_bad")

# ---------------------------------------------------------------------------
# Flat tables
# ---------------------------------------------------------------------------


def _side_columns(side: str) -> dict[str, pl.DataType]:
    cols: dict[str, pl.DataType] = {f"sum_assistant_{side}_tokens": pl.Int32()}
    cols.update({f"header_count_{side}_h{i}": pl.Int64() for i in range(1, 7)})
    cols[f"list_count_{side}_ordered"] = pl.Int64()
    cols[f"list_count_{side}_unordered"] = pl.Int64()
    cols[f"bold_count_{side}_asterisk"] = pl.Int64()  # the '**' field
    cols[f"bold_count_{side}_underscore"] = pl.Int64()  # the '__' field
    cols[f"context_{side}_tokens"] = pl.Int32()
    return cols


#: arena.battles: one row per vote, every scalar of the dump as a column.
BATTLES_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "model_a": pl.String(),
    "model_b": pl.String(),
    # normalized names (core/dataset/models.py: case, separators, alias table); what the leaderboards use
    "model_a_canonical": pl.String(),
    "model_b_canonical": pl.String(),
    "winner": pl.String(),
    "evaluation_session_id": pl.String(),
    "evaluation_order": pl.Int32(),
    "language": pl.String(),
    "is_code": pl.Boolean(),
    "timestamp": pl.Datetime("us"),
    **_side_columns("a"),
    **_side_columns("b"),
    "sum_user_tokens": pl.Int32(),
    "turns": pl.Int32(),
    "creative_writing": pl.Boolean(),
    "creative_writing_score": pl.String(),
    **{f"criteria_{c}": pl.Boolean() for c in CRITERIA},
    "instruction_following": pl.Boolean(),
    "instruction_following_score": pl.Int32(),
    "math": pl.Boolean(),
    # derived from the nested lists, for consistency checks
    "n_messages_a": pl.Int32(),
    "n_messages_b": pl.Int32(),
    "n_user_messages_a": pl.Int32(),
    "n_user_messages_b": pl.Int32(),
    "full_conversation_turns": pl.Int32(),
    # provenance
    "source_file": pl.String(),
    "source_row": pl.Int64(),
    # the dump (dataset id) the row came from; other dumps holding the same vote (',' joined)
    "dump": pl.String(),
    "also_in_dumps": pl.String(),
}

#: Where each flat conv_metadata / category_tag column comes from in the dump.
BATTLES_NESTED_PATHS: dict[str, tuple[str, ...]] = {}
for _side in ("a", "b"):
    BATTLES_NESTED_PATHS[f"sum_assistant_{_side}_tokens"] = (
        "conv_metadata",
        f"sum_assistant_{_side}_tokens",
    )
    for _i in range(1, 7):
        BATTLES_NESTED_PATHS[f"header_count_{_side}_h{_i}"] = (
            "conv_metadata",
            f"header_count_{_side}",
            f"h{_i}",
        )
    for _kind in ("ordered", "unordered"):
        BATTLES_NESTED_PATHS[f"list_count_{_side}_{_kind}"] = (
            "conv_metadata",
            f"list_count_{_side}",
            _kind,
        )
    BATTLES_NESTED_PATHS[f"bold_count_{_side}_asterisk"] = (
        "conv_metadata",
        f"bold_count_{_side}",
        "**",
    )
    BATTLES_NESTED_PATHS[f"bold_count_{_side}_underscore"] = (
        "conv_metadata",
        f"bold_count_{_side}",
        "__",
    )
    BATTLES_NESTED_PATHS[f"context_{_side}_tokens"] = (
        "conv_metadata",
        f"context_{_side}_tokens",
    )
BATTLES_NESTED_PATHS["sum_user_tokens"] = ("conv_metadata", "sum_user_tokens")
BATTLES_NESTED_PATHS["turns"] = ("conv_metadata", "turns")
BATTLES_NESTED_PATHS["creative_writing"] = (
    "category_tag",
    "creative_writing_v0.1",
    "creative_writing",
)
BATTLES_NESTED_PATHS["creative_writing_score"] = (
    "category_tag",
    "creative_writing_v0.1",
    "score",
)
for _c in CRITERIA:
    BATTLES_NESTED_PATHS[f"criteria_{_c}"] = ("category_tag", "criteria_v0.1", _c)
BATTLES_NESTED_PATHS["instruction_following"] = ("category_tag", "if_v0.1", "if")
BATTLES_NESTED_PATHS["instruction_following_score"] = (
    "category_tag",
    "if_v0.1",
    "score",
)
BATTLES_NESTED_PATHS["math"] = ("category_tag", "math_v0.1", "math")

#: Nested integer fields stored narrower than Int64 (e.g. token counts in Int32). The dump may hold
#: them as int64 (any integer width passes the schema check), so :func:`flatten.flatten_battles`
#: keeps them as Int64, the ``count_out_of_range`` quarantine rule rejects values outside the
#: stored type's range, and only the clean rows are narrowed to :data:`BATTLES_SCHEMA`.
NARROWED_COLUMNS: tuple[str, ...] = tuple(
    name for name in BATTLES_NESTED_PATHS
    if BATTLES_SCHEMA[name].is_integer() and BATTLES_SCHEMA[name] != pl.Int64()
)

#: The flat battles as :func:`flatten.flatten_battles` returns them (before quarantine).
FLAT_BATTLES_SCHEMA: dict[str, pl.DataType] = {
    name: pl.Int64() if name in NARROWED_COLUMNS else dtype for name, dtype in BATTLES_SCHEMA.items()
}

#: arena.messages: one row per message of conversation_a / conversation_b.
MESSAGES_SCHEMA: dict[str, pl.DataType] = {
    "battle_id": pl.String(),
    "side": pl.String(),  # 'a' or 'b'
    "turn": pl.Int32(),  # 1-based: the n-th user message and the replies after it
    "position": pl.Int32(),  # 0-based index of the message in the conversation
    "role": pl.String(),
    "content_type": pl.String(),  # part types joined by ',' (usually 'text')
    "text": pl.String(),  # text parts joined by '\n\n'
    "n_parts": pl.Int32(),
    "images": pl.List(pl.String()),  # non-null image references of the parts
    "num_tokens": pl.Int32(),  # only present in conversation_b
    "dump": pl.String(),  # the dump (dataset id) of the battle
}

#: arena.context_messages: full_conversation entries that precede the vote's own turns.
CONTEXT_MESSAGES_SCHEMA: dict[str, pl.DataType] = {
    "battle_id": pl.String(),
    "context_turn": pl.Int32(),  # 0-based index into full_conversation
    "slot": pl.String(),  # 'user', 'model_side_a' or 'model_side_b'
    "role": pl.String(),
    "content_type": pl.String(),
    "text": pl.String(),
    "n_parts": pl.Int32(),
    "images": pl.List(pl.String()),
    "is_current": pl.Boolean(),  # True only when the tail did not match the vote's turns
    "dump": pl.String(),
}

CONVERSATION_STYLE_COLUMNS = {
    "tokens": ("sum_assistant_{side}_tokens",),
    "headers": tuple(f"header_count_{{side}}_h{i}" for i in range(1, 7)),
    "lists": ("list_count_{side}_ordered", "list_count_{side}_unordered"),
    "bold": ("bold_count_{side}_asterisk", "bold_count_{side}_underscore"),
}
"""The four style-control features and the battles columns summed into each."""

#: arena.quarantine: input rows kept out of arena.battles, with the rule they broke.
QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),  # the row's id, or null when it had none
    "source_file": pl.String(),
    "source_row": pl.Int64(),  # 0-based row position in source_file
    "rule": pl.String(),  # short machine name, e.g. 'unknown_winner'
    "detail": pl.String(),  # human-readable reason
    "raw": pl.String(),  # the row's scalar values as JSON
    "dump": pl.String(),  # the dump (dataset id) the row came from
}

#: Columns every flat table carries to say which dump a row came from (set by the loader).
DUMP_COLUMNS: tuple[str, ...] = ("dump", "also_in_dumps")
