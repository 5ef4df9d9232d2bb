"""Every table users read is a view the gate re-points: no base table in schema arena but the records, the
validation tables belong to the publication they describe, and a warehouse from before is upgraded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.records import RECORD_TABLES
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.definitions import CATALOG
from arena_pipeline.jobs import rerank_job
from arena_pipeline.resources import ModelCatalog
from arena_pipeline_tests.support.materialize import (
    REAL_CSV,
    SAMPLE_RUN_CONFIG,
    copy_warehouse,
    materialize,
    materialized,
    rank_config,
    sample_resources,
    work_file,
)
from arena_pipeline_tests.support.publication_support import assert_live_is_one_publication

VALIDATION = ("external_comparison", "external_comparison_models", "benchmark_scores", "benchmark_agreement")


def _base_tables(warehouse: Path) -> list[str]:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return sorted(r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'",
            [SCHEMA]).fetchall())


def _live(warehouse: Path) -> dict:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        pid, tables = con.execute("SELECT publication_id, tables FROM arena.publications "
                                  "ORDER BY publication_id DESC LIMIT 1").fetchone()
    with connect_warehouse(str(work_file(warehouse)), read_only=True) as con:
        versions = dict(con.execute("SELECT version, build_id FROM arena_versions.versions").fetchall())
    return {"publication_id": pid, "tables": json.loads(tables), "builds": versions}


def test_after_a_full_run_schema_arena_has_no_base_table_but_the_records(sample_run):
    # in the readers' snapshot as in the pipeline's work file (the snapshot has the work file's layout)
    assert _base_tables(sample_run.warehouse) == _base_tables(work_file(sample_run.warehouse)) == sorted(RECORD_TABLES)
    live = _live(sample_run.warehouse)
    assert set(VALIDATION) <= set(live["tables"]) and set(CATALOG.published) <= set(live["tables"])
    assert {live["builds"][live["tables"][t]] for t in VALIDATION} == {sample_run.result.run_id}


def _scores_and_board(root: Path) -> tuple[Path, Path]:
    """A benchmark file and a published board (CSV) naming every model of the sample."""
    votes = pl.read_csv(REAL_CSV, infer_schema=False)
    names = pl.concat([votes.get_column("model_a"), votes.get_column("model_b")]).unique().sort()
    scores, board = root / "scores.csv", root / "board.csv"
    pl.DataFrame({"model": names, "made_up": [float(len(n)) for n in names]}).write_csv(scores)
    pl.DataFrame({"model": names, "rating": [1000.0 + 7 * (i % 11) for i in range(len(names))]}).write_csv(board)
    return scores, board


@pytest.mark.slow
def test_a_rerank_publishes_its_own_comparisons_and_upgrades_a_warehouse_from_before(sample_run, tmp_path):
    """A re-rank (the rerank_job's selection) publishes validation tables computed from its own board;
    a warehouse whose validation tables are base tables (from before they went through the gate) has
    them replaced by views in the gate's transaction."""
    warehouse = copy_warehouse(sample_run.warehouse, tmp_path / "warehouse.duckdb")
    with duckdb.connect(str(work_file(warehouse))) as con:  # the layout of a warehouse from before: stamped base tables
        for table in VALIDATION:
            con.execute(f"CREATE TABLE arena._old AS SELECT *, 1::BIGINT AS publication_id FROM arena.{table}")
            con.execute(f"DROP VIEW arena.{table}")
            con.execute(f"ALTER TABLE arena._old RENAME TO {table}")
    assert _base_tables(work_file(warehouse)) == sorted([*RECORD_TABLES, *VALIDATION])
    scores, board = _scores_and_board(tmp_path)
    catalog = ModelCatalog(benchmarks=str(scores), published_board=str(board))
    result = materialize(sample_resources(tmp_path, model_catalog=catalog), selection=rerank_job.selection,
                         run_config=SAMPLE_RUN_CONFIG)
    assert result.success
    assert {f"arena/{t}" for t in VALIDATION} | {"arena/leaderboard", "publication_gate"} <= materialized(result)
    assert "arena/battles" not in materialized(result)
    assert _base_tables(warehouse) == sorted(RECORD_TABLES)  # upgraded: views again
    live = _live(warehouse)
    assert live["publication_id"] == 2
    assert {live["builds"][live["tables"][t]] for t in (*VALIDATION, "leaderboard")} == {result.run_id}
    assert_live_is_one_publication(warehouse)
    # what the views show is computed from the board they are published with
    with connect_warehouse(str(warehouse), read_only=True) as con:
        models = {m for (m,) in con.execute("SELECT DISTINCT model FROM arena.leaderboard").fetchall()}
        matched = {m for (m,) in con.execute(
            "SELECT DISTINCT canonical FROM arena.benchmark_scores WHERE matched").fetchall()}
        compared = con.execute("SELECT sum(n_ours) FROM arena.external_comparison "
                               "WHERE method = 'bt' AND category = 'overall'").fetchone()[0]
        shown = con.execute("SELECT count(*) FROM arena.leaderboard "
                            "WHERE method = 'bt' AND category = 'overall'").fetchone()[0]
        columns = {r[0] for r in con.execute("DESCRIBE arena.benchmark_scores").fetchall()}
    assert matched and matched <= models and compared == shown
    assert "publication_id" not in columns
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "compared with publication 2:" in page


def test_a_new_benchmark_file_alone_is_published_with_the_live_boards(sample_run, tmp_path):
    """The recipe of docs/refresh.md: the benchmark tables and the gate, on the live boards (nothing else rebuilt)."""
    warehouse = copy_warehouse(sample_run.warehouse, tmp_path / "warehouse.duckdb")
    before = _live(warehouse)
    scores, _ = _scores_and_board(tmp_path)
    result = materialize(sample_resources(tmp_path, model_catalog=ModelCatalog(benchmarks=str(scores))),
                         selection=["arena/benchmark_scores", "arena/benchmark_agreement", "publication_gate",
                                    "leaderboard_report"])
    assert result.success
    live = _live(warehouse)
    assert live["publication_id"] == before["publication_id"] + 1
    assert {t for t, v in live["tables"].items() if v != before["tables"].get(t)} == {
        "benchmark_scores", "benchmark_agreement", "publication_changes"}
    with connect_warehouse(str(warehouse), read_only=True) as con:
        (matched,), = con.execute("SELECT count(*) FROM arena.benchmark_scores WHERE matched").fetchall()
    assert matched > 0
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert f"compared with publication {live['publication_id']}:" in page


@pytest.mark.slow
def test_a_warehouse_from_before_the_snapshot_is_upgraded_in_place_by_the_next_run(sample_run, tmp_path):
    """A warehouse of the old layout (the pipeline and its readers shared one file) at ARENA_WAREHOUSE:
    the next run adopts it as its work file (the same inode: no copy, no rebuild), publishes, and
    leaves a snapshot at the path readers use, with the earlier publications' records."""
    legacy = tmp_path / "warehouse.duckdb"
    shutil.copy(work_file(sample_run.warehouse), legacy)  # the work file is the old layout's whole warehouse
    if (wal := Path(f"{work_file(sample_run.warehouse)}.wal")).exists():  # with what its log holds
        shutil.copy(wal, f"{legacy}.wal")
    # where the vote tables' versions were DuckDB tables of that file (now views over the store's Parquet files)
    with duckdb.connect(str(legacy), config={"file_search_path": str(work_file(sample_run.warehouse).parent)}) as con:
        for (version,) in con.execute("SELECT version FROM arena_versions.versions "
                                      "WHERE files IS NOT NULL AND same_as IS NULL").fetchall():
            con.execute(f'CREATE TABLE arena_versions."_t" AS SELECT * FROM arena_versions."{version}"')
            con.execute(f'DROP VIEW arena_versions."{version}"')
            con.execute(f'ALTER TABLE arena_versions."_t" RENAME TO "{version}"')
        con.execute("ALTER TABLE arena_versions.versions DROP COLUMN files")
    before = _live(sample_run.warehouse)
    inode = legacy.stat().st_ino
    # another seed: a re-rank with the live settings would publish nothing (publication rule 23)
    result = materialize(sample_resources(tmp_path), selection=rerank_job.selection,
                         run_config=rank_config(min_battles=3, bootstrap_rounds=5, seed=7))
    assert result.success
    assert work_file(legacy).stat().st_ino == inode  # adopted in place
    assert legacy.stat().st_ino != inode  # readers' path: now a snapshot
    live = _live(legacy)
    assert live["publication_id"] == before["publication_id"] + 1
    assert live["tables"]["battles"] == before["tables"]["battles"]  # the flat tables reused, not rebuilt
    with connect_warehouse(str(legacy), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM arena.publications").fetchone()[0] == live["publication_id"]
        assert con.execute("SELECT count(*) FROM arena.battles").fetchone()[0] == 100
