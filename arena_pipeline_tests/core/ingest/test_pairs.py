"""core.pairs: the loader's preference pairs equal the SQL definition (preference_pairs_sql) row for row."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline import constants
from arena_pipeline.core.analysis import adopt_loaded_pairs, write_preference_pairs
from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.manifest import combine
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.load import load_dump
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.pairs import PAIR_ROWS_SCHEMA, pair_rows
from arena_pipeline.core.ingest.sources import parse_source, read_csv_export
from arena_pipeline_dev import dump_fixtures as fx
from arena_pipeline_dev.fixtures import flatten_table, make_table, write_dump
from arena_pipeline_tests.support.pair_frames import preference_pairs

SAMPLE = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"
PAIRS = constants.PAIRS_LOAD_TABLE


def _sql_pairs(battles: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    tags, _ = tag_categories(battles)
    canonical = battles.with_columns(model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))
    return preference_pairs(canonical, messages, tags).drop("prompt_messages", "chosen_messages", "rejected_messages")


@pytest.mark.parametrize("source", ["real_sample", "fixture"])
def test_pair_rows_equal_the_sql_definition(source):
    table = read_csv_export(SAMPLE).table if source == "real_sample" else make_table(300, seed=3)
    shard = flatten_table(table, "x")
    expected = _sql_pairs(shard.battles, shard.messages).sort("battle_id")
    got = pair_rows(pl.from_arrow(table), shard.battles, "rev").sort("battle_id")
    assert got.schema == pl.Schema(PAIR_ROWS_SCHEMA)
    assert got.get_column("dump_revision").unique().to_list() == ["rev"]
    assert expected.height > 50
    assert got.drop("dump_revision").equals(expected)


def test_pair_rows_of_votes_without_a_decision_are_empty():
    table = make_table(20, seed=1)
    shard = flatten_table(table, "x")
    ties = shard.battles.with_columns(winner=pl.lit("tie"))
    out = pair_rows(pl.from_arrow(table), ties, "rev")
    assert out.is_empty() and out.schema == pl.Schema(PAIR_ROWS_SCHEMA)


def _loaded_and_sql(con: duckdb.DuckDBPyConnection, schema: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the loader's pairs, write_preference_pairs over the loaded flat tables), both sorted."""
    battles = con.execute(f"SELECT * FROM {schema}.battles").pl()
    tags, _ = tag_categories(battles)
    con.register("tags_frame", tags.to_arrow())
    write_preference_pairs(con, f"{schema}.sql_pairs", f"{schema}.battles", f"{schema}.messages", "tags_frame",
                           model_columns=("model_a_canonical", "model_b_canonical"),
                           extra_columns="'rev' AS dump_revision", batch_messages=7)
    loaded = con.execute(f"SELECT * FROM {schema}.{PAIRS}").pl().sort("battle_id")
    return loaded, con.execute(f"SELECT * FROM {schema}.sql_pairs").pl().sort("battle_id")


def test_load_dump_makes_the_pairs_of_the_kept_votes(tmp_path, monkeypatch):
    """Several small batches (duplicates across batches are screened), two shards."""
    monkeypatch.setattr(ingest, "BATCH_ROWS", 16)
    write_dump(tmp_path, n_rows=120, n_shards=2, seed=5)
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA s")
        report = load_dump(local_manifest(parse_source(str(tmp_path / "data"))), con, "s", pairs_revision="rev")
        loaded, expected = _loaded_and_sql(con, "s")
    assert report.pairs == loaded.height == expected.height > 40
    assert loaded.equals(expected)


def test_load_dump_pairs_leave_out_votes_kept_from_another_dump():
    """The four dump formats together: content duplicates across dumps are deleted from the pairs too."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        folders = fx.write_family(Path(folder))
        parts = [(dump, local_manifest(parse_source(str(folders[dump] / "train.csv" if dump == fx.DUMP_55K
                                                         else folders[dump]))))
                 for dump in (fx.DUMP_140K, fx.DUMP_100K, fx.DUMP_55K, fx.DUMP_33K)]
        with duckdb.connect() as con:
            con.execute("CREATE SCHEMA s")
            report = load_dump(combine(parts), con, "s", pairs_revision="rev")
            loaded, expected = _loaded_and_sql(con, "s")
            gone = con.execute(f"SELECT count(*) FROM s.{PAIRS} WHERE battle_id NOT IN "
                               "(SELECT id FROM s.battles)").fetchone()[0]
    assert gone == 0
    assert report.pairs == loaded.height == expected.height > 0
    assert loaded.equals(expected)


def test_load_dump_without_pairs_revision_makes_no_pairs_table(tmp_path):
    write_dump(tmp_path, n_rows=10, n_shards=1)
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA s")
        report = load_dump(local_manifest(parse_source(str(tmp_path / "data"))), con, "s")
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert PAIRS not in tables and report.pairs == 0


def test_adopt_loaded_pairs_renames_and_sets_categories_from_the_published_tagging(tmp_path):
    write_dump(tmp_path, n_rows=60, n_shards=1, seed=2)
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA s")
        load_dump(local_manifest(parse_source(str(tmp_path / "data"))), con, "s", pairs_revision="rev")
        loaded, expected = _loaded_and_sql(con, "s")
        first, second = loaded.get_column("battle_id").head(2).to_list()
        # the published tagging differs from the loader's for two votes (one loses every category)
        con.execute("CREATE TABLE s.tags AS SELECT * FROM tags_frame WHERE battle_id <> ? "
                    "UNION ALL SELECT ?, 'zz_extra'", [first, second])
        rows, fixed = adopt_loaded_pairs(con, f"s.{PAIRS}", "adopted", "s.tags")
        out = con.execute("SELECT * FROM s.adopted").pl().sort("battle_id")
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert (rows, fixed) == (loaded.height, 2)
    assert PAIRS not in names
    cats = dict(zip(out.get_column("battle_id"), out.get_column("categories").to_list(), strict=True))
    assert cats[first] == []
    assert cats[second][-1] == "zz_extra"
    same = out.filter(~pl.col("battle_id").is_in([first, second]))
    assert same.equals(expected.filter(~pl.col("battle_id").is_in([first, second])))
