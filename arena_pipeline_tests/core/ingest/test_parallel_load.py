"""The load on every core (issue 42 item 2): worker processes flatten the shards and write the same rows as a
one-process load (duplicates within and across shards and dumps, quarantine, content copies), and a shard that
fails in a worker fails the load with the one-process load's error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.dataset.manifest import combine
from arena_pipeline.core.dataset.quarantine import CROSS_DUMP_RULE, DUPLICATE_RULE
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import SourceError, parse_source
from arena_pipeline_dev.fixtures import DATASET_ARROW_SCHEMA, make_rows


def _shards(root: Path, shards: list[list[dict]]) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    for i, rows in enumerate(shards):
        pq.write_table(pa.Table.from_pylist(rows, schema=DATASET_ARROW_SCHEMA),
                       data / f"train-{i:05d}-of-{len(shards):05d}.parquet", row_group_size=7)
    return data


def _family(tmp_path: Path, damage: Callable[[Path], None] = lambda folder: None):
    """Two dumps of two shards each: ids repeated within a shard, across shards (the first copy broken, so
    a later one is kept) and across dumps, votes the second dump repeats by content under new ids."""
    rows = make_rows(48, seed=3)
    broken = {**rows[8], "winner": "nonsense"}
    first = _shards(tmp_path / "a", [[*rows[:16], rows[3], broken], [*rows[16:32], rows[8], rows[5]]])
    copies = [{**row, "id": f"copy-{row['id']}"} for row in rows[20:24]]
    second = _shards(tmp_path / "b", [[*rows[32:48], rows[10]], [*copies, rows[40]]])
    damage(second)
    return combine([("dump-a", local_manifest(parse_source(str(first)))),
                    ("dump-b", local_manifest(parse_source(str(second))))])


def _corrupt(folder: Path) -> None:
    """Destroy the conversations of the second row group of the folder's first shard (its ids, schema and row
    count still read: the worker that flattens it fails, not the reading of the ids before)."""
    path = sorted(folder.glob("*.parquet"))[0]
    group = pq.ParquetFile(path).metadata.row_group(1)
    chunk = next(group.column(i) for i in range(group.num_columns)
                 if group.column(i).path_in_schema.startswith("conversation_a"))
    data = bytearray(path.read_bytes())
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data[start:start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    path.write_bytes(bytes(data))


def _load(manifest, folder: Path, workers: int) -> tuple[ingest.LoadReport, dict[str, pl.DataFrame]]:
    folders = {name: folder / name for name in ingest.load_tables()}
    report = ingest.fill_dump(manifest, folders, workers=workers)
    return report, {name: pl.read_parquet(path / ingest.PART_GLOB) for name, path in folders.items()}


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(pl.all().exclude(pl.List(pl.String)).cast(pl.String), nulls_last=True)


@pytest.mark.parametrize("batch_rows", [8, 4_096])
def test_workers_write_the_rows_one_process_writes(tmp_path, monkeypatch, batch_rows):
    monkeypatch.setattr(ingest, "BATCH_ROWS", batch_rows)
    manifest = _family(tmp_path)
    assert ingest.parallel_shards(manifest, 2) and not ingest.parallel_shards(manifest, 1)
    alone, one = _load(manifest, tmp_path / "one", 1)
    report, many = _load(manifest, tmp_path / "many", 2)
    assert report.rows == alone.rows and report.rows_read == alone.rows_read == 58
    assert (report.quarantine_by_rule, report.per_dump) == (alone.quarantine_by_rule, alone.per_dump)
    assert sorted(report.per_file, key=str) == sorted(alone.per_file, key=str)
    rules = set(one["quarantine"].get_column("rule"))
    assert {DUPLICATE_RULE.name, "unknown_winner", CROSS_DUMP_RULE} <= {r for rule in rules for r in rule.split(",")}
    for name, frame in one.items():
        assert _sorted(many[name]).equals(_sorted(frame)), name
    # each worker numbers its own part files: none overwrote another's
    assert len(list((tmp_path / "many" / "messages").glob(ingest.PART_GLOB))) >= 4


def test_a_corrupt_shard_fails_the_load_in_a_worker_as_in_one_process(tmp_path):
    manifest = _family(tmp_path, _corrupt)
    errors = []
    for workers in (1, 2):
        with pytest.raises(SourceError) as caught:
            _load(manifest, tmp_path / f"w{workers}", workers)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "\n" not in errors[0] and manifest.files[2].path in errors[0]
