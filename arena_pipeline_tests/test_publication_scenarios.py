"""The six ways the live boards used to change outside the publication gate, as regression tests.

Each test starts from a copy of one published warehouse and checks, byte for byte, that what
readers see (every arena.* view's SQL and content) is unchanged until the gate publishes, and that
afterwards exactly the new publication is visible, with the earlier one kept in the history.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import dagster as dg
import pyarrow.parquet as pq
import pytest

from arena_pipeline.assets import rankings as ranking_assets
from arena_pipeline.core.publication.gate import SOURCE_CHANGE, refusal_message
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.definitions import ASSET_CHECKS, ASSETS, default_resources
from arena_pipeline.resources import DumpSource, ModelCatalog
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import copy_warehouse, materialize, work_file
from arena_pipeline_tests.support.publication_support import (
    RANK,
    RANKING_SELECTION,
    REPO_ROOT,
    RERANK_SELECTION,
    VALIDATION_SELECTION,
    Setup,
    assert_live_is_one_publication,
    fingerprint,
    publications,
    query,
    subprocess_env,
)

ROWS = 240


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Setup:
    root = tmp_path_factory.mktemp("published")
    write_dump(root / "dump", n_rows=ROWS, n_shards=2, seed=11)
    setup = Setup(root, root / "dump", root / "warehouse.duckdb")
    assert setup.run().success
    return setup


@pytest.fixture
def setup(published, tmp_path) -> Setup:
    copy_warehouse(published.warehouse, tmp_path / "warehouse.duckdb")
    shutil.copytree(published.dump, tmp_path / "dump")
    shutil.copytree(published.root / "cache", tmp_path / "cache")
    return Setup(tmp_path, tmp_path / "dump", tmp_path / "warehouse.duckdb")


# 1 ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_rerank_changes_nothing_until_published_then_keeps_the_earlier_board(setup):
    before = fingerprint(setup.warehouse)
    report = setup.root / "report" / "index.html"
    result = setup.run(selection=RANKING_SELECTION,
                       rank={"min_battles": 1, "ties": "drop"})
    assert result.success
    assert fingerprint(setup.warehouse) == before  # computed, not published
    assert not report.exists()

    result = setup.run(selection=RERANK_SELECTION, rank={"min_battles": 1, "ties": "drop"})
    assert result.success
    after = fingerprint(setup.warehouse)
    assert after["leaderboard"] != before["leaderboard"] and after["battles"] == before["battles"]
    (first, _, _), (second, _, rebuilt) = publications(setup.warehouse)
    assert sorted(rebuilt) == ["benchmark_agreement", "benchmark_scores", "board_status", "dump_leaderboard",
                               "external_comparison", "external_comparison_models", "leaderboard", "model_fit",
                               "model_fit_calibration", "pairwise", "pairwise_significance", "publication_changes",
                               "style_coefficients",
                               "unrated_models"]
    settings = json.loads(query(setup.warehouse, "SELECT settings FROM arena.publications "
                                                 "WHERE publication_id = ?", [second])[0][0])
    assert settings["tables"]["leaderboard"]["ranking"]["ties"] == "drop"
    assert settings["tables"]["battles"]["checks"]["failed"] == []
    history = query(setup.warehouse, "SELECT publication_id, count(*) FROM arena.leaderboard_history "
                                     "GROUP BY 1 ORDER BY 1")
    assert [h[0] for h in history] == [first, second]
    assert report.is_file()  # the publication re-rendered the report
    # the large tables were not copied: the re-rank's publication reads the same versions
    tables = [json.loads(t) for (t,) in query(setup.warehouse, "SELECT tables FROM arena.publications ORDER BY 1")]
    for big in ("battles", "messages", "context_messages", "preference_pairs"):
        assert tables[0][big] == tables[1][big]
    assert_live_is_one_publication(setup.warehouse)


# 2 ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_failed_rerun_with_new_aliases_leaves_the_publication_and_its_status(setup, monkeypatch):
    aliases = setup.root / "aliases.csv"
    aliases.write_text("alias,canonical\nllama-4-maverick,deepseek-v3-0324\n", encoding="utf-8")
    catalog = ModelCatalog(aliases_path=str(aliases))
    before = fingerprint(setup.warehouse)

    def broken(*args, **kwargs):
        raise RuntimeError("the ranking step died")

    monkeypatch.setattr(ranking_assets, "compute_rankings", broken)
    result = setup.run(model_catalog=catalog)
    assert not result.success
    assert fingerprint(setup.warehouse) == before
    assert query(setup.warehouse, "SELECT status FROM arena.dumps") == [("published",)]
    assert len(publications(setup.warehouse)) == 1
    monkeypatch.undo()

    assert setup.run(model_catalog=catalog).success
    names = {r[0] for r in query(setup.warehouse, "SELECT DISTINCT model FROM arena.leaderboard")}
    canon = {r[0] for r in query(setup.warehouse, "SELECT DISTINCT model_a_canonical FROM arena.battles")}
    assert "llama-4-maverick" not in names | canon and "deepseek-v3-0324" in names
    assert len(publications(setup.warehouse)) == 2
    history = {r[0] for r in query(setup.warehouse, "SELECT DISTINCT publication_id FROM arena.leaderboard_history")}
    assert history == {1, 2}
    # the earlier board is still queryable, merged-away name and all
    old = {r[0] for r in query(setup.warehouse, "SELECT model FROM arena.leaderboard_history WHERE publication_id = 1")}
    assert "llama-4-maverick" in old


# 3 ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_changed_local_dump_in_place_gets_a_new_revision(setup):
    shard = sorted(setup.dump.glob("data/*.parquet"))[0]
    # stored plainly (no compression, no dictionary), so a winner can be flipped byte for byte
    pq.write_table(pq.read_table(shard), shard, compression="none", use_dictionary=False)
    source = DumpSource(source=str(setup.dump), cache_dir=str(setup.root / "cache"))
    old = source.latest_revision()
    assert setup.run().success
    stat = shard.stat()
    data = bytearray(shard.read_bytes())
    at = data.index(b"\x07\x00\x00\x00model_a")  # a winner value; same size, same mtime, same inode
    data[at + 4:at + 11] = b"model_b"
    with open(shard, "r+b") as fh:
        fh.write(data)
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    new = source.latest_revision()
    assert new != old
    assert setup.run().success
    statuses = dict(query(setup.warehouse, "SELECT revision, status FROM arena.dumps"))
    assert statuses[old] == "superseded" and statuses[new] == "published"


# 4 ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_empty_board_is_refused_by_the_gate_unless_allowed(setup):
    report = setup.root / "report" / "index.html"
    # a re-rank with another seed (with the same settings it would publish nothing: rule 23): a report of the live board
    assert setup.run(selection=RERANK_SELECTION, rank={"seed": 7}).success and report.is_file()
    before = fingerprint(setup.warehouse)
    result = setup.run(selection=RERANK_SELECTION, rank={"min_battles": 100000})
    assert not result.success
    text = " ".join(e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure)
    assert "overall leaderboard is empty" in text and "allow_degenerate" in text
    assert fingerprint(setup.warehouse) == before
    # the refused run's build says how it ended (it stayed 'running', unfinished, before)
    (status, detail), = query(setup.warehouse, "SELECT status, status_detail FROM arena_versions.builds "
                                               "WHERE build_id = ?", [result.run_id])
    assert status == "refused" and detail.startswith(refusal_message([])) and "overall leaderboard is empty" in detail
    assert len(publications(setup.warehouse)) == 2 and report.is_file()

    allowed = setup.run(selection=RERANK_SELECTION, rank={"min_battles": 100000},
                        publish={"allow_degenerate": True})
    assert allowed.success and len(publications(setup.warehouse)) == 3
    # whatever the live board is, the report never shows another one
    assert not report.exists() or "no model" in report.read_text(encoding="utf-8")


# 5 ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_concurrent_runs_of_two_revisions_both_publish_and_drop_nothing_of_each_other(setup, tmp_path):
    """Two refreshes of different revisions, in two processes, against one warehouse at once."""
    other = tmp_path / "dump2"
    write_dump(other, n_rows=ROWS, n_shards=2, seed=12)
    procs = []
    for name, dump in (("a", setup.dump), ("b", other)):
        env = subprocess_env(setup, ARENA_SOURCE=str(dump), ARENA_TEST_RUN_CONFIG=json.dumps(
            {"ops": {"rankings": {"config": RANK}}}))
        log = open(tmp_path / f"{name}.log", "w")
        procs.append((name, log, subprocess.Popen(
            [sys.executable, "-m", "arena_pipeline_tests.support.refresh_worker", "refresh"], cwd=tmp_path, env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)))
    try:
        for _, _, proc in procs:
            proc.wait(timeout=600)
    finally:
        for _, log, proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            log.close()
    for name, _, proc in procs:
        text = (tmp_path / f"{name}.log").read_text(errors="replace")
        assert proc.returncode == 0, text[-3000:]
        assert "does not exist" not in text
    assert len(publications(setup.warehouse)) == 3
    assert_live_is_one_publication(setup.warehouse)


# 6 ---------------------------------------------------------------------------------------------

def _cli(setup: Setup, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dagster", *args], cwd=setup.root, env=subprocess_env(setup),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_partial_runs_from_the_cli_without_dagster_home(setup):
    config = json.dumps({"ops": {"rankings": {"config": {"min_battles": 2, "bootstrap_rounds": 3}}}})
    before = fingerprint(setup.warehouse)
    alone = _cli(setup, "asset", "materialize", "-m", "arena_pipeline.definitions",
                 "--select", "arena/leaderboard", "--config-json", config)
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert fingerprint(setup.warehouse) == before  # built, not published
    config_file = setup.root / "rerank.yaml"
    config_file.write_text(config, encoding="utf-8")  # JSON is YAML
    rerank = _cli(setup, "job", "execute", "-m", "arena_pipeline.definitions", "-j", "rerank_job",
                  "-c", str(config_file))
    assert rerank.returncode == 0, rerank.stderr[-3000:]
    (_, _, _), (_, _, rebuilt) = publications(setup.warehouse)
    assert sorted(rebuilt) == ["benchmark_agreement", "benchmark_scores", "board_status", "dump_leaderboard",
                               "external_comparison", "external_comparison_models", "leaderboard", "model_fit",
                               "model_fit_calibration", "pairwise", "pairwise_significance", "publication_changes",
                               "style_coefficients",
                               "unrated_models"]
    assert_live_is_one_publication(setup.warehouse)


def test_rerank_job_recomputes_what_is_computed_from_the_new_board():
    """A re-rank publishes a new board, so the job also re-runs every asset computed from the leaderboard
    (the external and benchmark comparisons, before the gate) and the gate's step (the report): none
    may describe the board it replaced."""
    from arena_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    leaderboard = dg.AssetKey(["arena", "leaderboard"])
    downstream = {k for k in graph.get_all_asset_keys()
                  if {leaderboard, dg.AssetKey("publication_gate")} & graph.get(k).parent_keys}
    assert {dg.AssetKey(["arena", "external_comparison"]), dg.AssetKey(["arena", "benchmark_agreement"]),
            dg.AssetKey("publication_gate"), dg.AssetKey("leaderboard_report")} <= downstream
    selected = set(defs.resolve_job_def("rerank_job").asset_layer.executable_asset_keys)
    assert downstream <= selected
    assert dg.AssetKey(["arena", "battles"]) not in selected


def test_docs_sql_cookbook_runs_as_written(sample_run):
    """Every statement of docs/sql-cookbook.md runs on a published warehouse (the session's sample run)."""
    text = (REPO_ROOT / "docs" / "sql-cookbook.md").read_text(encoding="utf-8")
    block = text.split("```sql", 1)[1].split("```", 1)[0]
    statements = [s.strip() for s in block.split(";") if s.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in s.strip().splitlines())]
    assert len(statements) >= 8
    with connect_warehouse(str(sample_run.warehouse), read_only=True) as con:
        for statement in statements:
            con.execute(statement).fetchall()


