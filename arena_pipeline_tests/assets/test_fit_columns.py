"""The rankings step reads only the battles columns its fits read (assets/rankings.py ``fit_columns``): the
boards, each dump's boards and the model fit are those of the whole table."""

from __future__ import annotations

import duckdb
import polars as pl

from arena_pipeline.assets.rankings import fit_columns
from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA
from arena_pipeline.core.ranking import RankingConfig, compute_rankings, per_dump_leaderboards
from arena_pipeline.core.ranking.model_fit import compute_model_fit
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline_tests.support.battle_frames import make_battles


def _votes() -> pl.DataFrame:
    """Two dumps of canonical-named battles (the second lacks ``math``), raw names unlike the canonical ones."""
    battles = make_battles(240).with_columns(
        model_a=pl.col("model_a").str.to_uppercase(), model_b=pl.col("model_b").str.to_uppercase(),
        dump=pl.when(pl.int_range(pl.len()) % 3 == 0).then(pl.lit("d2")).otherwise(pl.lit("d1")))
    return battles.with_columns(math=pl.when(pl.col("dump") == "d2").then(None).otherwise(pl.col("math")))


def test_the_fits_on_the_columns_read_equal_the_fits_on_the_whole_table():
    config = RankingConfig(bootstrap_rounds=5)
    whole = _votes()
    with duckdb.connect() as con:
        con.register("battles", whole.to_arrow())
        narrow = con.execute(f'SELECT {fit_columns(con, "battles", config)} FROM battles').pl()
    assert narrow.width < whole.width and {"source_file", "n_messages_a", "model_a"}.isdisjoint(narrow.columns)
    assert set(narrow.columns) <= set(BATTLES_SCHEMA)
    # the fit ranks canonical names (assets/rankings.py Fit): the same on both
    canonical = {"model_a": pl.col("model_a_canonical"), "model_b": pl.col("model_b_canonical")}
    whole, narrow = whole.with_columns(**canonical), narrow.with_columns(**canonical)
    tags = tag_categories(whole)[0]
    assert tag_categories(narrow)[0].equals(tags)
    tags = tag_rows(whole.get_column("id"), [tags])  # narrow holds the same battles in the same order
    full, part = compute_rankings(whole, tags, config), compute_rankings(narrow, tags, config)
    assert part.leaderboard.height > 0 and part.leaderboard.equals(full.leaderboard)
    assert part.board_status.equals(full.board_status) and part.pairwise.equals(full.pairwise)
    assert part.style_coefficients.equals(full.style_coefficients)
    dumps = per_dump_leaderboards(narrow, tags, config, part.leaderboard)[0]
    assert dumps.get_column("dump").n_unique() == 2
    assert dumps.equals(per_dump_leaderboards(whole, tags, config, full.leaderboard)[0])
    assert compute_model_fit(narrow, tags, part.leaderboard, config).summary.equals(
        compute_model_fit(whole, tags, full.leaderboard, config).summary)


def test_the_cluster_column_is_read_whatever_it_is():
    with duckdb.connect() as con:
        con.register("battles", make_battles(4).to_arrow())
        columns = fit_columns(con, "battles", RankingConfig(cluster_column="source_row"))
        assert '"source_row"' in columns and '"model_a_canonical"' in columns and '"model_a"' not in columns
        assert '"source_row"' not in fit_columns(con, "battles", RankingConfig())


def test_the_votes_are_read_in_batches_and_the_tags_as_rows_of_the_battles(monkeypatch):
    """``read_votes``: the battles' columns as a whole read gives them, the tags as a categorical and a row of
    the battles each (8 bytes a tag, not two strings: 6.6M tags held ~280 MB at 1.36M votes as strings)."""
    from arena_pipeline.assets import rankings
    from arena_pipeline.core.ranking.tags import TAG_ROWS_SCHEMA

    config, battles = RankingConfig(), _votes()
    tags = tag_categories(battles)[0]
    monkeypatch.setattr(rankings, "BATCH_ROWS", 100)  # several batches of each
    with duckdb.connect() as con:
        con.register("battles", battles.to_arrow())
        con.register("battle_categories", tags.to_arrow())
        frame, rows = rankings.read_votes(con, "battles", "battle_categories", config)
        whole = con.execute(f'SELECT {fit_columns(con, "battles", config)} FROM battles').pl()
    assert frame.n_chunks() > 1 and frame.equals(whole)
    assert rows.schema == pl.Schema(TAG_ROWS_SCHEMA) and rows.height == tags.height > 500
    assert frame.get_column("id").gather(rows.get_column("_row")).equals(tags.get_column("battle_id"), check_names=False)
    assert rows.get_column("category").cast(pl.String).equals(tags.get_column("category"))
    assert rows.estimated_size() <= 8 * rows.height + 1024 < tags.estimated_size()


def test_no_votes_read_are_empty_frames_of_the_columns_and_of_the_tags_schema():
    """``read_votes`` on relations without rows: the fit's columns and the tags' schema, no row."""
    from arena_pipeline.assets import rankings
    from arena_pipeline.core.ranking.tags import TAG_ROWS_SCHEMA

    config, battles = RankingConfig(), _votes().head(0)
    tags = tag_categories(_votes())[0].head(0)
    with duckdb.connect() as con:
        con.register("battles", battles.to_arrow())
        con.register("battle_categories", tags.to_arrow())
        frame, rows = rankings.read_votes(con, "battles", "battle_categories", config)
        columns = con.execute(f'SELECT {fit_columns(con, "battles", config)} FROM battles').pl().columns
    assert frame.height == 0 and frame.columns == columns
    assert rows.height == 0 and rows.schema == pl.Schema(TAG_ROWS_SCHEMA)
