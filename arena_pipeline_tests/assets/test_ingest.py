"""The ingest assets materialized with Dagster: local dumps, the real CSV sample, and the fake Hub."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from arena_pipeline.core.ingest.sources import SourceError
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline_dev.fixtures import make_rows, write_dump
from arena_pipeline_dev.hub_server import fake_hub_server
from arena_pipeline_tests.support.materialize import REAL_CSV, materialize, rank_config, work_file

REPO = "lmarena-ai/arena-human-preference-140k"
RUN_CONFIG = rank_config(min_battles=1, bootstrap_rounds=5)


def _run(tmp_path: Path, source: DumpSource, raise_on_error: bool = True):
    """The whole graph on ``source`` into ``tmp_path/warehouse.duckdb``."""
    return materialize({"dump_source": source, "warehouse": Warehouse(database=str(tmp_path / "warehouse.duckdb"))},
                       run_config=RUN_CONFIG, raise_on_error=raise_on_error)


def _query(tmp_path: Path, sql: str):
    with connect_warehouse(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
def test_local_parquet_dump_to_duckdb(tmp_path):
    write_dump(tmp_path / "dump", n_rows=40, n_shards=2, seed=5)
    rows = make_rows(40, seed=5)
    result = _run(tmp_path, DumpSource(source=str(tmp_path / "dump")))
    assert result.success
    meta = result.asset_materializations_for_node("raw_dump")[0].metadata
    assert meta["rows"].value == 40 and meta["source_kind"].text == "parquet_dir"
    assert _query(tmp_path, "select count(*) from arena.battles") == [(40,)]
    expected_messages = sum(len(r["conversation_a"]) + len(r["conversation_b"]) for r in rows)
    assert _query(tmp_path, "select count(*) from arena.messages") == [(expected_messages,)]
    multi = rows[0]  # 3 turns, evaluation order 2
    got = _query(
        tmp_path,
        "select turns, n_user_messages_a, evaluation_order, sum_assistant_a_tokens, criteria_complexity "
        f"from arena.battles where id = '{multi['id']}'",
    )
    meta_a = multi["conv_metadata"]
    assert got == [(3, 3, 2, meta_a["sum_assistant_a_tokens"],
                    multi["category_tag"]["criteria_v0.1"]["complexity"])]
    turns = _query(
        tmp_path,
        f"select turn, role from arena.messages where battle_id = '{multi['id']}' and side = 'a' order by position",
    )
    assert turns == [(1, "user"), (1, "assistant"), (2, "user"), (2, "assistant"), (3, "user"), (3, "assistant")]
    assert _query(tmp_path, f"select count(*) from arena.context_messages where battle_id = '{multi['id']}'") == [(3,)]
    views = [t for (t,) in _query(tmp_path, "select view_name from duckdb_views() where schema_name = 'arena'")]
    assert {"battles", "context_messages", "messages", "quarantine"} <= set(views)
    assert _query(tmp_path, "select status, rows from arena.dumps") == [("published", 40)]
    report = Path(result.asset_materializations_for_node("publication_gate")[1].metadata["path"].path)
    assert report.is_file() and "<table" in report.read_text(encoding="utf-8")
    assert not report.is_relative_to(Path.cwd())


def test_real_csv_sample_ingests_completely(sample_run):
    """The session's run of the real sample (ranked with min_battles 3: the tables checked here do not depend on it)."""
    assert sample_run.result.success
    assert _query(sample_run.root, "select count(*), count(distinct model_a) from arena.battles")[0][0] == 100
    assert _query(sample_run.root, "select winner, count(*) from arena.battles group by 1 order by 1") == [
        ("both_bad", 10), ("model_a", 38), ("model_b", 33), ("tie", 19)]
    assert _query(sample_run.root, "select count(*) from arena.messages") == [(452,)]
    assert _query(sample_run.root, "select count(*) from arena.quarantine") == [(0,)]
    # arena.dumps counts a CSV export's rows (it recorded -1 before)
    assert _query(sample_run.root, "select rows from arena.dumps") == [(100,)]
    assert _query(
        sample_run.root,
        "select text from arena.messages where battle_id = 'c4b9710c-8d64-4bee-a0b0-94637ae4cc65' "
        "and side = 'b' and position = 0",
    ) == [("Compare Tormenta20 with DnD5e",)]


