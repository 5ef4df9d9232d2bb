"""The ``arena-pipeline`` CLI against small DuckDB warehouses built in tmp_path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline.cli import EXIT_LOCKED, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE, format_board, format_shift, main
from arena_pipeline.core.labels import rank_label, rank_set_label
from arena_pipeline.core.store.records import DUMPS_DDL
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.core.validation.external import EXTERNAL_COMPARISON_MODELS_SCHEMA, EXTERNAL_COMPARISON_SCHEMA
from arena_pipeline.presentation.read import read_dump_boards, read_published
from arena_pipeline.presentation.read_board import read_board
from arena_pipeline_tests.support.synthetic_published import (
    CHAMPION,
    REVISION,
    synthetic_benchmarks,
    synthetic_dump,
    synthetic_outputs,
    synthetic_quality,
)

#: The validation tables (exported when present).
VALIDATION_TABLES = ["external_comparison", "external_comparison_models", "benchmark_scores", "benchmark_agreement"]


def build_warehouse(path: Path, *, leaderboard: bool = True, extras: bool = True, validation: bool = False) -> Path:
    """A warehouse with schema ``arena`` shaped like the published views (plain tables here)."""
    out = synthetic_outputs()
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE SCHEMA arena")
        if leaderboard:
            lb = out.leaderboard.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            con.execute("CREATE TABLE arena.leaderboard AS SELECT * FROM lb")
        if extras:
            pw = out.pairwise.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            st = out.style_coefficients.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            q = synthetic_quality()  # noqa: F841
            con.execute("CREATE TABLE arena.pairwise AS SELECT * FROM pw")
            ps = out.pairwise_significance.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            con.execute("CREATE TABLE arena.pairwise_significance AS SELECT * FROM ps")
            con.execute("CREATE TABLE arena.style_coefficients AS SELECT * FROM st")
            con.execute("CREATE TABLE arena.quality_results AS SELECT * FROM q")
            un = out.unrated_models.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            bs = out.board_status.with_columns(dump_revision=pl.lit(REVISION))  # noqa: F841
            con.execute("CREATE TABLE arena.unrated_models AS SELECT * FROM un")
            con.execute("CREATE TABLE arena.board_status AS SELECT * FROM bs")
            # a view, as publication makes them (over the earlier dumps' tables)
            con.execute("CREATE VIEW arena.leaderboard_history AS SELECT * FROM arena.leaderboard")
            con.execute(DUMPS_DDL.format(table="arena.dumps"))
            d = synthetic_dump()
            con.execute(
                "INSERT INTO arena.dumps VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                [d["revision"], d["source"], d["source_kind"], d["requested_revision"], d["first_seen"],
                 d["files"], d["rows"], "published", d["published_at"], d["published_at"]],
            )
        if validation:
            bench = synthetic_benchmarks()
            frames = {"external_comparison": pl.DataFrame(schema=EXTERNAL_COMPARISON_SCHEMA),  # no board configured
                      "external_comparison_models": pl.DataFrame(schema=EXTERNAL_COMPARISON_MODELS_SCHEMA),
                      "benchmark_scores": bench.scores, "benchmark_agreement": bench.agreement}
            for name, frame in frames.items():  # noqa: B007 - frame is read by DuckDB
                con.execute(f"CREATE TABLE arena.{name} AS SELECT * FROM frame")
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return build_warehouse(tmp_path_factory.mktemp("wh") / "warehouse.duckdb")


@pytest.fixture(autouse=True)
def _no_env_warehouse(monkeypatch):
    monkeypatch.delenv("ARENA_WAREHOUSE", raising=False)


# ---------------------------------------------------------------------------------------------
# leaderboard
# ---------------------------------------------------------------------------------------------


def test_leaderboard_prints_a_table_in_rank_order(warehouse, capsys, golden):
    assert main(["leaderboard", "--warehouse", str(warehouse), "--top", "3"]) == EXIT_OK
    out = capsys.readouterr().out
    lines = out.splitlines()
    golden.check("cli", "leaderboard --top 3: title", lines[0])
    assert lines[0].startswith("Overall") and REVISION in lines[0]
    header = lines[2].split()
    assert header == ["Rank", "Spread", "All-at-once", "Model", "Rating", "95%", "CI", "Above", "Battles"]
    board = synthetic_outputs().leaderboard.filter(
        (pl.col("category") == "overall") & (pl.col("method") == "bt")
    ).sort("rank")
    for line, row in zip(lines[4:7], board.head(3).iter_rows(named=True), strict=True):
        cells = line.split()
        assert cells[0] == str(row["rank"]) and cells[3] == row["model"]
        # issue 44: the rank spread (for this model) and the set for every model at once
        assert cells[1] == rank_set_label(row["rank_ub"], row["rank_lb"])
        assert cells[2] == rank_set_label(row["rank_ub_simultaneous"], row["rank_lb_simultaneous"])
        assert cells[4] == f"{row['rating']:.1f}"
        assert f"[{row['ci_lower']:.1f}, {row['ci_upper']:.1f}]" in line
        assert cells[-1] == f"{row['n_battles']:,}"
        assert cells[-2] == str(row["significantly_above"])  # issue 36: from the pairwise tests
    golden.check("cli", "leaderboard: legend", next(part for part in out.split("\n\n") if part.startswith("95% CI:")))


def test_leaderboard_category_method_and_all_rows(warehouse, capsys, golden):
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "math",
                 "--method", "bt_style", "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    golden.check("cli", "leaderboard math bt_style: title", out.splitlines()[0])
    assert "&lt;" not in out and "<b>odd|model</b> & co" in out  # plain text, not HTML


@pytest.mark.parametrize(("category", "method"), [("Math", "BT_style"), (" MATH ", "bt_style"),
                                                  ("math", "Bt_Style")])
def test_category_and_method_as_printed_or_in_any_case(warehouse, capsys, category, method, golden):
    """The CLI prints 'Math'; typing it back (or MATH) finds the math board."""
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", category,
                 "--method", method]) == EXIT_OK
    golden.check("cli", "leaderboard math bt_style as typed: title", capsys.readouterr().out.splitlines()[0])


def test_unknown_category_and_method_list_the_valid_ones(warehouse, capsys, golden):
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "poetry"]) == EXIT_USAGE
    golden.check("cli", "leaderboard: unknown category", capsys.readouterr().err)
    # a real category without a board in this dump is missing data, not a typo
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "multi_turn"]) == EXIT_NO_DATA
    golden.check("cli", "leaderboard: category without a board", capsys.readouterr().err)
    assert main(["leaderboard", "--warehouse", str(warehouse), "--method", "elo"]) == EXIT_USAGE
    err = capsys.readouterr().err
    golden.check("cli", "leaderboard: unknown method", err)
    assert "Traceback" not in err


def test_a_near_miss_category_or_method_names_the_closest(warehouse, capsys, golden):
    """Issue 37: ``maths`` is answered with "did you mean 'math'?" (difflib), before the valid names."""
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "maths"]) == EXIT_USAGE
    golden.check("cli", "leaderboard: near-miss category", capsys.readouterr().err)
    assert main(["leaderboard", "--warehouse", str(warehouse), "--method", "bt_styl"]) == EXIT_USAGE
    golden.check("cli", "leaderboard: near-miss method", capsys.readouterr().err)


def test_dump_option_prints_one_dumps_own_board(warehouse, tmp_path, capsys, golden):
    """``--dump``: a loaded dump's rows of arena.dump_leaderboard (here: the 33k has only an overall
    board, the 140k also math); a dump or category it lacks is an error naming the valid ones."""
    assert main(["leaderboard", "--warehouse", str(warehouse), "--dump", "a/33k"]) == EXIT_NO_DATA
    golden.check("cli", "leaderboard --dump: no per-dump boards", capsys.readouterr().err)
    path = tmp_path / "family.duckdb"
    path.write_bytes(warehouse.read_bytes())
    with duckdb.connect(str(path)) as con:  # the 33k's board: the overall bt rows, its ratings 100 lower
        con.execute("CREATE TABLE arena.dump_leaderboard AS "
                    "SELECT 'a/33k' AS dump, * REPLACE (rating - 100 AS rating) FROM arena.leaderboard "
                    "WHERE category = 'overall' AND method = 'bt' "
                    "UNION ALL SELECT 'b/140k', * FROM arena.leaderboard WHERE category IN ('overall', 'math')")
    assert main(["leaderboard", "--warehouse", str(path), "--dump", "a/33k", "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    golden.check("cli", "leaderboard --dump a/33k: title", out.splitlines()[0])
    board = synthetic_outputs().leaderboard.filter((pl.col("category") == "overall") & (pl.col("method") == "bt"))
    champion = board.filter(pl.col("rank") == 1).row(0, named=True)
    assert f"{champion['rating'] - 100:.1f}" in out and f" {champion['rating']:.1f} " not in out
    assert "Categories without a board" not in out  # the combined boards' tables are not this dump's
    assert main(["leaderboard", "--warehouse", str(path), "--dump", "b/140k", "--category", "math"]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[0].endswith("; dump b/140k")
    assert main(["leaderboard", "--warehouse", str(path), "--dump", "a/33k", "--category", "math"]) == EXIT_NO_DATA
    golden.check("cli", "leaderboard --dump: category not on that dump's boards", capsys.readouterr().err)
    assert main(["leaderboard", "--warehouse", str(path), "--dump", "c/55k"]) == EXIT_USAGE
    golden.check("cli", "leaderboard --dump: unknown dump", capsys.readouterr().err)
    assert main(["export", "--warehouse", str(path), str(tmp_path / "out")]) == EXIT_OK
    exported = pl.read_parquet(tmp_path / "out" / "dump_leaderboard.parquet")
    both = synthetic_outputs().leaderboard.filter(pl.col("category").is_in(["overall", "math"])).height
    assert exported.group_by("dump").len().sort("dump").rows() == [("a/33k", board.height), ("b/140k", both)]


def test_the_rows_of_a_board_are_the_read_apis_frames(warehouse, tmp_path):
    """``leaderboard`` reads one board as DuckDB's rows (``read_board``); the report and the UI read frames
    (``PublicationView``): for every board, also a dump's own, both give the same rows in the same order, the
    same revision, unrated models and categories without a board, and the same errors."""
    path = tmp_path / "family.duckdb"
    path.write_bytes(warehouse.read_bytes())
    with duckdb.connect(str(path)) as con:  # one dump's own boards: overall and math, 'o''dump' needs quoting
        con.execute("CREATE TABLE arena.dump_leaderboard AS SELECT 'o''dump' AS dump, * FROM arena.leaderboard "
                    "WHERE category IN ('overall', 'math')")
    with connect_warehouse(str(path), read_only=True) as con:
        for dump, pub in ((None, read_published(con, style=False)), ("o'dump", read_dump_boards(con, "o'dump"))):
            boards = [(c, m) for c in pub.categories() for m in pub.methods(c)]
            assert len(boards) > 3 and any(pub.board(c, m).get_column("provisional").any() for c, m in boards)
            for category, method in boards:
                rows, frame = read_board(con, category, method, dump=dump), pub.board(category, method)
                assert rows.ranked + rows.provisional == frame.rows(named=True), (category, method)
                assert rows.provisional == frame.filter("provisional").rows(named=True)
                assert rows.categories == pub.categories()
                assert rows.unrated == pub.unrated(category).select(
                    "model", "battles", "wins", "losses", "ties", "reason").rows()
                assert rows.no_board == pub.no_board().select(
                    "category", "status", pl.col("reason").fill_null("")).rows()
                if dump is None:
                    assert rows.revision == pub.revision
            for category, method in (("nosuch", "bt"), ("overall", "nosuch"), ("no_refusal", "bt")):
                with pytest.raises(ValueError) as expected:
                    pub.check_board(category, method)
                with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
                    read_board(con, category, method, dump=dump)


def test_provisional_models_are_listed_apart_from_the_ranked_ones(warehouse, capsys, golden):
    """Math: every model has fewer than 301 battles, so none is ranked; all are listed as provisional
    below the (empty) ranked table, each once, with the reason."""
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "math", "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    ranked, _, provisional = out.partition("\nProvisional (")
    golden.check("cli", "leaderboard: no model shown", ranked.strip().splitlines()[-1])
    board = synthetic_outputs().leaderboard.filter((pl.col("category") == "math") & (pl.col("method") == "bt"))
    assert board.get_column("provisional").all()
    head, *rows = provisional.split("\n\n")[0].strip().splitlines()
    golden.check("cli", "leaderboard: provisional heading", head)
    assert head.startswith(f"{board.height} models")
    listed = [line.split()[4] for line in rows[2:]]  # after the header and the rule; rank "prov. N", two rank sets
    first_words = [m.split()[0] for m in board.sort("rank", "model").get_column("model")]
    assert listed == first_words
    for line, row in zip(rows[2:], board.sort("rank", "model").iter_rows(named=True), strict=True):
        assert line.split()[:2] == ["prov.", str(row["rank"])] and f"{row['rating']:.1f}" in line


def test_provisional_ranks_are_marked_apart_from_the_shown_ranks():
    """A provisional rank (its place among every model of the board) is printed "prov. N", so a
    provisional rank 2 never reads as the shown rank 2 (issue 36: math had both)."""
    row = {"rank_ub": 1, "rank_lb": 3, "model": "m", "rating": 1010.0, "ci_lower": 1.0, "ci_upper": 20.0, "ci_method": "sandwich",
           "significantly_above": 0, "n_battles": 400}
    shown = format_board([{**row, "rank": 2, "provisional": False}]).splitlines()[2]
    provisional = format_board([{**row, "rank": 2, "provisional": True}]).splitlines()[2]
    assert shown.split()[:3] == ["2", "1-3", "–"] and provisional.split()[:4] == ["prov.", "2", "1-3", "–"]
    assert rank_label(2) == "2" and rank_label(2, True) == "prov. 2" and rank_label(None) == "–"


def test_top_bounds_the_provisional_list_too(warehouse, capsys, golden):
    """--top N shows at most N provisional models (the best N) and says how many there are."""
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "math", "--top", "2"]) == EXIT_OK
    provisional = capsys.readouterr().out.partition("\nProvisional (")[2].split("\n\n")[0].strip().splitlines()
    board = synthetic_outputs().leaderboard.filter((pl.col("category") == "math") & (pl.col("method") == "bt"))
    assert board.height > 2
    golden.check("cli", "leaderboard --top 2: provisional heading", provisional[0])
    assert provisional[0].startswith(f"{board.height} models")
    best = board.sort("rank", "model").head(2).get_column("model").to_list()
    assert [line.split()[4] for line in provisional[3:]] == [m.split()[0] for m in best]  # "prov. N", two rank sets


def test_shown_board_lists_no_provisional_section_when_every_model_is_shown(warehouse, capsys):
    assert main(["leaderboard", "--warehouse", str(warehouse), "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Provisional (" not in out and "No model reaches" not in out


def test_unrated_models_and_categories_without_a_board_are_listed_with_the_reason(warehouse, capsys, golden):
    assert main(["leaderboard", "--warehouse", str(warehouse)]) == EXIT_OK
    out = capsys.readouterr().out
    unrated = out.split("\nUnrated (1 model with battles here but no rating):\n")[1].splitlines()
    assert unrated[0].split() == ["Model", "Battles", "W/L/T", "Reason"]
    assert unrated[2].split()[:4] == [CHAMPION, "24", "24/0/0", "only"]
    golden.check("cli", "leaderboard: unrated model line", unrated[2])
    no_board = out.split("\nCategories without a board (19):\n")[1].splitlines()
    rows = {line.split()[0]: line.split(maxsplit=2)[1:] for line in no_board[2:]}
    assert len(rows) == 19 and "overall" not in rows
    assert {name: rows[name][0] for name in ("math", "no_refusal", "no_tie", "multi_turn")} == {
        "math": "no_board", "no_refusal": "unavailable", "no_tie": "no_board", "multi_turn": "unavailable"}
    golden.check("cli", "leaderboard: categories without a board", "\n".join(no_board))
    # asking for a category without a board says why
    assert main(["leaderboard", "--warehouse", str(warehouse), "--category", "no_refusal"]) == EXIT_NO_DATA
    golden.check("cli", "leaderboard: unavailable category", capsys.readouterr().err)


def test_warehouse_from_env_at_run_time_and_flag_wins(warehouse, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARENA_WAREHOUSE", str(warehouse))
    assert main(["leaderboard", "--top", "1"]) == EXIT_OK
    assert "gemini-2.5-pro" in capsys.readouterr().out
    missing = tmp_path / "elsewhere.duckdb"
    assert main(["leaderboard", "--warehouse", str(missing)]) == EXIT_NO_DATA
    assert str(missing) in capsys.readouterr().err


def test_default_warehouse_path_is_relative_to_the_working_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard"]) == EXIT_NO_DATA
    err = capsys.readouterr().err
    assert "no warehouse at data/warehouse.duckdb" in err and "ARENA_WAREHOUSE" in err
    assert not (tmp_path / "data").exists()  # nothing created by a read


@pytest.mark.parametrize("command", [["leaderboard"], ["export", "OUT"], ["report", "OUT"]])
def test_missing_or_unpublished_warehouse_is_a_clear_error(tmp_path, capsys, command, golden):
    argv = [c if c != "OUT" else str(tmp_path / "out") for c in command]
    assert main([*argv, "--warehouse", str(tmp_path / "none.duckdb")]) == EXIT_NO_DATA
    assert "no warehouse at" in capsys.readouterr().err

    bare = build_warehouse(tmp_path / "bare.duckdb", leaderboard=False, extras=False)
    assert main([*argv, "--warehouse", str(bare)]) == EXIT_NO_DATA
    golden.check("cli", f"{command[0]}: unpublished warehouse", capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_empty_leaderboard_and_not_a_database(tmp_path, capsys):
    path = tmp_path / "empty.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA arena; CREATE TABLE arena.leaderboard (category VARCHAR, method VARCHAR)")
    con.close()
    assert main(["leaderboard", "--warehouse", str(path)]) == EXIT_NO_DATA
    assert "is empty" in capsys.readouterr().err
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    assert main(["leaderboard", "--warehouse", str(junk)]) == EXIT_NO_DATA
    err = capsys.readouterr().err
    assert "cannot open" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["leaderboard"], ["export", "OUT"], ["report", "OUT"]])
def test_a_published_view_that_cannot_be_read_is_one_line(tmp_path, capsys, command, golden):
    """A view over a version table that is gone: exit 1 and one line naming the file, no traceback."""
    path = build_warehouse(tmp_path / "broken.duckdb", extras=False)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE arena.lb_version AS SELECT * FROM arena.leaderboard")
        con.execute("DROP TABLE arena.leaderboard")
        con.execute("CREATE VIEW arena.leaderboard AS SELECT * FROM arena.lb_version")
        con.execute("DROP TABLE arena.lb_version")
    argv = [c if c != "OUT" else str(tmp_path / "r.html") for c in command]
    assert main([*argv, "--warehouse", str(path)]) == EXIT_NO_DATA
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    golden.check("cli", "a published view that cannot be read", err[0].partition(f"{path}: ")[0])
    assert not (tmp_path / "r.html").exists()


def test_usage_errors_return_2(capsys):
    assert main([]) == EXIT_USAGE
    assert main(["leaderboard", "--top", "-1"]) == EXIT_USAGE
    assert main(["export", "--format", "xlsx", "x"]) == EXIT_USAGE
    assert main(["nosuchcommand"]) == EXIT_USAGE
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "leaderboard" in out and "Exit codes: 0 ok; 1 no warehouse" in out
    assert main(["leaderboard", "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "--warehouse PATH" in out and "$ARENA_WAREHOUSE" in out and "--timeout SECONDS" in out


def test_a_closed_pipe_ends_the_output_quietly(warehouse, monkeypatch, capsys):
    """`arena-pipeline leaderboard | head -1`: the reader goes away, the command ends with 0, no traceback."""
    import errno
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["leaderboard", "--warehouse", str(warehouse)]) == EXIT_OK
    assert not isinstance(sys.stdout, ClosedPipe)  # later writes (the flush at exit) go nowhere
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------


def test_export_parquet_writes_every_table_and_a_manifest(warehouse, tmp_path, capsys):
    out_dir = tmp_path / "export"
    assert main(["export", "--warehouse", str(warehouse), "--format", "parquet", str(out_dir)]) == EXIT_OK
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["board_status.parquet", "dumps.parquet", "leaderboard.parquet", "leaderboard_history.parquet",
                     "manifest.json", "pairwise.parquet", "pairwise_significance.parquet", "quality_results.parquet",
                     "style_coefficients.parquet", "unrated_models.parquet"]
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["revision"] == REVISION and manifest["format"] == "parquet"
    assert manifest["missing_tables"] == ["models", "style_coefficients_history", "dump_leaderboard",
                                          "model_fit", "model_fit_calibration", "benchmark_scores",
                                          "benchmark_agreement", "external_comparison", "external_comparison_models",
                                          "publication_changes"]
    assert manifest["tables"]["leaderboard_history"]["rows"] == manifest["tables"]["leaderboard"]["rows"]
    lb = pl.read_parquet(out_dir / "leaderboard.parquet")
    expected = synthetic_outputs().leaderboard
    assert manifest["tables"]["leaderboard"]["rows"] == lb.height == expected.height
    assert lb.drop("dump_revision").sort("category", "method", "model").equals(
        expected.sort("category", "method", "model")
    )
    assert "leaderboard.parquet: 81 rows" in capsys.readouterr().out


def test_export_includes_the_validation_tables_when_present(tmp_path):
    path = build_warehouse(tmp_path / "validated.duckdb", validation=True)
    bench = synthetic_benchmarks()
    assert main(["export", "--warehouse", str(path), "--format", "parquet", str(tmp_path / "p")]) == EXIT_OK
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert set(VALIDATION_TABLES) <= set(manifest["tables"]) and not set(VALIDATION_TABLES) & set(
        manifest["missing_tables"])
    assert manifest["tables"]["benchmark_scores"]["rows"] == bench.scores.height
    assert pl.read_parquet(tmp_path / "p" / "benchmark_agreement.parquet").equals(bench.agreement)
    assert pl.read_parquet(tmp_path / "p" / "external_comparison.parquet").is_empty()
    assert main(["export", "--warehouse", str(path), "--format", "csv", str(tmp_path / "c")]) == EXIT_OK
    agreement = pl.read_csv(tmp_path / "c" / "benchmark_agreement.csv")
    assert agreement.height == bench.agreement.height
    assert agreement.get_column("spearman").to_list() == pytest.approx(
        bench.agreement.get_column("spearman").to_list(), nan_ok=True)
    first = bench.agreement.get_column("disagreements")[0][0]["model"]
    assert first in agreement.get_column("disagreements")[0]  # the list of structs, as JSON text


def test_export_csv(warehouse, tmp_path):
    out_dir = tmp_path / "csv"
    assert main(["export", "--warehouse", str(warehouse), "--format", "csv", str(out_dir)]) == EXIT_OK
    pw = pl.read_csv(out_dir / "pairwise.csv")
    assert pw.height == synthetic_outputs().pairwise.height
    assert {"model_1", "model_2", "win_rate_1", "dump_revision"} <= set(pw.columns)
    dumps = pl.read_csv(out_dir / "dumps.csv")
    assert dumps.get_column("revision").to_list() == [REVISION]
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]


def test_export_over_an_earlier_export_of_the_other_format_says_so(warehouse, tmp_path, capsys, golden):
    """Issue 37: the folder is replaced whole; a csv export over a parquet one says its parquet files are gone."""
    out_dir = tmp_path / "out"
    assert main(["export", "--warehouse", str(warehouse), str(out_dir)]) == EXIT_OK
    assert "replaced" not in capsys.readouterr().out
    assert list(out_dir.glob("*.parquet"))
    assert main(["export", "--warehouse", str(warehouse), "--format", "csv", str(out_dir)]) == EXIT_OK
    golden.check("cli", "export: over the other format", capsys.readouterr().out.splitlines()[-1])
    assert not list(out_dir.glob("*.parquet"))
    assert main(["export", "--warehouse", str(warehouse), "--format", "csv", str(out_dir)]) == EXIT_OK
    golden.check("cli", "export: over the same format", capsys.readouterr().out.splitlines()[-1])


#: Aliases that DuckDB's own list text quotes for some elements only ([a, 'b:0']); one is a formula.
LIST_ALIASES = [["amazon-nova-experimental-chat-05-14"], ["amazon.nova-pro-v1:0", "a, b", 'say "hi"', "=1+1"], [],
                None]


def test_csv_export_writes_every_list_column_as_a_json_array(tmp_path):
    """A list cell is a JSON array (of objects for a list of structs) that json.loads gives back; a null
    list is an empty cell; parquet keeps the lists."""
    path = build_warehouse(tmp_path / "lists.duckdb", validation=True)
    models = pl.DataFrame({"model": ["m1", "m2", "m3", "m4"], "aliases": LIST_ALIASES},  # noqa: F841
                          schema={"model": pl.String, "aliases": pl.List(pl.String)})
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE arena.models AS SELECT * FROM models")
    assert main(["export", "--warehouse", str(path), "--format", "csv", str(tmp_path / "c")]) == EXIT_OK

    def cells(table: str, column: str) -> list:
        frame = pl.read_csv(tmp_path / "c" / f"{table}.csv", infer_schema=False)
        return [None if cell is None else json.loads(cell) for cell in frame.get_column(column)]

    assert cells("models", "aliases") == LIST_ALIASES  # the formula stays inside a JSON string: "[" first
    assert cells("quality_results", "sample_ids") == synthetic_quality().get_column("sample_ids").to_list()
    assert cells("benchmark_agreement", "disagreements") == (
        synthetic_benchmarks().agreement.get_column("disagreements").to_list())
    assert main(["export", "--warehouse", str(path), "--format", "parquet", str(tmp_path / "p")]) == EXIT_OK
    assert pl.read_parquet(tmp_path / "p" / "models.parquet").get_column("aliases").to_list() == LIST_ALIASES


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o027], ids=oct)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_folder_and_files_get_the_modes_of_the_umask(warehouse, tmp_path, umask, fmt):
    """OUT_DIR gets 0o777 less the umask, as ``mkdir`` gives (not mkdtemp's 0o700), its files 0o666 less it."""
    out_dir = tmp_path / "export"
    previous = os.umask(umask)
    try:
        assert main(["export", "--warehouse", str(warehouse), "--format", fmt, str(out_dir)]) == EXIT_OK
    finally:
        os.umask(previous)
    assert oct(out_dir.stat().st_mode & 0o777) == oct(0o777 & ~umask)
    for name in (f"leaderboard.{fmt}", "manifest.json"):
        assert oct((out_dir / name).stat().st_mode & 0o777) == oct(0o666 & ~umask)


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def test_report_renders_from_the_warehouse(warehouse, tmp_path, capsys, golden):
    out = tmp_path / "r" / "index.html"
    assert main(["report", str(out), "--warehouse", str(warehouse), "--title", "Arena test"]) == EXIT_OK
    page = out.read_text(encoding="utf-8")
    assert "<title>Arena test</title>" in page and REVISION in page
    assert 'id="cat-coding"' in page and "winner_in_set" in page
    golden.check("cli", "report: written", capsys.readouterr().out)


def test_report_is_never_written_over_a_file_it_did_not_write(warehouse, tmp_path, capsys, golden):
    """`report WAREHOUSE_PATH` replaced the DuckDB file with the page (issue 38, item 2): refused in one line,
    every byte kept; a report written before is replaced as ever."""
    import shutil

    copy = tmp_path / "warehouse.duckdb"
    shutil.copy(warehouse, copy)
    before = copy.read_bytes()
    assert main(["report", str(copy), "--warehouse", str(copy)]) == EXIT_NO_DATA
    golden.check("cli", "report: onto the warehouse", capsys.readouterr().err)
    notes = tmp_path / "notes.html"
    notes.write_text("<html><body>my notes</body></html>")
    for target in (copy, notes):  # another warehouse's file, a page of someone else's
        original = target.read_bytes()
        assert main(["report", str(target), "--warehouse", str(warehouse)]) == EXIT_NO_DATA
        golden.check("cli", f"report: onto {target.name}", capsys.readouterr().err)
        assert target.read_bytes() == original
    assert copy.read_bytes() == before
    page = tmp_path / "index.html"
    assert main(["report", str(page), "--warehouse", str(warehouse)]) == EXIT_OK
    assert main(["report", str(page), "--warehouse", str(warehouse), "--title", "Again"]) == EXIT_OK
    assert "<title>Again</title>" in page.read_text(encoding="utf-8")


def test_report_brings_a_page_behind_the_live_publication_up_to_it(warehouse, tmp_path, monkeypatch, capsys, golden):
    """A page left at publication N-1 while N is live (issue 38, item 3): `report` re-renders it, says which
    publication the page showed, and the page now carries the live publication's id."""
    from arena_pipeline.presentation import read
    from arena_pipeline.presentation.report import page_publication

    live = {"publication_id": 5, "revision": REVISION, "tables": {}, "settings": {}}
    monkeypatch.setattr(read, "live_publication", lambda con, schema: {**live, "publication_id": 4})
    page = tmp_path / "index.html"
    assert main(["report", str(page), "--warehouse", str(warehouse)]) == EXIT_OK
    assert page_publication(page) == 4
    capsys.readouterr()
    monkeypatch.setattr(read, "live_publication", lambda con, schema: live)
    assert main(["report", str(page), "--warehouse", str(warehouse)]) == EXIT_OK
    golden.check("cli", "report: a page behind the live publication", capsys.readouterr().out.splitlines()[-1])
    assert page_publication(page) == 5


def test_changes_since_the_live_publication_says_so(warehouse, monkeypatch, capsys, golden):
    """`changes --since <live id>` printed the live boards compared with themselves, every change 0 (issue 38,
    item 8); it says plainly that this is the live publication, and compares nothing."""
    from arena_pipeline.core.changes import changes
    from arena_pipeline.core.store import records

    monkeypatch.setattr(records, "live_publication", lambda con, schema: {"publication_id": 4, "revision": REVISION})

    def no_comparison(*args):
        raise AssertionError("the live publication was compared with itself")

    monkeypatch.setattr(changes, "changes_between", no_comparison)
    assert main(["changes", "--warehouse", str(warehouse), "--since", "4"]) == EXIT_OK
    golden.check("changes", "--since the live publication", capsys.readouterr().out)


def test_changes_name_each_boards_data_relation_when_they_differ(warehouse, monkeypatch, capsys, golden):
    """Issue 36: the votes' relation is decided per board (the same votes with other style counts are
    'votes changed' on bt_style only): the title gives one relation when every board shares it, else
    each board's line says its own."""
    import polars as pl

    from arena_pipeline.core.changes import changes
    from arena_pipeline.core.store import records

    monkeypatch.setattr(records, "live_publication", lambda con, schema: {"publication_id": 4, "revision": REVISION})
    rows = [("ref", 1000.0, None, None), ("a", 1040.0, 1020.0, 1060.0), ("b", 990.0, 970.0, 1010.0)]
    frames = [pl.DataFrame(rows, schema=["model", "rating", "ci_lower", "ci_upper"], orient="row").with_columns(
        category=pl.lit(c), method=pl.lit(m), ci_method=pl.lit("sandwich"), rank=pl.lit(1), rank_ub=pl.lit(1),
        n_battles=pl.lit(500), provisional=pl.lit(False)) for c in ("overall", "math") for m in ("bt", "bt_style")]
    board = pl.concat(frames)
    relations = pl.DataFrame({"category": ["overall", "math"], "data_relation": [changes.SAME_VOTES] * 2,
                              "style_relation": [changes.VOTES_CHANGED, changes.SAME_VOTES]})
    for relation, method, said in ((relations, "bt_style", changes.VOTES_CHANGED), (relations, "bt", None),
                                   (changes.VOTES_ADDED, "bt", changes.VOTES_ADDED)):
        monkeypatch.setattr(changes, "changes_between",
                            lambda *args, r=relation: changes.compare_boards(board, board, relation=r))
        assert main(["changes", "--warehouse", str(warehouse), "--since", "1", "--method", method]) == EXIT_OK
        lines = capsys.readouterr().out.splitlines()
        if said == changes.VOTES_ADDED:  # one relation: in the title, not on every board
            assert lines[0].endswith(f"): {changes.VOTES_ADDED}") and not any("kept" in x and "; votes" in x
                                                                            for x in lines)
            continue
        golden.check("changes", f"title: boards of different relations ({method})", lines[0])
        boards = [line for line in lines if " kept (" in line]
        expected = ([f"; {changes.VOTES_CHANGED}", f"; {changes.SAME_VOTES}"] if method == "bt_style"
                    else [f"; {changes.SAME_VOTES}"] * 2)
        assert [line[line.rindex(";"):] for line in boards] == expected, boards


def test_a_misspelt_warehouse_variable_is_named_by_the_reader_commands(tmp_path, monkeypatch, capsys, golden):
    """ARENA_WAREHOUS=data/own.duckdb: the reader commands read the default warehouse, and say why first."""
    from arena_pipeline.cli import misspelt_warehouse_variable

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARENA_WAREHOUS", "data/own.duckdb")
    assert main(["leaderboard"]) == EXIT_NO_DATA
    note, error = capsys.readouterr().err.splitlines()
    assert note.startswith("note: ARENA_WAREHOUS ") and "data/warehouse.duckdb" in note
    golden.check("cli", "a reader command: a misspelt ARENA_WAREHOUSE, the note", note)
    assert error.startswith("arena-pipeline: error: ") and "data/warehouse.duckdb" in error
    golden.check("cli", "a reader command: a misspelt ARENA_WAREHOUSE, the error", error)
    assert misspelt_warehouse_variable(Path("data/own.duckdb"), {"ARENA_WAREHOUS": "x"}) is None  # --warehouse
    assert misspelt_warehouse_variable(Path("data/warehouse.duckdb"),
                                       {"ARENA_WAREHOUS": "x", "ARENA_WAREHOUSE": "y"}) is None
    assert misspelt_warehouse_variable(Path("data/warehouse.duckdb"), {"ARENA_SOURCE": "x"}) is None


def test_report_default_path_follows_the_warehouse(warehouse, tmp_path, monkeypatch):
    """The report lies beside its warehouse (issue 47: a misspelt ARENA_WAREHOUSE wrote its report over the
    default warehouse's, data/report/index.html); ARENA_REPORT, then OUT, set it elsewhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARENA_WAREHOUSE", str(warehouse))
    assert main(["report"]) == EXIT_OK
    page = warehouse.parent / "report" / "index.html"
    assert page.is_file()
    assert not (tmp_path / "data").exists()
    # a second warehouse in the same folder (the README's data/own.duckdb): a page of its own, the other kept
    import shutil

    own = shutil.copy(warehouse, warehouse.parent / "own.duckdb")
    before = page.read_bytes()
    monkeypatch.setenv("ARENA_WAREHOUSE", str(own))
    assert main(["report"]) == EXIT_OK
    assert f'content="{own.resolve()}"' in (warehouse.parent / "report" / "own.html").read_text(encoding="utf-8")
    assert page.read_bytes() == before
    monkeypatch.setenv("ARENA_REPORT", str(tmp_path / "set" / "index.html"))
    assert main(["report"]) == EXIT_OK
    assert (tmp_path / "set" / "index.html").is_file()


def test_the_report_of_another_warehouse_is_never_written_over(warehouse, tmp_path, monkeypatch, capsys, golden):
    import shutil

    from arena_pipeline.resources import ReportSettings

    out = tmp_path / "report" / "index.html"
    assert main(["report", str(out), "--warehouse", str(warehouse)]) == EXIT_OK
    assert f'<meta name="arena-warehouse" content="{warehouse.resolve()}">' in out.read_text(encoding="utf-8")
    assert main(["report", str(out), "--warehouse", str(warehouse)]) == EXIT_OK  # its own: replaced
    other = tmp_path / "dat" / "warehouse.duckdb"
    other.parent.mkdir()
    shutil.copy(warehouse, other)
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["report", str(out), "--warehouse", str(other)]) == EXIT_NO_DATA
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and f"{out} " in error[0] and f"({warehouse.resolve()})" in error[0]
    golden.check("cli", "report: onto another warehouse's report", error[0])
    assert out.read_bytes() == before
    # a warehouse copied with its page beside it: the page in its own place is its own
    moved = tmp_path / "moved" / "warehouse.duckdb"
    (moved.parent / "report").mkdir(parents=True)
    shutil.copy(warehouse, moved)
    shutil.copy(out, moved.parent / "report" / "index.html")
    assert main(["report", "--warehouse", str(moved)]) == EXIT_OK
    assert f'content="{moved.resolve()}"' in (moved.parent / "report" / "index.html").read_text(encoding="utf-8")
    assert ReportSettings().path(str(other)) == tmp_path / "dat" / "report" / "index.html"
    assert ReportSettings().path("data/warehouse.duckdb") == Path("data/report/index.html")  # the default's
    assert ReportSettings().path("data/own.duckdb") == Path("data/report/own.html")


# ---------------------------------------------------------------------------------------------
# processes: the console entry point, a locked warehouse
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_module_entry_point_runs_in_a_fresh_process(warehouse):
    result = subprocess.run(
        [sys.executable, "-m", "arena_pipeline.cli", "leaderboard", "--top", "2"],
        env={**os.environ, "ARENA_WAREHOUSE": str(warehouse)},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "gemini-2.5-pro" in result.stdout


#: What the read-only commands must start without: the fitting and validation stacks (scipy alone
#: is ~0.5 s of imports, Dagster ~1 s); they belong to the pipeline, not to reading its tables.
PIPELINE_ONLY_MODULES = ("scipy", "dagster", "great_expectations", "sklearn")


#: What ``import arena_pipeline.cli``, ``--help`` and ``leaderboard`` must do without: the array and validation
#: stacks (NumPy, Arrow, pydantic and pandas, ~0.3 s of imports together) that only the frames of the other
#: commands and of the pipeline need; ``leaderboard`` prints DuckDB's rows (``presentation.read_board``).
FRAME_ONLY_MODULES = ("polars", "numpy", "pyarrow", "pydantic", "pandas", "jinja2")


@pytest.mark.slow
@pytest.mark.parametrize("argv", [None, ["--help"], ["leaderboard", "--top", "2"],
                                  ["leaderboard", "--category", "nosuch"], ["export", "--help"], ["refresh", "--help"]],
                         ids=["import", "help", "leaderboard", "unknown-category", "export-help", "refresh-help"])
def test_the_cli_and_leaderboard_load_no_pipeline_or_array_library(warehouse, argv):
    """In a fresh process: importing the CLI, ``--help`` and ``leaderboard`` (also failing on a typo) leave
    every one of :data:`PIPELINE_ONLY_MODULES` and :data:`FRAME_ONLY_MODULES` out of ``sys.modules``
    (what makes the command start and ``leaderboard`` answer fast)."""
    script = textwrap.dedent(f"""
        import json, sys
        import arena_pipeline.cli
        code = 0 if {argv!r} is None else arena_pipeline.cli.main({argv!r})
        loaded = [m for m in {PIPELINE_ONLY_MODULES + FRAME_ONLY_MODULES!r} if m in sys.modules]
        print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "ARENA_WAREHOUSE": str(warehouse)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stderr.strip().splitlines()[-1])
    expected = EXIT_USAGE if argv and "nosuch" in argv else EXIT_OK
    assert outcome == {"code": expected, "loaded": []}, result.stderr
    if argv == ["leaderboard", "--top", "2"]:
        assert "gemini-2.5-pro" in result.stdout


