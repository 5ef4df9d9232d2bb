"""The version store (arena_pipeline/assets/version_store.py) on a temporary warehouse, and assets built on it
invoked directly on frames (or on stored versions, for those reading references), as plain functions
(issue 26 part 2)."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest

from arena_pipeline.assets.analysis import position_bias_table, rating_trend_table
from arena_pipeline.assets.metadata import schema_metadata, table_metadata
from arena_pipeline.assets.models import models
from arena_pipeline.assets.rankings import _TAGGED_COLUMNS, battle_categories
from arena_pipeline.assets.version_store import (
    VERSION_STORE,
    Fill,
    FillTogether,
    Later,
    TableRef,
    Versioned,
    VersionStore,
    version_store,
)
from arena_pipeline.checks import models_confusable, quality_check
from arena_pipeline.constants import BATTLES_TABLE, SCHEMA
from arena_pipeline.core.analysis import rating_trend
from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.store import store as store_module
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.versions import Build, start_build, version_name
from arena_pipeline.resources import ModelCatalog, Warehouse
from arena_pipeline_tests.support.battle_frames import MODELS, make_battles

REVISION = "a" * 40
RUN = "run-store-1"


def _build() -> Build:
    return Build(RUN, REVISION)


def _key(table: str) -> dg.AssetKey:
    return dg.AssetKey([SCHEMA, table])


@pytest.fixture
def store(tmp_path) -> VersionStore:
    """A store on a fresh warehouse, for a run whose build works on REVISION."""
    warehouse = Warehouse(database=str(tmp_path / "w.duckdb"))
    manifest = DumpManifest("hub", "org/name", "main", REVISION, (ShardFile("/x/a.parquet", "a.parquet", 10, 3, "ab"),))
    with warehouse.connection() as con:
        start_build(con, SCHEMA, RUN, manifest)
    return VersionStore(warehouse, RUN)


def _store(store: VersionStore, table: str, value, columns: dict | None = None) -> dg.OutputContext:
    metadata = schema_metadata(columns, f"{SCHEMA}.{table}") if columns else {}
    context = dg.build_output_context(asset_key=_key(table), definition_metadata=metadata)
    store.handle_output(context, value)
    return context


def _load(store: VersionStore, table: str, kind: type, columns: str | None = None, spec: TableSpec | None = None):
    """Load ``table`` as ``kind``; ``spec``: what the upstream asset declares the table is."""
    upstream = dg.build_output_context(asset_key=_key(table), definition_metadata=table_metadata(spec)) if spec else None
    return store.load_input(dg.build_input_context(
        asset_key=_key(table), dagster_type=dg.PythonObjectDagsterType(kind), upstream_output=upstream,
        definition_metadata={"columns": columns} if columns else None))


def _settings(store: VersionStore, table: str) -> str:
    with store.warehouse.connection() as con:
        return con.execute("SELECT settings FROM arena_versions.versions WHERE table_name = ?", [table]).fetchone()[0]


def test_a_frame_is_stored_as_the_runs_version_and_loaded_back_with_only_the_declared_columns(store):
    frame = pl.DataFrame({"category": ["overall", "math"], "battles": [3, 1], "note": ["x", "y"]})
    columns = {"category": pl.String(), "battles": pl.Int64(), "note": pl.String(), "dump_revision": pl.String()}
    _store(store, "position_bias", Versioned(frame, {"threshold": 2}), columns)
    with store.warehouse.connection() as con:
        stored = con.execute(f'SELECT * FROM arena_versions."{version_name("position_bias", _build())}" '
                             "ORDER BY category").fetchall()
    # the store stamps the version's revision in the declared dump_revision column
    assert stored == [("math", 1, "y", REVISION), ("overall", 3, "x", REVISION)]
    assert '"threshold": 2' in _settings(store, "position_bias") and "package_version" in _settings(store, "position_bias")
    loaded = _load(store, "position_bias", pl.DataFrame, "category, battles")
    assert loaded.sort("category").to_dicts() == [{"category": "math", "battles": 1},
                                                  {"category": "overall", "battles": 3}]


def test_a_heavy_table_is_written_inside_duckdb_and_loads_only_as_a_reference(store):
    def make(con, target: str) -> int:
        con.execute(f"CREATE TABLE {target} AS SELECT range AS message_id, 'text ' || range AS content "
                    "FROM range(1000)")
        return 1000

    _store(store, "messages", Fill(make))
    ref = _load(store, "messages", TableRef)
    assert isinstance(ref, TableRef)
    assert ref.version == ref.base == version_name("messages", _build()) and ref.revision == REVISION
    with store.warehouse.connection() as con:
        assert con.execute(f"SELECT count(*), max(message_id) FROM {ref.name}").fetchone() == (1000, 999)
    with pytest.raises(TypeError, match="too large"):  # its asset declares it heavy
        _load(store, "messages", pl.DataFrame, spec=TableSpec(heavy=True, file_view=True))


def test_an_unsupported_output_is_refused(store):
    with pytest.raises(TypeError, match="DataFrame or a Fill"):
        _store(store, "models", {"not": "a table"})


def test_a_table_with_the_inputs_of_an_earlier_version_is_a_view_of_it(store):
    frame = pl.DataFrame({"id": ["a", "b"], "winner": ["tie", "model_a"]})
    _store(store, "battles", Versioned(frame, reuse=True))
    manifest = DumpManifest("hub", "org/name", "main", REVISION, ())
    with store.warehouse.connection() as con:
        start_build(con, SCHEMA, "run-store-2", manifest)
    second = VersionStore(store.warehouse, "run-store-2")
    _store(second, "battles", Versioned(frame, reuse=True))
    with store.warehouse.connection() as con:
        rows = con.execute("SELECT build_id, same_as FROM arena_versions.versions ORDER BY created_at").fetchall()
    assert rows == [(RUN, None), ("run-store-2", version_name("battles", _build()))]
    ref = _load(second, "battles", TableRef)
    assert ref.base == version_name("battles", _build()) != ref.version
    assert _load(second, "battles", pl.DataFrame).sort("id").rows() == [("a", "tie"), ("b", "model_a")]


def _refs(store: VersionStore, battles: pl.DataFrame, tags: pl.DataFrame) -> dict[str, TableRef]:
    """``battles`` and ``tags`` stored as the run's versions, as the references an asset reading them inside
    DuckDB is given."""
    _store(store, BATTLES_TABLE, battles)
    _store(store, "battle_categories", tags)
    return {"battles": _load(store, BATTLES_TABLE, TableRef), "battle_categories": _load(store, "battle_categories", TableRef)}


def test_position_bias_invoked_directly_on_stored_versions(store):
    winners = ["model_a"] * 6 + ["model_b"] * 2 + ["tie", "both_bad"]
    battles = pl.DataFrame({"id": [f"b{i}" for i in range(10)], "winner": winners,
                            "model_a": ["x"] * 10, "model_b": ["y"] * 10})
    tags = pl.DataFrame({"battle_id": [f"b{i}" for i in range(10)] + ["b0", "b6", "b7"],
                         "category": ["overall"] * 10 + ["math"] * 3})
    output = position_bias_table(warehouse=store.warehouse, **_refs(store, battles, tags))
    assert isinstance(output.value, Versioned) and output.value.reuse  # counted only when none is reused
    table, metadata = output.value.table.make()
    table = table.sort("category")
    assert table.get_column("category").to_list() == ["math", "overall"]
    math, overall = table.to_dicts()
    assert (overall["battles"], overall["decisive"], overall["a_wins"], overall["a_win_rate"]) == (10, 8, 6, 0.75)
    assert (math["decisive"], math["a_wins"]) == (3, 1)
    assert "dump_revision" not in table.columns  # the store adds it: it is the version's revision
    assert metadata["overall"].value[0]["a_wins"] == 6


def test_rating_trend_invoked_directly_on_stored_versions_reads_the_trends_votes_only(store):
    """The step reads the trend's columns and categories inside DuckDB: the trend of the whole frames."""
    battles = make_battles(400).with_columns(model_a_canonical=pl.col("model_a").str.to_uppercase(),
                                             model_b_canonical=pl.col("model_b").str.to_uppercase())
    tags, _ = battle_categories(battles=battles).table.make()
    output = rating_trend_table(warehouse=store.warehouse, **_refs(store, battles, tags))
    assert isinstance(output.value, Versioned) and output.value.reuse  # fitted only when none is reused
    trend, metadata = output.value.table.make()
    canonical = battles.with_columns(model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))
    expected = rating_trend(canonical, tags)
    assert expected.height >= 3 and trend.equals(expected)
    assert metadata["months"] == expected.get_column("month").n_unique()
    assert set(trend.get_column("model")) <= {m.upper() for m in MODELS}  # canonical names


