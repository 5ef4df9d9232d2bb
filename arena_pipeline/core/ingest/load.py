"""Loading a fetched dump: flattened batch by batch, each vote table written once as Parquet part files."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.constants import (
    BATTLES_TABLE,
    CONTEXT_MESSAGES_TABLE,
    MESSAGES_TABLE,
    PREFERENCE_PAIRS_TABLE,
    QUARANTINE_TABLE,
)
from arena_pipeline.core.dataset import raw_values
from arena_pipeline.core.dataset.adapters import ARENA_140K, Adapter, csv_schema
from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.dataset.quarantine import (
    CONFLICT_RULE,
    CONVERSATION_COLUMNS,
    CROSS_DUMP_RULE,
    conversation_defects,
    count_by_rule,
    quarantine_rows,
    split_cross_dump,
    split_quarantine,
)
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, QUARANTINE_SCHEMA
from arena_pipeline.core.ingest.flatten import all_user_texts, flatten_battles
from arena_pipeline.core.ingest.parallel import run_in_processes, start_processes
from arena_pipeline.core.ingest.prefetch import prefetched
from arena_pipeline.core.ingest.sources import (
    DEFAULT_MAX_CELL_BYTES,
    SourceError,
    check_utf8,
    csv_adapter,
    dump_name,
    file_sha256,
    file_stamp,
    read_csv_export,
    read_csv_text,
    schema_adapter,
    verify_shard,
)
from arena_pipeline.core.ingest.tables import LOAD_TABLES, Batch, LoadTable, Screened
from arena_pipeline.core.store import warehouse
from arena_pipeline.core.store.versions import PARQUET_COMPRESSION, PART_GLOB, ROW_GROUP_ROWS, write_part

#: Rows of a parquet shard flattened at a time: with DuckDB's memory_limit, this sets the load's peak
#: memory (4,096 votes of the real dump are ~90 MB of Arrow data, about 4x that while flattened).
BATCH_ROWS = 4_096


@dataclass
class LoadReport:
    """Row counts and timings of one load."""

    revision: str
    rows_read: int = 0
    #: rows written per table of the load (``tables.LOAD_TABLES``)
    rows: dict[str, int] = field(default_factory=dict)
    quarantine_by_rule: dict[str, int] = field(default_factory=dict)
    per_file: list[dict] = field(default_factory=list)
    #: per dump: format, rows read, battles, quarantined, votes kept from another dump
    per_dump: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def battles(self) -> int:
        """Votes kept (arena.battles)."""
        return self.rows.get(BATTLES_TABLE, 0)

    @property
    def messages(self) -> int:
        """Rows of arena.messages."""
        return self.rows.get(MESSAGES_TABLE, 0)

    @property
    def context_messages(self) -> int:
        """Rows of arena.context_messages."""
        return self.rows.get(CONTEXT_MESSAGES_TABLE, 0)

    @property
    def quarantined(self) -> int:
        """Input rows quarantined (arena.quarantine)."""
        return self.rows.get(QUARANTINE_TABLE, 0)

    @property
    def pairs(self) -> int:
        """Preference pairs (arena.preference_pairs: the decisive kept votes with a prompt and two replies)."""
        return self.rows.get(PREFERENCE_PAIRS_TABLE, 0)


class FileChangedError(SourceError):
    """A file of the dump is not what ``raw_dump`` fetched (its size, time or content differ): the
    revision is not loaded because its files changed, not because the dump is bad; a new run fetches
    the new content (a new revision) and loads it."""


def file_change(shard: ShardFile) -> str | None:
    """How ``shard``'s file differs from the file ``raw_dump`` fetched, in words; None when it does not.

    The size is compared first (a truncated or grown file), then the stamp taken with the file's
    sha256; a file whose stamp differs is hashed again (one sequential read) and differs only when
    its content does (a file touched, or copied back, is unchanged). Without a digest, a different
    modification time counts as a change.
    """
    try:
        stamp = file_stamp(shard.path)
    except OSError as exc:
        return f"it cannot be opened now: {exc.strerror or type(exc).__name__}"
    if stamp[0] != shard.size:
        return f"{shard.size:,} bytes when fetched, {stamp[0]:,} now"
    if shard.stamp is not None and tuple(shard.stamp) == stamp:
        return None
    if shard.sha256 is not None:
        digest = file_sha256(shard.path)
        if digest == shard.sha256 and file_stamp(shard.path) == stamp:
            return None
        return f"sha256 {digest} now, {shard.sha256} when fetched"
    if shard.stamp is not None and shard.stamp[1] != stamp[1]:
        return "modified since"
    return None


def changed_error(shard: ShardFile, change: str) -> FileChangedError:
    """The one-line error of a file that changed since it was fetched (:func:`file_change`)."""
    return FileChangedError(f"{shard.name} ({shard.path}) changed since it was fetched ({change}): run again to "
                            "load the new revision; nothing was loaded")


def content_unchanged(shard: ShardFile) -> tuple[int, ...]:
    """The file's stamp now, once its content is known to be what ``shard.sha256`` says.

    The revision was computed from the files' sha256 before this load; a file rewritten since then
    would publish other content under that revision (and a sensor would then skip the revision as
    live). A file whose stamp is the one its hash was taken at is unchanged; any other (or one with
    no stamp, such as a Hub shard served from the cache) is hashed again, one sequential read.

    Raises
    ------
    FileChangedError
        The file is not the one its revision was computed from (:func:`file_change`).
    """
    change = file_change(shard)
    if change is not None:
        raise changed_error(shard, change)
    return file_stamp(shard.path)


#: Errors of reading a file (besides SourceError): a file that changed since it was fetched raises them too.
_READ_ERRORS = (OSError, pa.ArrowException, pl.exceptions.PolarsError, duckdb.IOException)


def read_failure(shard: ShardFile, exc: BaseException) -> SourceError | None:
    """What a failure while reading ``shard`` is reported as: :class:`FileChangedError` when the file
    changed since it was fetched (whatever the reader said: a truncated file reads as corrupt); else,
    for a read error, a :class:`SourceError` naming the file; None for any other error (raised as it is)."""
    if isinstance(exc, FileChangedError):
        return exc
    change = file_change(shard)
    if change is not None:
        return changed_error(shard, change)
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, _READ_ERRORS):
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return SourceError(f"{shard.name} ({shard.path}) is not readable ({type(exc).__name__}: {reason}); "
                           "nothing was loaded")
    return None


def dump_label(manifest: DumpManifest, shard: ShardFile) -> str:
    """The ``dump`` a file's rows carry: its dataset id (Hub), or the local file or folder's name."""
    if getattr(shard, "dump", None):
        return shard.dump
    return dump_name(manifest.source_kind, manifest.source)


def file_adapter(path: Path) -> Adapter:
    """The dump format of one file (parquet schema or CSV header; the 140k CSV export is ARENA_140K)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return csv_adapter(path) or ARENA_140K
    return schema_adapter(pq.read_schema(path), path)