class CutAfterFetch(DumpSource):
    """A local dump whose second shard is cut short once raw_dump has fetched it (before the load reads it)."""

    def fetch(self, revision=None, revisions=None):
        manifest = super().fetch(revision=revision, revisions=revisions)
        second = Path(manifest.files[1].path)
        with open(second, "r+b") as fh:
            fh.truncate(second.stat().st_size // 2)
        return manifest


@pytest.mark.slow
def test_a_shard_changed_after_the_fetch_is_not_recorded_as_a_bad_dump(tmp_path, golden):
    """A shard cut short after the fetch recorded a good revision as a failed dump, with a reader's error that
    named no file (issue 38, item 5): the revision stays fetched, "not loaded" because a named file changed,
    the build failed with that reason, and no staging table of the load is left in the work file."""
    write_dump(tmp_path / "dump", n_rows=40, n_shards=2, seed=8)
    result = _run(tmp_path, CutAfterFetch(source=str(tmp_path / "dump")), raise_on_error=False)
    assert not result.success
    (revision, status, detail), = _query(tmp_path, "SELECT revision, status, status_detail FROM arena.dumps")
    assert status == "fetched"
    golden.check("load", "a shard changed after the fetch: the dump's status", re.sub(r"\(.*?\)", "(...)", detail))
    with connect_warehouse(str(work_file(tmp_path / "warehouse.duckdb")), read_only=True) as con:
        (build_status, build_detail), = con.execute("SELECT status, status_detail FROM arena_versions.builds").fetchall()
        stages = con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '\\_stage\\_%' "
                             "ESCAPE '\\'").fetchall()
    assert build_status == "failed"
    golden.check("load", "a shard changed after the fetch: the build's status", re.sub(r"\(.*?\)", "(...)", build_detail))
    assert stages == []


@pytest.mark.slow
def test_fake_hub_download_cache_hit_and_new_revision(tmp_path):
    shards = write_dump(tmp_path / "v1", n_rows=30, n_shards=3, seed=1)
    with fake_hub_server(tmp_path / "hub") as hub:
        sha1 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
        source = DumpSource(source=REPO, revision="main", cache_dir=str(tmp_path / "cache"),
                            hf_endpoint=hub.url, hf_token="hf_secret_token_value")
        first = _run(tmp_path, source)
        assert first.success
        meta = first.asset_materializations_for_node("raw_dump")[0].metadata
        assert meta["revision"].text == sha1 and meta["requested_revision"].text == "main"
        assert len(hub.file_gets()) == 3
        assert _query(tmp_path, "select count(*) from arena.battles") == [(30,)]

        again = _run(tmp_path, source)  # same revision: nothing downloaded
        assert again.success and len(hub.file_gets()) == 3

        v2 = write_dump(tmp_path / "v2", n_rows=50, n_shards=2, seed=2)
        sha2 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in v2})
        assert sha2 != sha1
        third = _run(tmp_path, source)
        assert third.success
        assert third.asset_materializations_for_node("raw_dump")[0].metadata["revision"].text == sha2
        assert len(hub.file_gets()) == 5
        assert _query(tmp_path, "select count(*) from arena.battles") == [(50,)]
        assert (tmp_path / "cache").exists()
        logs = "\n".join(str(e) for e in third.all_events)
        assert "hf_secret_token_value" not in logs


@pytest.mark.slow
def test_hub_dump_rejected_for_missing_columns_is_recorded_as_failed(tmp_path):
    """A Hub revision whose shard lacks a documented column fails raw_dump (no retry) and is
    recorded in arena.dumps under its commit, status failed, with the reason; the published dump
    stays published. A transfer fault or a lookup failure records nothing (nothing is known of
    the dump's content)."""
    from arena_pipeline_tests.support import bad_inputs as bi

    good = write_dump(tmp_path / "v1", n_rows=30, n_shards=1, seed=1)
    rows = make_rows(10, seed=21)
    bad = bi.write_shards(tmp_path / "v2", [bi.table_of(rows[:5]),
                                            bi.table_of(rows[5:]).drop_columns(["winner"])])
    with fake_hub_server(tmp_path / "hub") as hub:
        sha1 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in good})
        source = DumpSource(source=REPO, revision="main", cache_dir=str(tmp_path / "cache"),
                            hf_endpoint=hub.url, attempts=2, backoff_s=0.05, timeout_s=5)
        assert _run(tmp_path, source).success
        sha2 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in bad})

        result = _run(tmp_path, source, raise_on_error=False)
        assert not result.success and result.get_failed_step_keys() == {"raw_dump"}
        assert result.retry_attempts_for_node("raw_dump") == 0

        hub.set_faults(down=True)  # the Hub unreachable: a failure with nothing to record
        assert not _run(tmp_path, source, raise_on_error=False).success
    history = _query(tmp_path, "select revision, status, source, source_kind, requested_revision, "
                               "status_detail from arena.dumps order by first_seen")
    assert [h[:5] for h in history] == [
        (sha1, "published", REPO, "hub", "main"),
        (sha2, "failed", REPO, "hub", "main"),
    ]
    detail = history[1][5]
    assert detail.startswith(f"rejected: {bad[1].relative_to(tmp_path / 'v2')} of {REPO}@{sha2[:12]}"
                             " failed verification")
    assert "missing column winner" in detail
    assert _query(tmp_path, "select count(*) from arena.battles") == [(30,)]


