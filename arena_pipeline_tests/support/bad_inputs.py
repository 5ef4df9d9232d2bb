"""Corrupt dumps for the bad-input tests: broken files, broken rows, new optional fields.

Parquet inputs start from the fixture votes of :mod:`arena_pipeline_dev.fixtures` (the dataset
card's exact Arrow schema) and break one thing; CSV inputs start from the real 100-row export in
``data/`` and change one cell or a few bytes. Every builder returns what a test needs to state the
exact expected outcome (the path of the broken file, the ids and rules of the broken rows...).
"""

from __future__ import annotations

import copy
import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA
from arena_pipeline_dev.fixtures import make_rows

REAL_CSV = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"


def shard_name(index: int, count: int) -> str:
    """``data/train-0000i-of-0000n.parquet``: the Hub layout, as ``source_file`` records it."""
    return f"data/train-{index:05d}-of-{count:05d}.parquet"


def write_shards(root: Path, tables: list[pa.Table]) -> list[Path]:
    """Write ``tables`` as the shards of a dump in ``root`` (Hub layout); return their paths."""
    paths = []
    for i, table in enumerate(tables):
        path = Path(root) / shard_name(i, len(tables))
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        paths.append(path)
    return paths


def table_of(rows: list[dict], schema: pa.Schema = DATASET_ARROW_SCHEMA) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


# ---------------------------------------------------------------------------
# Whole-file problems (parquet)
# ---------------------------------------------------------------------------

def truncate(path: Path, keep: float = 0.6) -> Path:
    """Cut ``path`` after ``keep`` of its bytes, as an interrupted copy leaves it (footer lost)."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: int(len(data) * keep)])
    return Path(path)


def replace_with_html(path: Path) -> Path:
    """Overwrite a shard with the HTML error page a proxy or an expired signed URL returns."""
    Path(path).write_bytes(
        b"<!DOCTYPE html>\n<html><head><title>403 Forbidden</title></head>"
        b"<body><h1>Request has expired</h1></body></html>\n"
    )
    return Path(path)


def schema_with_nested_type(path: tuple[str, ...], new_type: pa.DataType,
                            schema: pa.Schema = DATASET_ARROW_SCHEMA) -> pa.Schema:
    """``schema`` with the struct field at ``path`` retyped, e.g. ``("conv_metadata", "turns")``."""

    def retype(dtype: pa.DataType, rest: tuple[str, ...]) -> pa.DataType:
        if not rest:
            return new_type
        return pa.struct([pa.field(f.name, retype(f.type, rest[1:])) if f.name == rest[0] else f
                          for f in dtype])

    index = schema.get_field_index(path[0])
    return schema.set(index, pa.field(path[0], retype(schema.field(path[0]).type, path[1:])))


def with_turns_as_text(rows: list[dict]) -> pa.Table:
    """The rows with ``conv_metadata.turns`` as a string ("1"): an exporter's type drift."""
    rows = copy.deepcopy(rows)
    for row in rows:
        row["conv_metadata"]["turns"] = str(row["conv_metadata"]["turns"])
    return table_of(rows, schema_with_nested_type(("conv_metadata", "turns"), pa.string()))


# ---------------------------------------------------------------------------
# New optional fields: reported, never fatal
# ---------------------------------------------------------------------------

NEW_CATEGORY_VERSION = "criteria_v0.2"
NEW_TOP_LEVEL_COLUMN = "release_channel"


def with_new_optional_fields(rows: list[dict]) -> pa.Table:
    """The rows plus a ``category_tag.criteria_v0.2`` struct and a top-level ``release_channel``."""
    rows = copy.deepcopy(rows)
    for i, row in enumerate(rows):
        row["category_tag"][NEW_CATEGORY_VERSION] = {"complexity": i % 2 == 0,
                                                     "reasoning": i % 3 == 0}
        row[NEW_TOP_LEVEL_COLUMN] = "stable" if i % 2 else "beta"
    tag = DATASET_ARROW_SCHEMA.field("category_tag").type
    version = pa.struct([("complexity", pa.bool_()), ("reasoning", pa.bool_())])
    new_tag = pa.struct([*tag, pa.field(NEW_CATEGORY_VERSION, version)])
    schema = DATASET_ARROW_SCHEMA.set(DATASET_ARROW_SCHEMA.get_field_index("category_tag"),
                                      pa.field("category_tag", new_tag))
    return table_of(rows, schema.append(pa.field(NEW_TOP_LEVEL_COLUMN, pa.string())))


# ---------------------------------------------------------------------------
# Row-level problems (parquet)
# ---------------------------------------------------------------------------

@dataclass
class BadRow:
    """One broken input row and the outcome expected for it."""

    case: str
    id: str | None
    source_file: str
    source_row: int
    rule: str  # exact quarantine.rule (rules joined by ',' in core.quarantine.RULES order)
    detail: str  # a fragment of quarantine.detail


