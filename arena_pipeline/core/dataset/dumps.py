"""Several dumps in one table: which columns each dump lacks, and each dump's own battles.

A dump's format may lack fields (``adapters.Adapter.unavailable``): the loader leaves them null in
every row of that dump and lets no other null through (``quarantine.split_quarantine``'s
``optional``). So downstream, a column of :data:`~arena_pipeline.core.dataset.adapters.ADAPTABLE_COLUMNS`
that is null in every row of a dump is *unavailable* for that dump: categories that read it are
reported unavailable there, and the quality suites do not check it there, instead of treating the
nulls as false or as failures.

A dump's own votes are those it keeps, those it holds as another dump's kept vote
(``also_in_dumps``) and its copies of votes another dump holds with other content
(``quarantine.CONFLICT_RULE``: out of the combined tables, read back by :func:`conflicting_copies`).
Each dump's own boards are fitted by :func:`arena_pipeline.core.ranking.per_dump.per_dump_leaderboards`:
this module only answers questions about the data, and imports nothing of the ranking step.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from arena_pipeline.core.dataset.adapters import ADAPTABLE_COLUMNS
from arena_pipeline.core.dataset.quarantine import CONFLICT_RULE
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, FLAT_BATTLES_SCHEMA


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


def board_dumps(battles: pl.DataFrame, copies: pl.DataFrame | None = None) -> list[str]:
    """The dumps with votes of their own (sorted): kept in ``battles``, named in its ``also_in_dumps``
    (every vote of the dump is held by a dump loaded earlier), or holding ``copies``."""
    found = set(dumps_of(battles))
    if "also_in_dumps" in battles.columns:
        found |= set(battles.get_column("also_in_dumps").drop_nulls().str.split(",").explode().to_list())
    if copies is not None:
        found |= set(dumps_of(copies))
    return sorted(d for d in found if d)


def conflicting_copies(quarantine: pl.DataFrame) -> pl.DataFrame:
    """The votes quarantined as :data:`~arena_pipeline.core.dataset.quarantine.CONFLICT_RULE` alone, as battles.

    Such a vote is a dump's own copy of a vote id another dump holds with other content: the
    combined tables keep the other copy, the dump's own board counts this one. A copy that also
    broke a row rule (``rule`` lists it too) is not a vote of any board.

    Parameters
    ----------
    quarantine
        Rows of ``arena.quarantine`` (at least ``rule`` and ``raw``).

    Returns
    -------
    pl.DataFrame
        :data:`~arena_pipeline.core.dataset.schema.BATTLES_SCHEMA` rows decoded from ``raw``, one per
        (dump, id): the first by (source_file, source_row).
    """
    rows = quarantine.filter(pl.col("rule") == CONFLICT_RULE)
    if rows.is_empty():
        return pl.DataFrame(schema=BATTLES_SCHEMA)
    decoded = rows.select(pl.col("raw").str.json_decode(pl.Struct(FLAT_BATTLES_SCHEMA))).unnest("raw")
    return (decoded.cast(BATTLES_SCHEMA).select(list(BATTLES_SCHEMA))
            .sort("source_file", "source_row").unique(["dump", "id"], keep="first", maintain_order=True))