#: The largest row group (uncompressed bytes) of a shard of the card's format that Polars' streaming
#: reader reads (it decodes a row group at a time; pyarrow's reader, used beyond, a batch at a time).
#: The Hub's shards have 1,000-row row groups (about 22 MB of the 1x dump).
POLARS_ROW_GROUP_BYTES = 256 * 2**20


def _parquet_batches(path: Path, parquet: pq.ParquetFile, columns: list[str], adapter: Adapter
                     ) -> Iterator[tuple[pa.Table, bool]]:
    """The shard's ``columns``, :data:`BATCH_ROWS` rows at a time, as Arrow tables (dictionary-encoded
    columns decoded), each with whether its reader validated its text as UTF-8.

    The card's format (:data:`ARENA_140K`) with row groups up to :data:`POLARS_ROW_GROUP_BYTES` is
    read by Polars' streaming engine and handed over as Arrow without a copy (string views, large
    lists; rows are dropped with :func:`_filtered`): on the 1x dump of benchmarks/bench_ingest.py,
    1.7 s and 3.3 s of CPU against 5.3 s and 7.0 s with pyarrow's batch reader (2.2 s and 4.2 s, and
    ~200 MB more at the load's peak, converted to Arrow's large strings). Other formats, whose
    adapters look at the Arrow types, and larger row groups are read by pyarrow (no pre-buffering:
    it reads a row group's column chunks ahead in one piece, meant for object stores; a local file
    read as needed holds ~200 MB less at peak on the 1x dump, for no more time).

    Polars validates UTF-8 as it reads and refuses the whole file at the first text that is not: from
    the batch where it stopped, pyarrow reads on (its batches are validated by ``raw_values.screen_raw``
    and such votes quarantined). pyarrow does not validate.

    Raises
    ------
    SourceError
        A part of the file cannot be read (a corrupt page, say): the message names the file and,
        found by reading the row groups from where the read stopped, the row group.
    """
    meta = parquet.metadata
    largest = max((meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)), default=0)
    done = 0
    if adapter is ARENA_140K and largest <= POLARS_ROW_GROUP_BYTES:
        try:
            scan = raw_values.decoded_scan(pl.scan_parquet(path).select(columns))
            for frame in scan.collect_batches(chunk_size=BATCH_ROWS):
                table = frame.to_arrow(compat_level=pl.CompatLevel.newest())
                yield table, True
                done += table.num_rows
            return
        except pl.exceptions.PolarsError as exc:
            if "invalid utf-8" not in str(exc).lower():
                raise _read_error(path, parquet, columns, done, exc) from exc
    yield from _pyarrow_batches(path, parquet, columns, done)


def _row_group_starts(parquet: pq.ParquetFile) -> list[int]:
    """The first row of each row group, and the file's row count last."""
    meta = parquet.metadata
    starts = [0]
    for i in range(meta.num_row_groups):
        starts.append(starts[-1] + meta.row_group(i).num_rows)
    return starts


def _pyarrow_batches(path: Path, parquet: pq.ParquetFile, columns: list[str], skip: int = 0
                     ) -> Iterator[tuple[pa.Table, bool]]:
    """pyarrow's batches of the file from row ``skip`` on (see :func:`_parquet_batches`)."""
    starts = _row_group_starts(parquet)
    first = max((i for i in range(len(starts) - 1) if starts[i] <= skip), default=0)
    drop, done = skip - starts[first], skip
    batches = parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns,
                                   row_groups=range(first, parquet.metadata.num_row_groups))
    while True:
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as exc:
            raise _read_error(path, parquet, columns, done, exc) from exc
        if batch is None:
            return
        if drop:
            cut = min(drop, batch.num_rows)
            batch, drop = batch.slice(cut), drop - cut
            if not batch.num_rows:
                continue
        done += batch.num_rows
        yield raw_values.decoded(pa.Table.from_batches([batch])), False


