"""Category tags as rows of the battles frame: what the fits hold of ``arena.battle_categories``.

A vote has ~5 tags. As ``(battle_id, category)`` strings they took more than half the memory of the votes' columns
the fits read (at 1.36M votes, 6.6M tags: ~280 MiB against 448 MiB); as ``(category, _row)``, a
categorical and the battle's row in the battles frame, they take 8 bytes each (50 MiB). The fits take the
tags in that form only: :func:`tag_rows` turns tags (read a batch at a time by the ranking step, or whole by
a test or a benchmark) into it; :func:`category_rows` gives each category's rows to the fits, a category
at a time (a hash of every (category, battle) pair at once took ~800 MiB more at that size).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

#: Tags turned into rows at a time by the ranking step's read (``assets.rankings.read_votes``).
BATCH_ROWS = 1 << 20

#: The tags' compact form: category and the battle's row (null: no battle of the frame has its id).
TAG_ROWS_SCHEMA: dict[str, pl.DataType] = {"category": pl.Categorical(), "_row": pl.UInt32()}


def tag_rows(ids: pl.Series, batches: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Tags (``battle_id``, ``category``), given a batch at a time, as :data:`TAG_ROWS_SCHEMA` rows.

    Parameters
    ----------
    ids
        The battles frame's ``id`` column: the row of a tag is the row of its battle there (every row
        with that id, should an id repeat).
    batches
        Frames of ``battle_id`` and ``category``, in the tags' order.

    Returns
    -------
    pl.DataFrame
        ``category`` and ``_row``, in the tags' order; a tag whose battle is not in ``ids`` has a null row.
    """
    index = ids.rename("battle_id").to_frame().with_row_index("_row")
    parts = [batch.select("battle_id", pl.col("category").cast(pl.String).cast(pl.Categorical()))
             .join(index, on="battle_id", how="left", maintain_order="left").select("category", "_row")
             for batch in batches]
    return pl.concat(parts) if parts else pl.DataFrame(schema=TAG_ROWS_SCHEMA)


def category_rows(tags: pl.DataFrame) -> tuple[dict[str, np.ndarray], int]:
    """Each category's battles once, as rows of the battles frame, in the tags' order.

    Parameters
    ----------
    tags
        :func:`tag_rows`'s ``category`` and ``_row``.

    Returns
    -------
    tuple[dict[str, np.ndarray], int]
        Each category's rows (a battle at its first tag with the category: a repeated tag counts once),
        and how many tags name a battle that is not in the frame (left out).
    """
    tagged = tags.select("category", "_row")
    without = tagged.get_column("_row").null_count()
    rows = {}
    for key, part in tagged.drop_nulls("_row").partition_by("category", as_dict=True).items():
        row = part.get_column("_row").to_numpy()
        first = np.unique(row, return_index=True)[1]  # each battle once, in a category's own order
        rows[str(key[0])] = row if len(first) == len(row) else row[np.sort(first)]
    return rows, without
