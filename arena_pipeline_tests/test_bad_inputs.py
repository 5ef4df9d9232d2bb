"""Bad-input corpus: broken files fail the run and leave the published dump alone; broken rows go
to arena.quarantine with the right rule while the run succeeds; new optional fields are not fatal.

Whole-file cases first publish a good dump into a warehouse (once per module, then copied per
test), materialize the bad dump into the copy and compare the arena.* views, their row counts and
arena.dumps with the state before. Row-level cases run the whole graph once per dump (module
fixtures) and check each broken row's quarantine rule in its own test. The inputs are built by
:mod:`arena_pipeline_tests.support.bad_inputs`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.assets.ingest import FetchConfig, raw_dump
from arena_pipeline.constants import VERSIONS_SCHEMA
from arena_pipeline.core.dataset.schema import QUARANTINE_SCHEMA
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.load import load_dump
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import parse_source
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline_dev.fixtures import make_rows, make_table, write_dump
from arena_pipeline_tests.support import bad_inputs as bi
from arena_pipeline_tests.support.materialize import copy_warehouse, materialize, materialized, rank_config

RUN_CONFIG = rank_config(min_battles=1, bootstrap_rounds=5)

#: What a run that stops at the blocking checks materializes (the load's tables, the pairs among them).
FLAT_KEYS = {"raw_dump", "arena/battles", "arena/messages", "arena/context_messages",
             "arena/quarantine", "arena/preference_pairs"}


def run(source: Path, warehouse: Path, instance: dg.DagsterInstance | None = None) -> dg.ExecuteInProcessResult:
    """The whole graph on the dump at ``source`` into ``warehouse``."""
    return materialize({"dump_source": DumpSource(source=str(source)), "warehouse": Warehouse(database=str(warehouse))},
                       run_config=RUN_CONFIG, instance=instance)


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def failure_text(result: dg.ExecuteInProcessResult, node: str) -> str:
    """The failed step's error message, with its causes (the user exception is usually a cause)."""
    failure = result.failure_data_for_node(node)
    assert failure is not None, f"step {node} did not fail"
    texts, error = [], failure.error
    while error is not None:
        texts.append(error.message)
        error = error.cause
    return "\n".join(texts)


def battles_metadata(result: dg.ExecuteInProcessResult) -> dict:
    """The metadata of the arena/battles materialization (rows_read, row count...)."""
    return next(m.metadata for m in result.asset_materializations_for_node("flat_tables")
                if m.asset_key.to_user_string() == "arena/battles")


def publication_state(warehouse: Path) -> dict:
    """What readers see: every arena view's SQL and row count, a digest of the battles, the
    dump history, and the versioned tables (staging tables of a failed load aside)."""
    with connect_warehouse(str(warehouse), read_only=True) as con:
        def scalar(sql: str, params: list | None = None):
            return con.execute(sql, params or []).fetchone()[0]

        views = dict(con.execute("select view_name, sql from duckdb_views() "
                                 "where schema_name = 'arena' order by 1").fetchall())
        counts = {v: scalar(f'select count(*) from arena."{v}"') for v in views}
        digest = scalar("select md5(string_agg(id || ':' || winner || ':' || source_row, ',' "
                        "order by id)) from arena.battles")
        tables = [t for (t,) in con.execute("select table_name from duckdb_tables() "
                                            "where schema_name = ?", [VERSIONS_SCHEMA]).fetchall()]
        # table versions only: not the leftover staging tables of a failed load, nor the registry
        versions = {t: scalar(f'select count(*) from "{VERSIONS_SCHEMA}"."{t}"')
                    for t in sorted(tables) if not t.startswith("_stage_") and "__" in t}
        dumps = con.execute("select * from arena.dumps where status = 'published'").fetchall()
    return {"views": views, "counts": counts, "battles_digest": digest, "versions": versions,
            "published": dumps}


# ---------------------------------------------------------------------------
# A first, good publication that the bad dumps must leave alone
# ---------------------------------------------------------------------------

@dataclass
class PublicationView:
    warehouse: Path
    revision: str
    state: dict


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> PublicationView:
    root = tmp_path_factory.mktemp("published")
    write_dump(root / "dump", n_rows=30, n_shards=2, seed=5)
    result = run(root / "dump", root / "warehouse.duckdb")
    assert result.success
    revision = result.asset_materializations_for_node("raw_dump")[0].metadata["revision"].text
    state = publication_state(root / "warehouse.duckdb")
    assert state["counts"]["battles"] == 30 and len(state["published"]) == 1
    return PublicationView(root / "warehouse.duckdb", revision, state)