def _read_error(path: Path, parquet: pq.ParquetFile, columns: list[str], done: int, exc: Exception) -> SourceError:
    """The error of a file whose reading failed after ``done`` rows: the row group that fails to read
    (each row group from the one holding row ``done`` is read alone, with pyarrow, until one fails)."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    starts = _row_group_starts(parquet)
    groups = len(starts) - 1
    first = max((i for i in range(groups) if starts[i] <= done), default=0)
    for group in range(first, groups):
        try:
            parquet.read_row_group(group, columns=columns)
        except (OSError, pa.ArrowException) as probe:
            detail = (str(probe).strip().splitlines() or [reason])[0]
            return SourceError(f"{path}: row group {group} of {groups} (rows {starts[group]:,} to "
                               f"{starts[group + 1] - 1:,}) is not readable ({type(exc).__name__}: {reason}; "
                               f"read alone: {detail}); nothing was loaded")
    return SourceError(f"{path}: not readable after row {done:,} ({type(exc).__name__}: {reason}); "
                       "nothing was loaded")


def _iter_parquet(path: Path, adapter: Adapter = ARENA_140K):
    """Yield (canonical Arrow table, row offset, excluded rows or None) batches of a verified shard.

    Each batch's values no later step may touch (text that is not UTF-8, counts beyond Int64) are made
    null first and their rows excluded (``raw_values.screen_raw``), before the format's own row rules.
    """
    offset = 0
    parquet = pq.ParquetFile(path, pre_buffer=False)
    columns = adapter.read_columns(parquet.schema_arrow)
    for raw, validated in _parquet_batches(path, parquet, columns, adapter):
        raw, unreadable = raw_values.screen_raw(raw, utf8=not validated)
        excluded = raw_values.merge_screens(unreadable, adapter.screen(raw))
        table = adapter.convert(raw)
        yield table, offset, excluded
        offset += table.num_rows


def _filtered(table: pa.Table, keep: pl.Series) -> pa.Table:
    """The rows of ``table`` where ``keep`` is true, filtered by Polars: the shards Polars reads are
    Arrow string views (:func:`_parquet_batches`), which pyarrow's filter does not take, and Polars
    keeps the kept texts where they are instead of copying them."""
    return pl.from_arrow(table).filter(keep).to_arrow(compat_level=pl.CompatLevel.newest())


def _excluded(table: pa.Table, battles: pl.DataFrame, screened: pl.DataFrame, adapter: Adapter
              ) -> tuple[pa.Table, pl.DataFrame, pl.DataFrame]:
    """Move the rows that break a rule of the format (``Adapter.row_rules``) to quarantine."""
    excluded = screened.get_column("rule").is_not_null()
    if not excluded.any():
        return table, battles, pl.DataFrame(schema=QUARANTINE_SCHEMA)
    moved = quarantine_rows(battles.filter(excluded), *screened.filter(excluded).get_columns())
    return _filtered(table, ~excluded), battles.filter(~excluded), moved


def _read_adapted_csv(path: Path, adapter: Adapter) -> pa.Table:
    """A CSV of another format (the 55k Kaggle file) in the canonical schema."""
    check_utf8(path)
    frame = read_csv_text(path)
    return adapter.convert(frame.select(adapter.read_columns(csv_schema(frame.columns))).to_arrow())


def _without_conversation_defects(table: pa.Table, battles: pl.DataFrame, unparsed: pl.DataFrame
                                  ) -> tuple[pa.Table, pl.DataFrame, pl.DataFrame]:
    """Move the votes whose conversation breaks a ``quarantine.MESSAGE_RULES`` rule to quarantine.

    ``table`` and ``battles`` are row-aligned (battles is table flattened); both lose those rows.
    """
    defects = conversation_defects(pl.from_arrow(table.select(list(CONVERSATION_COLUMNS))))
    if defects.is_empty():
        return table, battles, unparsed
    rows = defects.get_column("row")
    bad = battles.with_row_index("_row").join(defects, left_on="_row", right_on="row", how="inner")
    moved = quarantine_rows(bad.select(battles.columns), bad.get_column("rule"), bad.get_column("detail"))
    keep = ~pl.int_range(battles.height, dtype=pl.UInt32, eager=True).is_in(rows.implode())
    return _filtered(table, keep), battles.filter(keep), pl.concat([unparsed, moved])


def _iter_file(shard: ShardFile, aliases: pl.DataFrame | None, max_cell_bytes: int | None = None,
               dump: str | None = None, adapter: Adapter = ARENA_140K
               ) -> Iterator[tuple[pa.Table, pl.DataFrame, pl.DataFrame]]:
    """Yield (nested rows, their flat battles, quarantine rows of unparseable input) batch by batch."""
    for table, battles, unparsed in _iter_flat(shard, aliases, max_cell_bytes, dump, adapter):
        yield _without_conversation_defects(table, battles, unparsed)


def _unavailable_as_null(battles: pl.DataFrame, adapter: Adapter) -> pl.DataFrame:
    """The columns the format cannot fill are null (flattening counts an absent list as 0 items)."""
    if not adapter.unavailable:
        return battles
    return battles.with_columns(pl.lit(None, dtype=battles.schema[c]).alias(c) for c in adapter.unavailable)


def _iter_flat(shard: ShardFile, aliases: pl.DataFrame | None, max_cell_bytes: int | None,
               dump: str | None = None, adapter: Adapter = ARENA_140K
               ) -> Iterator[tuple[pa.Table, pl.DataFrame, pl.DataFrame]]:
    """:func:`_iter_file` before conversation defects are moved out."""
    path = Path(shard.path)
    if path.suffix.lower() == ".csv" and adapter is ARENA_140K:
        parsed = read_csv_export(path, max_cell_bytes or DEFAULT_MAX_CELL_BYTES)
        # rows that parsed keep their CSV position: rebuild it from the quarantined positions
        kept = sorted(set(range(parsed.rows_read)) - set(parsed.quarantine["source_row"].to_list()))
        battles = flatten_battles(pl.from_arrow(parsed.table), shard.name, aliases=aliases,
                                  dump=dump).with_columns(source_row=pl.Series(kept, dtype=pl.Int64))
        # name the file as arena.battles does (its name inside the dump), not by its local path
        yield parsed.table, battles, parsed.quarantine.with_columns(source_file=pl.lit(shard.name),
                                                                    dump=pl.lit(dump, pl.String))
        return
    empty = pl.DataFrame(schema=QUARANTINE_SCHEMA)
    if path.suffix.lower() == ".csv":
        table = _read_adapted_csv(path, adapter)
        battles = flatten_battles(pl.from_arrow(table), shard.name, 0, aliases, dump)
        yield table, _unavailable_as_null(battles, adapter), empty
        return
    verify_shard(path)
    for table, offset, excluded in _iter_parquet(path, adapter):
        battles = flatten_battles(pl.from_arrow(table), shard.name, offset, aliases, dump)
        yield _excluded(table, _unavailable_as_null(battles, adapter), excluded, adapter)


def _screen(batch: pl.DataFrame, kept: list[pl.DataFrame], optional: tuple[str, ...] = ()
            ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split one batch into clean rows and quarantine rows, duplicates of earlier batches included.

    The kept copies of this batch's ids from earlier batches are screened along with it, so the
    first clean copy by (source_file, source_row) wins across the whole dump; they stay clean and
    are dropped from the result.
    """
    ids = batch.select("id").drop_nulls().unique()
    # most batches repeat no earlier id: one semi-join over the kept ids says so (one join per kept
    # batch for every batch grows with the square of the batches: ~0.3 s at 1x, ~5 s at 4x); only
    # then are the earlier rows themselves gathered, semi-joining each kept batch
    if kept and pl.concat([part.select("id") for part in kept]).join(ids, on="id", how="semi").height:
        earlier = pl.concat([part.join(ids, on="id", how="semi") for part in kept])
    else:
        earlier = batch.clear()
    # earlier rows are narrowed to BATTLES_SCHEMA, batch rows not yet (schema.NARROWED_COLUMNS)
    clean, quarantine = split_quarantine(
        pl.concat([earlier, batch], how="vertical_relaxed") if earlier.height else batch, optional
    )
    if earlier.height:
        clean = clean.join(earlier.select("source_file", "source_row"), on=["source_file", "source_row"], how="anti")
    return clean, quarantine


