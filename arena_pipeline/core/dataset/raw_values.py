"""Values of a file's own Arrow batch that no later step may touch: text that is not UTF-8, counts beyond Int64.

The loader screens every batch it reads with :func:`screen_raw` before anything else looks at it (the
format's row rules, the conversion, the flattening), then moves the rows it flags to quarantine as
``adapters.Adapter.row_rules`` rows are moved.

Decisions
---------
- **Text that is not UTF-8 never reaches Polars.** pyarrow's parquet reader does not validate the
  ``string`` columns it reads, and ``pl.from_arrow`` does not either: the first string operation on
  such a value read out of bounds (a segfault, the whole process gone). Every string column, nested
  ones included (a message's text), is validated per batch (``Array.validate(full=True)``, one pass;
  a column that fails is bisected to its rows). The value becomes null and its vote is quarantined
  with :data:`~arena_pipeline.core.dataset.quarantine.INVALID_UTF8_RULE`, the detail naming the column
  and the first bytes. Polars' own reader validates as it reads (the loader then reads the file with
  pyarrow from there on: ``core/ingest/load.py``).
- **A count no signed 64-bit integer holds** (a ``uint64`` over 2**63 - 1) is null and its vote
  quarantined as ``count_out_of_range``, the detail naming the column path and the value, instead of
  failing the batch in a cast to Int64 (the canonical counts are Int32 or Int64).
- **Dictionary-encoded columns** (legitimate parquet: a writer's choice of encoding) are decoded to their
  value type (:func:`decoded`); the format checks read a dictionary as its value type.
- Only the rows flagged change: the others keep their buffers (a rebuilt column shares them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from arena_pipeline.core.dataset.quarantine import INVALID_UTF8_RULE

#: Rule name of a count beyond Int64 (the rule of every count the canonical schema cannot hold).
COUNT_RULE = "count_out_of_range"
_INT64_MAX = 2**63 - 1
#: Bytes of a value shown in a detail.
SHOWN_BYTES = 40


def plain_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every dictionary type (nested ones included) replaced by its value type."""
    if pa.types.is_dictionary(dtype):
        return plain_type(dtype.value_type)
    if pa.types.is_struct(dtype):
        return pa.struct([f.with_type(plain_type(f.type)) for f in dtype])
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(plain_type(dtype.value_type)))
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(plain_type(dtype.value_type)))
    return dtype


def decoded(table: pa.Table) -> pa.Table:
    """``table`` with dictionary-encoded columns (nested ones included) decoded to their value type."""
    schema = pa.schema([f.with_type(plain_type(f.type)) for f in table.schema], metadata=table.schema.metadata)
    return table if schema.equals(table.schema) else table.cast(schema)


def plain_polars_dtype(dtype: pl.DataType) -> pl.DataType:
    """A Polars ``dtype`` with every categorical (how Polars reads a dictionary-encoded parquet column,
    handed over as Arrow string views pyarrow cannot decode) replaced by ``String``, nested ones included."""
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return pl.String()
    if isinstance(dtype, pl.List):
        return pl.List(plain_polars_dtype(dtype.inner))
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: plain_polars_dtype(f.dtype) for f in dtype.fields})
    return dtype


def decoded_scan(scan: pl.LazyFrame) -> pl.LazyFrame:
    """``scan`` with its categorical columns (nested ones included) read as strings."""
    casts = {name: plain for name, dtype in scan.collect_schema().items()
             if (plain := plain_polars_dtype(dtype)) != dtype}
    return scan.cast(casts) if casts else scan


def _is_text(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)


