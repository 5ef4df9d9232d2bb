"""The benchmarks' polling reader (arena_pipeline_dev/readers.py): good, mixed and failed reads are told apart."""

from __future__ import annotations

import json
import threading

import duckdb

from arena_pipeline_dev.readers import TABLES, poll


def _publication(path, recorded: dict[str, int]) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS arena")
        con.execute("CREATE OR REPLACE TABLE arena.publications AS SELECT 1 AS publication_id, ? AS rows",
                    [json.dumps(recorded)])
        for table in TABLES:
            con.execute(f"CREATE OR REPLACE TABLE arena.{table} AS SELECT 'm' || i AS model, i * 1.0 AS rating "
                        "FROM range(3) r(i)")


def _poll(tmp_path, connect, **kwargs) -> dict:
    stop = tmp_path / "stop"
    stop.unlink(missing_ok=True)
    timer = threading.Timer(0.4, stop.touch)
    timer.start()
    try:
        figures = poll(connect, stop, tmp_path / "out.json", interval_s=0.05, **kwargs)
    finally:
        timer.cancel()
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == figures
    assert figures["attempted"] >= 2
    return figures


def test_good_mixed_and_failed_reads_are_counted(tmp_path, capsys):
    path = tmp_path / "w.duckdb"
    _publication(path, dict.fromkeys(TABLES, 3))
    for hold in (False, True):
        good = _poll(tmp_path, lambda: duckdb.connect(str(path), read_only=True), hold=hold)
        assert (good["failed"], good["mixed"], good["publications_seen"]) == (0, 0, [1])
        assert good["longest_gap_s"] > 0
    assert capsys.readouterr().out.split() == ["ready", "ready"]
    _publication(path, {**dict.fromkeys(TABLES, 3), "battles": 4})  # a table's rows are not the recorded ones
    mixed = _poll(tmp_path, lambda: duckdb.connect(str(path), read_only=True))
    assert mixed["mixed"] == mixed["attempted"] and mixed["failed"] == 0
    missing = _poll(tmp_path, lambda: duckdb.connect(str(tmp_path / "none.duckdb"), read_only=True))
    assert missing["failed"] == missing["attempted"] and missing["mixed"] == 0 and missing["publications_seen"] == []
    assert list(missing["errors"]) and all(key.startswith("IOException: ") for key in missing["errors"])