def test_unrated_models_and_board_status_are_published_with_the_boards(sample_run):
    """The two tables come from the rankings fit and agree with the published leaderboard; the report
    rendered by the publication lists them and has a panel per model (the session's sample run)."""
    from arena_pipeline.core.dataset.categories import CATEGORY_NAMES

    with connect_warehouse(str(sample_run.warehouse), read_only=True) as con:
        status = con.execute("SELECT category, status, rated_models, shown_models, provisional_models, "
                             "unrated_models, reason FROM arena.board_status").fetchall()
        boards = dict(con.execute("SELECT category, count(*) FROM arena.leaderboard WHERE method = 'bt' "
                                  "GROUP BY 1").fetchall())
        shown = dict(con.execute("SELECT category, count(*) FROM arena.leaderboard WHERE method = 'bt' "
                                 "AND NOT provisional GROUP BY 1").fetchall())
        unrated = con.execute("SELECT category, model FROM arena.unrated_models").fetchall()
        on_boards = set(con.execute("SELECT category, model FROM arena.leaderboard").fetchall())
        revisions = con.execute("SELECT DISTINCT dump_revision FROM arena.board_status UNION "
                                "SELECT DISTINCT dump_revision FROM arena.leaderboard").fetchall()
    assert [s[0] for s in status] == list(CATEGORY_NAMES) and len(revisions) == 1
    for category, state, rated, n_shown, provisional, n_unrated, reason in status:
        assert rated == boards.get(category, 0) and n_shown == shown.get(category, 0)
        assert rated == n_shown + provisional and n_unrated == sum(c == category for c, _ in unrated)
        assert (state == "board") == (n_shown > 0) and (reason is None) == (state == "board")
    assert not set(unrated) & on_boards
    page = sample_run.report.read_text(encoding="utf-8")
    assert 'id="unrated"' in page and ('id="no-board"' in page) == any(s[1] != "board" for s in status)
    assert page.count('class="model-panel"') == len({m for _, m in on_boards})


