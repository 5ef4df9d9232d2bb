"""arena.publication_changes through the gate, on publications with known differences: a re-rank with
other settings (the same votes) and a dump with votes (and a model) added; the CLI and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.cli import EXIT_NO_DATA, EXIT_OK, EXIT_USAGE, main
from arena_pipeline.core.changes.changes import SAME_VOTES, VOTES_ADDED, Z95
from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline_dev.fixtures import make_rows
from arena_pipeline_tests.support.publication_support import RERANK_SELECTION, Setup, assert_live_is_one_publication
from arena_pipeline_tests.test_cli import PIPELINE_ONLY_MODULES

FIRST, GROWN = 150, 260
NEW_MODEL = "mistral-medium-2505"


def _write(root: Path, rows: list[dict]) -> Path:
    """A two-shard local dump of ``rows``."""
    table = pa.Table.from_pylist(rows, schema=DATASET_ARROW_SCHEMA)
    (root / "data").mkdir(parents=True)
    half = -(-table.num_rows // 2)
    for i in range(2):
        pq.write_table(table.slice(i * half, half), root / "data" / f"train-{i:05d}-of-00002.parquet")
    return root


def _frame(warehouse: Path, sql: str, params: list | None = None) -> pl.DataFrame:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return con.execute(sql, params or []).pl()


def _expected(warehouse: Path, before: int, after: int) -> pl.DataFrame:
    """The two publications' boards side by side, straight from arena.leaderboard_history."""
    # the test's standard errors: the sandwich of the primary (clustered or not), else the primary (issue 36)
    se = ("CASE WHEN ci_method LIKE 'cluster_%' AND cluster_sandwich_lower IS NOT NULL THEN cluster_sandwich_{0} "
          "WHEN ci_method NOT LIKE 'cluster_%' AND sandwich_lower IS NOT NULL THEN sandwich_{0} ELSE ci_{0} END "
          "AS se_{0}")
    # a clustered primary's vote-level sandwich (its votes-added variance scales that difference)
    vote = "CASE WHEN ci_method LIKE 'cluster_%' THEN sandwich_{0} END AS vote_{0}"
    history = _frame(warehouse, "SELECT publication_id, category, method, model, rating, ci_lower, ci_upper, rank, "
                                f"{se.format('lower')}, {se.format('upper')}, {vote.format('lower')}, "
                                f"{vote.format('upper')} "
                                "FROM arena.leaderboard_history WHERE publication_id IN (?, ?)", [before, after])
    old, new = (history.filter(pl.col("publication_id") == p).drop("publication_id") for p in (before, after))
    return old.join(new, on=["category", "method", "model"], how="full", coalesce=True, suffix="_after")


def _check_against_history(changes: pl.DataFrame, expected: pl.DataFrame) -> None:
    """Every board row of either publication is a row of the changes, with the differences of the history."""
    key = ["category", "method", "model"]
    assert changes.height == expected.height
    both = changes.join(expected, on=key, how="inner")
    assert both.height == expected.height
    status = both.select(
        new=(pl.col("status") == "new") == pl.col("rating").is_null(),
        gone=(pl.col("status") == "gone") == pl.col("rating_after").is_null(),
        change=(pl.col("rating_change") - (pl.col("rating_after") - pl.col("rating"))).abs().fill_null(0) < 1e-9,
        rank=pl.col("rank_change").eq_missing(pl.col("rank") - pl.col("rank_after")),
    )
    assert status.select(pl.all().all()).row(0) == (True, True, True, True), both.filter(~status.select(
        pl.all_horizontal(pl.all())).to_series())