def test_battle_categories_invoked_directly_on_a_battles_frame():
    battles = make_battles(12)  # coding: is_code (every 5th), multi_turn: 2 turns (i % 3 == 2)
    output = battle_categories(battles=battles)
    assert isinstance(output, Versioned) and output.reuse  # tagged only when no equal version is reused
    tags, metadata = output.table.make()
    per_category = dict(tags.group_by("category").len().iter_rows())
    assert per_category["overall"] == 12
    assert per_category["coding"] == 3 and per_category["multi_turn"] == 4
    assert set(tags.filter(pl.col("category") == "coding").get_column("battle_id")) == {"id-0000", "id-0005", "id-0010"}
    assert metadata["battles_per_category"].value["coding"] == 3


def test_battle_categories_reads_only_the_columns_its_rules_read():
    """The input's columns (_TAGGED_COLUMNS) tag as the whole table does: the same tags and metadata, a dump
    that lacks a rule's column included."""
    battles = make_battles(30).with_columns(
        dump=pl.when(pl.int_range(pl.len()) < 10).then(pl.lit("old")).otherwise(pl.lit("new")))
    battles = battles.with_columns(math=pl.when(pl.col("dump") == "old").then(None).otherwise(pl.col("math")))
    whole, whole_metadata = battle_categories(battles=battles).table.make()
    narrow, narrow_metadata = battle_categories(
        battles=battles.select([c.strip() for c in _TAGGED_COLUMNS.split(",") if c.strip() in battles.columns])).table.make()
    assert narrow.equals(whole) and narrow.height > 30
    assert narrow_metadata == whole_metadata
    assert whole_metadata["unavailable_by_dump"].value  # the old dump lacks math