@pytest.fixture
def warehouse(published, tmp_path) -> Path:
    """A copy of the published warehouse for one test to damage."""
    return copy_warehouse(published.warehouse, tmp_path / "warehouse.duckdb")


def assert_publication_untouched(warehouse: Path, published: PublicationView) -> None:
    """Same views (SQL and row counts), same battles, same published history row, and every
    versioned table of the published revision unchanged; a bad dump may only add its own tables."""
    before, after = published.state, publication_state(warehouse)
    for part in ("views", "counts", "battles_digest", "published"):
        assert after[part] == before[part], part
    assert after["published"][0][0] == published.revision
    assert {t: after["versions"].get(t) for t in before["versions"]} == before["versions"]
    added = set(after["versions"]) - set(before["versions"])
    live_build = {t.rpartition("__")[2] for t in before["versions"]}
    assert not [t for t in added if t.rpartition("__")[2] in live_build]


def rejected_revisions(warehouse: Path) -> list[tuple]:
    """(status, detail) of the dumps that are neither published nor superseded."""
    return query(warehouse, "select status, status_detail from arena.dumps "
                            "where status not in ('published', 'superseded')")


def failed_expectations(warehouse: Path) -> list[tuple[str, list[str]]]:
    """(status, the expectation ids its detail names) of the rejected revisions (``<table> failed error
    expectations: <id>, <id>``)."""
    return [(status, detail.rpartition(": ")[2].split(", ")) for status, detail in rejected_revisions(warehouse)]


# ---------------------------------------------------------------------------
# Whole-file problems: the run fails, naming the file and the problem
# ---------------------------------------------------------------------------

def _two_shards(root: Path, second=None) -> list[Path]:
    """A good first shard and a second one (good unless ``second`` rows/table is given)."""
    rows = make_rows(10, seed=21)
    table = bi.table_of(rows[5:]) if second is None else second(rows[5:])
    return bi.write_shards(root, [bi.table_of(rows[:5]), table])


# Each builder writes a bad dump under ``root`` and returns (ARENA_SOURCE, the step that must
# fail, a regex its error must match: the file's path, then the problem).

def _named(path: Path) -> str:
    return re.escape(str(path.resolve())) + ": "


def truncated_shard(root: Path):
    paths = _two_shards(root)
    bi.truncate(paths[1])
    return root, "raw_dump", _named(paths[1]) + "not a readable parquet file"


def html_instead_of_parquet(root: Path):
    paths = _two_shards(root)
    bi.replace_with_html(paths[1])
    return root, "raw_dump", (_named(paths[1])
                              + r"not a readable parquet file \(ArrowInvalid: .*magic bytes")


def missing_column(root: Path):
    paths = _two_shards(root, lambda rows: bi.table_of(rows).drop_columns(["winner"]))
    return root, "raw_dump", (_named(paths[1]) + "does not match the dataset card schema: "
                              r"missing column winner \(expected string\)")


def wrong_nested_type(root: Path):
    paths = _two_shards(root, bi.with_turns_as_text)
    return root, "raw_dump", (_named(paths[1]) + "does not match the dataset card schema: "
                              "wrong type for conv_metadata.turns: expected int32, found string")


def csv_broken_quoting(root: Path):
    root.mkdir()
    path = bi.csv_cut_inside_quotes(root / "broken_quotes.csv", record=50)
    # the cell Polars quotes (thousands of characters) is cut to its start; the column and the likely cause stay
    return path, "flat_tables", (_named(path) + r"not parseable as CSV \(ComputeError: could not parse `[^`]{80,100}…` "
                                 r"\([\d,]+ characters\) as dtype `str` at column 'conversation_a' \(column number "
                                 r"\d+\)\); a quoted cell never ends: is the file cut short\?")


def csv_not_utf8(root: Path):
    root.mkdir()
    path, offset, line = bi.csv_with_latin1_row(root / "latin1.csv", record=41)
    return path, "flat_tables", (_named(path) + f"not valid UTF-8 at byte {offset} "
                                 rf"\(line {line}\): b'\\xe9,")


