"""Several dumps in one table: which columns each dump lacks, and each dump's own battles.

A dump's format may lack fields (``adapters.Adapter.unavailable``): the loader leaves them null in
every row of that dump and lets no other null through (``quarantine.split_quarantine``'s
``optional``). So downstream, a column of :data:`~arena_pipeline.core.adapters.ADAPTABLE_COLUMNS`
that is null in every row of a dump is *unavailable* for that dump: categories that read it are
reported unavailable there, and the quality suites do not check it there, instead of treating the
nulls as false or as failures.
"""

from __future__ import annotations

import dataclasses
import time
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


def per_dump_leaderboards(battles: pl.DataFrame, tags: pl.DataFrame, config, combined: pl.DataFrame
                          ) -> tuple[pl.DataFrame, dict[str, float]]:
    """Each loaded dump's own boards: the combined leaderboard's columns plus ``dump``.

    A dump's battles are :func:`dump_battles` (its own and those it shares with a dump kept
    first), fitted by ``compute_rankings`` with the same ``config``: same methods, intervals and
    seeds. With one dump the combined board is that dump's board and is not fitted again. A
    dump whose format lacks the style counts gets no ``bt_style`` board (its style features would
    all be 0: the fit would be plain Bradley-Terry under another name).

    Returns the boards and the seconds each dump's fit took.
    """
    # imported here: core.ranking imports core.categories, which imports this module
    from arena_pipeline.core.ranking import compute_rankings
    from arena_pipeline.core.ranking.style_control import style_columns

    dumps = dumps_of(battles)
    none = combined.with_columns(dump=pl.lit(None, pl.String)).head(0)
    if not dumps:
        return none, {}
    if len(dumps) == 1:
        return combined.with_columns(dump=pl.lit(dumps[0])), {dumps[0]: 0.0}
    gaps = unavailable_columns(battles, style_columns())
    boards, seconds = [], {}
    for dump in dumps:
        started = time.perf_counter()
        own = dump_battles(battles, dump)
        own_tags = tags.join(own.select(battle_id="id"), on="battle_id", how="semi")
        # a dump without style counts is not given the style fit at all (its board would be dropped)
        methods = tuple(m for m in config.methods if m != "bt_style") if dump in gaps else config.methods
        if not methods:
            continue
        board = compute_rankings(own, own_tags, dataclasses.replace(config, methods=methods)).leaderboard
        boards.append(board.with_columns(dump=pl.lit(dump)))
        seconds[dump] = time.perf_counter() - started
    if not boards:
        return none, seconds
    return pl.concat(boards, how="vertical_relaxed"), seconds
