"""Each loaded dump's own boards: the ranking step run again on one dump's battles at a time.

Which battles belong to a dump and which columns a dump lacks are questions about the data
(:mod:`arena_pipeline.core.dataset.dumps`); fitting their boards is the ranking step's, so it lives here.
"""

from __future__ import annotations

import dataclasses
import time

import polars as pl

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.dumps import board_dumps, dump_battles, unavailable_columns
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.leaderboard import compute_rankings
from arena_pipeline.core.ranking.rating_method import configured_methods
from arena_pipeline.core.ranking.tags import tag_rows


def per_dump_leaderboards(battles: pl.DataFrame, tags: pl.DataFrame, config: RankingConfig,
                          combined: pl.DataFrame, copies: pl.DataFrame | None = None
                          ) -> tuple[pl.DataFrame, dict[str, float]]:
    """Each loaded dump's own boards: the combined leaderboard's columns plus ``dump``.

    A dump's battles are its own votes: :func:`~arena_pipeline.core.dataset.dumps.dump_battles` (its own and
    those it shares with a dump kept first) and its ``copies`` (votes another dump holds with other
    content, tagged here with ``categories.tag_categories``), fitted by ``compute_rankings`` with the
    same ``config``: same methods, intervals and seeds. A dump all of whose votes another dump holds
    still gets its board. With one dump the combined board is that dump's board and is not fitted
    again. A dump whose format lacks a column a method needs (``RatingMethod.battle_columns``) gets
    no board of that method: a dump without the style counts gets no ``bt_style`` board (its style
    features would all be 0: the fit would be plain Bradley-Terry under another name).

    Parameters
    ----------
    battles
        The battles of every loaded dump, with ``dump`` and ``also_in_dumps`` columns.
    tags
        Their category tags as rows of ``battles`` (``tags.tag_rows``), as for ``compute_rankings``.
    config
        The ranking settings of the combined boards.
    combined
        The combined leaderboard (``RankingOutput.leaderboard``), reused when there is one dump.
    copies
        The votes quarantined as conflicting copies (``dumps.conflicting_copies``), model columns
        as in ``battles``; None: none.

    Returns
    -------
    tuple[pl.DataFrame, dict[str, float]]
        The boards, and the seconds each dump's fit took.
    """
    copies = battles.clear() if copies is None else copies.select(battles.columns)
    dumps = board_dumps(battles, copies)
    none = combined.with_columns(dump=pl.lit(None, pl.String)).head(0)
    if not dumps:
        return none, {}
    if len(dumps) == 1:
        return combined.with_columns(dump=pl.lit(dumps[0])), {dumps[0]: 0.0}
    needs = {m.name: set(m.battle_columns()) for m in configured_methods(config.methods)}
    gaps = unavailable_columns(pl.concat([battles, copies]) if copies.height else battles,
                               sorted(set().union(*needs.values())))
    boards, seconds = [], {}
    for dump in dumps:
        started = time.perf_counter()
        own = dump_battles(battles.with_row_index("_at"), dump)
        own_tags = _own_rows(tags, own.get_column("_at"))
        own = own.drop("_at")
        mine = copies.filter(pl.col("dump") == dump).join(own.select("id"), on="id", how="anti")
        if mine.height:
            own = pl.concat([own, mine])
            own_tags = pl.concat([own_tags, tag_rows(own.get_column("id"), [tag_categories(mine)[0]])])
        # a dump without a method's columns is not given that method's fit at all (its board would be dropped)
        methods = tuple(m for m in config.methods if not needs[m] & set(gaps.get(dump, ())))
        if not methods:
            continue
        board = compute_rankings(own, own_tags, dataclasses.replace(config, methods=methods)).leaderboard
        boards.append(board.with_columns(dump=pl.lit(dump)))
        seconds[dump] = time.perf_counter() - started
    if not boards:
        return none, seconds
    return pl.concat(boards, how="vertical_relaxed"), seconds


def _own_rows(tags: pl.DataFrame, at: pl.Series) -> pl.DataFrame:
    """``tags`` (rows of every dump's battles) as rows of a dump's battles, whose rows there are ``at``, in order."""
    position = at.to_frame("_row").with_row_index("_own")
    return tags.join(position, on="_row", how="inner", maintain_order="left").select("category", _row="_own")