@dataclass
class RowLevelDump:
    """A two-shard dump mixing clean votes and one broken row per case."""

    paths: list[Path]
    shards: list[list[dict]]  # the rows written, per shard
    bad: list[BadRow] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(len(s) for s in self.shards)

    def clean(self) -> list[tuple[str, int, dict]]:
        """(source_file, source_row, row) of every row expected in arena.battles."""
        broken = {(b.source_file, b.source_row) for b in self.bad}
        return [(shard_name(s, len(self.shards)), r, row)
                for s, rows in enumerate(self.shards) for r, row in enumerate(rows)
                if (shard_name(s, len(self.shards)), r) not in broken]


def other_winner(winner: str) -> str:
    """A valid winner different from ``winner``."""
    return "tie" if winner != "tie" else "model_b"


ROW_CASES = (
    "unknown winner", "null model", "model_a == model_b", "turns = 0",
    "turns disagree with messages", "negative tokens", "empty conversation", "null id",
    "duplicate id within a shard", "duplicate id across shards",
)


def row_level_dump(root: Path, per_shard: int = 12, seed: int = 11) -> RowLevelDump:
    """Two shards of ``per_shard`` votes; rows 2-10 of shard 0 and row 3 of shard 1 are broken.

    Each broken row breaks exactly the rules listed in its :class:`BadRow` (``turns = 0`` also
    disagrees with the user messages, an empty conversation also disagrees with ``turns``). The
    duplicates copy a clean row with a different ``winner``, so the kept copy can be told apart.
    The cases come in :data:`ROW_CASES` order.
    """
    rows = make_rows(2 * per_shard, seed=seed)
    first, second = rows[:per_shard], rows[per_shard:]
    f0, f1 = shard_name(0, 2), shard_name(1, 2)
    bad: list[BadRow] = []

    def broken(index, rule, detail, shard=first, name=f0):
        case = ROW_CASES[len(bad)]
        bad.append(BadRow(case, shard[index]["id"], name, index, rule, detail))

    first[2]["winner"] = "draw"
    broken(2, "unknown_winner", "winner=draw is not one of model_a, model_b, tie, both_bad")
    first[3]["model_b"] = None
    broken(3, "null_model", "model_b=null")
    first[4]["model_b"] = first[4]["model_a"]
    broken(4, "same_model", f"model_a and model_b are both {first[4]['model_a']}")
    first[5]["conv_metadata"]["turns"] = 0
    broken(5, "invalid_turns,turns_mismatch", "turns=0 is not at least 1")
    users = sum(m["role"] == "user" for m in first[6]["conversation_a"])
    first[6]["conv_metadata"]["turns"] = users + 1
    broken(6, "turns_mismatch", f"turns={users + 1} but conversation_a has {users} user "
           f"messages and conversation_b has {users}")
    first[7]["conv_metadata"]["sum_assistant_a_tokens"] = -5
    broken(7, "negative_tokens", "negative token count: sum_assistant_a_tokens=-5")
    first[8]["conversation_a"] = []
    first[8]["conversation_b"] = []
    broken(8, "turns_mismatch,empty_conversation",
           "empty conversation: conversation_a has 0 messages, conversation_b has 0")
    first[9]["id"] = None
    broken(9, "null_id", "id is null")
    # a second copy of row 0 later in the same shard, and of row 1 in the next shard
    first[10] = dict(copy.deepcopy(first[0]), winner=other_winner(first[0]["winner"]))
    broken(10, "duplicate_id", f"id {first[0]['id']} is repeated; the copy kept is {f0} row 0")
    second[3] = dict(copy.deepcopy(first[1]), winner=other_winner(first[1]["winner"]))
    broken(3, "duplicate_id", f"id {first[1]['id']} is repeated; the copy kept is {f0} row 1",
           shard=second, name=f1)
    paths = write_shards(root, [table_of(first), table_of(second)])
    return RowLevelDump(paths=paths, shards=[first, second], bad=bad)


def messages_of(row: dict) -> int:
    return len(row["conversation_a"]) + len(row["conversation_b"])


# ---------------------------------------------------------------------------
# CSV exports
# ---------------------------------------------------------------------------

def read_real_csv() -> tuple[list[str], list[list[str]]]:
    """Header and records of the real 100-vote export."""
    records = list(csv.reader(io.StringIO(REAL_CSV.read_text(encoding="utf-8"))))
    return records[0], records[1:]


def write_csv(path: Path, header: list[str], records: list[list[str]]) -> Path:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *records])
    Path(path).write_text(out.getvalue(), encoding="utf-8")
    return Path(path)