def label_late_duplicates(quarantine: pl.DataFrame, battles: pl.DataFrame) -> pl.DataFrame:
    """Add ``duplicate_id`` to quarantine rows whose id has another copy that was screened later.

    Within one batch :func:`split_quarantine` already labels every rejected copy of a repeated
    id; across batches a rejected copy was screened before its later copies existed. Labelling
    here makes the rule independent of file and batch boundaries.
    """
    if quarantine.is_empty():
        return quarantine
    ids = pl.concat([quarantine.select("id"), battles.select("id")]).drop_nulls()
    repeated = ids.group_by("id").len().filter(pl.col("len") > 1).select("id")
    kept_at = battles.join(repeated, on="id", how="semi").select(
        "id", pl.format("{} row {}", "source_file", "source_row").alias("_kept_at")
    )
    flagged = quarantine.join(repeated.with_columns(_repeated=pl.lit(True)), on="id", how="left")
    flagged = flagged.join(kept_at, on="id", how="left")
    missing = pl.col("_repeated").fill_null(False) & ~pl.col("rule").str.contains(r"(^|,)duplicate_id($|,)")
    note = (
        pl.when(pl.col("_kept_at").is_not_null())
        .then(pl.format("id {} is repeated; the copy kept is {}", "id", "_kept_at"))
        .otherwise(pl.format("id {} is repeated and every copy breaks another rule", "id"))
    )
    return flagged.with_columns(
        rule=pl.when(missing).then(pl.col("rule") + ",duplicate_id").otherwise("rule"),
        detail=pl.when(missing).then(pl.concat_str(["detail", note], separator="; ")).otherwise("detail"),
    ).select(list(QUARANTINE_SCHEMA))


def load_dump(manifest: DumpManifest, con: duckdb.DuckDBPyConnection, schema: str,
              suffix: str = "", aliases: pl.DataFrame | None = None,
              when_read: Callable[[], None] | None = None, tables: tuple[LoadTable, ...] = LOAD_TABLES) -> LoadReport:
    """Flatten every file of ``manifest`` into DuckDB tables ``schema.<name><suffix>`` (battles, messages,
    context_messages, quarantine and preference_pairs): :func:`fill_dump` into part files in a temporary
    folder, then each table created from its files, all swapped in together
    (``warehouse.write_tables_with``). The pipeline does not call this (its vote tables *are* the part
    files, ``assets/ingest.py``); tests and benchmarks do, to query a load in one database.

    Raises
    ------
    SourceError
        A file that is not usable as a whole (named in the message); nothing is swapped in then.
    """
    names = {table.name + suffix: table.name for table in tables}
    with tempfile.TemporaryDirectory(prefix="arena-load-") as scratch:
        folders = {table.name: Path(scratch) / table.name for table in tables}
        report = fill_dump(manifest, folders, aliases, when_read, tables)

        def fill(stages: Mapping[str, str]) -> LoadReport:
            for table, stage in stages.items():
                con.execute(f"CREATE TABLE {stage} AS SELECT * FROM {parts_scan(folders[names[table]])}")
            return report

        return warehouse.write_tables_with(con, schema, list(names), fill)


def load_tables(tables: tuple[LoadTable, ...] = LOAD_TABLES) -> dict[str, dict]:
    """The tables one load fills, with their columns (from their declaration, ``tables.LOAD_TABLES``)."""
    return {table.name: dict(table.columns) for table in tables}


def parts_scan(folder: Path | str) -> str:
    """The DuckDB scan of a table's part files in ``folder`` (in the order they were written)."""
    return f"read_parquet({warehouse.sql_string(str(Path(folder) / PART_GLOB))})"


def fill_dump(manifest: DumpManifest, folders: Mapping[str, Path], aliases: pl.DataFrame | None = None,
              when_read: Callable[[], None] | None = None, tables: tuple[LoadTable, ...] = LOAD_TABLES,
              workers: int = 1) -> LoadReport:
    """Flatten every file of ``manifest`` into Parquet part files: ``folders`` maps each table of
    :func:`load_tables` to the folder its part files are written into (created; the caller makes it the
    table's version, or deletes it after a failure). Each table's rows are written once, here, as the
    batches are flattened; nothing copies them afterwards.

    Rows breaking a row-level rule (core/dataset/quarantine.py) or whose nested fields do not parse go
    to quarantine, with their messages left out; every input row ends in exactly one of battles and
    quarantine.

    Messages are written batch by batch (``BATCH_ROWS`` votes, a part file per batch and table,
    :class:`_Parts`), so memory stays bounded by one batch of the dump and the battles table (about
    450 bytes a vote, no texts), which is written last, once every vote is screened. A worker thread
    reads and flattens the next batch while this one's part files are written (``prefetch.py``).

    ``aliases`` is the model alias table for the canonical name columns (None: the packaged one).

    The reward-model pairs of the kept votes are made from each batch's nested rows
    (``core.ingest.pairs.pair_rows``, the one definition of arena.preference_pairs; ``dump_revision``
    is the manifest's revision): the texts are assembled while the batch holds them, so the pairs
    cost no second pass over the messages and no more memory than a batch. ``when_read`` is called
    once every batch is read, while the last files are written (one core is idle then).

    ``workers`` > 1: a dump of several parquet shards is flattened by that many worker processes, a shard
    each at a time, each holding a batch (:func:`_fill_parallel`: the same rows).

    Raises
    ------
    SourceError
        A file that is not usable as a whole (named in the message).
    """
    started = time.perf_counter()
    report = LoadReport(revision=manifest.revision)
    parts = _Parts({table.name: Path(folders[table.name]) for table in tables}, load_tables(tables))
    if parallel_shards(manifest, workers):
        _fill_parallel(manifest, parts, aliases, report, when_read, tables, workers)
    else:
        _fill_parts(manifest, parts, aliases, report, when_read, tables)
    parts.finish()
    report.seconds = time.perf_counter() - started
    return report