def test_models_invoked_directly_on_stored_versions(store):
    battles = make_battles(8).with_columns(model_b_canonical=pl.lit("gemini-2.5-pro"))
    tags, _ = battle_categories(battles=battles).table.make()
    output = models(model_catalog=ModelCatalog(), warehouse=store.warehouse, **_refs(store, battles, tags))
    assert output.value.reuse and "aliases_sha256" in output.value.settings  # counted only when none is reused
    table, metadata = output.value.table.make()
    assert metadata["models_without_provider"].value == table.filter(pl.col("provider").is_null())["model"].to_list()
    gemini = table.filter(pl.col("model") == "gemini-2.5-pro").row(0, named=True)
    # every battle has it on side b now (a self-battle counts once)
    assert gemini["n_battles"] == 8 and gemini["battles_overall"] == 8
    assert set(table.get_column("model")) == set(MODELS)


def test_the_battles_suite_checks_the_version_the_store_gives_and_records_it_on_that_version(store):
    _store(store, "battles", make_battles(20))
    checked = _load(store, "battles", TableRef)
    with dg.build_op_context() as context:
        errors, warnings = quality_check(BATTLES_TABLE)(context, warehouse=store.warehouse, checked=checked)
    assert (errors.check_name, errors.passed, errors.severity) == ("battles_errors", True, dg.AssetCheckSeverity.ERROR)
    assert (warnings.check_name, warnings.severity, errors.metadata["rows"].value) == (
        "battles_warnings", dg.AssetCheckSeverity.WARN, 20)
    with store.warehouse.connection() as con:
        passed = con.execute("SELECT checks_passed FROM arena_versions.versions WHERE version = ?",
                             [checked.version]).fetchone()
        recorded = con.execute("SELECT DISTINCT table_version, dump_revision FROM arena.quality_results").fetchall()
    assert passed == (True,) and recorded == [(checked.version, REVISION)]


def test_models_confusable_invoked_directly_on_a_models_frame():
    result = models_confusable(models=pl.DataFrame({"model": ["gemma-3-27b-it", "g\u0435mma-3-27b-it", "o3"]}))
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN and result.metadata["models"].value == 3
    assert [(p["model"], p["other"]) for p in result.metadata["pairs"].value] == [("gemma-3-27b-it", "g\u0435mma-3-27b-it")]