@pytest.mark.slow
def test_moving_to_another_dump_is_refused_as_a_change_of_source(setup):
    """The live boards show every model (display_min_battles 0, as the docs' sample run); a run on
    another dump under the default threshold would show none: the refusal says it is another source."""
    assert setup.run(rank={"display_min_battles": 0}).success
    before = fingerprint(setup.warehouse)
    write_dump(setup.root / "other", n_rows=ROWS, n_shards=1, seed=12)
    other = Setup(setup.root, setup.root / "other", setup.warehouse)
    result = other.run()
    assert not result.success
    text = " ".join(e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure)
    assert "would no longer be shown" in text or "no longer" in text
    assert f"{str(setup.dump)!r} and this run's of {str(other.dump)!r}: {SOURCE_CHANGE}" in text
    assert "max_model_drop" in text
    assert fingerprint(setup.warehouse) == before
    # a refusal on the live dump itself says nothing of a change of source
    same = setup.run(rank={"display_min_battles": 10**6})
    assert not same.success
    text = " ".join(e.step_failure_data.error.to_string() for e in same.all_events if e.is_step_failure)
    assert "publication refused" in text and "The live boards are of source" not in text


@pytest.mark.slow
def test_the_report_or_the_gate_can_be_selected_alone(setup):
    """`--select leaderboard_report` re-renders the live publication's report; `--select publication_gate`
    runs the gate (nothing new here) and keeps the report in step. Each raised DagsterInvalidSubsetError."""
    report = setup.root / "report" / "index.html"
    before = fingerprint(setup.warehouse)
    assert not report.exists()
    def run(selection):  # no rankings config: the rankings step is not selected
        return materialize(setup.resources(), selection=selection)

    alone = run(["leaderboard_report"])
    assert alone.success and report.is_file()
    assert [e.asset_key.to_user_string() for e in alone.get_asset_materialization_events()] == ["leaderboard_report"]
    report.unlink()
    gate = run(["publication_gate"])
    assert gate.success and report.is_file()  # the page follows what is live, recorded or not
    assert [e.asset_key.to_user_string() for e in gate.get_asset_materialization_events()] == ["publication_gate"]
    assert fingerprint(setup.warehouse) == before and len(publications(setup.warehouse)) == 1