@pytest.mark.slow
@pytest.mark.parametrize("build", [
    pytest.param(truncated_shard, id="truncated shard"),
    pytest.param(html_instead_of_parquet, id="non-parquet file"),
    pytest.param(missing_column, id="missing column"),
    pytest.param(wrong_nested_type, id="wrong type"),
    pytest.param(csv_broken_quoting, id="CSV broken quoting"),
    pytest.param(csv_not_utf8, id="CSV non-UTF-8"),
])
def test_whole_file_problem_fails_the_run_and_keeps_the_publication(
        build, published, warehouse, tmp_path):
    source, step, message = build(tmp_path / "bad")
    result = run(source, warehouse)

    assert not result.success
    assert result.get_failed_step_keys() == {step}
    assert result.retry_attempts_for_node(step) == 0  # a broken file stays broken
    assert re.search(message, failure_text(result, step)), failure_text(result, step)
    # nothing downstream of the failure ran; no flat table of the bad dump was materialized
    assert materialized(result) == (set() if step == "raw_dump" else {"raw_dump"})
    assert not result.get_asset_check_evaluations()
    assert_publication_untouched(warehouse, published)
    history = query(warehouse, "select revision, status, status_detail from arena.dumps "
                               "where status <> 'published'")
    if step == "raw_dump":  # the fetch rejected the dump: recorded as failed under its content revision
        [(revision, status, detail)] = history
        assert revision.startswith("local-") and revision != published.revision and status == "failed"
        assert detail.startswith("rejected: ")
    else:  # the load failed: the revision is recorded as failed, with the reason
        [(revision, status, detail)] = history
        assert revision != published.revision and status == "failed"
        assert detail.startswith("flatten: ") and source.name in detail


@pytest.mark.slow
def test_empty_dump_is_blocked_by_the_row_count_expectation(published, warehouse, tmp_path):
    """A dump whose only shard is a valid parquet file with 0 rows loads 0 rows, then the blocking
    battles check stops it (row_count.at_least_1): nothing is published."""
    bi.write_shards(tmp_path / "empty", [make_table(3).slice(0, 0)])
    result = run(tmp_path / "empty", warehouse)

    assert not result.success
    assert result.get_failed_step_keys() == {"battles_quality"}
    errors = {e.check_name: e for e in result.get_asset_check_evaluations()}["battles_errors"]
    assert not errors.passed
    failed = errors.metadata["failed_expectations"].value
    assert [(f["expectation"], f["observed"]) for f in failed] == [("row_count.at_least_1", "0")]
    assert battles_metadata(result)["rows_read"].value == 0
    assert materialized(result) == FLAT_KEYS
    assert_publication_untouched(warehouse, published)
    assert failed_expectations(warehouse) == [("failed", ["row_count.at_least_1"])]


def test_empty_shard_next_to_good_ones_loads_the_others(tmp_path):
    """An empty shard is a valid file: it contributes 0 rows and the dump loads from the others."""
    rows = make_rows(8, seed=4)
    empty = make_table(3).slice(0, 0)
    bi.write_shards(tmp_path / "dump", [bi.table_of(rows[:5]), empty, bi.table_of(rows[5:])])
    manifest = local_manifest(parse_source(str(tmp_path / "dump")))
    with duckdb.connect() as con:
        report = load_dump(manifest, con, "v")
        ids = {r[0] for r in con.execute("select id from v.battles").fetchall()}
    assert [f.rows for f in manifest.files] == [5, 0, 3]
    assert report.per_file == [{"file": bi.shard_name(i, 3), "rows": n, "dump": "dump", "format": "arena-140k"}
                               for i, n in enumerate((5, 0, 3))]
    assert (report.rows_read, report.battles, report.quarantined) == (8, 8, 0)
    assert ids == {r["id"] for r in rows}


# ---------------------------------------------------------------------------
# Row-level problems (parquet): the run succeeds, each broken row is quarantined
# ---------------------------------------------------------------------------

@dataclass
class RowLevelRun:
    dump: bi.RowLevelDump
    result: dg.ExecuteInProcessResult
    warehouse: Path

    def quarantine(self) -> dict[tuple[str, int], dict]:
        columns = ("id", "source_file", "source_row", "rule", "detail", "raw")
        rows = query(self.warehouse, f"select {', '.join(columns)} from arena.quarantine")
        return {(r[1], r[2]): dict(zip(columns, r, strict=True)) for r in rows}