#: (id, dump): a kept vote and a dump that repeats it (for ``also_in_dumps``).
_PAIRS_SCHEMA = {"id": pl.String, "dump": pl.String}


def _move_repeats(battles: pl.DataFrame, hit: pl.DataFrame, detail: pl.Expr, pairs: pl.DataFrame
                  ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(``battles`` without the ``hit`` rows, those rows as :data:`CROSS_DUMP_RULE` quarantine rows
    with ``detail``, ``pairs``); nothing moves when ``hit`` is empty."""
    if hit.is_empty():
        return battles, pl.DataFrame(schema=QUARANTINE_SCHEMA), pl.DataFrame(schema=_PAIRS_SCHEMA)
    moved = quarantine_rows(hit.select(battles.columns), CROSS_DUMP_RULE, hit.select(detail).to_series())
    return battles.join(hit.select("id"), on="id", how="anti"), moved, pairs


def _same_id_elsewhere(battles: pl.DataFrame, seen: list[pl.DataFrame], dump: str, optional: tuple[str, ...] = ()
                      ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Split off the rows whose id another dump's kept rows have (``quarantine.split_cross_dump``)."""
    others = [part for part in (part.filter(pl.col("dump") != dump) for part in seen) if part.height]
    return split_cross_dump(battles, pl.concat(others) if others else None, optional)


def _content_duplicates(keys: pl.DataFrame) -> pl.DataFrame:
    """Rows (id, dump, kept_id, kept_dump) whose models, winner and prompt text an earlier dump has.

    ``keys`` holds every kept row in load order with ``content`` (a hash of the canonical models,
    winner and user texts); within one dump a repeated content is a separate vote and is kept.
    """
    first = (keys.with_row_index("_order").sort("_order")
             .group_by("content", maintain_order=True)
             .agg(kept_id=pl.col("id").first(), kept_dump=pl.col("dump").first(),
                  kept_file=pl.col("source_file").first(), kept_row=pl.col("source_row").first()))
    return keys.join(first, on="content", how="inner").filter(pl.col("dump") != pl.col("kept_dump"))


def _content_key(battles: pl.DataFrame, frame: pl.DataFrame) -> pl.Series:
    """A hash of (canonical model_a, model_b, winner, user texts) per row (frames row-aligned)."""
    texts = frame.select(all_user_texts("conversation_a").fill_null("")).to_series()
    return battles.select(
        pl.concat_str([pl.col("model_a_canonical"), pl.col("model_b_canonical"), pl.col("winner"),
                       pl.lit(texts)], separator="\x1f", ignore_nulls=True).hash(seed=14)
    ).to_series().alias("content")


class _Parts:
    """The part files of one load: per table a folder, each appended frame a part file of its own.

    A part file is written whole by Polars (its string views as they are, no copy) and bounded by a
    batch, so the load holds no more than a batch of a table at a time. A failure leaves the folders
    to the caller (the version store deletes them: nothing of a failed load is ever read).
    """

    def __init__(self, folders: Mapping[str, Path], schemas: Mapping[str, Mapping], first: int = 0) -> None:
        # first: the number of the first part file (a worker of a parallel load numbers its own range)
        self.folders, self.first = dict(folders), first
        self.schemas = {table: dict(schemas[table]) for table in self.folders}
        self.written = dict.fromkeys(self.folders, 0)
        for folder in self.folders.values():
            folder.mkdir(parents=True, exist_ok=True)

    def append(self, table: str, frame: pl.DataFrame) -> int:
        """Write ``frame`` as the next part file of ``table``, in the table's columns and types (every part
        file of a table has one schema: a batch's column that is wider, say Int64 for Int32, is cast);
        return the rows written."""
        if frame.height == 0:
            return 0
        self.written[table] += 1
        typed = frame.select(pl.col(name).cast(kind) for name, kind in self.schemas[table].items())
        return write_part(self.folders[table], typed, self.first + self.written[table] - 1)

    def finish(self) -> None:
        """Give a table without rows one empty part file of its columns (a scan needs one file)."""
        for table, count in self.written.items():
            if count == 0:
                write_part(self.folders[table], pl.DataFrame(schema=self.schemas[table]))

    def delete_battles(self, table: str, battles: pl.DataFrame) -> int:
        """Rewrite ``table``'s part files without the rows of ``battles``' ``battle_id`` values (votes a
        dump loaded earlier holds by content: only a load of several dumps); return how many rows went."""
        gone = battles.get_column("battle_id").implode()
        removed = 0
        for path in sorted(self.folders[table].glob(PART_GLOB)):
            frame = pl.read_parquet(path)
            kept = frame.filter(~pl.col("battle_id").is_in(gone))
            if kept.height < frame.height:
                removed += frame.height - kept.height
                tmp = path.with_suffix(".rewrite")
                kept.write_parquet(tmp, row_group_size=ROW_GROUP_ROWS, **PARQUET_COMPRESSION)
                os.replace(tmp, path)
        return removed


@dataclass
class _Accumulated:
    """What the batches of a load leave besides their messages: the rows of battles and quarantine."""

    kept: list[pl.DataFrame] = field(default_factory=list)
    quarantine: list[pl.DataFrame] = field(default_factory=list)
    cross: list[pl.DataFrame] = field(default_factory=list)
    pairs: list[pl.DataFrame] = field(default_factory=list)
    keys: list[pl.DataFrame] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)


