"""Loading a fetched dump into the warehouse: shard by shard into staging, then one atomic publish."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.constants import BATTLES_TABLE, CONTEXT_MESSAGES_TABLE, MESSAGES_TABLE, QUARANTINE_TABLE
from arena_pipeline.core import warehouse
from arena_pipeline.core.flatten import flatten_table
from arena_pipeline.core.schema import (
    BATTLES_SCHEMA,
    CONTEXT_MESSAGES_SCHEMA,
    DATASET_ARROW_SCHEMA,
    MESSAGES_SCHEMA,
    QUARANTINE_SCHEMA,
)
from arena_pipeline.core.sources import (
    SourceSpec,
    file_sha256,
    local_shards,
    read_csv_export,
    verify_shard,
)

BATCH_ROWS = 8_192


@dataclass(frozen=True)
class ShardFile:
    """One file of a dump as fetched: local path, name inside the dump, size and row count."""

    path: str
    name: str
    size: int
    rows: int
    sha256: str | None = None


@dataclass(frozen=True)
class DumpManifest:
    """What the raw-dump asset hands on: the source, its resolved revision and its files."""

    source_kind: str
    source: str
    requested_revision: str
    revision: str
    files: tuple[ShardFile, ...] = field(default_factory=tuple)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def local_fingerprint(paths: list[Path]) -> str:
    """A revision id for local files: sha256 over (name, size, mtime) of each, 'local-' + 16 hex."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "local-" + digest.hexdigest()[:16]


def local_files(spec: SourceSpec) -> list[Path]:
    """The files of a local source, in load order."""
    if spec.kind == "parquet_dir":
        return local_shards(Path(spec.location))
    return [Path(spec.location)]


def local_manifest(spec: SourceSpec) -> DumpManifest:
    """Describe a local dump in place (parquet shards are verified against the dataset card)."""
    paths = local_files(spec)
    files = []
    root = Path(spec.location) if spec.kind == "parquet_dir" else Path(spec.location).parent
    for path in paths:
        rows = verify_shard(path) if path.suffix.lower() == ".parquet" else -1
        files.append(ShardFile(str(path), str(path.relative_to(root)), path.stat().st_size, rows,
                               file_sha256(path)))
    return DumpManifest(spec.kind, spec.location, "local", local_fingerprint(paths), tuple(files))


@dataclass
class LoadReport:
    """Row counts and timings of one load."""

    revision: str
    rows_read: int = 0
    battles: int = 0
    messages: int = 0
    context_messages: int = 0
    quarantined: int = 0
    per_file: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def _iter_parquet(path: Path):
    """Yield (Arrow table, row offset) batches of a verified parquet shard, documented columns only."""
    offset = 0
    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=DATASET_ARROW_SCHEMA.names):
        table = pa.Table.from_batches([batch])
        yield table, offset
        offset += table.num_rows


def load_dump(manifest: DumpManifest, con: duckdb.DuckDBPyConnection, schema: str,
              suffix: str = "") -> LoadReport:
    """Flatten every file of ``manifest`` into staging tables, then swap them in together.

    The tables are ``schema.<name><suffix>`` for battles, messages, context_messages and quarantine
    (the pipeline passes the versions schema and a revision suffix).

    Messages are streamed into DuckDB batch by batch, so memory stays bounded by one batch of the
    dump plus the (small) battles table.
    """
    started = time.perf_counter()
    report = LoadReport(revision=manifest.revision)
    tables = {
        BATTLES_TABLE: BATTLES_SCHEMA,
        MESSAGES_TABLE: MESSAGES_SCHEMA,
        CONTEXT_MESSAGES_TABLE: CONTEXT_MESSAGES_SCHEMA,
        QUARANTINE_TABLE: QUARANTINE_SCHEMA,
    }
    tables = {name + suffix: columns for name, columns in tables.items()}
    for table, columns in tables.items():
        warehouse.create_stage(con, schema, table, columns)
    battles: list[pl.DataFrame] = []
    quarantine: list[pl.DataFrame] = []
    for shard in manifest.files:
        path = Path(shard.path)
        file_rows = 0
        if path.suffix.lower() == ".csv":
            parsed = read_csv_export(path)
            quarantine.append(parsed.quarantine)
            file_rows = parsed.rows_read
            # rows that parsed keep their CSV position: rebuild it from the quarantined positions
            kept = sorted(set(range(parsed.rows_read)) - set(parsed.quarantine["source_row"].to_list()))
            flat = flatten_table(parsed.table, shard.name)
            flat.battles = flat.battles.with_columns(source_row=pl.Series(kept, dtype=pl.Int64))
            batches = [flat]
        else:
            verify_shard(path)
            batches = (flatten_table(t, shard.name, offset) for t, offset in _iter_parquet(path))
        for flat in batches:
            if path.suffix.lower() != ".csv":
                file_rows += flat.battles.height
            battles.append(flat.battles)
            report.messages += warehouse.append(con, schema, MESSAGES_TABLE + suffix, flat.messages)
            report.context_messages += warehouse.append(con, schema, CONTEXT_MESSAGES_TABLE + suffix,
                                                        flat.context_messages)
        report.rows_read += file_rows
        report.per_file.append({"file": shard.name, "rows": file_rows})
    all_battles = pl.concat(battles) if battles else pl.DataFrame(schema=BATTLES_SCHEMA)
    all_quarantine = pl.concat(quarantine) if quarantine else pl.DataFrame(schema=QUARANTINE_SCHEMA)
    report.battles = warehouse.append(con, schema, BATTLES_TABLE + suffix, all_battles)
    report.quarantined = warehouse.append(con, schema, QUARANTINE_TABLE + suffix, all_quarantine)
    warehouse.publish(con, schema, tables)
    report.seconds = time.perf_counter() - started
    return report