@pytest.fixture(scope="module")
def row_level(tmp_path_factory) -> RowLevelRun:
    root = tmp_path_factory.mktemp("row_level")
    dump = bi.row_level_dump(root / "dump")
    result = run(root / "dump", root / "warehouse.duckdb")
    return RowLevelRun(dump, result, root / "warehouse.duckdb")


@pytest.mark.slow
def test_row_level_dump_succeeds_with_rows_read_equal_battles_plus_quarantine(row_level):
    assert row_level.result.success
    meta = row_level.result.asset_materializations_for_node("flat_tables")
    counts = {m.asset_key.to_user_string(): m.metadata["dagster/row_count"].value for m in meta}
    rows_read = battles_metadata(row_level.result)["rows_read"].value
    assert rows_read == row_level.dump.rows == 24
    assert (counts["arena/battles"], counts["arena/quarantine"]) == (14, 10)
    assert len(row_level.dump.bad) == 10
    [(battles, quarantined)] = query(row_level.warehouse,
                                     "select (select count(*) from arena.battles), "
                                     "(select count(*) from arena.quarantine)")
    assert battles + quarantined == rows_read
    checks = {c.check_name: c.passed for c in row_level.result.get_asset_check_evaluations()}
    assert checks["battles_errors"] and checks["messages_errors"]
    assert "publication_gate" in materialized(row_level.result)


@pytest.mark.slow
@pytest.mark.parametrize("case", bi.ROW_CASES)
def test_broken_row_is_quarantined_with_its_rule(row_level, case):
    [bad] = [b for b in row_level.dump.bad if b.case == case]
    got = row_level.quarantine()[(bad.source_file, bad.source_row)]
    assert (got["id"], got["rule"]) == (bad.id, bad.rule), bad.case
    assert bad.detail in got["detail"]
    assert json.loads(got["raw"])["source_row"] == bad.source_row


@pytest.mark.slow
def test_clean_rows_are_intact_and_quarantined_rows_have_no_messages(row_level):
    clean = row_level.dump.clean()
    battles = query(row_level.warehouse, "select id, source_file, source_row, winner, model_a, "
                                         "model_b, turns from arena.battles")
    assert sorted(battles) == sorted(
        (row["id"], f, r, row["winner"], row["model_a"], row["model_b"],
         row["conv_metadata"]["turns"]) for f, r, row in clean)
    messages = dict(query(row_level.warehouse,
                          "select battle_id, count(*) from arena.messages group by 1"))
    assert messages == {row["id"]: bi.messages_of(row) for _, _, row in clean}
    assert json.loads(row_level.quarantine()[(bi.shard_name(0, 2), 2)]["raw"])["winner"] == "draw"


@pytest.mark.slow
def test_duplicate_ids_keep_the_first_copy_by_source_file_and_row(row_level):
    shard0 = row_level.dump.shards[0]
    kept = query(row_level.warehouse,
                 "select id, winner, source_file, source_row from arena.battles "
                 "where id in (?, ?) order by source_row", [shard0[0]["id"], shard0[1]["id"]])
    assert kept == [(shard0[0]["id"], shard0[0]["winner"], bi.shard_name(0, 2), 0),
                    (shard0[1]["id"], shard0[1]["winner"], bi.shard_name(0, 2), 1)]
    # the later copies carried another winner
    assert shard0[10]["winner"] != shard0[0]["winner"]
    assert row_level.dump.shards[1][3]["winner"] != shard0[1]["winner"]


# ---------------------------------------------------------------------------
# Row-level problems (CSV export), a literal that would run code among them
# ---------------------------------------------------------------------------

@dataclass
class CsvRun:
    bad: list[bi.BadRow]
    marker: Path
    result: dg.ExecuteInProcessResult
    warehouse: Path


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory) -> CsvRun:
    root = tmp_path_factory.mktemp("csv")
    marker = root / "MARKER"
    path, bad = bi.csv_row_level(root / "export.csv", marker)
    result = run(path, root / "warehouse.duckdb")
    return CsvRun(bad, marker, result, root / "warehouse.duckdb")


@pytest.mark.slow
def test_csv_with_broken_records_succeeds_and_never_runs_code(csv_run):
    assert not csv_run.marker.exists()
    assert csv_run.result.success
    assert battles_metadata(csv_run.result)["rows_read"].value == 100
    assert query(csv_run.warehouse, "select (select count(*) from arena.battles), "
                                    "(select count(*) from arena.quarantine)") == [(95, 5)]
    bad_ids = [b.id for b in csv_run.bad]
    assert query(csv_run.warehouse, "select count(*) from arena.battles where list_contains(?, id)",
                 [bad_ids]) == [(0,)]
    # the records after the unparseable ones keep their CSV position
    positions = query(csv_run.warehouse,
                      "select list(source_row order by source_row) from arena.battles")
    assert positions == [(sorted(set(range(100)) - {b.source_row for b in csv_run.bad}),)]