def _flat_batches(manifest: DumpManifest, aliases: pl.DataFrame | None, report: LoadReport,
                  screened: _Accumulated, tables: tuple[LoadTable, ...] = LOAD_TABLES
                  ) -> Iterator[dict[str, pl.DataFrame]]:
    """Read, screen and flatten ``manifest``'s files batch by batch: yield the rows of each table made batch by
    batch (``LoadTable.batch``), by name.

    Battles and quarantine rows accumulate in ``screened`` and the files' counts in ``report`` (read
    them once the iterator is exhausted). Pure Polars and pyarrow: it runs in the loader's worker thread.
    """
    # content duplicates are looked for across dumps only: one dump's votes need no content key
    several_dumps = len({dump_label(manifest, shard) for shard in manifest.files}) > 1
    for shard in manifest.files:
        file_rows = 0
        # a manifest pickled before the field existed has no limit: the default applies
        limit = getattr(manifest, "csv_max_cell_bytes", None)
        dump = dump_label(manifest, shard)
        stamp = content_unchanged(shard)  # before the file is opened: a file cut short reads as corrupt
        try:
            adapter = file_adapter(Path(shard.path))
        except Exception as exc:
            raise (read_failure(shard, exc) or exc) from exc
        screened.formats.setdefault(dump, adapter.name)
        for table, battles, unparsed in _read_file(shard, aliases, limit, dump, adapter):
            file_rows += battles.height + unparsed.height
            batch = battles  # row-aligned with table
            battles, repeated, seen_in = _same_id_elsewhere(battles, screened.kept, dump, adapter.unavailable)
            clean, rejected = _screen(battles, screened.kept, adapter.unavailable)
            screened.quarantine += [unparsed, rejected]
            screened.cross.append(repeated)
            screened.pairs.append(seen_in)
            screened.kept.append(clean)
            if clean.height < batch.height:
                keep = batch.get_column("source_row").is_in(clean.get_column("source_row").implode())
                table = _filtered(table, keep)
            frame = pl.from_arrow(table)
            if several_dumps:
                screened.keys.append(clean.select("id", "dump", "source_file", "source_row").with_columns(
                    _content_key(clean, frame)))
            batch = Batch(frame, clean, dump, manifest.revision)
            yield {table.name: table.batch(batch) for table in tables if table.keyed_by_battle}
        if file_stamp(shard.path) != stamp:  # the tables would not be the revision's content
            change = file_change(shard)
            raise changed_error(shard, "modified while it was read" + (f": {change}" if change else ""))
        report.rows_read += file_rows
        report.per_file.append({"file": shard.name, "rows": file_rows, "dump": dump, "format": adapter.name})


def _read_file(shard: ShardFile, aliases: pl.DataFrame | None, max_cell_bytes: int | None, dump: str,
               adapter: Adapter) -> Iterator[tuple[pa.Table, pl.DataFrame, pl.DataFrame]]:
    """:func:`_iter_file`, whose failures name the file (:func:`read_failure`)."""
    try:
        yield from _iter_file(shard, aliases, max_cell_bytes, dump, adapter)
    except Exception as exc:
        raise (read_failure(shard, exc) or exc) from exc


def _fill_parts(manifest: DumpManifest, stages: _Parts, aliases: pl.DataFrame | None,
                report: LoadReport, when_read: Callable[[], None] | None = None,
                tables: tuple[LoadTable, ...] = LOAD_TABLES) -> None:
    """Write the part files of ``manifest``'s files (see fill_dump).

    Files of several dumps (a combined manifest) load in manifest order; a vote a dump loaded
    earlier already holds (same id, or same canonical models, winner and user texts) is moved to
    quarantine with :data:`~arena_pipeline.core.dataset.quarantine.CROSS_DUMP_RULE` and the kept row
    lists the repeating dump in ``also_in_dumps``. A worker thread reads and flattens the next
    batch while this one's part files are written (:func:`prefetch.prefetched`).
    """
    screened = _Accumulated()
    report.rows = dict.fromkeys((table.name for table in tables), 0)
    for made in prefetched(_flat_batches(manifest, aliases, report, screened, tables)):
        for name, frame in made.items():
            report.rows[name] += stages.append(name, frame)
        made = frame = None  # not held while the next batch is made
    # every batch is read: the worker's core is idle while the battles and quarantine are screened and
    # written; the caller may use it (the pipeline imports Great Expectations there, for the checks next)
    if when_read is not None:
        when_read()
    _finish(stages, report, screened, tables)


def _finish(stages: _Parts, report: LoadReport, screened: _Accumulated, tables: tuple[LoadTable, ...]) -> None:
    """Once every batch is screened: label late duplicates, move the votes an earlier dump holds by content
    (deleting their rows from the tables written batch by batch), and write battles and quarantine."""
    kept, quarantine, cross, pairs, keys = (screened.kept, screened.quarantine, screened.cross, screened.pairs,
                                            screened.keys)
    formats = screened.formats
    all_battles = pl.concat(kept) if kept else pl.DataFrame(schema=BATTLES_SCHEMA)
    all_quarantine = pl.concat(quarantine) if quarantine else pl.DataFrame(schema=QUARANTINE_SCHEMA)
    all_quarantine = label_late_duplicates(all_quarantine, all_battles)
    if len(formats) > 1 and keys:
        all_battles, by_content, content_pairs = _drop_content_duplicates(all_battles, pl.concat(keys))
        if by_content.height:
            cross.append(by_content)
            pairs.append(content_pairs)
            gone = by_content.select(battle_id="id")
            for table in tables:
                if table.keyed_by_battle:
                    report.rows[table.name] -= stages.delete_battles(table.name, gone)
    all_battles = _mark_also_in(all_battles, pairs)
    all_quarantine = pl.concat([all_quarantine, *cross]) if cross else all_quarantine
    if all_battles.height + all_quarantine.height != report.rows_read:
        raise AssertionError(
            f"rows read ({report.rows_read}) != battles ({all_battles.height}) + quarantine ({all_quarantine.height})"
        )
    done = Screened(all_battles, all_quarantine)
    for table in tables:
        if not table.keyed_by_battle:
            report.rows[table.name] = stages.append(table.name, table.screened(done))
    report.quarantine_by_rule = dict(count_by_rule(all_quarantine).iter_rows()) if all_quarantine.height else {}
    report.per_dump = _per_dump(all_battles, all_quarantine, formats)