def test_a_build_whose_step_failed_is_closed_with_the_reason_not_as_abandoned(tmp_path):
    """A step that waited past the lock timeout cannot record its failure in the work file; its build was
    later labelled "abandoned: its process ended" (issue 38, item 8). The run's recorded failure is now the
    build's reason; a build whose run did not fail (a killed process leaves it started) is 'abandoned'."""
    import subprocess
    import sys

    import duckdb

    from arena_pipeline.assets.builds import run_failure
    from arena_pipeline.core.store.versions import close_abandoned_builds
    from arena_pipeline.core.store.warehouse import WarehouseLockedError

    locked = "work.duckdb is locked by another process (waited 120.0 s of 120 s)"

    @dg.asset
    def waits_for_the_work_file():
        raise WarehouseLockedError(locked)

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(gone.stdout)  # a process of this host that has ended
    manifest = DumpManifest("local", "votes.csv", "local", "rev-1")
    with dg.instance_for_test() as instance:
        failed = dg.materialize([waits_for_the_work_file], instance=instance, raise_on_error=False)
        assert not failed.success
        killed = "k" * 8 + "-0000-0000-0000-000000000000"
        instance.add_run(dg.DagsterRun(job_name="refresh_job", run_id=killed, status=dg.DagsterRunStatus.STARTED))
        with duckdb.connect(str(tmp_path / "work.duckdb")) as con:
            for run_id in (failed.run_id, killed):
                start_build(con, SCHEMA, run_id, manifest)
            con.execute("UPDATE arena_versions.builds SET pid = ?", [pid])
            assert sorted(close_abandoned_builds(con, run_failure(instance))) == sorted([failed.run_id, killed])
            ended = dict(con.execute("SELECT build_id, status || ': ' || status_detail FROM arena_versions.builds")
                         .fetchall())
    assert ended[failed.run_id] == (f"failed: step waits_for_the_work_file failed: {WarehouseLockedError.__module__}."
                                    f"WarehouseLockedError: {locked}")
    assert ended[killed].startswith(f"abandoned: its process ({pid} on ")


def _pair_fill(calls: list, fail: bool = False) -> FillTogether:
    """Two tables made in one pass as Parquet part files (as the load writes the vote tables); ``calls``
    counts the passes."""
    def make(con, folders):
        calls.append(dict(folders))
        pl.DataFrame({"x": range(3)}).write_parquet(folders["left_t"] / "part-000000.parquet")
        pl.DataFrame({"y": range(2)}).write_parquet(folders["right_t"] / "part-000000.parquet")
        if fail:
            raise RuntimeError("disk gone")
        return {"left_t": (3, {"seconds": 0.5}), "right_t": 2}

    return FillTogether(("left_t", "right_t"), make)


def _stored(store: VersionStore, table: str, value) -> dict:
    """Store ``value`` as ``table``'s output; return the output metadata the store logged (plain values)."""
    with dg.build_output_context(asset_key=_key(table)) as context:
        store.handle_output(context, value)
        return {k: getattr(v, "value", v) for k, v in context.get_logged_metadata().items()}


def _relations(store: VersionStore) -> set[str]:
    with store.warehouse.connection() as con:
        return {n for (n,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'arena_versions' "
                                          "UNION ALL SELECT view_name FROM duckdb_views() "
                                          "WHERE schema_name = 'arena_versions'").fetchall()}


def test_tables_filled_together_are_made_in_one_pass_swapped_in_together_and_reused_together(store):
    calls: list = []
    together = _pair_fill(calls)
    first = [_stored(store, t, Versioned(together, {"k": 1}, reuse=True)) for t in ("left_t", "right_t")]
    assert len(calls) == 1  # one pass for both outputs, into new folders the store named
    files = store.warehouse.files_path()
    assert set(calls[0]) == {"left_t", "right_t"} and all(f.parent == files for f in calls[0].values())
    versions = {t: version_name(t, _build()) for t in ("left_t", "right_t")}
    with store.warehouse.connection() as con:
        registered = dict(con.execute("SELECT table_name, rows FROM arena_versions.versions").fetchall())
        assert con.execute(f'SELECT count(*) FROM arena_versions."{versions["right_t"]}"').fetchone() == (2,)
    assert registered == {"left_t": 3, "right_t": 2}
    assert [m.get("seconds") for m in first] == [0.5, None]
    assert not any(name.startswith("_stage_") for name in _relations(store))
    # the versions are their files (no copy in the work file), in folders of their own
    assert sorted(p.name.rpartition(".")[0] for p in files.iterdir()) == sorted(versions.values())

    # another build with the same settings and code: both versions are views of the first's, nothing is made
    again = VersionStore(store.warehouse, "run-store-2")
    manifest = DumpManifest("hub", "org/name", "main", REVISION, (ShardFile("/x/a.parquet", "a.parquet", 10, 3, "ab"),))
    with store.warehouse.connection() as con:
        start_build(con, SCHEMA, "run-store-2", manifest)
    later: list = []
    together = _pair_fill(later)  # the step's outputs share one
    reused = [_stored(again, t, Versioned(together, {"k": 1}, reuse=True)) for t in ("left_t", "right_t")]
    assert later == []
    assert [m["reused"] for m in reused] == [versions["left_t"], versions["right_t"]]
    assert [m["dagster/row_count"] for m in reused] == [3, 2]