def _may_hold(dtype: pa.DataType, utf8: bool) -> bool:
    """Whether :func:`_walk` may flag a value of an array of ``dtype``: it holds a ``uint64`` (or, with
    ``utf8``, a text) where the walk looks (struct fields, list values). An array that cannot is not
    walked: on the batches Polars reads, whose text is validated already, that is every column but the
    counts (walking them, a mask per nested array, was ~10% of the load's CPU)."""
    if pa.types.is_struct(dtype):
        return any(_may_hold(f.type, utf8) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _may_hold(dtype.value_type, utf8)
    return pa.types.is_uint64(dtype) or (utf8 and _is_text(dtype))


def _as_bytes(array: pa.Array) -> pa.Array:
    """A text array's bytes as a binary array (no UTF-8 validation, no copy)."""
    target = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary()}.get(array.type, pa.binary_view())
    return array.view(target)


def _valid_utf8(array: pa.Array) -> bool:
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _invalid_utf8(array: pa.Array) -> np.ndarray:
    """Per element of a text array, whether it is not UTF-8 (one validation; bisection only when it fails)."""
    bad = np.zeros(len(array), dtype=bool)
    pending = [(0, len(array))] if len(array) and not _valid_utf8(array) else []
    while pending:  # every range here holds a bad element: halve it until the elements are found
        start, stop = pending.pop()
        if stop - start == 1:
            bad[start] = True
            continue
        middle = (start + stop) // 2
        pending += [(a, b) for a, b in ((start, middle), (middle, stop)) if not _valid_utf8(array.slice(a, b - a))]
    return bad


@dataclass
class _Found:
    """What :func:`_walk` found in one array: per element, the rules broken and a detail of each."""

    mask: np.ndarray
    #: element -> {rule: detail} (only the flagged elements)
    details: dict[int, dict[str, str]] = field(default_factory=dict)


def _leaf(array: pa.Array, path: str, utf8: bool) -> tuple[_Found, pa.Array]:
    if utf8 and _is_text(array.type):
        mask = _invalid_utf8(array)
        rule, shown = INVALID_UTF8_RULE, _as_bytes(array)

        def detail(i: int) -> str:
            value = shown[i].as_py()
            cut = "..." if len(value) > SHOWN_BYTES else ""
            return f"{path} is not valid UTF-8: {value[:SHOWN_BYTES]!r}{cut}"
    elif pa.types.is_uint64(array.type):
        mask = pc.greater(array, pa.scalar(_INT64_MAX, pa.uint64())).fill_null(False).to_numpy(zero_copy_only=False)
        rule = COUNT_RULE

        def detail(i: int) -> str:
            return f"{path}={array[i].as_py()} (uint64 in the file, beyond Int64)"
    else:
        return _Found(np.zeros(len(array), dtype=bool)), array
    found = _Found(mask, {int(i): {rule: detail(int(i))} for i in np.flatnonzero(mask)})
    if not mask.any():
        return found, array
    return found, pc.if_else(pa.array(~mask), array, pa.scalar(None, array.type))


def _walk(array: pa.Array, path: str, utf8: bool) -> tuple[_Found, pa.Array]:
    """The elements of ``array`` holding a bad value (at any depth), and ``array`` with those values null."""
    dtype = array.type
    if pa.types.is_struct(dtype):
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        mask = np.zeros(len(array), dtype=bool)
        details: dict[int, dict[str, str]] = {}
        children, changed = [], False
        for i, f in enumerate(dtype):
            original = array.field(i)  # a new wrapper on every call: keep the one compared
            found, child = _walk(original, f"{path}.{f.name}", utf8)
            changed |= child is not original
            children.append(child)
            mask |= found.mask & valid
            for row, rules in found.details.items():
                if valid[row]:
                    for rule, text in rules.items():
                        details.setdefault(row, {}).setdefault(rule, text)
        if not changed:
            return _Found(mask, details), array
        rebuilt = pa.StructArray.from_arrays(children, fields=list(dtype), mask=array.is_null())
        return _Found(mask, details), rebuilt
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        offsets = array.offsets.to_numpy(zero_copy_only=False)
        first = int(offsets[0])
        offsets = offsets - first  # the slice's own values (a batch may be a slice of a larger array)
        original = array.values.slice(first, int(offsets[-1]))
        found, values = _walk(original, f"{path}[]", utf8)
        mask = np.zeros(len(array), dtype=bool)
        details: dict[int, dict[str, str]] = {}
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        for child in np.flatnonzero(found.mask):
            row = int(np.searchsorted(offsets, child, side="right") - 1)
            if valid[row]:
                mask[row] = True
                for rule, text in found.details.get(int(child), {}).items():
                    details.setdefault(row, {}).setdefault(rule, text)
        if values is original:
            return _Found(mask, details), array
        offsets = pa.array(offsets, pa.int64() if pa.types.is_large_list(dtype) else pa.int32())
        rebuilt = type(array).from_arrays(offsets, values, type=dtype, mask=array.is_null())
        return _Found(mask, details), rebuilt
    return _leaf(array, path, utf8)