def csv_cut_inside_quotes(path: Path, record: int = 50) -> Path:
    """The real export with record ``record`` cut short inside its first quoted field.

    The opening quote is never closed, so the CSV parser cannot find where the record ends.
    """
    lines = REAL_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    line = lines[record + 1]
    quote = line.index('"')
    lines[record + 1] = line[: quote + 30] + "\n"
    Path(path).write_text("".join(lines), encoding="utf-8")
    return Path(path)


def csv_with_latin1_row(path: Path, record: int = 41) -> tuple[Path, int, int]:
    """The real export with record ``record``'s language cell written in Latin-1 ('café' as 0xE9).

    Returns the path, the offset of the first non-UTF-8 byte and its 1-based line number.
    """
    header, records = read_real_csv()
    placeholder = "@@latin-1@@"
    records[record][header.index("language")] = placeholder
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *records])
    data = text.getvalue().encode("utf-8").replace(placeholder.encode(), b"caf\xe9")
    Path(path).write_bytes(data)
    offset = data.index(b"caf\xe9") + 3
    return Path(path), offset, data[:offset].count(b"\n") + 1


CSV_CASES = ("code-calling literal", "unclosed literal", "bad timestamp",
             "unknown winner after unparseable records", "wrong nested shape")


def csv_row_level(path: Path, marker: Path) -> tuple[Path, list[BadRow]]:
    """The real export with five broken records; one holds a literal that would run a shell command.

    Records 5, 7 and 30 do not parse (rule ``unparseable_nested_field``), nor does record 9's
    timestamp (rule ``unparseable_field``); record 20 parses but
    has an unknown winner, so its ``source_row`` must still be its CSV position. ``detail`` is
    the start of the expected detail for unparseable records, a fragment otherwise.
    """
    header, records = read_real_csv()
    col = header.index
    name = Path(path).name
    bad = []

    def broken(case, index, column, value, rule, detail):
        records[index][col(column)] = value
        bad.append(BadRow(case, records[index][col("id")], name, index, rule, detail))

    unparseable = "unparseable_nested_field"
    broken(CSV_CASES[0], 5, "conv_metadata", f"__import__('os').system('touch {marker}')",
           unparseable, "conv_metadata: ValueError: malformed node or string")
    broken(CSV_CASES[1], 7, "conversation_a", "[{'role': 'user', 'content': [", unparseable,
           "conversation_a: SyntaxError")
    broken(CSV_CASES[2], 9, "timestamp", "yesterday", "unparseable_field",
           "timestamp: not an ISO 8601 time: 'yesterday'")
    broken(CSV_CASES[3], 20, "winner", "model_c", "unknown_winner", "winner=model_c is not one of")
    broken(CSV_CASES[4], 30, "category_tag", "{'criteria_v0.1': 'yes'}", unparseable,
           "category_tag: ArrowTypeError")
    return write_csv(path, header, records), bad


# ---------------------------------------------------------------------------
# One bad value in each dump format (parquet): one quarantined vote each
# ---------------------------------------------------------------------------

#: The row of each small fixture table that gets the bad value.
BAD_ROW = 1


def set_value(table: pa.Table, path: tuple, value, dtype: pa.DataType | None = None, row: int = BAD_ROW) -> pa.Table:
    """``table`` with the (nested) value at ``path`` of ``row`` replaced; ``dtype`` retypes a
    top-level column or struct field at ``path`` (for values its card type cannot hold)."""
    rows = copy.deepcopy(table.to_pylist())
    target = rows[row]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    schema = table.schema if dtype is None else schema_with_nested_type(path, dtype, table.schema)
    return pa.Table.from_pylist(rows, schema=schema)


def with_timestamp_unit(table: pa.Table, unit: str, value: int, row: int = BAD_ROW) -> pa.Table:
    """``table`` (140k) with ``timestamp`` stored in ``unit`` and ``value`` (in that unit) at ``row``."""
    index = table.schema.get_field_index("timestamp")
    values = table.column("timestamp").cast(pa.timestamp(unit)).cast(pa.int64()).to_pylist()
    values[row] = value
    return table.set_column(index, "timestamp", pa.array(values, pa.int64()).cast(pa.timestamp(unit)))


def with_num_tokens(table: pa.Table, value: int, row: int = BAD_ROW) -> pa.Table:
    """``table`` (140k) with ``conversation_b``'s ``num_tokens`` as int64 and ``value`` in ``row``'s second message."""
    rows = copy.deepcopy(table.to_pylist())
    rows[row]["conversation_b"][1]["num_tokens"] = value
    message = table.schema.field("conversation_b").type.value_type
    wide = pa.list_(pa.struct([pa.field(f.name, pa.int64() if f.name == "num_tokens" else f.type) for f in message]))
    index = table.schema.get_field_index("conversation_b")
    return pa.Table.from_pylist(rows, schema=table.schema.set(index, pa.field("conversation_b", wide)))