@pytest.mark.slow
def test_locked_warehouse_is_reported_after_the_timeout(warehouse, tmp_path, capsys):
    locked = tmp_path / "locked.duckdb"
    locked.write_bytes(warehouse.read_bytes())
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time, duckdb
            con = duckdb.connect({str(locked)!r})
            print("locked", flush=True)
            time.sleep(120)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        code = main(["leaderboard", "--warehouse", str(locked), "--timeout", "0.5"])
        assert code == EXIT_LOCKED
        assert time.monotonic() - started < 30
        err = capsys.readouterr().err
        # the pipeline never holds the snapshot: the reader that does is told to open it read-only
        assert f"is open read-write by process {holder.pid}" in err and "read-only" in err and "--timeout" in err
    finally:
        # SIGKILL: the runner may have SIGTERM ignored (Dagster gives SIGTERM SIGINT's handler, which is
        # "ignore" when the runner was started as a background job of a script), and children inherit it
        holder.kill()
        holder.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# hostile input and output safety
# ---------------------------------------------------------------------------------------------

EVIL_NAMES = {
    "gemini-2.5-pro": "=HYPERLINK(\"http://x.example\",\"click\")",
    "o3-2025-04-16": "\x1b]0;pwned\x07\x1b[2J-rm",
    "deepseek-r1-0528": "\u202eevil-model",
}


