"""Model identity assets materialized: canonical names, arena.models and the external comparison."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from arena_pipeline.assets.models import external_comparison
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, ModelCatalog, Warehouse
from arena_pipeline_tests.support.materialize import REAL_CSV, SAMPLE_RUN_CONFIG, materialize, materialized, run_sample

BOARD = Path(__file__).parents[1] / "data" / "benchmarks" / "board.csv"  # 8 models of one board


def _rows(tmp_path: Path, sql: str):
    with connect_warehouse(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
def test_user_alias_merges_names_and_comparison_matches_renamed_models(tmp_path):
    aliases = tmp_path / "aliases.csv"
    # a user alias: rank o3-mini under a name of the user's choosing
    aliases.write_text("alias,canonical,provider\no3-mini,o3-mini-renamed,OpenAI\n", encoding="utf-8")
    board = tmp_path / "board.json"
    board.write_text(json.dumps({
        "full": {
            "Claude 3.5 Sonnet (20241022)": {"rating": 1250.0, "rating_q025": 1240.0, "rating_q975": 1260.0},
            "gemma-3-27b-it": {"rating": 1200.0, "rating_q025": 1190.0, "rating_q975": 1210.0},
            "O3 Mini Renamed": {"rating": 1150.0, "rating_q025": 1140.0, "rating_q975": 1160.0},
            "a-model-we-never-saw": {"rating": 1100.0, "rating_q025": 1090.0, "rating_q975": 1110.0},
        },
        "english": {"gemma-3-27b-it": {"rating": 1000.0, "rating_q025": 990.0, "rating_q975": 1010.0}},
    }), encoding="utf-8")
    result = run_sample(tmp_path, model_catalog=ModelCatalog(aliases_path=str(aliases), published_board=str(board)))
    assert result.success
    # raw names stay, canonical names are separate and used by the boards
    assert _rows(tmp_path, "select distinct model_a_canonical from arena.battles where model_a = 'o3-mini'") == [
        ("o3-mini-renamed",)]
    boards = {m for (m,) in _rows(tmp_path, "select distinct model from arena.leaderboard")}
    assert "o3-mini-renamed" in boards and "o3-mini" not in boards
    models = _rows(tmp_path, "select provider, aliases, battles_overall from arena.models where model = 'o3-mini-renamed'")
    assert models == [("OpenAI", ["o3-mini"], 9)]
    summary = _rows(
        tmp_path,
        "select n_matched, unmatched_theirs from arena.external_comparison where category = 'overall' and method = 'bt'",
    )
    (n_matched, unmatched), = summary
    assert n_matched == 3
    assert unmatched == ["a-model-we-never-saw"]
    unknown = _rows(tmp_path, "select count(*) from arena.external_comparison where category = 'english' and method = 'bt'")
    assert unknown == [(1,)]  # their unknown category key is kept and reported, not dropped
    per_model = _rows(
        tmp_path,
        "select model, their_name from arena.external_comparison_models "
        "where category = 'overall' and method = 'bt' and status = 'matched' order by model",
    )
    assert [m for m, _ in per_model] == ["claude-3-5-sonnet-20241022", "gemma-3-27b-it", "o3-mini-renamed"]


@pytest.mark.slow
def test_malformed_board_fails_its_check_not_the_run(tmp_path):
    """A malformed board fails its own check, not the run: the comparison's versions are empty (their
    settings say why) and are published with the new board, which the gate publishes."""
    board = tmp_path / "board.json"
    board.write_text("{not json", encoding="utf-8")
    result = run_sample(tmp_path, model_catalog=ModelCatalog(published_board=str(board)))
    assert result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    check = {e.check_name: e for e in result.get_asset_check_evaluations()}["published_board_valid"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert "board.json" in check.description
    done = materialized(result)
    assert {"arena/external_comparison", "arena/external_comparison_models", "publication_gate"} <= done
    assert _rows(tmp_path, "select count(*) from arena.external_comparison") == [(0,)]
    (recorded,), = _rows(tmp_path, "select settings->'$.tables.external_comparison.published_board' "
                                   "from arena.publications")
    assert json.loads(recorded)["path"] == str(board) and "board.json" in json.loads(recorded)["problem"]


def test_no_board_configured_publishes_empty_comparison_tables(sample_run):
    """The session's sample run has no board (ARENA_PUBLISHED_BOARD is unset for every test): empty
    versions whose settings say so, the check not run."""
    result = sample_run.result
    assert result.success
    done = materialized(result)
    assert {"publication_gate", "arena/external_comparison", "arena/external_comparison_models"} <= done
    assert "published_board_valid" not in {e.check_name for e in result.get_asset_check_evaluations()}
    for table in ("external_comparison", "external_comparison_models"):
        assert _rows(sample_run.root, f"select count(*) from arena.{table}") == [(0,)]
        (recorded,), = _rows(sample_run.root, f"select settings->'$.tables.{table}.published_board' from arena.publications")
        assert json.loads(recorded)["status"] == "not configured" and "path" not in json.loads(recorded)


@pytest.mark.slow
def test_look_alike_names_merge_or_warn(tmp_path):
    """Invisible characters merge into the real name (format characters, and the default-ignorable
    code points and blanks that are not: combining grapheme joiner, braille blank, Hangul filler,
    variation selector 16, which used to give rows that look the same); a Cyrillic look-alike stays
    apart and the non-blocking models_confusable check names the pair while the run succeeds."""
    import polars as pl

    votes = pl.read_csv(REAL_CSV, infer_schema=False)
    name = "gemma-3-27b-it"
    rows = votes.with_row_index("_i").filter(pl.col("model_a") == name).get_column("_i").to_list()
    assert len(rows) >= 6
    variants = {rows[0]: "gemma\u200b-3-27b-it", rows[1]: "\ufeffgemma-3-27b-it",
                rows[2]: "g\u0435mma-3-27b-it", rows[3]: "gemma\u034f-3-27b-it", rows[4]: "gemma-3-27b-it\u2800",
                rows[5]: "\u3164gemma-3-27b-it\ufe0f"}
    model_a = votes.get_column("model_a").to_list()
    for i, v in variants.items():
        model_a[i] = v
    source = tmp_path / "votes.csv"
    votes.with_columns(pl.Series("model_a", model_a)).write_csv(source)
    result = materialize({"dump_source": DumpSource(source=str(source)),
                          "warehouse": Warehouse(database=str(tmp_path / "warehouse.duckdb")), "model_catalog": ModelCatalog()},
                         run_config=SAMPLE_RUN_CONFIG)
    assert result.success
    models = {m for (m,) in _rows(tmp_path, "select model from arena.models")}
    assert {m for m in models if m.endswith("-3-27b-it")} == {name, "g\u0435mma-3-27b-it"}
    (aliases,), = _rows(tmp_path, f"select aliases from arena.models where model = '{name}'")
    assert {v for v in variants.values() if "\u0435" not in v} <= set(aliases)
    evaluation = {e.check_name: e for e in result.get_asset_check_evaluations()}["models_confusable"]
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    pairs = evaluation.metadata["pairs"].value
    assert [(p["model"], p["other"]) for p in pairs] == [(name, "g\u0435mma-3-27b-it")]


def test_a_missing_alias_file_fails_the_run_at_launch_naming_the_setting(tmp_path, monkeypatch):
    from arena_pipeline_dev.fixtures import write_dump

    write_dump(tmp_path / "dump", n_rows=20)
    monkeypatch.setenv("ARENA_MODEL_ALIASES", str(tmp_path / "no-such-aliases.csv"))
    result = materialize({"dump_source": DumpSource(source=str(tmp_path / "dump")),
                          "warehouse": Warehouse(database=str(tmp_path / "warehouse.duckdb"))})
    assert not result.success
    # nothing ran: the run failed while its resources were set up, before raw_dump
    assert not [e for e in result.all_events if e.event_type_value == "STEP_START"]
    assert not (tmp_path / "warehouse.duckdb").exists()
    messages = [f"{e.message} {e.event_specific_data}" for e in result.all_events]
    assert any("ARENA_MODEL_ALIASES is" in m and "no-such-aliases.csv" in m and "which is not a file" in m
               for m in messages), messages[-3:]


def test_external_comparison_invoked_directly_on_a_leaderboard_frame(tmp_path):
    """Our board against a published one 10 points higher, one of our models missing there; then a malformed
    board: a failed check, empty tables and the problem recorded; then none: no check."""
    ours = pl.read_csv(BOARD).with_columns(category=pl.lit("overall"), method=pl.lit("bt"))
    published = tmp_path / "board.csv"
    pl.read_csv(BOARD).head(7).with_columns(pl.col("rating", "ci_lower", "ci_upper") + 10,
                                            category=pl.lit("overall")).write_csv(published)

    def invoke(board: str | None) -> list:
        with dg.build_asset_context(resources={"model_catalog": ModelCatalog(published_board=board),
                                               "dump_source": DumpSource()}) as context:
            return list(external_comparison(context, leaderboard=ours, last_vote=pl.DataFrame({"last_vote": [None]})))

    check, summary, per_model = invoke(str(published))
    assert check.passed and check.metadata["rows"].value == 7
    assert [summary.output_name, per_model.output_name] == ["external_comparison", "external_comparison_models"]
    record = summary.value.settings["published_board"]
    assert list(summary.value.settings) == ["published_board"] and per_model.value.settings == summary.value.settings
    assert record["path"] == str(published) and "sha256" in record and "aliases_sha256" in record
    row = summary.value.table.filter(pl.col("category") == "overall", pl.col("method") == "bt").row(0, named=True)
    assert row["n_matched"] == 7 and row["spearman"] == pytest.approx(1.0) and row["median_shift"] == pytest.approx(10.0)
    assert per_model.value.table.filter(pl.col("status") != "matched").get_column("model").to_list() == [
        "command-a-03-2025"]
    assert summary.metadata["published_board"].value == record

    published.write_text("model,rating\nx,lots\n", encoding="utf-8")
    check, summary, per_model = invoke(str(published))
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert summary.value.table.is_empty() and per_model.value.table.is_empty()
    assert summary.value.settings["published_board"]["problem"] == check.metadata["problem"].value

    summary, per_model = invoke(None)
    assert summary.value.settings["published_board"]["status"] == "not configured" and summary.value.table.is_empty()