@pytest.mark.slow
def test_changes_between_publications_with_known_differences(tmp_path, capsys, golden):
    rows = make_rows(GROWN, seed=31)
    for i in range(FIRST, GROWN, 3):  # a model only the grown dump has
        rows[i]["model_b"] = NEW_MODEL if rows[i]["model_a"] != NEW_MODEL else rows[i]["model_b"]
    small, grown = _write(tmp_path / "small", rows[:FIRST]), _write(tmp_path / "grown", rows)
    warehouse = tmp_path / "warehouse.duckdb"
    setup = Setup(tmp_path, small, warehouse)
    relaxed = {"max_model_drop": 1.0, "max_category_drop": 1.0}

    # publication 1: nothing to compare with, an empty table of the publication
    assert setup.run(publish=relaxed).success
    live = assert_live_is_one_publication(warehouse)
    assert "publication_changes" in live["tables"]
    assert _frame(warehouse, "SELECT * FROM arena.publication_changes").is_empty()

    # publication 2: a re-rank with other settings (ties dropped, a higher battle floor): the same votes
    other = {"ties": "drop", "min_battles": 12}
    assert setup.run(selection=RERANK_SELECTION, rank=other, publish=relaxed).success
    assert assert_live_is_one_publication(warehouse)["publication_id"] == 2
    changes = _frame(warehouse, "SELECT * FROM arena.publication_changes")
    assert set(changes.get_column("data_relation")) == {SAME_VOTES}
    assert set(changes.get_column("settings_changed")) == {True}
    assert set(changes.get_column("since_publication")) == {1}
    _check_against_history(changes, _expected(warehouse, 1, 2))
    kept = changes.filter(pl.col("status") == "kept")
    assert kept.filter(pl.col("rating_change").abs() > 1e-6).height > 0  # the settings moved ratings
    assert (changes.get_column("status") == "gone").any()  # the battle floor removed models from small boards
    # on the same votes the interval allows only the difference of the two widths (rho = 1)
    bounded = kept.filter(pl.col("change_ci_lower").is_not_null() & pl.col("change_ci_upper").is_finite())
    assert bounded.height and set(bounded.get_column("correlation")) == {1.0}
    assert bounded.get_column("beyond_interval").any()

    # publication 3: the grown dump (every earlier vote kept, votes and a model added), same settings
    assert Setup(tmp_path, grown, warehouse).run(rank=other, publish=relaxed).success
    assert assert_live_is_one_publication(warehouse)["publication_id"] == 3
    changes = _frame(warehouse, "SELECT * FROM arena.publication_changes")
    assert set(changes.get_column("data_relation")) == {VOTES_ADDED}
    assert set(changes.get_column("settings_changed")) == {False}
    _check_against_history(changes, _expected(warehouse, 2, 3))
    new = changes.filter((pl.col("category") == "overall") & (pl.col("status") == "new"))
    assert NEW_MODEL in new.get_column("model").to_list()
    nested = changes.filter(pl.col("correlation").is_between(0, 1, closed="none"))
    assert nested.height  # nested fits: Var = max(s0^2 - s1^2, 0), s from the sandwich of the primary
    # clustered boards: max(v0^2 - v1^2, 0) (s1/v1)^2 with v the vote-level sandwich (issue 36)
    assert set(nested.get_column("change_variance").str.split(",").list.first()) <= {
        "max(s0^2 - s1^2", "max(v0^2 - v1^2"}
    history = _expected(warehouse, 2, 3)

    def se(column: str, suffix: str = "") -> pl.Expr:
        return (pl.col(f"{column}_upper{suffix}") - pl.col(f"{column}_lower{suffix}")) / (2 * Z95)

    order = nested.join(history, on=["category", "method", "model"]).select(
        "change_variance", half=pl.col("change_ci_upper") - pl.col("rating_change"),
        se0=se("se"), se1=se("se", "_after"), v0=se("vote"), v1=se("vote", "_after"))
    scaled = order.get_column("change_variance").str.starts_with("max(v0")
    plain = (order["se0"] ** 2 - order["se1"] ** 2).clip(lower_bound=0)
    design = (order["v0"] ** 2 - order["v1"] ** 2).clip(lower_bound=0) * (order["se1"] / order["v1"]) ** 2
    expected = Z95 * pl.select(pl.when(scaled).then(design).otherwise(plain)).to_series().sqrt()
    assert ((order["half"] - expected).abs() < 1e-9).all()
    assert order.height == nested.height
    # the publication records the relation (what --since composes once the earlier battles are dropped)
    settings = json.loads(_frame(warehouse, "SELECT settings FROM arena.publications WHERE publication_id = 3")
                          .item())["tables"]["publication_changes"]
    assert settings["since_publication"] == 2 and settings["data_relation"] == VOTES_ADDED

    # the CLI: the published table, or any kept publication
    assert main(["changes", "--warehouse", str(warehouse), "--category", "Overall"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "since publication 2" in out and VOTES_ADDED in out and NEW_MODEL in out and "new" in out
    # small and grown are two local folders: another source, as the gate would say (issue 37)
    assert f"another source ({str(small)!r} -> {str(grown)!r}), {VOTES_ADDED}" in out
    assert "Math" not in out
    assert main(["changes", "--warehouse", str(warehouse), "--since", "1", "--top", "0"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "since publication 1" in out and VOTES_ADDED in out  # same votes, then votes added
    assert main(["changes", "--warehouse", str(warehouse), "--since", "3"]) == EXIT_OK  # the live one
    golden.check("changes", "--since the live publication, a grown dump's", capsys.readouterr().out)
    assert main(["changes", "--warehouse", str(warehouse), "--since", "99"]) == EXIT_NO_DATA
    assert "publication 99 is not kept" in capsys.readouterr().err
    assert main(["changes", "--warehouse", str(warehouse), "--category", "nonsense"]) == EXIT_USAGE
    assert main(["changes", "--warehouse", str(warehouse), "--method", "nonsense"]) == EXIT_USAGE

    # the report of publication 3 has the section, the new model marked
    report = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "Changes since publication 2" in report and 'class="badge new"' in report
    # a clustered board's votes-added interval says where its variance comes from
    assert "times the design effect of the sessions" in report

    # read-only: the command imports neither the fitting nor the pipeline stack
    script = textwrap.dedent(f"""
        import json, sys
        import arena_pipeline.cli
        code = arena_pipeline.cli.main(["changes", "--since", "1"])
        loaded = [m for m in {PIPELINE_ONLY_MODULES!r} if m in sys.modules]
        print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "ARENA_WAREHOUSE": str(warehouse)},
                            capture_output=True, text=True, timeout=120)
    assert json.loads(result.stderr.strip().splitlines()[-1]) == {"code": EXIT_OK, "loaded": []}, result.stderr