@dataclass
class BadValue:
    """One value a dump format's file can hold but the canonical tables cannot, and its outcome."""

    format: str  # "33k", "100k" or "140k" (dump_fixtures / fixtures tables)
    case: str
    build: object  # table -> table with the bad value in row BAD_ROW
    rule: str
    detail: str  # the exact quarantine.detail


_TIME = "(seconds since 1970) is not a time the dataset card's timestamp[ns] holds (finite, from 1677-09-22 to before " \
        "2262-04-11)"
_BIG = 2**40
_U64 = 2**63 + 5


def _count(column: str) -> str:
    return f"count out of range of its stored type: {column}={_BIG} (stored as Int32)"


def bad_values() -> list[BadValue]:
    """Each bad value of the issue in each format that can hold it (a CSV cell is covered by ``csv_row_level``)."""
    cases = []
    for fmt in ("33k", "100k"):
        for value, shown in ((float("inf"), "inf"), (float("nan"), "NaN"), (1e300, "1e+300"),
                             (-1e15, "-1000000000000000.0"), (1e11, "100000000000.0")):
            cases.append(BadValue(fmt, f"tstamp={shown}", lambda t, v=value: set_value(t, ("tstamp",), v),
                                  "unparseable_field", f"tstamp={shown} {_TIME}"))
        cases.append(BadValue(fmt, "turn=2^40", lambda t: set_value(t, ("turn",), _BIG), "count_out_of_range",
                              _count("turn")))
    cases.append(BadValue("100k", "conv_metadata.sum_user_tokens=2^40",
                          lambda t: set_value(t, ("conv_metadata", "sum_user_tokens"), _BIG), "count_out_of_range",
                          _count("sum_user_tokens")))
    cases.append(BadValue("140k", "evaluation_order=2^40 (int64)",
                          lambda t: set_value(t, ("evaluation_order",), _BIG, pa.int64()), "count_out_of_range",
                          _count("evaluation_order")))
    cases.append(BadValue("140k", "timestamp[ms] in year 318857", lambda t: with_timestamp_unit(t, "ms", 10**16),
                          "unparseable_field", f"timestamp=10000000000000.0 {_TIME}"))
    cases.append(BadValue("140k", "timestamp[us] in year 287,000", lambda t: with_timestamp_unit(t, "us", 9 * 10**18),
                          "unparseable_field", f"timestamp=9000000000000.0 {_TIME}"))
    cases.append(BadValue("140k", "num_tokens=2^40 (int64)", lambda t: with_num_tokens(t, _BIG), "count_out_of_range",
                          _count("conversation_b num_tokens")))
    # a uint64 beyond Int64 (issue 38, item 5): the 140k one failed the dump ("conversion from u64 to i64
    # failed"), the 100k one was quarantined as null_required, saying nothing of the value
    for fmt, path in (("140k", ("conv_metadata", "sum_user_tokens")), ("140k", ("evaluation_order",)),
                      ("100k", ("conv_metadata", "sum_user_tokens")), ("100k", ("turn",)), ("33k", ("turn",))):
        name = ".".join(path)
        cases.append(BadValue(fmt, f"{name}=2^63+5 (uint64)",
                              lambda t, p=path: set_value(t, p, _U64, pa.uint64()), "count_out_of_range",
                              f"count out of range of its stored type: {name}={_U64} (uint64 in the file, "
                              "beyond Int64)"))
    return cases


# ---------------------------------------------------------------------------
# One vote id in several dumps, with other content
# ---------------------------------------------------------------------------

def conflicting_dumps(root: Path, names: tuple[str, str, str]) -> tuple[list[dict], list[dict]]:
    """Three dumps A, B, C (``names``) under ``root/<name>``, 140k format: A has 12 votes; B repeats
    A's votes 0-7 (0-2 as they are, 3 with its sides swapped, 4-5 with another winner, 6 with another
    model, 7 with the winner 'draw') and has 2 votes of its own; C is A's votes 0-5 unchanged.
    Returns A's and B's rows."""
    a = make_rows(12, seed=1)
    b = copy.deepcopy(a[:8]) + make_rows(2, seed=2)
    b[3].update(model_a=a[3]["model_b"], model_b=a[3]["model_a"],
                winner={"model_a": "model_b", "model_b": "model_a"}.get(a[3]["winner"], a[3]["winner"]))
    for i in (4, 5):
        b[i]["winner"] = other_winner(a[i]["winner"])
    b[6]["model_b"] = next(m for m in ("llama-4-maverick", "deepseek-v3-0324") if m not in (a[6]["model_a"],
                                                                                          a[6]["model_b"]))
    b[7]["winner"] = "draw"
    for name, rows in zip(names, (a, b, copy.deepcopy(a[:6])), strict=True):
        write_shards(root / name, [table_of(rows)])
    return a, b
