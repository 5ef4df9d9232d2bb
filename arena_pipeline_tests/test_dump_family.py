"""Every public dump in one warehouse: discovery on the fake Hub, the sensor, a combined publication."""

from __future__ import annotations

import json
import time

import dagster as dg
import duckdb
import pytest

from arena_pipeline.cli import main
from arena_pipeline.constants import REVISION_TAG
from arena_pipeline.core.dataset.manifest import combined_revision
from arena_pipeline.core.ingest import hub as hub_client
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse
from arena_pipeline.sensors import new_dump_sensor
from arena_pipeline_dev import dump_fixtures as fx
from arena_pipeline_dev.hub_server import fake_hub_server
from arena_pipeline_tests.support.materialize import materialize
from arena_pipeline_tests.support.ticks import tick

PATTERN = "lmarena-ai/arena-human-preference-*"
NEW_DUMP = "lmarena-ai/arena-human-preference-200k"  # a fifth dataset: a renamed copy of the 140k format


@pytest.fixture
def hub(tmp_path):
    with fake_hub_server(tmp_path / "hub") as server:
        server.publish("someone-else/arena-human-preference-mirror", "main",
                       fx.family_files()[fx.DUMP_140K])  # another org: never discovered
        yield server


@pytest.fixture
def shas(hub) -> dict[str, str]:
    """The four fixture dumps on the fake Hub: dataset id -> main's sha."""
    return {dataset: hub.publish(dataset, "main", files) for dataset, files in fx.family_files().items()}


def _source(hub, tmp_path) -> DumpSource:
    return DumpSource(datasets=fx.DUMP_33K, discover=PATTERN, cache_dir=str(tmp_path / "cache"),
                      hf_endpoint=hub.url, attempts=1, backoff_s=0.1, timeout_s=5)


def _tick(hub, tmp_path, instance, cursor):
    with dg.build_sensor_context(cursor=cursor, instance=instance,  # closed: see ticks.py
                                 resources={"dump_source": _source(hub, tmp_path),
                                            "warehouse": Warehouse(database=str(tmp_path / "none.duckdb"))}) as context:
        started = time.perf_counter()
        result = new_dump_sensor.evaluate_tick(context)
    return result, time.perf_counter() - started


@pytest.mark.slow
def test_discovery_lists_the_matching_datasets_with_their_shas(hub, shas):
    found = hub_client.discover_datasets(PATTERN, endpoint=hub.url)
    assert found == {d: shas[d] for d in (fx.DUMP_100K, fx.DUMP_140K, fx.DUMP_55K)}
    assert hub_client.discover_datasets("lmarena-ai/arena-human-preference-1*", endpoint=hub.url) == {
        fx.DUMP_100K: shas[fx.DUMP_100K], fx.DUMP_140K: shas[fx.DUMP_140K]}
    listing = [p for m, p in hub.requests() if p.startswith("/api/datasets?")]
    assert listing and all("author=lmarena-ai" in p and "expand=sha" in p for p in listing)
    with pytest.raises(ValueError, match="<org>/<name pattern>"):
        hub_client.discover_datasets("arena-*", endpoint=hub.url)