@pytest.mark.slow
@pytest.mark.parametrize("case", bi.CSV_CASES)
def test_broken_csv_record_is_quarantined_with_its_rule(csv_run, case):
    [bad] = [b for b in csv_run.bad if b.case == case]
    rows = query(csv_run.warehouse, "select id, rule, detail from arena.quarantine "
                                    "where source_row = ?", [bad.source_row])
    assert len(rows) == 1
    got_id, rule, detail = rows[0]
    assert (got_id, rule) == (bad.id, bad.rule)
    if bad.rule == "unparseable_nested_field":
        assert detail.startswith(bad.detail), detail
    else:
        assert bad.detail in detail, detail


@pytest.mark.slow
def test_csv_quarantine_names_the_file_like_battles(csv_run):
    names = query(csv_run.warehouse, "select distinct source_file from arena.battles "
                                     "union all select distinct source_file from arena.quarantine")
    assert set(names) == {("export.csv",)}


# ---------------------------------------------------------------------------
# New optional fields: not fatal, and reported
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def new_fields(tmp_path_factory):
    root = tmp_path_factory.mktemp("new_fields")
    rows = make_rows(10, seed=8)
    bi.write_shards(root / "dump", [bi.with_new_optional_fields(rows)])
    with dg.DagsterInstance.ephemeral() as instance:  # disposed here, not whenever the GC gets to it
        result = run(root / "dump", root / "warehouse.duckdb", instance)
        yield rows, result, root / "warehouse.duckdb", instance


@pytest.mark.slow
def test_new_category_version_and_column_are_not_fatal(new_fields):
    rows, result, warehouse, _ = new_fields
    assert result.success
    got = query(warehouse, "select id, criteria_complexity, criteria_creativity, math "
                           "from arena.battles")
    tags = [r["category_tag"] for r in rows]
    assert sorted(got) == sorted(
        (r["id"], t["criteria_v0.1"]["complexity"], t["criteria_v0.1"]["creativity"],
         t["math_v0.1"]["math"]) for r, t in zip(rows, tags, strict=True))
    assert query(warehouse, "select count(*) from arena.quarantine") == [(0,)]


@pytest.mark.slow
def test_new_category_version_and_column_are_reported(new_fields):
    _, result, _, instance = new_fields
    run_log = "\n".join(repr(entry) for entry in instance.all_logs(result.run_id))
    assert bi.NEW_CATEGORY_VERSION in run_log and bi.NEW_TOP_LEVEL_COLUMN in run_log
    meta = result.asset_materializations_for_node("raw_dump")[0].metadata
    assert meta["new_fields"].value == {bi.shard_name(0, 1): [
        f"category_tag.{bi.NEW_CATEGORY_VERSION} (struct<complexity: bool, reasoning: bool>)",
        f"{bi.NEW_TOP_LEVEL_COLUMN} (string)"]}


# ---------------------------------------------------------------------------
# The blocking checks really block
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_blocking_check_stops_a_bad_dump_that_escaped_quarantine(
        published, warehouse, tmp_path, monkeypatch):
    def pass_everything(battles: pl.DataFrame, optional=()):
        return battles, pl.DataFrame(schema=QUARANTINE_SCHEMA)

    monkeypatch.setattr(ingest, "split_quarantine", pass_everything)
    rows = make_rows(10, seed=9)
    rows[3]["winner"] = "draw"
    bi.write_shards(tmp_path / "dump", [bi.table_of(rows)])
    result = run(tmp_path / "dump", warehouse)

    assert not result.success
    assert result.get_failed_step_keys() == {"battles_quality"}
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["battles_errors"].passed
    failed = {f["expectation"]: f
              for f in checks["battles_errors"].metadata["failed_expectations"].value}
    assert set(failed) == {"winner.in_set"}
    assert failed["winner.in_set"]["sample_ids"] == [rows[3]["id"]]
    assert failed["winner.in_set"]["unexpected_count"] == 1
    # leaderboards and publication never ran; the views still show the first dump
    assert materialized(result) == FLAT_KEYS
    assert_publication_untouched(warehouse, published)
    revision = result.asset_materializations_for_node("raw_dump")[0].metadata["revision"].text
    stored = query(warehouse, "select sample_ids from arena.quality_results where not success "
                              "and dump_revision = ? and expectation_id = 'winner.in_set'",
                   [revision])
    assert stored == [([rows[3]["id"]],)]
    assert failed_expectations(warehouse) == [("failed", ["winner.in_set"])]