@pytest.fixture(scope="module")
def evil_warehouse(tmp_path_factory) -> Path:
    path = build_warehouse(tmp_path_factory.mktemp("evil") / "warehouse.duckdb")
    with duckdb.connect(str(path)) as con:
        for good, bad in EVIL_NAMES.items():
            con.execute("UPDATE arena.leaderboard SET model = ? WHERE model = ?", [bad, good])
        assert con.execute("SELECT count(*) FROM arena.leaderboard WHERE model = ?",
                           [EVIL_NAMES["gemini-2.5-pro"]]).fetchone()[0] > 0
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "soon"])
def test_timeout_must_be_a_finite_number(value, capsys):
    assert main(["leaderboard", f"--timeout={value}"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--timeout" in err and "seconds" in err and repr(value) in err


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "²"])
def test_top_that_is_not_a_number_says_so_in_words(value, capsys, golden):
    assert main(["leaderboard", "--top", value]) == EXIT_USAGE
    err = capsys.readouterr().err
    golden.check("cli", f"leaderboard --top {value}", err.strip().splitlines()[-1])
    assert "_count" not in err and "Traceback" not in err


def test_terminal_control_characters_in_names_are_escaped(evil_warehouse, capsys):
    assert main(["leaderboard", "--warehouse", str(evil_warehouse), "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert not any(c in out for c in ("\x1b", "\x07", "\u202e"))
    assert "\\x1b]0;pwned\\x07\\x1b[2J-rm" in out and "\\u202eevil-model" in out


def test_csv_export_neutralises_formulas_and_parquet_stays_raw(evil_warehouse, tmp_path):
    import csv as csv_module

    from arena_pipeline.export import FORMULA_PREFIXES

    assert main(["export", "--warehouse", str(evil_warehouse), "--format", "csv", str(tmp_path / "c")]) == EXIT_OK
    with open(tmp_path / "c" / "leaderboard.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv_module.DictReader(fh))
    models = {r["model"] for r in rows}
    assert "'" + EVIL_NAMES["gemini-2.5-pro"] in models
    assert not [m for m in models if m.startswith(FORMULA_PREFIXES)]
    assert "'" + EVIL_NAMES["o3-2025-04-16"] not in models  # starts with ESC, not a formula character
    assert all(not r["rating"].startswith("'") for r in rows)  # numbers are left alone
    assert main(["export", "--warehouse", str(evil_warehouse), "--format", "parquet", str(tmp_path / "p")]) == EXIT_OK
    raw = set(pl.read_parquet(tmp_path / "p" / "leaderboard.parquet").get_column("model"))
    assert set(EVIL_NAMES.values()) <= raw


def test_every_formula_prefix_is_neutralised(tmp_path):
    from arena_pipeline.export import FORMULA_PREFIXES, csv_safe_select

    values = [p + "x" for p in FORMULA_PREFIXES] + ["plain", "'quoted", None]
    with duckdb.connect() as con:
        con.execute("CREATE TABLE t (v VARCHAR, n DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?, -1.5)", [[v] for v in values])
        out = con.execute(csv_safe_select(con, "SELECT * FROM t")).fetchall()
    assert [v for v, _ in out] == ["'" + p + "x" for p in FORMULA_PREFIXES] + ["plain", "'quoted", None]
    assert {n for _, n in out} == {-1.5}


def test_export_is_all_or_nothing_on_a_full_disk(warehouse, tmp_path, monkeypatch, capsys, golden):
    import errno

    from arena_pipeline import export

    out_dir = tmp_path / "export"
    assert main(["export", "--warehouse", str(warehouse), "--format", "csv", str(out_dir)]) == EXIT_OK
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    # an earlier export's folder is replaced as a whole
    assert main(["export", "--warehouse", str(warehouse), "--format", "csv", str(out_dir)]) == EXIT_OK
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    capsys.readouterr()
    calls = []
    real = export.relation_exists

    def disk_fills_up(con, schema, table):
        calls.append(table)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(con, schema, table)

    monkeypatch.setattr(export, "relation_exists", disk_fills_up)
    assert main(["export", "--warehouse", str(warehouse), "--format", "parquet", str(out_dir)]) == EXIT_NO_DATA
    golden.check("cli", "export: disk full", capsys.readouterr().err)
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no temporary folder left


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_to_a_link_lands_in_its_folder_and_keeps_the_link(warehouse, tmp_path, fmt):
    """OUT_DIR a symbolic link to a folder (elsewhere, through a link in a link): the export replaces the
    folder's content, twice over, and the link stays a link to it. It used to be renamed away and
    replaced by a plain folder, the target left as it was."""
    target = tmp_path / "elsewhere" / "exports"
    target.mkdir(parents=True)
    (tmp_path / "links").mkdir()
    hop, link = tmp_path / "links" / "hop", tmp_path / "links" / "latest"
    hop.symlink_to(target)
    link.symlink_to(hop)
    for _ in range(2):  # a new folder, then an earlier export's folder
        assert main(["export", "--warehouse", str(warehouse), "--format", fmt, str(link)]) == EXIT_OK
        assert link.is_symlink() and os.readlink(link) == str(hop)
        assert hop.is_symlink() and os.readlink(hop) == str(target)
        assert json.loads((target / "manifest.json").read_text())["revision"] == REVISION
        assert (target / f"leaderboard.{fmt}").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "links"]
    assert [p.name for p in (tmp_path / "elsewhere").iterdir()] == ["exports"]  # no temporary folder left
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["hop", "latest"]


def test_export_to_a_link_that_leads_nowhere_is_refused_in_one_line(warehouse, tmp_path, capsys, golden):
    dangling, loop = tmp_path / "dangling", tmp_path / "loop"
    dangling.symlink_to(tmp_path / "gone")
    loop.symlink_to(loop)
    for link in (dangling, loop):
        assert main(["export", "--warehouse", str(warehouse), str(link)]) == EXIT_NO_DATA
        golden.check("cli", f"export: a {link.name} link", capsys.readouterr().err)
    assert dangling.is_symlink() and loop.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "loop"]


def test_export_and_report_targets_of_the_wrong_kind_are_one_line_errors(warehouse, tmp_path, capsys, golden):
    a_file = tmp_path / "taken.csv"
    a_file.write_text("x\n")
    assert main(["export", "--warehouse", str(warehouse), str(a_file)]) == EXIT_NO_DATA
    golden.check("cli", "export: onto a file", capsys.readouterr().err)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main(["export", "--warehouse", str(warehouse), str(busy)]) == EXIT_NO_DATA
    golden.check("cli", "export: into a folder of other files", capsys.readouterr().err)
    assert (busy / "notes.txt").read_text() == "mine"
    assert main(["report", str(tmp_path), "--warehouse", str(warehouse)]) == EXIT_NO_DATA
    golden.check("cli", "report: onto a folder", capsys.readouterr().err)
    # a file where the report's folder should be: the write fails, one line, exit 1
    assert main(["report", str(a_file / "index.html"), "--warehouse", str(warehouse)]) == EXIT_NO_DATA
    golden.check("cli", "report: a file in the way", capsys.readouterr().err)  # not mkdir's "File exists"
    # deeper, and for an export: the file in the way is named
    assert main(["report", str(a_file / "sub" / "index.html"), "--warehouse", str(warehouse)]) == EXIT_NO_DATA
    assert capsys.readouterr().err.strip().endswith(f": {a_file} is a file, not a folder")
    assert main(["export", "--warehouse", str(warehouse), str(a_file / "out")]) == EXIT_NO_DATA
    golden.check("cli", "export: a file in the way", capsys.readouterr().err)


def test_damaged_warehouse_is_one_line_with_the_way_to_rebuild(warehouse, tmp_path, capsys, golden):
    import shutil

    damaged = tmp_path / "warehouse.duckdb"
    shutil.copy(warehouse, damaged)
    with open(damaged, "r+b") as fh:
        fh.truncate(os.path.getsize(damaged) // 2)
    assert main(["leaderboard", "--warehouse", str(damaged)]) == EXIT_NO_DATA
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1  # DuckDB's own words (offsets in the file) vary with the file: not pinned
    golden.check("cli", "leaderboard: damaged warehouse", re.sub(r" \(IO Error: .*?\);", " (<DuckDB's error>);", err[0]))


@pytest.mark.parametrize(("method", "label"), [("spectral", "Rank Centrality cross-check (spectral);"),
                                               ("bt", "Bradley-Terry (bt);")])
def test_method_is_named_once_in_the_title(warehouse, capsys, method, label, golden):
    assert main(["leaderboard", "--warehouse", str(warehouse), "--method", method]) == EXIT_OK
    out = capsys.readouterr().out
    title = out.splitlines()[0]
    assert label in title and title.count(f"({method})") == 1
    # spectral is said to be a cross-check on its own terms, not Bradley-Terry's scale (issue 36)
    notes = [line for line in out.splitlines() if "cross-check" in line and line != title]
    assert len(notes) == (method == "spectral")
    if notes:
        golden.check("cli", "leaderboard spectral: the cross-check note", notes[0])


def test_changes_of_a_rerank_that_moved_nothing_list_no_row_of_zeros(warehouse, monkeypatch, capsys, golden):
    """Issue 47: a re-rank that changed only the threshold printed every kept model, alphabetically, as
    "+0.0 [+0.0, +0.0]"; the models that did not move are counted, those that moved listed, largest first."""
    import polars as pl

    from arena_pipeline.core.changes import changes
    from arena_pipeline.core.store import records

    monkeypatch.setattr(records, "live_publication", lambda con, schema: {"publication_id": 4, "revision": REVISION})

    def board(rows):
        return pl.DataFrame(rows, schema=["model", "rating", "ci_lower", "ci_upper", "rank"], orient="row").with_columns(
            category=pl.lit("overall"), method=pl.lit("bt"), ci_method=pl.lit("sandwich"), rank_ub=pl.col("rank"),
            n_battles=pl.lit(500), provisional=pl.lit(False))

    rows = [(m, 1000.0 + 10 * i, 990.0 + 10 * i, 1010.0 + 10 * i, 9 - i) for i, m in enumerate("abcdefgh")]
    before = board(rows)
    same = before
    monkeypatch.setattr(changes, "changes_between",
                        lambda *args: changes.compare_boards(before, same, relation=changes.SAME_VOTES))
    assert main(["changes", "--warehouse", str(warehouse), "--since", "1"]) == EXIT_OK
    out = capsys.readouterr().out
    golden.check("changes", "a re-rank that moved nothing", out)
    assert "+0.0" not in out and "Model" not in out
    moved = board([(m, r + (5.0 if m == "b" else 0.0), lo, hi, k if m not in "gh" else {"g": 1, "h": 3}[m])
                   for m, r, lo, hi, k in rows])
    monkeypatch.setattr(changes, "changes_between",
                        lambda *args: changes.compare_boards(before, moved, relation=changes.SAME_VOTES))
    assert main(["changes", "--warehouse", str(warehouse), "--since", "1"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("5 models kept did not move") for line in out)
    listed = [line.split()[0] for line in out if " kept " in line and "->" in line]
    assert listed == ["b", "g", "h"]  # the rating's move first, then the rank's


def test_an_aligned_boards_changes_say_how_far_the_shift_moved(golden):
    """``changes`` prints, under an aligned board, the shift's own move, which Change leaves out."""
    golden.check("changes", "an aligned board's shift", format_shift({"before": 250.0, "after": 262.5, "change": 12.5}))


def test_the_timeout_is_not_said_to_wait_for_a_pipeline_run(capsys, golden):
    """Runs never hold the readers' file (the snapshot): --timeout waits for another process that opened it
    read-write, which --help says (issue 47; it spoke of "a pipeline run [that] holds the warehouse lock")."""
    for command in ("leaderboard", "export", "report", "changes"):
        assert main([command, "--help"]) == EXIT_OK
        text = " ".join(capsys.readouterr().out.split())
        assert "pipeline run holds" not in text
        timeout = text[text.index("--timeout"):]
        golden.check("cli", "--help: --timeout", timeout[:timeout.index(" --", 2)])