@pytest.mark.slow
def test_sensor_picks_up_a_new_dataset_and_does_nothing_costly_otherwise(hub, shas, tmp_path):
    with dg.instance_for_test() as instance:
        first, _ = _tick(hub, tmp_path, instance, None)
        expected = {fx.DUMP_33K: shas[fx.DUMP_33K], **{d: shas[d] for d in
                                                             (fx.DUMP_100K, fx.DUMP_140K, fx.DUMP_55K)}}
        [request] = first.run_requests
        assert request.run_key == combined_revision(expected) == request.tags[REVISION_TAG]
        assert request.run_config == {"ops": {"raw_dump": {"config": {"revisions": expected}}}}
        # load order: ARENA_DATASETS first, then the discovered ones by name
        assert list(request.run_config["ops"]["raw_dump"]["config"]["revisions"]) == [
            fx.DUMP_33K, fx.DUMP_100K, fx.DUMP_140K, fx.DUMP_55K]

        before = len(hub.requests())
        again, seconds = _tick(hub, tmp_path, instance, first.cursor)
        assert not again.run_requests and "unchanged" in again.skip_message
        calls = hub.requests()[before:]
        # one listing and one revision look-up; no file is touched
        assert len(calls) == 2 and not hub.file_gets(), calls

        hub.publish(NEW_DUMP, "main", {"data/train-00000-of-00001.parquet": fx.family_files()[fx.DUMP_140K][
            "data/train-00000-of-00001.parquet"]})
        new, new_seconds = _tick(hub, tmp_path, instance, again.cursor or first.cursor)
        [request] = new.run_requests
        pinned = request.run_config["ops"]["raw_dump"]["config"]["revisions"]
        assert NEW_DUMP in pinned and len(pinned) == 5
        assert {d: s for d, s in pinned.items() if d != NEW_DUMP} == expected
        print(f"\ndiscovery tick: unchanged {seconds * 1000:.0f} ms, new dataset {new_seconds * 1000:.0f} ms")
        assert seconds < 5 and new_seconds < 5


def _table_counts(warehouse) -> dict[str, dict[str, int]]:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return {table: dict(con.execute(f"SELECT dump, count(*) FROM arena.{table} GROUP BY dump").fetchall())
                for table in ("battles", "messages", "context_messages", "quarantine", "dump_leaderboard")}


