"""Whole runs publishing to a DuckLake on a real PostgreSQL (ARENA_DUCKLAKE): the sample and a 3,000-vote
dump reach the lake, a fresh process reads the same boards as the snapshot file, the read commands read
the lake, and readers polling or holding a connection through a refresh see one whole publication at a time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from arena_pipeline.cli import EXIT_OK, main
from arena_pipeline.definitions import defs
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import materialize, rank_config, run_sample, sample_resources
from arena_pipeline_tests.test_refresh_faults import WORKER, _env, _process, _wait_for

pytestmark = pytest.mark.slow  # a PostgreSQL server, whole runs, reader processes

LEADERBOARD = "SELECT * FROM arena.leaderboard ORDER BY category, method, rank, model"
FRESH_READER = """
import json, sys
from arena_pipeline.core.store.lake import connect_lake
con = connect_lake(sys.argv[1], read_only=True)
print(json.dumps(con.execute(sys.argv[2]).fetchall(), default=str))
"""


def _fresh_lake_read(attach: str, sql: str) -> list:
    """Rows of ``sql`` as a new process that attaches the lake read-only sees them."""
    out = subprocess.run([sys.executable, "-c", FRESH_READER, attach, sql], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _snapshot_read(path: Path, sql: str) -> list:
    """Rows of ``sql`` on the snapshot file at ``path``, opened as readers open it."""
    with Warehouse(database=str(path)).reader() as con:
        return json.loads(json.dumps(con.execute(sql).fetchall(), default=str))


def _lake_warehouse(database: Path, lake) -> Warehouse:
    return Warehouse(database=str(database), ducklake=lake.attach, ducklake_data_path=str(lake.data_path))


def _cli(capsys, monkeypatch, argv: list[str], lake=None) -> str:
    """What ``arena-pipeline argv`` prints, reading the lake when ``lake`` is given (ARENA_DUCKLAKE)."""
    with monkeypatch.context() as patch:
        if lake is not None:
            patch.setenv("ARENA_DUCKLAKE", lake.attach)
        capsys.readouterr()
        assert main(argv) == EXIT_OK
        return capsys.readouterr().out


def test_the_sample_publishes_to_the_lake_and_the_read_commands_read_it(tmp_path, new_lake, capsys, monkeypatch):
    database = tmp_path / "warehouse.duckdb"
    result = run_sample(tmp_path, warehouse=_lake_warehouse(database, new_lake))
    assert result.success
    # a fresh process attaching the lake read-only reads the snapshot's leaderboard, row for row
    rows = _fresh_lake_read(new_lake.attach, LEADERBOARD)
    assert rows and rows == _snapshot_read(database, LEADERBOARD)
    # a re-rank: publication 2 (only the small tables written); `changes --since 1` against the lake
    rerank = materialize(sample_resources(tmp_path, warehouse=_lake_warehouse(database, new_lake)),
                         run_config=rank_config(min_battles=3, bootstrap_rounds=7))
    assert rerank.success
    assert _fresh_lake_read(new_lake.attach, "SELECT max(publication_id) FROM arena.publications") == [[2]]
    warehouse = ["--warehouse", str(database)]
    for argv in (["leaderboard", "--top", "5"], ["changes", "--since", "1"]):
        from_lake = _cli(capsys, monkeypatch, argv + ["--warehouse", str(tmp_path / "absent.duckdb")], new_lake)
        assert from_lake == _cli(capsys, monkeypatch, argv + warehouse), argv
    assert "Changes of publication 2" in from_lake
    out = tmp_path / "export"
    _cli(capsys, monkeypatch, ["export", str(out), "--warehouse", str(tmp_path / "absent.duckdb")], new_lake)
    assert (out / "leaderboard.parquet").is_file() and (out / "manifest.json").is_file()
    report = tmp_path / "lake.html"
    assert "wrote" in _cli(capsys, monkeypatch, ["report", str(report), "--warehouse", str(tmp_path / "x.duckdb")],
                           new_lake)
    assert report.stat().st_size > 0


def _refresh(dump: Path, database: Path, lake) -> dg.ExecuteInProcessResult:
    with dg.DagsterInstance.ephemeral() as instance:
        return defs.resolve_job_def("refresh_job").execute_in_process(
            instance=instance, raise_on_error=False,
            resources={"dump_source": DumpSource(source=str(dump)), "warehouse": _lake_warehouse(database, lake)})


def _reader(tmp_path: Path, name: str, lake, hold: bool):
    out, stop, ready = (tmp_path / f"{name}.{suffix}" for suffix in ("json", "stop", "ready"))
    args = WORKER + ["read", "--warehouse", str(tmp_path / "unused.duckdb"), "--lake", lake.attach, "--out",
                     str(out), "--stop-file", str(stop), "--ready-file", str(ready), "--pause", "0.1"]
    return args + (["--hold"] if hold else []), out, stop, ready


def test_readers_of_the_lake_see_one_whole_publication_at_a_time_through_a_refresh(tmp_path, new_lake):
    database = tmp_path / "warehouse.duckdb"
    first, second = tmp_path / "v1", tmp_path / "v2"
    write_dump(first, n_rows=3000, n_shards=3, seed=1)
    write_dump(second, n_rows=3000, n_shards=3, seed=2)
    assert _refresh(first, database, new_lake).success
    assert _fresh_lake_read(new_lake.attach, LEADERBOARD) == _snapshot_read(database, LEADERBOARD)

    polling, held = _reader(tmp_path, "polling", new_lake, False), _reader(tmp_path, "held", new_lake, True)
    env = _env(tmp_path)
    with _process(polling[0], env, tmp_path / "polling.log", tmp_path) as poller, \
            _process(held[0], env, tmp_path / "held.log", tmp_path) as holder:
        for proc, (_, _, _, ready), name in ((poller, polling, "polling"), (holder, held, "held")):
            _wait_for(lambda p=proc, r=ready: r.exists() or p.poll() is not None, 120, f"the {name} reader")
            assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
        started = time.time()
        result = _refresh(second, database, new_lake)
        ended = time.time()
        time.sleep(1.0)  # keep reading the new publication a little
        for _, _, stop, _ in (polling, held):
            stop.touch()
        poller.wait(timeout=60)
        holder.wait(timeout=60)
    assert result.success
    assert _fresh_lake_read(new_lake.attach, LEADERBOARD) == _snapshot_read(database, LEADERBOARD)
    for name, (_, out, _, _) in (("polling", polling), ("held", held)):
        summary = json.loads(out.read_text())
        assert summary["errors"] == {} and summary["blocked"] == 0, (name, summary["errors"])
        seen = summary["observations"]
        assert all(o["consistent"] for o in seen), (name, [o for o in seen if not o["consistent"]])  # 0 mixed
        publications = [seen[i]["publication"] for _, i in summary["timeline"]]
        assert publications == sorted(publications) and set(publications) == {1, 2}, (name, publications)
        during = sum(started <= t <= ended for t, _ in summary["timeline"])
        assert during > 0, name
        print(f"\n{name} reader of the lake: {summary['reads']} reads ({during} during the {ended - started:.1f} s "
              f"refresh), {len(summary['errors'])} failed, 0 mixed; publications seen {sorted(set(publications))}")


def test_a_lake_that_cannot_be_attached_is_one_line_without_the_password(postgres_server, capsys, monkeypatch):
    attach = f"ducklake:postgres:dbname=absent host=127.0.0.1 port={postgres_server.port} user=arena password=s3cret"
    monkeypatch.setenv("ARENA_DUCKLAKE", attach)
    assert main(["leaderboard"]) == 1
    err = capsys.readouterr().err
    assert "cannot attach the DuckLake" in err and "password=***" in err and "s3cret" not in err
    assert len(err.strip().splitlines()) == 1, err
