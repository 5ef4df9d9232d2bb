"""Category tags as rows of the battles frame (core/ranking/tags.py): the fits give the same tables from
either form of the tags, and the compact form is what the tags say."""

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
    # the pairs once each, in the tags' order, from either form
    by_rows, by_ids = category_rows(battles.get_column("id"), rows), category_rows(battles.get_column("id"), tags)
    assert by_rows[1] == by_ids[1] == 1
    assert sum(len(row) for row in by_rows[0].values()) == tags.height - 2
    assert by_rows[0].keys() == by_ids[0].keys() and all((by_rows[0][k] == by_ids[0][k]).all() for k in by_ids[0])
    # in the tags' order: the repeated tag (at 40) counts at its first place (3)
    overall = tags.filter(pl.col("category") == "overall").get_column("battle_id").unique(maintain_order=True)
    assert battles.get_column("id").gather(by_rows[0]["overall"]).to_list() == [
        i for i in overall.to_list() if i != "no-such-battle"]


def test_the_fits_are_the_same_from_either_form_of_the_tags(votes):
    battles, tags = votes
    rows = tag_rows(battles.get_column("id"), [tags])
    by_ids, by_rows = compute_rankings(battles, tags, CONFIG), compute_rankings(battles, rows, CONFIG)
    assert by_ids.leaderboard.height > 0 and by_rows.leaderboard.equals(by_ids.leaderboard)
    for name in ("pairwise", "pairwise_significance", "style_coefficients", "unrated_models", "board_status"):
        assert getattr(by_rows, name).equals(getattr(by_ids, name)), name
    assert by_rows.metadata["dropped"] == by_ids.metadata["dropped"] == {
        "self_battles": 1, "self_battle_category_rows": by_ids.metadata["dropped"]["self_battle_category_rows"],
        "category_rows_without_battle": 1}
    assert by_ids.metadata["dropped"]["self_battle_category_rows"] >= 1
    fits = [compute_model_fit(battles, t, by_ids.leaderboard, CONFIG) for t in (tags, rows)]
    assert fits[0].summary.height > 0
    assert fits[1].summary.equals(fits[0].summary) and fits[1].calibration.equals(fits[0].calibration)
    dumps = [per_dump_leaderboards(battles, t, CONFIG, by_ids.leaderboard)[0] for t in (tags, rows)]
    assert dumps[0].get_column("dump").n_unique() == 2 and dumps[1].equals(dumps[0])
