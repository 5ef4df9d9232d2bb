"""Several dumps in one table: which columns each dump lacks, and each dump's own battles.

A dump's format may lack fields (``adapters.Adapter.unavailable``): the loader leaves them null in
every row of that dump and lets no other null through (``quarantine.split_quarantine``'s
``optional``). So downstream, a column of :data:`~arena_pipeline.core.adapters.ADAPTABLE_COLUMNS`
that is null in every row of a dump is *unavailable* for that dump: categories that read it are
reported unavailable there, and the quality suites do not check it there, instead of treating the
nulls as false or as failures.

Each dump's own boards are fitted by :func:`arena_pipeline.core.ranking.per_dump.per_dump_leaderboards`:
this module only answers questions about the data, and imports nothing of the ranking step.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from arena_pipeline.core.adapters import ADAPTABLE_COLUMNS


def unavailable_columns(battles: pl.DataFrame, columns: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Per dump, the columns (of ``columns``, default every adaptable one) null in all its rows.

    Dumps with no such column are left out; a frame without ``dump`` gives ``{}``.
    """
    if "dump" not in battles.columns or battles.is_empty():
        return {}
    wanted = [c for c in (columns if columns is not None else sorted(ADAPTABLE_COLUMNS)) if c in battles.columns]
    if not wanted:
        return {}
    counts = battles.group_by("dump").agg(pl.col(c).is_not_null().any() for c in wanted)
    out = {}
    for row in counts.iter_rows(named=True):
        missing = [c for c in wanted if not row[c]]
        if missing:
            out[row["dump"]] = missing
    return out


def dump_battles(battles: pl.DataFrame, dump: str) -> pl.DataFrame:
    """The battles of one dump: those kept from it and those it shares with a dump loaded earlier."""
    also = pl.col("also_in_dumps").fill_null("").str.split(",").list.contains(pl.lit(dump))
    return battles.filter((pl.col("dump") == dump) | also)


def dumps_of(battles: pl.DataFrame) -> list[str]:
    """The dumps present in ``battles`` (sorted; [] without a ``dump`` column)."""
    if "dump" not in battles.columns:
        return []
    return sorted(battles.get_column("dump").drop_nulls().unique().to_list())