def test_a_failed_fill_together_leaves_no_staging_table_and_registers_nothing(store):
    with pytest.raises(RuntimeError, match="disk gone"):
        _stored(store, "left_t", Versioned(_pair_fill([], fail=True), reuse=True))
    assert _relations(store) & {"_stage_" + version_name(t, _build()) for t in ("left_t", "right_t")} == set()
    assert not any("left_t" in name or "right_t" in name for name in _relations(store))
    with store.warehouse.connection() as con:
        assert con.execute("SELECT count(*) FROM arena_versions.versions").fetchone() == (0,)
    assert list(store.warehouse.files_path().iterdir()) == []  # nothing of the failed attempt stays


def test_an_in_process_run_keeps_no_stored_table_in_memory(sample_run):
    """``execute_in_process`` keeps every output's value until the run ends (Dagster's output capture): each
    :class:`Versioned` the store stored is released (its table None), so no stored frame, and no fit that a
    ``Later`` holds, stays in memory through the later steps. Fails if ``handle_output`` keeps the table."""
    result = sample_run.result
    values = {key: result.asset_value(key) for key in (
        dg.AssetKey([SCHEMA, "battle_categories"]), dg.AssetKey([SCHEMA, "leaderboard"]),
        dg.AssetKey([SCHEMA, "position_bias"]), dg.AssetKey([SCHEMA, BATTLES_TABLE]))}
    assert all(isinstance(value, Versioned) for value in values.values()), values
    assert {key: value.table for key, value in values.items() if value.table is not None} == {}


def _three_tables(made: list, settings: dict):
    """A step with three outputs a store makes only when no earlier version can be reused (``Later``, as the fits'
    tables); ``settings``: per table, what it is recorded with; ``made``: the tables made."""
    manifest = DumpManifest("hub", "org/name", "main", REVISION, (ShardFile("/x/a.parquet", "a.parquet", 10, 3, "ab"),))
    names = ("ahead_a", "ahead_b", "ahead_c")

    def make(name: str) -> pl.DataFrame:
        made.append(name)
        return pl.DataFrame({"x": [len(name), len(made)]})

    @dg.multi_asset(outs={n: dg.AssetOut(key=_key(n), io_manager_key=VERSION_STORE) for n in names})
    def three(context, warehouse: Warehouse):  # (no annotation: a string under `annotations`, which Dagster refuses)
        with warehouse.connection() as con:  # the run's build, as raw_dump starts it
            start_build(con, SCHEMA, context.run.run_id, manifest)
        for name in names:
            yield dg.Output(Versioned(Later(lambda name=name: make(name)), settings[name], reuse=True), output_name=name)

    return three


def test_a_steps_reused_later_outputs_take_one_hold_and_one_that_comes_otherwise_is_made(tmp_path, monkeypatch):
    """The fits' tables of an unchanged re-run: the step's first reused ``Later`` output reuses the others in the
    same hold of the work file (one hold, not one per output); an output that then comes with other settings
    drops that view and is made and stored as its own version."""
    holds: list = []
    work = store_module.Store.work
    monkeypatch.setattr(store_module.Store, "work", lambda self, **kw: holds.append(1) or work(self, **kw))
    warehouse = Warehouse(database=str(tmp_path / "w.duckdb"))
    settings = {n: {"rounds": 5} for n in ("ahead_a", "ahead_b", "ahead_c")}
    made: list = []

    def run() -> str:
        holds.clear()
        with dg.instance_for_test() as instance:
            result = dg.materialize([_three_tables(made, settings)], instance=instance,
                                    resources={"warehouse": warehouse, VERSION_STORE: version_store})
        assert result.success
        return result.run_id

    run()
    assert made == ["ahead_a", "ahead_b", "ahead_c"]
    made.clear()
    again = run()
    assert made == [] and len(holds) == 2  # the build's, and one for the three reused outputs
    settings["ahead_b"] = {"rounds": 6}
    made.clear()
    changed = run()
    assert made == ["ahead_b"] and len(holds) == 4  # b: its view dropped and looked up again, then stored
    with warehouse.connection() as con:
        same_as = dict(con.execute("SELECT table_name, same_as FROM arena_versions.versions WHERE build_id = ?",
                                   [changed]).fetchall())
        rows = con.execute(f"SELECT x FROM arena_versions.\"{version_name('ahead_b', Build(changed, REVISION))}\"").fetchall()
        reused = dict(con.execute("SELECT table_name, same_as FROM arena_versions.versions WHERE build_id = ?",
                                  [again]).fetchall())
    assert same_as["ahead_b"] is None and sorted(rows) == [(1,), (7,)]  # made by the third run
    assert same_as["ahead_a"] and same_as["ahead_c"]
    assert all(reused.values()) and sorted(reused) == ["ahead_a", "ahead_b", "ahead_c"]
