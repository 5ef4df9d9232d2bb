"""The reference for batched validation: a suite on a frame of several dumps, each expectation on the rows
of the dumps that have its columns (what ``core.quality.validate_relation`` must give on the same table)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from arena_pipeline.core.validation.quality import (
    SCHEMA_EXPECTATION_TYPES,
    QualityReport,
    _kwargs_columns,
    read_suite,
    validate_frame,
)


def validate_dumps(
    df: pl.DataFrame,
    suite_name: str | Path,
    unavailable: Mapping[str, Collection[str]],
    *,
    dump_column: str = "dump",
    **kwargs: Any,
) -> QualityReport:
    """``validate_frame`` on a table of several dumps, some lacking some columns.

    ``unavailable`` maps a dump to the columns its format does not have (``core/dumps.py``).
    Every expectation that names none of those columns runs once on the whole frame (``id.unique``
    stays a check across dumps); one that names some runs on the rows of the dumps that have them
    (on no rows, and so passing, when no dump has them). Without ``unavailable`` this is
    ``validate_frame``. ``kwargs`` are ``validate_frame``'s.
    """
    if not any(unavailable.values()):
        return validate_frame(df, suite_name, **kwargs)
    start = time.perf_counter()
    data = read_suite(suite_name, kwargs.get("directory"))
    gaps = {c for cols in unavailable.values() for c in cols}
    groups: dict[tuple[str, ...], list[str]] = {}
    everywhere = []
    for exp in data["expectations"]:
        named = set(_kwargs_columns(exp.get("kwargs") or {})) & gaps
        if not named or exp.get("type") in SCHEMA_EXPECTATION_TYPES:
            everywhere.append(exp["id"])
            continue
        lacking = tuple(sorted(d for d, cols in unavailable.items() if named & set(cols)))
        groups.setdefault(lacking, []).append(exp["id"])
    schema = kwargs.pop("schema", None) or df.schema
    reports = [validate_frame(df, suite_name, only=everywhere, schema=schema, **kwargs)]
    for lacking, ids in groups.items():
        part = df.filter(~pl.col(dump_column).is_in(list(lacking)))
        reports.append(validate_frame(part, suite_name, only=ids, schema=schema, **kwargs))
    order = {e["id"]: i for i, e in enumerate(data["expectations"])}
    results = pl.concat([r.results for r in reports]).sort(
        pl.col("expectation_id").replace_strict(order, return_dtype=pl.Int64))
    first = reports[0]
    return QualityReport(suite=first.suite, table=first.table, row_count=df.height, results=results,
                         duration_s=time.perf_counter() - start)