# ---------------------------------------------------------------------------
# Bugs found by this corpus, fixed since (each test failed before its fix)
# ---------------------------------------------------------------------------

def test_duplicate_across_nested_files_keeps_one_copy(tmp_path):
    rows = make_rows(4, seed=3)
    later = dict(rows[0], winner=bi.other_winner(rows[0]["winner"]))
    (tmp_path / "dump" / "x").mkdir(parents=True)
    pq.write_table(bi.table_of(rows[:2]), tmp_path / "dump" / "x" / "0.parquet")
    pq.write_table(bi.table_of([later, *rows[2:]]), tmp_path / "dump" / "x-1.parquet")
    manifest = local_manifest(parse_source(str(tmp_path / "dump")))
    with duckdb.connect() as con:
        report = load_dump(manifest, con, "v")
        kept = con.execute("select source_file from v.battles where id = ?",
                           [rows[0]["id"]]).fetchall()
    assert (report.rows_read, report.battles, report.quarantined) == (5, 4, 1)
    assert kept == [("x-1.parquet",)]  # the first copy by (source_file, source_row)


def test_duplicate_label_does_not_depend_on_file_boundaries(tmp_path):
    rows = make_rows(4, seed=6)
    rows[1]["winner"] = "draw"
    copy_ = dict(rows[1], winner="model_a")
    rules = {}
    for layout, shards in {"one file": [[*rows, copy_]], "two files": [rows, [copy_]]}.items():
        bi.write_shards(tmp_path / layout, [bi.table_of(s) for s in shards])
        with duckdb.connect() as con:
            load_dump(local_manifest(parse_source(str(tmp_path / layout))), con, "v")
            rules[layout] = con.execute("select rule from v.quarantine "
                                        "order by source_file, source_row").fetchall()
    assert rules["one file"] == [("unknown_winner,duplicate_id",)]
    assert rules["two files"] == rules["one file"]


def test_source_error_is_not_retried(tmp_path):
    paths = _two_shards(tmp_path / "dump")
    bi.truncate(paths[1])
    with dg.build_asset_context() as context, pytest.raises(dg.Failure) as failure:
        raw_dump(context, FetchConfig(),
                 dump_source=DumpSource(source=str(tmp_path / "dump")),
                 warehouse=Warehouse(database=str(tmp_path / "w.duckdb")))
    assert failure.value.allow_retries is False
    assert "not a readable parquet file" in failure.value.description


def test_count_out_of_int32_range_is_quarantined_naming_the_field(tmp_path):
    """conv_metadata typed int64 holding 2^63-1 used to crash flat_tables ("conversion from i64 to
    i32 failed"); a header count of 2^63-1 wrapped the style sum. Now the first is a quarantine rule
    naming the field, and the second stays in the battle with a finite style feature."""
    from arena_pipeline.core.ranking.style_control import style_feature_exprs

    huge = 2**63 - 1
    rows = make_rows(4, seed=8)
    rows[1]["conv_metadata"]["sum_user_tokens"] = huge
    rows[2]["conv_metadata"]["header_count_a"]["h1"] = huge
    rows[2]["conv_metadata"]["header_count_b"]["h2"] = 1
    schema = bi.schema_with_nested_type(("conv_metadata", "sum_user_tokens"), pa.int64())
    bi.write_shards(tmp_path / "dump", [bi.table_of(rows, schema)])
    with duckdb.connect() as con:
        report = load_dump(local_manifest(parse_source(str(tmp_path / "dump"))), con, "v")
        quarantined = con.execute("select id, rule, detail from v.quarantine").fetchall()
        battles = pl.from_arrow(con.execute("select * from v.battles order by source_row").arrow())
    assert (report.rows_read, report.battles, report.quarantined) == (4, 3, 1)
    assert [(battle, rule) for battle, rule, _ in quarantined] == [(rows[1]["id"], "count_out_of_range")]
    assert f"sum_user_tokens={huge} (stored as Int32)" in quarantined[0][2]  # the field, its value, its type
    assert battles.schema["sum_user_tokens"] == pl.Int32
    features = battles.filter(pl.col("id") == rows[2]["id"]).select(style_feature_exprs())
    assert features.get_column("headers").to_list() == [pytest.approx(1.0)]  # a wrapped sum gave 0


