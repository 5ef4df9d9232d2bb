"""Category tags as rows of the battles frame (core/ranking/tags.py): the compact form is what the tags say,
and the fits (which take that form only) give from the conversion of the tags the boards of each category's
own battles."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings, per_dump_leaderboards
from arena_pipeline.core.ranking.model_fit import compute_model_fit
from arena_pipeline.core.ranking.tags import TAG_ROWS_SCHEMA, category_rows, tag_rows
from arena_pipeline_tests.support.battle_frames import make_battles

CONFIG = RankingConfig(bootstrap_rounds=5, min_battles=1)


@pytest.fixture(scope="module")
def votes() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two dumps of battles, one a self-battle; their tags with a tag repeated and one of a battle not there."""
    battles = make_battles(300, overrides={7: {"model_b": "model-0", "model_a": "model-0"}}).with_columns(
        dump=pl.when(pl.int_range(pl.len()) % 3 == 0).then(pl.lit("d2")).otherwise(pl.lit("d1")),
        also_in_dumps=pl.lit(None, pl.String))
    battles = battles.with_columns(model_a_canonical=pl.col("model_a"), model_b_canonical=pl.col("model_b"))
    tags = tag_categories(battles)[0]
    extra = pl.DataFrame({"battle_id": [tags.item(3, "battle_id"), "no-such-battle"],
                          "category": [tags.item(3, "category"), "overall"]}, schema=tags.schema)
    return battles, pl.concat([tags.head(40), extra, tags.tail(-40)])


def test_tags_read_in_batches_are_the_rows_of_their_battles(votes):
    battles, tags = votes
    batches = [tags.slice(start, 97) for start in range(0, tags.height, 97)]
    rows = tag_rows(battles.get_column("id"), batches)
    assert rows.schema == pl.Schema(TAG_ROWS_SCHEMA) and rows.height == tags.height
    found = rows.get_column("_row")
    assert found.null_count() == 1 and found.is_null().arg_max() == 41  # the tag of no battle, where it was
    ids = battles.get_column("id").gather(found.drop_nulls())
    assert ids.to_list() == tags.filter(pl.col("battle_id") != "no-such-battle").get_column("battle_id").to_list()
    assert rows.get_column("category").cast(pl.String).equals(tags.get_column("category"))
    # each category's battles once, in the tags' order: the repeated tag (at 40) counts at its first place (3)
    by_rows, without = category_rows(rows)
    assert without == 1 and sum(len(row) for row in by_rows.values()) == tags.height - 2
    expected = {key[0]: [i for i in part.get_column("battle_id").unique(maintain_order=True) if i != "no-such-battle"]
                for key, part in tags.partition_by("category", as_dict=True).items()}
    assert {c: battles.get_column("id").gather(row).to_list() for c, row in by_rows.items()} == expected
    assert category_rows(tag_rows(battles.get_column("id"), [tags]))[0].keys() == by_rows.keys()


def test_the_conversion_gives_each_categorys_board_and_each_dumps_board(votes):
    battles, tags = votes
    rows = tag_rows(battles.get_column("id"), [tags])
    clean = tags.unique(maintain_order=True).filter(pl.col("battle_id") != "no-such-battle")
    out = compute_rankings(battles, rows, CONFIG)
    assert out.leaderboard.height > 0
    assert out.metadata["dropped"] == {
        "self_battles": 1, "self_battle_category_rows": out.metadata["dropped"]["self_battle_category_rows"],
        "category_rows_without_battle": 1}
    assert out.metadata["dropped"]["self_battle_category_rows"] >= 1
    # a category's board: the board of its own battles alone (the rows point at the right battles)
    key = ["method", "model"]
    for category in ("overall", "coding"):
        own = battles.join(clean.filter(pl.col("category") == category).select(id="battle_id"), on="id", how="semi")
        alone = compute_rankings(own, tag_rows(own.get_column("id"), [own.select(battle_id="id", category=pl.lit(
            category))]), CONFIG).leaderboard
        board = out.leaderboard.filter(pl.col("category") == category)
        assert board.height > 0
        columns = [*key, "rating", "n_battles"]
        assert board.sort(key).select(columns).equals(alone.sort(key).select(columns))
    # the repeated tag and the tag of no battle change no fit
    again = tag_rows(battles.get_column("id"), [clean])
    fits = [compute_model_fit(battles, t, out.leaderboard, CONFIG) for t in (rows, again)]
    assert fits[0].summary.height > 0
    assert fits[1].summary.equals(fits[0].summary) and fits[1].calibration.equals(fits[0].calibration)
    # each dump's board: the board of its battles with their own tags' rows
    dumps = per_dump_leaderboards(battles, rows, CONFIG, out.leaderboard)[0]
    assert dumps.get_column("dump").n_unique() == 2
    for dump in ("d1", "d2"):
        own = battles.filter(pl.col("dump") == dump)
        mine = compute_rankings(own, tag_rows(own.get_column("id"), [clean]), CONFIG).leaderboard
        assert dumps.filter(pl.col("dump") == dump).drop("dump").equals(mine)