#: Columns and types of :func:`screen_raw`'s screen (as ``quarantine.screen_rows``).
SCREEN_SCHEMA = {"rule": pl.String, "detail": pl.String}


def screen_raw(table: pa.Table, utf8: bool = True) -> tuple[pa.Table, pl.DataFrame]:
    """Null the values of ``table`` no later step may touch, and say which rows held them.

    Parameters
    ----------
    table
        One batch of a file's own columns (dictionaries decoded: :func:`decoded`).
    utf8
        Validate the text columns (False for a batch whose reader validated UTF-8 already: Polars).

    Returns
    -------
    table, screen
        ``table`` with every text that is not UTF-8 and every ``uint64`` over Int64 null (columns
        without such a value unchanged); ``screen``: per row, ``rule`` (``invalid_utf8``,
        ``count_out_of_range``, joined by ``','``; null for a row without such a value) and
        ``detail`` (per rule, the first offending value of each column, joined by ``'; '``).
    """
    rows: dict[int, dict[str, list[str]]] = {}
    for index, name in enumerate(table.column_names):
        column = table.column(index)
        if not _may_hold(column.type, utf8):
            continue
        chunks, changed, start = [], False, 0
        for chunk in column.chunks:
            found, fixed = _walk(chunk, name, utf8)
            changed |= fixed is not chunk
            chunks.append(fixed)
            for row, rules in found.details.items():
                for rule, text in rules.items():
                    rows.setdefault(start + row, {}).setdefault(rule, []).append(text)
            start += len(chunk)
        if changed:
            table = table.set_column(index, table.schema.field(index), pa.chunked_array(chunks, column.type))
    rule = [None] * table.num_rows
    detail = [None] * table.num_rows
    for row, rules in rows.items():  # the flagged rows only
        ordered = [r for r in (INVALID_UTF8_RULE, COUNT_RULE) if r in rules]
        rule[row] = ",".join(ordered)
        detail[row] = "; ".join(_detail(r, rules[r]) for r in ordered)
    return table, pl.DataFrame({"rule": rule, "detail": detail}, schema=SCREEN_SCHEMA)


def _detail(rule: str, texts: list[str]) -> str:
    if rule == COUNT_RULE:
        return "count out of range of its stored type: " + ", ".join(texts)
    return "; ".join(texts)


def merge_screens(first: pl.DataFrame, second: pl.DataFrame) -> pl.DataFrame:
    """Two row-aligned screens as one: each row's rules (``first``'s, then ``second``'s) and details."""
    both = pl.concat([first.select(rule_a="rule", detail_a="detail"),
                      second.select(rule_b="rule", detail_b="detail")], how="horizontal")
    any_rule = pl.col("rule_a").is_not_null() | pl.col("rule_b").is_not_null()
    return both.select(
        rule=pl.when(any_rule).then(pl.concat_str("rule_a", "rule_b", separator=",", ignore_nulls=True)),
        detail=pl.when(any_rule).then(pl.concat_str("detail_a", "detail_b", separator="; ", ignore_nulls=True)),
    ).cast(SCREEN_SCHEMA)