@pytest.mark.slow
def test_hub_source_errors_say_what_to_do(tmp_path, monkeypatch):
    from arena_pipeline.core.ingest import hub as core_hub
    from arena_pipeline.core.ingest.sources import SourceError

    shards = write_dump(tmp_path / "v1", n_rows=6, n_shards=1, seed=3)
    monkeypatch.chdir(tmp_path)
    with fake_hub_server(tmp_path / "hub") as hub:
        sha = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
        hub.publish(REPO, "v1.0", {f"data/{p.name}": p for p in shards})

        def source(name, **kw):
            return DumpSource(source=name, cache_dir=str(tmp_path / "cache"), hf_endpoint=hub.url,
                              attempts=2, backoff_s=0.05, timeout_s=2, **kw)

        # a bare org/name the Hub does not have: the error also says no such local path exists
        with pytest.raises(core_hub.HubNotFound, match="no local path of that name exists") as err:
            source("org/missing").fetch()
        assert "repository org/missing not found" in str(err.value)
        with pytest.raises(core_hub.HubNotFound) as err:
            source("hf://datasets/org/missing").fetch()
        assert "no local path" not in str(err.value)
        # a relative path that does not exist is never sent to the Hub
        (tmp_path / "data").mkdir()
        before = len(hub.requests())
        with pytest.raises(SourceError, match="no such local path"):
            source("data/mydump").fetch()
        assert len(hub.requests()) == before

        # hf://datasets/org/name@revision pins the revision; ARENA_REVISION may not contradict it
        pinned = source(f"hf://datasets/{REPO}@v1.0").fetch()
        assert (pinned.revision, pinned.requested_revision, pinned.rows) == (sha, "v1.0", 6)
        with pytest.raises(SourceError, match="set only one"):
            source(f"hf://datasets/{REPO}@v1.0", revision="main").fetch()

        # Hub down: `attempts` requests, one message ending with what to do offline
        hub.set_faults(down=True)
        before = len(hub.requests())
        with pytest.raises(core_hub.HubUnavailable, match="2 attempt") as err:
            source(REPO, revision="main").latest_revision()
        assert len(hub.requests()) - before == 2
        assert str(err.value).endswith(core_hub.OFFLINE_HINT) and err.value.__cause__ is None


def test_csv_cell_limit_comes_from_the_resource_or_its_environment_variable(tmp_path, monkeypatch, golden):
    from arena_pipeline.core.ingest.load import load_dump
    from arena_pipeline.core.ingest.sources import DEFAULT_MAX_CELL_BYTES

    csv_path = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"
    monkeypatch.delenv("ARENA_CSV_MAX_CELL_BYTES", raising=False)
    assert DumpSource(source=str(csv_path)).fetch().csv_max_cell_bytes == DEFAULT_MAX_CELL_BYTES
    monkeypatch.setenv("ARENA_CSV_MAX_CELL_BYTES", "50000")
    manifest = DumpSource(source=str(csv_path)).fetch()  # resolved at run time, not at import
    assert manifest.csv_max_cell_bytes == 50_000
    assert DumpSource(source=str(csv_path), csv_max_cell_bytes=60_000).fetch().csv_max_cell_bytes == 60_000
    with duckdb.connect() as con:
        report = load_dump(manifest, con, "v")
    assert report.quarantine_by_rule.get("oversized_cell", 0) > 0
    assert report.battles + report.quarantined == report.rows_read == 100
    monkeypatch.setenv("ARENA_CSV_MAX_CELL_BYTES", "lots")
    with pytest.raises(ValueError) as raised:
        DumpSource(source=str(csv_path)).fetch()
    golden.check("load", "a cell limit that is no number", str(raised.value))