def _run_part(setup: Setup, run_id: str, selection: list[str], rank: dict) -> list[str]:
    """Steps of run ``run_id`` (``selection``), executed in process; returns the run's log lines. Two parts
    with one run id are one build: the warehouse sees one run whose steps are interrupted by another's."""
    job = dg.Definitions(assets=[*ASSETS, *ASSET_CHECKS],
                         resources={**default_resources(), **setup.resources()}).resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            run_config={"ops": {"rankings": {"config": {**RANK, **rank}}}}, instance=instance, run_id=run_id,
            asset_selection=[dg.AssetKey.from_user_string(s) for s in selection])
        assert result.success
        return [entry.user_message for entry in instance.all_logs(run_id)]


@pytest.mark.slow
def test_changes_computed_against_a_publication_no_longer_live_are_recomputed_by_the_gate(setup, golden):
    """Publication rule 18: arena.publication_changes is computed by its asset before the gate, against the
    live publication; when another run publishes between that step and the gate, the gate recomputes it
    against the publication it replaces (the changes never describe a board that is no longer live)."""
    (first, _, _), = publications(setup.warehouse)
    run_id = str(uuid.uuid4())
    before_gate = [*RANKING_SELECTION, *VALIDATION_SELECTION, "arena/publication_changes"]
    lines = _run_part(setup, run_id, before_gate, {"ties": "drop"})
    assert not any("recomputed by the gate" in line for line in lines)
    with connect_warehouse(str(work_file(setup.warehouse)), read_only=True) as con:
        (settings,), = con.execute("SELECT settings FROM arena_versions.versions WHERE build_id = ? "
                                   "AND table_name = 'publication_changes'", [run_id]).fetchall()
    assert json.loads(settings)["since_publication"] == first

    # another run publishes in between (a re-rank of its own, with the asset computing its changes)
    assert setup.run(selection=[*RERANK_SELECTION, "arena/publication_changes"], rank={"seed": 7}).success
    (_, _, _), (rival, _, _) = publications(setup.warehouse)

    lines = _run_part(setup, run_id, ["publication_gate", "leaderboard_report"], {"ties": "drop"})
    recomputed = [line for line in lines if "recomputed by the gate" in line]
    assert len(recomputed) == 1 and (first, rival) == (1, 2)
    golden.check("changes", "recomputed by the gate: another publication went live", recomputed[0])
    live = assert_live_is_one_publication(setup.warehouse)
    assert live["publication_id"] == rival + 1
    settings = json.loads(query(setup.warehouse, "SELECT settings FROM arena.publications WHERE publication_id = ?",
                                [live["publication_id"]])[0][0])
    assert settings["tables"]["publication_changes"]["since_publication"] == rival
    since = query(setup.warehouse, "SELECT DISTINCT since_publication FROM arena.publication_changes")
    assert since == [(rival,)]
    # the rival's own changes were its asset's, computed against the first publication
    rival_settings = json.loads(query(setup.warehouse, "SELECT settings FROM arena.publications "
                                                       "WHERE publication_id = ?", [rival])[0][0])
    assert rival_settings["tables"]["publication_changes"]["since_publication"] == first