@pytest.mark.slow
def test_message_defect_quarantines_one_vote_instead_of_blocking_the_dump(tmp_path):
    """A null role inside one conversation used to fail the blocking messages_errors check
    (turn.not_null) for the whole dump; now that vote alone is quarantined, with the position."""
    import copy

    rows = copy.deepcopy(make_rows(8, seed=9))
    rows[2]["conversation_b"][1]["role"] = None
    first_a = rows[3]["conversation_a"]
    rows[3]["conversation_a"] = [first_a[1], first_a[0], first_a[1]]  # a reply before the user
    rows[4]["conversation_a"][0]["role"] = None  # a user message without a role
    bi.write_shards(tmp_path / "dump", [bi.table_of(rows)])
    result = run(tmp_path / "dump", tmp_path / "w.duckdb")
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["messages_errors"] and checks["battles_errors"]
    quarantined = query(tmp_path / "w.duckdb",
                        "select id, rule, detail from arena.quarantine order by source_row")
    # with its user message roleless, the reply after it has no user message before it either
    assert [(battle, rule) for battle, rule, _ in quarantined] == [
        (rows[2]["id"], "null_role"), (rows[3]["id"], "reply_before_user"),
        (rows[4]["id"], "null_role,reply_before_user")]
    # each detail names the conversation and the position of each defect (the wording: golden/load.txt)
    assert [re.findall(r"(conversation_[ab]) message at position (\d)", detail) for *_, detail in quarantined] == [
        [("conversation_b", "1")], [("conversation_a", "0")], [("conversation_a", "0"), ("conversation_a", "1")]]
    assert query(tmp_path / "w.duckdb", "select count(*) from arena.battles") == [(5,)]
    left = query(tmp_path / "w.duckdb", "select count(*) from arena.messages where battle_id in (?, ?, ?)",
                 [rows[2]["id"], rows[3]["id"], rows[4]["id"]])
    assert left == [(0,)]


@pytest.mark.slow
def test_bad_values_of_an_older_format_are_quarantined_and_the_dump_publishes(tmp_path):
    """A 33k dump with a tstamp of inf and a turn of 2^40 used to stop flat_tables with a raw Polars
    InvalidOperationError and mark the whole dump failed (issue 25 item 4)."""
    from arena_pipeline_dev import dump_fixtures as fx

    table = bi.set_value(bi.set_value(fx.make_33k(n=8), ("tstamp",), float("inf")), ("turn",), 2**40, row=4)
    bi.write_shards(tmp_path / "dump", [table])
    result = run(tmp_path / "dump", tmp_path / "w.duckdb")
    assert result.success
    ids = table.column("question_id").to_pylist()
    quarantined = query(tmp_path / "w.duckdb", "select id, rule, split_part(detail, ' (', 1) from arena.quarantine "
                                               "order by source_row")
    assert [(battle, rule, detail.rpartition(" ")[2]) for battle, rule, detail in quarantined] == [
        (ids[bi.BAD_ROW], "unparseable_field", "tstamp=inf"), (ids[4], "count_out_of_range", "turn=1099511627776")]
    assert query(tmp_path / "w.duckdb", "select count(*) from arena.battles") == [(6,)]
    assert "publication_gate" in materialized(result)


@pytest.mark.slow
def test_a_snapshot_that_cannot_be_written_after_a_failure_does_not_hide_the_failure(tmp_path, monkeypatch):
    """A load that fails records why and gives readers a snapshot of that record; when that snapshot
    cannot be written (a full disk, say), the step still fails with the load's own error."""
    from arena_pipeline.core.store import snapshot

    write_dump(tmp_path / "dump", n_rows=12, n_shards=2, seed=4)
    shard = sorted((tmp_path / "dump").rglob("*.parquet"))[1]
    bi.truncate(shard)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "sync_snapshot", full_disk)
    result = run(tmp_path / "dump", tmp_path / "w.duckdb")
    assert not result.success
    text = failure_text(result, "raw_dump")
    assert shard.name in text and "No space left" not in text