def _split_sample(tmp_path: Path, parts: dict[str, slice]) -> dict[str, Path]:
    """The real sample's rows cut into local CSV dumps (header kept), by path relative to ``tmp_path``.

    A row spans several lines (quoted newlines), so rows are cut with a CSV reader, not by line."""
    import polars as pl

    rows = pl.read_csv(REAL_CSV, infer_schema=False)
    out = {}
    for name, part in parts.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        rows[part].write_csv(path)
        out[name] = path
    return out


def test_two_local_dumps_with_one_name_fail_clearly(tmp_path):
    """x/votes.csv and y/votes.csv would both be the dump 'votes.csv': one used to replace the other
    without a word (40 votes lost); the look-up and the fetch both refuse, naming both paths."""
    paths = _split_sample(tmp_path, {"x/votes.csv": slice(0, 60), "y/votes.csv": slice(40, 100)})
    source = DumpSource(datasets=",".join(str(p) for p in paths.values()))
    message = rf"{paths['x/votes.csv']} and {paths['y/votes.csv']} would both be the dump 'votes\.csv'"
    with pytest.raises(SourceError, match=message):
        source.latest_revisions()
    with pytest.raises(SourceError, match=message):
        source.fetch()


def test_the_order_of_the_dumps_is_part_of_the_revision(tmp_path):
    """The order decides which copy of a shared vote is kept: a.csv,b.csv and b.csv,a.csv are two
    different tables, so two revisions (the sensor saw no change when the list was reordered)."""
    paths = _split_sample(tmp_path, {"a.csv": slice(0, 60), "b.csv": slice(40, 100)})
    forward = DumpSource(datasets=f"{paths['a.csv']},{paths['b.csv']}")
    backward = DumpSource(datasets=f"{paths['b.csv']},{paths['a.csv']}")
    assert forward.latest_revision() != backward.latest_revision()
    assert list(forward.latest_revisions()) == ["a.csv", "b.csv"]
    for source in (forward, backward):
        assert source.fetch().revision == source.latest_revision()  # the run's build and the sensor agree


def test_a_warehouse_that_is_another_database_is_refused_before_anything_is_written(tmp_path, golden):
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
        con.execute("CREATE SCHEMA sales")
        con.execute("CREATE VIEW sales.big AS SELECT * FROM orders WHERE total > 100")
    write_dump(tmp_path / "dump", n_rows=20)
    result = _run(tmp_path, DumpSource(source=str(tmp_path / "dump"), cache_dir=str(tmp_path / "cache")),
                          raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.message
    golden.check("load", "a warehouse that is another database", message)
    # nothing was written: the file holds what it held
    assert sorted(_query(tmp_path, "SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "
                                   "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal")) == [
        ("main", "orders"), ("sales", "big")]
    assert not _query(tmp_path, "SELECT * FROM duckdb_schemas() WHERE schema_name LIKE 'arena%'")


def test_an_upgrade_that_changes_name_normalization_changes_the_flat_tables_reuse_key(monkeypatch):
    """Polars' regex engine and Python's Unicode database decide how raw names normalize, yet neither was part
    of the reuse key (issue 38, item 8): after an upgrade a re-run reused names normalized the old way."""
    import unicodedata

    import polars as pl

    from arena_pipeline.assets.ingest import flat_settings
    from arena_pipeline.core.dataset.models import load_aliases
    from arena_pipeline.core.store.versions import Build, inputs_key

    aliases, build = load_aliases(), Build("run-1", "rev-1")

    def key() -> str:
        return inputs_key(None, "battles", build, flat_settings(aliases, None))  # battles has no inputs: no look-up

    before = key()
    assert key() == before  # the same libraries: the same key, the tables are reused
    assert flat_settings(aliases, None)["normalization"] == {"polars": pl.__version__,
                                                             "unicodedata": unicodedata.unidata_version}
    monkeypatch.setattr(pl, "__version__", "0.0.1")
    after_polars = key()
    monkeypatch.setattr(unicodedata, "unidata_version", "1.1.0")
    assert len({before, after_polars, key()}) == 3
