"""The load's two parquet readers (Polars' streaming engine, pyarrow's batch reader) load the same tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import parse_source
from arena_pipeline_dev.fixtures import make_table
from arena_pipeline_tests.core.ingest.test_load_parts import TABLES as STAGED


def _dump(root: Path) -> Path:
    """Two shards of small row groups, with rows the load drops: repeated ids and an unknown winner."""
    table = make_table(300, seed=5)
    winners = table.column("winner").to_pylist()
    winners[7] = "model_c"  # unknown_winner: quarantined, its messages left out
    table = table.set_column(table.schema.get_field_index("winner"), "winner",
                             pa.array(winners, type=table.schema.field("winner").type))
    repeated = pa.concat_tables([table, table.slice(10, 5), table.slice(200, 3)])  # later copies quarantined
    data = root / "data"
    data.mkdir(parents=True)
    half = repeated.num_rows // 2
    for i, part in enumerate((repeated.slice(0, half), repeated.slice(half))):
        pq.write_table(part, data / f"train-{i:05d}-of-00002.parquet", row_group_size=64)
    return data


def _load(data: Path, database: Path) -> dict[str, pl.DataFrame]:
    manifest = local_manifest(parse_source(str(data)))
    with duckdb.connect(str(database)) as con:
        report = ingest.load_dump(manifest, con, "s")
        assert report.quarantined >= 9 and report.pairs > 0
        # rowid: the order rows were appended in (each table keeps the dump's order)
        return {name: con.execute(f'SELECT rowid AS _row, * FROM s."{name}" ORDER BY rowid').pl() for name in STAGED}


def test_polars_and_pyarrow_readers_load_identical_tables(tmp_path, monkeypatch):
    data = _dump(tmp_path)
    scans = []
    real_scan = pl.scan_parquet

    def counted_scan(*args, **kwargs):
        scans.append(args[0])
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(pl, "scan_parquet", counted_scan)
    by_polars = _load(data, tmp_path / "polars.duckdb")
    assert len(scans) == 2  # one streaming scan per shard
    monkeypatch.setattr(ingest, "POLARS_ROW_GROUP_BYTES", -1)  # every row group is "too large"
    by_pyarrow = _load(data, tmp_path / "pyarrow.duckdb")
    assert len(scans) == 2  # pyarrow read them
    for name in STAGED:
        assert by_polars[name].height == by_pyarrow[name].height, name
        assert by_polars[name].equals(by_pyarrow[name]), name