def _drop_content_duplicates(battles: pl.DataFrame, keys: pl.DataFrame
                             ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Move the votes an earlier dump holds by content to quarantine: (battles, quarantine, pairs)."""
    dups = _content_duplicates(keys).select("id", "kept_id", "kept_dump", "kept_file", "kept_row")
    hit = battles.join(dups, on="id", how="inner")
    detail = pl.format("the same vote (models, winner and prompt text) is kept from dump {} ({} row {}, id {})",
                       "kept_dump", "kept_file", "kept_row", "kept_id")
    return _move_repeats(battles, hit, detail, hit.select(id="kept_id", dump="dump"))


def _mark_also_in(battles: pl.DataFrame, pairs: list[pl.DataFrame]) -> pl.DataFrame:
    """Fill ``also_in_dumps``: the other dumps that hold each kept vote (sorted, ',' joined)."""
    pairs = [p for p in pairs if p.height]
    if not pairs:
        return battles
    also = (pl.concat(pairs).unique().sort("dump").group_by("id")
            .agg(pl.col("dump").str.join(",").alias("_also")))
    return (battles.join(also, on="id", how="left")
            .with_columns(also_in_dumps=pl.coalesce("also_in_dumps", "_also")).drop("_also"))


def _per_dump(battles: pl.DataFrame, quarantine: pl.DataFrame, formats: dict[str, str]) -> dict[str, dict]:
    """Rows per dump: battles kept, quarantined (and of those, votes another dump holds)."""
    kept = dict(battles.group_by("dump").len().iter_rows())
    rejected = dict(quarantine.group_by("dump").len().iter_rows())
    across = dict(quarantine.filter(pl.col("rule") == CROSS_DUMP_RULE).group_by("dump").len().iter_rows())
    conflicts = dict(quarantine.filter(pl.col("rule").str.split(",").list.contains(CONFLICT_RULE))
                     .group_by("dump").len().iter_rows())
    return {dump: {"format": fmt, "battles": kept.get(dump, 0), "quarantined": rejected.get(dump, 0),
                   "kept_in_another_dump": across.get(dump, 0), "conflicting_duplicates": conflicts.get(dump, 0),
                   "rows_read": kept.get(dump, 0) + rejected.get(dump, 0)}
            for dump, fmt in formats.items()}


#: What the load's forkserver imports once, for every worker it forks: this module and pandas, which pyarrow
#: imports the first time it converts a Python value (the format's row rules do, on a worker's first batch):
#: ~0.5 s of CPU per worker otherwise.
_WORKER_PRELOAD = (__name__, "pandas")

#: Part files a shard's worker may number (each job numbers its own range: names unique in every folder).
_PARTS_PER_JOB = 100_000


def parallel_shards(manifest: DumpManifest, workers: int) -> bool:
    """Whether a load of ``manifest`` runs in worker processes: several workers and several files, every
    file a parquet shard of the card's format (other formats, read whole, load in this process)."""
    if workers < 2 or len(manifest.files) < 2:
        return False
    try:
        return all(Path(shard.path).suffix.lower() == ".parquet"
                   and file_adapter(Path(shard.path)) is ARENA_140K for shard in manifest.files)
    except Exception:  # a file that cannot be read now: the sequential load names it
        return False


@dataclass(frozen=True)
class ShardJob:
    """One shard for a worker: phase 1 writes the rows of its votes whose id no other row has and hands the
    others back (``repeated``); phase 2 (``only``: kept battles of those votes) writes theirs."""

    shard: ShardFile
    number: int
    dump: str
    revision: str
    aliases: pl.DataFrame | None
    folders: Mapping[str, Path]
    schemas: Mapping[str, Mapping]
    tables: tuple[LoadTable, ...]
    several_dumps: bool
    batch_rows: int = BATCH_ROWS
    repeated: pl.DataFrame | None = None
    only: pl.DataFrame | None = None
    phase: int = 1


@dataclass
class ShardResult:
    """What a worker hands back: battle-level rows only (no texts)."""

    number: int
    rows_read: int = 0
    format: str = ""
    kept: list[pl.DataFrame] = field(default_factory=list)
    quarantine: list[pl.DataFrame] = field(default_factory=list)
    deferred: list[pl.DataFrame] = field(default_factory=list)
    keys: list[pl.DataFrame] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    parts: int = 0


def _write_batch(job: ShardJob, parts: _Parts, result: ShardResult, table, battles: pl.DataFrame,
                 keep: pl.Series) -> None:
    """Write the tables made batch by batch for the ``keep`` rows of ``table`` (``battles``: their kept rows)."""
    frame = pl.from_arrow(_filtered(table, keep) if not keep.all() else table)
    if job.several_dumps:
        result.keys.append(battles.select("id", "dump", "source_file", "source_row").with_columns(
            _content_key(battles, frame), _file=pl.lit(job.number)))
    batch = Batch(frame, battles, job.dump, job.revision)
    for item in job.tables:
        if item.keyed_by_battle:
            result.rows[item.name] = result.rows.get(item.name, 0) + parts.append(item.name, item.batch(batch))


def flatten_shard(job: ShardJob) -> ShardResult:
    """Read, screen and flatten one shard in a worker process (see :func:`fill_parallel`)."""
    shard, result = job.shard, ShardResult(job.number)
    global BATCH_ROWS  # a worker process loads one shard at a time, in the load's batch size
    BATCH_ROWS = job.batch_rows
    stamp = content_unchanged(shard)
    try:
        adapter = file_adapter(Path(shard.path))
    except Exception as exc:
        raise (read_failure(shard, exc) or exc) from exc
    result.format = adapter.name
    parts = _Parts(job.folders, job.schemas, first=(2 * job.number + job.phase) * _PARTS_PER_JOB)
    for number, (table, battles, unparsed) in enumerate(
            _read_file(shard, job.aliases, None, job.dump, adapter)):
        result.rows_read += battles.height + unparsed.height
        if job.only is not None:
            keep = battles.get_column("source_row").is_in(job.only.get_column("source_row").implode())
            if keep.any():
                kept = battles.filter(keep).select("source_row").join(job.only, on="source_row", how="left",
                                                                       maintain_order="left")
                _write_batch(job, parts, result, table, kept, keep)
            continue
        result.quarantine.append(unparsed)
        deferred = battles.get_column("id").is_in(job.repeated.get_column("id").implode()).fill_null(False)
        if deferred.any():
            result.deferred.append(battles.filter(deferred).with_columns(_batch=pl.lit(number)))
        clean, rejected = split_quarantine(battles.filter(~deferred), adapter.unavailable)
        result.quarantine.append(rejected)
        result.kept.append(clean.with_columns(_file=pl.lit(job.number)))
        keep = battles.get_column("source_row").is_in(clean.get_column("source_row").implode())
        _write_batch(job, parts, result, table, clean, keep)
    if file_stamp(shard.path) != stamp:
        change = file_change(shard)
        raise changed_error(shard, "modified while it was read" + (f": {change}" if change else ""))
    result.parts = max(parts.written.values(), default=0)
    return result


def _repeated_ids(manifest: DumpManifest) -> pl.DataFrame | None:
    """The ids more than one row of the dump's shards has (read from the ``id`` column alone): their votes are
    screened in load order by the main process; every other vote is decided by its own row. None when a
    shard's ids cannot be read (the load then runs in this process, and fails as it does there)."""
    try:
        # ParquetFile, not pq.read_table: that imports pyarrow.dataset and pandas (0.5 s of CPU, before any worker)
        ids = [pl.from_arrow(pq.ParquetFile(shard.path).read(columns=["id"])).select(pl.col("id").cast(pl.String))
               for shard in manifest.files]
    except Exception:
        return None
    return pl.concat(ids).drop_nulls().group_by("id").len().filter(pl.col("len") > 1).select("id")


def _replay(results: list[ShardResult], jobs: list[ShardJob], screened: _Accumulated) -> pl.DataFrame:
    """Screen the votes of repeated ids batch by batch in load order, as the sequential load does
    (``_same_id_elsewhere``, ``_screen``); return their kept battles (with ``_file``)."""
    earlier: list[pl.DataFrame] = []
    files: list[int] = []
    for result, job in zip(results, jobs, strict=True):
        if not result.deferred:
            continue
        optional = file_adapter(Path(job.shard.path)).unavailable
        rows = pl.concat(result.deferred)
        for (_,), batch in rows.group_by("_batch", maintain_order=True):
            battles, repeated, seen_in = _same_id_elsewhere(batch.drop("_batch"), earlier, job.dump, optional)
            clean, rejected = _screen(battles, earlier, optional)
            screened.quarantine.append(rejected)
            screened.cross.append(repeated)
            screened.pairs.append(seen_in)
            earlier.append(clean)
            files.append(job.number)
    return (pl.concat([part.with_columns(_file=pl.lit(number)) for part, number in zip(earlier, files, strict=True)])
            if earlier else pl.DataFrame())


def _fill_parallel(manifest: DumpManifest, stages: _Parts, aliases: pl.DataFrame | None, report: LoadReport,
                  when_read: Callable[[], None] | None, tables: tuple[LoadTable, ...], workers: int) -> None:
    """Write the part files of ``manifest``'s shards in ``workers`` processes, the same rows as the sequential
    load (``_fill_parts``).

    The screening is sequential (a vote's later copies lose to its first clean copy, across files and
    dumps): the ``id`` column of every shard is read first (a column alone), and a vote whose id no other
    row has is decided by its own row, in its worker, which writes its messages, context messages and
    pairs at once. The votes of a repeated id come back (battle columns only) and are screened here, batch
    by batch in load order; the workers then write the rows of those kept (their shards read again: none
    in the real dump). Battles and quarantine are written last, here, as by the sequential 
    """
    several_dumps = len({dump_label(manifest, shard) for shard in manifest.files}) > 1
    folders = {t.name: stages.folders[t.name] for t in tables if t.keyed_by_battle}
    schemas = {name: stages.schemas[name] for name in folders}
    start_processes(_WORKER_PRELOAD)  # the workers' imports overlap the read of the ids
    repeated = _repeated_ids(manifest)
    if repeated is None:
        _fill_parts(manifest, stages, aliases, report, when_read, tables)
        return
    jobs = [ShardJob(shard, number, dump_label(manifest, shard), manifest.revision, aliases, folders, schemas,
                     tables, several_dumps, BATCH_ROWS, repeated=repeated)
            for number, shard in enumerate(manifest.files)]
    results = run_in_processes(flatten_shard, jobs, workers, _WORKER_PRELOAD)
    screened = _Accumulated()
    for result, job in zip(results, jobs, strict=True):
        screened.formats.setdefault(job.dump, result.format)
        screened.quarantine += result.quarantine
        report.rows_read += result.rows_read
        report.per_file.append({"file": job.shard.name, "rows": result.rows_read, "dump": job.dump,
                                "format": result.format})
    kept = _replay(results, jobs, screened)
    later = []
    if kept.height:
        later = [ShardJob(job.shard, job.number, job.dump, job.revision, aliases, folders, schemas, tables,
                          several_dumps, BATCH_ROWS, only=kept.filter(pl.col("_file") == job.number).drop("_file"), phase=2)
                 for job in jobs if kept.filter(pl.col("_file") == job.number).height]
    finished = results + run_in_processes(flatten_shard, later, workers, _WORKER_PRELOAD)
    if when_read is not None:
        when_read()
    order = ["_file", "source_row"]
    report.rows = dict.fromkeys((t.name for t in tables), 0)
    for result in finished:
        for name, rows in result.rows.items():
            report.rows[name] += rows
    for name in folders:  # every part file of the workers counts (a table without any gets an empty one)
        stages.written[name] += sum(1 for _ in stages.folders[name].glob(PART_GLOB))
    battles = [part for result in results for part in result.kept] + ([kept] if kept.height else [])
    screened.kept = [pl.concat(battles, how="vertical_relaxed").sort(order).drop("_file")] if battles else []
    keys = [part for result in finished for part in result.keys]
    if keys:
        screened.keys = [pl.concat(keys).sort(order).drop("_file")]
    _finish(stages, report, screened, tables)