@pytest.mark.slow
def test_combined_refresh_publishes_combined_and_per_dump_boards(hub, shas, tmp_path, capsys):
    warehouse = tmp_path / "warehouse.duckdb"
    with dg.instance_for_test() as instance:
        first, _ = _tick(hub, tmp_path, instance, None)
        revisions = first.run_requests[0].run_config["ops"]["raw_dump"]["config"]["revisions"]
        result = materialize(
            {"dump_source": _source(hub, tmp_path), "warehouse": Warehouse(database=str(warehouse)),
             "report_settings": ReportSettings(report_path=str(tmp_path / "report" / "index.html"))},
            run_config={"ops": {"raw_dump": {"config": {"revisions": revisions}},
                                "rankings": {"config": {"min_battles": 1, "bootstrap_rounds": 5}}}},
            instance=instance,
        )
    assert result.success
    counts = _table_counts(warehouse)
    print("\nrows per dump:", counts)
    # the 33k dump loads first: the 100k's repeated votes are counted, not loaded twice; the 55k's
    # votes repeated from the 100k are dropped (the copy kept is the 100k's, or the 33k's where the
    # 100k repeats the 33k)
    by_content = fx.SHARED_CONTENT_ROWS
    anon = fx.NOT_ANONYMOUS  # votes cast with the model names shown: quarantined (not_anonymous)
    assert counts["battles"] == {fx.DUMP_33K: 36 - anon[fx.DUMP_33K],
                                 fx.DUMP_100K: 40 - fx.SHARED_ID_ROWS - anon[fx.DUMP_100K],
                                 fx.DUMP_140K: 40, fx.DUMP_55K: 30 - by_content}
    assert counts["quarantine"] == {fx.DUMP_33K: anon[fx.DUMP_33K], fx.DUMP_100K: fx.SHARED_ID_ROWS + anon[fx.DUMP_100K],
                                    **({fx.DUMP_55K: by_content} if by_content else {})}
    assert set(counts["messages"]) == set(counts["battles"])
    assert set(counts["dump_leaderboard"]) == set(counts["battles"])
    with connect_warehouse(str(warehouse), read_only=True) as con:
        rules = dict(con.execute("SELECT rule, count(*) FROM arena.quarantine GROUP BY rule").fetchall())
        assert rules == {"duplicate_across_dumps": fx.SHARED_ID_ROWS + by_content,
                         "not_anonymous": sum(anon.values())}
        revision, = con.execute("SELECT revision FROM arena.publications").fetchone()
        assert revision == combined_revision(revisions)
        # each dump's own revision is recorded with the build's files
        files = con.execute("SELECT files FROM arena.dumps WHERE revision = ?", [revision]).fetchone()[0]

        recorded = {f["dump"]: f["dump_revision"] for f in json.loads(files)}
        assert recorded == revisions
        assert "dump" not in [r[0] for r in con.execute("DESCRIBE arena.leaderboard").fetchall()]
        # the combined board counts each vote once; each dump's board its own votes
        total = con.execute("SELECT sum(n) FROM (SELECT count(*) n FROM arena.battle_categories "
                            "WHERE category = 'overall')").fetchone()[0]
        assert total == sum(counts["battles"].values())
        methods = dict(con.execute("SELECT dump, list(DISTINCT method ORDER BY method) FROM arena.dump_leaderboard "
                                   "WHERE category = 'overall' GROUP BY dump").fetchall())
        assert methods[fx.DUMP_140K] == ["bt", "bt_style", "spectral"]
        assert methods[fx.DUMP_33K] == ["bt", "spectral"]  # no style counts in the 33k: no bt_style board
        # one model across dumps: the 33k's gpt-4 and the 2024 dumps' gpt-4-0314
        gpt4 = dict(con.execute("SELECT dump, sum(n_battles) FROM arena.dump_leaderboard WHERE model = 'gpt-4-0314' "
                                "AND category = 'overall' AND method = 'bt' GROUP BY dump").fetchall())
        assert set(gpt4) >= {fx.DUMP_33K, fx.DUMP_100K}
        coding = {r[0] for r in con.execute("SELECT DISTINCT dump FROM arena.dump_leaderboard "
                                            "WHERE category = 'coding'").fetchall()}
        assert coding <= {fx.DUMP_100K, fx.DUMP_140K}  # the 33k and 55k have no is_code
        own = dict(con.execute("SELECT model, rating FROM arena.dump_leaderboard WHERE dump = ? "
                               "AND category = 'overall' AND method = 'bt'", [fx.DUMP_33K]).fetchall())
    capsys.readouterr()
    # the CLI shows one dump's own board: its models (shown and provisional) with its ratings
    assert main(["leaderboard", "--warehouse", str(warehouse), "--dump", fx.DUMP_33K, "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(f"; dump {fx.DUMP_33K}")
    # a provisional model's rank is printed "prov. N" (one model per row either way)
    rows = [line.replace("prov. ", "", 1).split() for line in out.splitlines()]
    printed = {r[3]: float(r[4]) for r in rows if len(r) > 4 and r[0].isdigit()}  # rank, spread, all at once
    assert len(own) >= 3 and printed == pytest.approx(own, abs=0.05)


def test_local_datasets_combine_in_the_configured_order(tmp_path, monkeypatch):
    folders = fx.write_family(tmp_path / "dumps")
    paths = [str(folders[fx.DUMP_140K]), str(folders[fx.DUMP_55K] / "train.csv")]
    monkeypatch.setenv("ARENA_DATASETS", " , ".join(paths))
    source = DumpSource(cache_dir=str(tmp_path / "cache"))  # the field unset: the variable is read at use
    assert source.is_multi() and source.configured_datasets() == paths
    revisions = source.latest_revisions()
    assert list(revisions) == ["arena-human-preference-140k", "train.csv"]
    assert all(r.startswith("local-") for r in revisions.values())
    manifest = source.fetch()
    assert manifest.revision == source.latest_revision() == combined_revision(revisions)
    assert [f.dump for f in manifest.files] == list(revisions)
    assert [f.name for f in manifest.files] == ["arena-human-preference-140k/data/train-00000-of-00001.parquet",
                                                "train.csv/train.csv"]
    monkeypatch.delenv("ARENA_DATASETS")
    assert not DumpSource().is_multi()  # the single ARENA_SOURCE keeps working


@pytest.mark.slow
def test_schedule_pins_every_dump_and_an_unreachable_hub_skips(hub, shas, tmp_path, golden):
    from arena_pipeline.schedules import nightly_refresh

    with dg.instance_for_test() as instance:
        [request] = tick(nightly_refresh, instance, {"dump_source": _source(hub, tmp_path),
                                                     "warehouse": Warehouse(database=str(tmp_path / "none.duckdb"))}
                         ).run_requests
        assert request.run_config["ops"]["raw_dump"]["config"]["revisions"] == {
            d: shas[d] for d in (fx.DUMP_33K, fx.DUMP_100K, fx.DUMP_140K, fx.DUMP_55K)}
        hub.set_faults(down=True)
        result, _ = _tick(hub, tmp_path, instance, None)
        assert not result.run_requests
        golden.check("triggers", "skip: the Hub is down, a family of dumps",
                     result.skip_message.partition(": HubUnavailable")[0])
        assert ": HubUnavailable" in result.skip_message  # then the client's own words


@pytest.mark.slow
def test_a_dump_with_conflicting_copies_gets_its_own_board(tmp_path, capsys):
    """Dump b repeats 8 votes of dump a, 4 with other content; dump c is 6 of a's votes. b's conflicting
    copies used to be duplicate_across_dumps and c got no board ('no boards'); issue 25 item 2."""
    import polars as pl

    from arena_pipeline.core.dataset.categories import tag_categories
    from arena_pipeline.core.ingest.load import load_dump
    from arena_pipeline.core.ingest.local_dump import local_manifest
    from arena_pipeline.core.ingest.sources import parse_source
    from arena_pipeline.core.ranking import RankingConfig, compute_rankings
    from arena_pipeline.core.ranking.tags import tag_rows
    from arena_pipeline_tests.support import bad_inputs as bi

    names = ("org/a", "org/b", "org/c")
    bi.conflicting_dumps(tmp_path / "dumps", names)
    warehouse = tmp_path / "warehouse.duckdb"
    source = DumpSource(datasets=",".join(str(tmp_path / "dumps" / n) for n in names), cache_dir=str(tmp_path / "c"))
    result = materialize(
        {"dump_source": source, "warehouse": Warehouse(database=str(warehouse)),
         "report_settings": ReportSettings(report_path=str(tmp_path / "report" / "index.html"))},
        run_config={"ops": {"rankings": {"config": {"min_battles": 1, "bootstrap_rounds": 5}}}},
    )
    assert result.success
    meta = {m.asset_key.to_user_string(): m.metadata for m in result.asset_materializations_for_node("flat_tables")}
    assert meta["arena/quarantine"]["by_rule"].value["conflicting_duplicate"] == 4
    assert meta["arena/battles"]["per_dump"].value["b"]["conflicting_duplicates"] == 4
    # the report's dump section counts them with the other quarantine rules (by rule list, as they are stored)
    assert ("duplicate_across_dumps 10, conflicting_duplicate 3, unknown_winner,conflicting_duplicate 1"
            in (tmp_path / "report" / "index.html").read_text(encoding="utf-8"))
    with connect_warehouse(str(warehouse), read_only=True) as con:
        boards = con.execute("SELECT dump, model, rating, n_battles FROM arena.dump_leaderboard WHERE method = 'bt' "
                             "AND category = 'overall' ORDER BY model").pl()
    assert set(boards["dump"]) == {"a", "b", "c"}
    # b's board is the board of b loaded alone: its 4 shared votes, 3 conflicting copies and 2 of its own
    with duckdb.connect() as alone:
        load_dump(local_manifest(parse_source(str(tmp_path / "dumps" / "org/b"))), alone, "v")
        own = alone.execute("SELECT * FROM v.battles").pl().with_columns(
            model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))
    assert own.height == 9
    own_tags = tag_rows(own.get_column("id"), [tag_categories(own)[0]])
    expected = compute_rankings(own, own_tags, RankingConfig(min_battles=1, bootstrap_rounds=5)
                                ).leaderboard.filter((pl.col("method") == "bt") & (pl.col("category") == "overall"))
    got = boards.filter(pl.col("dump") == "b")
    assert got["model"].to_list() == expected.sort("model")["model"].to_list()
    assert got["n_battles"].to_list() == expected.sort("model")["n_battles"].to_list()
    assert got["rating"].to_list() == pytest.approx(expected.sort("model")["rating"].to_list(), abs=1e-6)
    capsys.readouterr()
    assert main(["leaderboard", "--warehouse", str(warehouse), "--dump", "c", "--top", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("; dump c")
